"""CoD-Train of Qwen3-8B on GridNavigation (cod_reference.md 4.1 ``exp_plan_final/train/grid_navigation.yaml``).

Table 1 hyperparameters (``codjax/train/paper_configs.py``) with the reference's Grid-specific changes: a
10-step linear learning-rate warmup and the 8B grid parameters (cod_reference 2.6).
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_base


def get_config():
  # cod_reference 2.6 "8B config": size 8-12, 4 bumps, scales 0.10-0.35, 4-6 rounds, reveal radius 2 (the
  # "8b" preset); no length penalty (lp 0, 4.1), which GridNavigation's reward never applies.
  envs = {"grid": env_entry("grid_navigation", "8b")}
  c = paper_8b_base("grid_navigation_qwen3_8b", envs)
  c.optim.warmup_steps = 10  # cod_reference 4.1: lr 1e-6, warmup 10, constant
  # cod_reference 4.1 lists no save interval for grid_navigation.yaml: Setting A's 100 steps is kept.
  return c
