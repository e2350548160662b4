"""OptimalControl (registers "optimal_control"): env.py (dynamics, tasks, family, registration), presets.py
(named parameter sets), expert.py (system-identifying expert and random policy)."""

from codjax.envs.optimal_control.env import ControlConfig, ControlFamily, make_optimal_control
from codjax.envs.optimal_control.presets import PRESETS

__all__ = ["PRESETS", "ControlConfig", "ControlFamily", "make_optimal_control"]
