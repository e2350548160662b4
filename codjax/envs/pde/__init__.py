"""PDE-Discovery: identify the reaction term of u_t = u_xx + f(u) from sampled data (registers "pde_discovery")."""

from codjax.envs.pde.env import PdeFamily, PdeTaskEnv, make_pde_discovery, pde_reward
from codjax.envs.registry import register

register("pde_discovery")(make_pde_discovery)

__all__ = ["PdeFamily", "PdeTaskEnv", "make_pde_discovery", "pde_reward"]
