"""CoD-Train of Qwen3-8B on GridNavigation (agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/train/grid_navigation.yaml``, "the yaml" below).

Table 1 hyperparameters (``codjax/train/paper_configs.py``) with the reference's Grid-specific changes: a
10-step linear learning-rate warmup and the 8B grid parameters.

  python launch/train.py --config=experiments/grid_navigation_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_base


def get_config():
  # the yaml: size 8-12, 4 bumps, scales 0.10-0.35, 4-6 rounds, reveal radius 2 (the "8b" preset); length
  # penalty 0, which GridNavigation's reward never applies
  envs = {"grid": env_entry("grid_navigation", "8b")}
  c = paper_8b_base("grid_navigation_qwen3_8b", envs)
  c.optim.warmup_steps = 10  # the yaml: lr 1e-6, warmup 10, constant
  # the yaml sets no save interval: Setting A's 100 steps is kept
  return c
