"""Benchmark: Alchemy-Random easy (cross-domain for FrozenLake-trained checkpoints; agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/bench/eval_alchemy_easy.yaml``): the training Alchemy parameters, 500 packs
of 8 test tasks, Table 1's evaluation limits (``codjax/train/paper_configs.py: paper_8b_eval``).

  python launch/evaluate.py --config=experiments/eval_alchemy_easy.py --config.model.path=CKPT

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_eval


def get_config():
  # CoD paper Tab. 2 (easy): 3-4 tiers, 3-4 base elements, 1 recipe per element, 8 rounds, unlimited materials;
  # Tab. 1: solve-task length penalty 0.1
  env = env_entry("alchemy_random", "easy", length_penalty_coef=0.1)
  return paper_8b_eval("eval_alchemy_easy", "alchemy_easy", env)
