"""The offline ALFWorld household environment ``alfworld_synth`` (docs/methods/evoharness.md).

vocab.py (ALFWorld's vocabulary, read from the installed ``alfworld``), problem.py (the frozen ``Problem`` and its
scene spec), world.py (the exact state machine: admissible commands, feedback, ``won``), planner.py (the
full-knowledge planner that certifies problems), generator.py (layouts, houses, goals, splits), env.py (tasks,
family, registration), presets.py, expert.py (scripted expert and random policy), tier1.py (the TextWorld
engine used as the differential oracle; imported on its own).
"""

from codjax.envs.household.env import (CommandResult, HouseholdFamily, HouseholdTask, build_config, make_household,
                                       parse_action)
from codjax.envs.household.generator import SPLITS, HouseholdConfig
from codjax.envs.household.presets import PRESETS
from codjax.envs.household.problem import Goal, Item, Problem, Receptacle
from codjax.envs.household.vocab import FAMILIES

__all__ = ["FAMILIES", "PRESETS", "SPLITS", "CommandResult", "Goal", "HouseholdConfig", "HouseholdFamily",
           "HouseholdTask", "Item", "Problem", "Receptacle", "build_config", "make_household", "parse_action"]
