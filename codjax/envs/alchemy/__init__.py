"""Alchemy-Random (registers "alchemy_random"): env.py (recipe graphs, tasks, family, registration), presets.py
(named parameter sets), expert.py (scripted expert and random policy)."""

from codjax.envs.alchemy.env import AlchemyConfig, AlchemyFamily, build_config, make_alchemy
from codjax.envs.alchemy.presets import PRESETS

__all__ = ["PRESETS", "AlchemyConfig", "AlchemyFamily", "build_config", "make_alchemy"]
