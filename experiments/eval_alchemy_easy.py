"""Benchmark: Alchemy-Random easy (cross-domain for FrozenLake-trained checkpoints; cod_reference.md 4.2
``eval_alchemy_easy.yaml``): the training Alchemy parameters, 500 packs of 8 test tasks, Table 1's
evaluation limits (``codjax/train/paper_configs.py: paper_8b_eval``).

  python launch/evaluate.py --config=experiments/eval_alchemy_easy.py --config.model.path=CKPT
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_eval


def get_config():
  # Table 2 (easy): 3-4 tiers, 3-4 base elements, 1 recipe per element, 8 rounds, unlimited materials;
  # length penalty 0.1 (cod_reference 4.1).
  env = env_entry("alchemy_random", "easy", length_penalty_coef=0.1)
  return paper_8b_eval("eval_alchemy_easy", "alchemy_easy", env)
