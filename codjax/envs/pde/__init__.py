"""PDE-Discovery (registers "pde_discovery"): identify the reaction term of u_t = u_xx + f(u) from sampled data.

env.py (tasks, actions, reward, family, registration), presets.py (named parameter sets), expert.py (scripted
expert and random policy), and the environment's own parts: dictionary.py (the 15 reaction terms), families.py
(+ families/*.json, the ground-truth templates), model.py (hidden model), solver.py (simulation),
regression.py (sparse regression), prompts.py (text).
"""

from codjax.envs.pde.env import PdeFamily, PdeTaskEnv, make_pde_discovery, pde_reward
from codjax.envs.pde.presets import PRESETS

__all__ = ["PRESETS", "PdeFamily", "PdeTaskEnv", "make_pde_discovery", "pde_reward"]
