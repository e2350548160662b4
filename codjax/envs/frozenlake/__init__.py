"""FrozenLake-Obscure (registers "frozenlake_obscure"): env.py (tasks, family, registration), presets.py (named
parameter sets), expert.py (scripted expert and random policy)."""

from codjax.envs.frozenlake.env import FrozenLakeConfig, FrozenLakeFamily, build_config, make_frozenlake
from codjax.envs.frozenlake.presets import PRESETS

__all__ = ["PRESETS", "FrozenLakeConfig", "FrozenLakeFamily", "build_config", "make_frozenlake"]
