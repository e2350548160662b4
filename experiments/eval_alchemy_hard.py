"""Benchmark: Alchemy-Random hard (in-domain OOD for Mixed-trained checkpoints; agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/bench/eval_alchemy_hard.yaml``): 500 packs of 8 test tasks, Table 1's
evaluation limits (``codjax/train/paper_configs.py: paper_8b_eval``).

  python launch/evaluate.py --config=experiments/eval_alchemy_hard.py --config.model.path=CKPT

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_eval


def get_config():
  # CoD paper Tab. 2 (hard): 3-4 tiers, 4-6 base elements, 1-2 recipes per element, 15 rounds, limited materials;
  # eval_alchemy_hard.yaml: shrink 0.4-0.8, cross-tier <= 0.05, noise <= 0.3; Tab. 1: length penalty 0.1
  env = env_entry("alchemy_random", "hard", length_penalty_coef=0.1)
  return paper_8b_eval("eval_alchemy_hard", "alchemy_hard", env)
