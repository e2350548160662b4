"""Text environments (text in, text out), their registry and scripted experts."""

from codjax.envs.base import EnvFamily, StepResult, TaskEnv, Turn, derive_seed
from codjax.envs.registry import make, names, register

__all__ = ["EnvFamily", "StepResult", "TaskEnv", "Turn", "derive_seed", "make", "names", "register"]
