"""GridNavigation (registers "grid_navigation"): env.py (cost fields, tasks, family, registration), presets.py
(named parameter sets), expert.py (scripted expert and random policy)."""

from codjax.envs.grid_navigation.env import GridConfig, GridFamily, make_grid_navigation
from codjax.envs.grid_navigation.presets import PRESETS

__all__ = ["PRESETS", "GridConfig", "GridFamily", "make_grid_navigation"]
