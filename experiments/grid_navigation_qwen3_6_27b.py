"""CoD-Train of Qwen3.6-27B on GridNavigation (cod_reference.md 4.1 ``exp_plan_final/train/grid_navigation_27b.yaml``).

Qwen3.6-27B is the codjax preset ``qwen3.6-27b`` (the Qwen3.5/3.6 hybrid); the checkpoint path is a placeholder
(``--config.model.path``), see ``codjax/train/paper_configs.py: paper_27b_base``.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import EPOCH_STEPS_8B, paper_27b_base


def get_config():
  # cod_reference 2.6 "27B train": size 8-12, 4 bumps, scales 0.15-0.45, 3-5 rounds, reveal radius 1 (the
  # "27b_train" preset); lp 0 (4.1), which GridNavigation's reward never applies.
  envs = {"grid": env_entry("grid_navigation", "27b_train")}
  # cod_reference 4.1: prompt / response / model_len 22000 / 3999 / 26000.
  c = paper_27b_base("grid_navigation_qwen3_6_27b", envs, prompt_tokens=22_000, response_tokens=3_999,
                     seq_len=26_000)
  c.optim.warmup_steps = 10  # cod_reference 4.1: lr 1e-6, warmup 10, constant
  c.total_steps = EPOCH_STEPS_8B  # cod_reference 4.1: 1 epoch of 50,000 rows, 32 tasks per step
  c.checkpoint.every = 20  # cod_reference 4.1: save every 20
  return c
