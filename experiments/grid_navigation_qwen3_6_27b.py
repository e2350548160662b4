"""CoD-Train of Qwen3.6-27B on GridNavigation (CoD paper Sec. 3.4; agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/train/grid_navigation_27b.yaml``, "the yaml" below).

Qwen3.6-27B is the codjax preset ``qwen3.6-27b`` (the Qwen3.5/3.6 hybrid); the checkpoint path is a placeholder
(``--config.model.path``), see ``codjax/train/paper_configs.py: paper_27b_base``.

  python launch/train.py --config=experiments/grid_navigation_qwen3_6_27b.py --config.model.path=<Qwen3.6-27B>

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import EPOCH_STEPS_8B, paper_27b_base


def get_config():
  # the yaml: size 8-12, 4 bumps, scales 0.15-0.45, 3-5 rounds, reveal radius 1 (the "27b_train" preset);
  # length penalty 0, which GridNavigation's reward never applies
  envs = {"grid": env_entry("grid_navigation", "27b_train")}
  # the yaml: prompt / response / model_len 22000 / 3999 / 26000
  c = paper_27b_base("grid_navigation_qwen3_6_27b", envs, prompt_tokens=22_000, response_tokens=3_999,
                     seq_len=26_000)
  c.optim.warmup_steps = 10  # the yaml: lr 1e-6, warmup 10, constant
  c.total_steps = EPOCH_STEPS_8B  # the yaml: 1 epoch of 50,000 rows, 32 tasks per step
  c.checkpoint.every = 20  # the yaml: save every 20
  return c
