"""Benchmark: Alchemy-Random hard (in-domain OOD for Mixed-trained checkpoints; cod_reference.md 4.2
``eval_alchemy_hard.yaml``): 500 packs of 8 test tasks, Table 1's evaluation limits
(``codjax/train/paper_configs.py: paper_8b_eval``).

  python launch/evaluate.py --config=experiments/eval_alchemy_hard.py --config.model.path=CKPT
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_eval


def get_config():
  # Table 2 (hard): 3-4 tiers, 4-6 base elements, 1-2 recipes per element, 15 rounds, limited materials;
  # cod_reference 4.2: shrink 0.4-0.8, cross-tier <= 0.05, noise <= 0.3 (the "hard" preset); penalty 0.1.
  env = env_entry("alchemy_random", "hard", length_penalty_coef=0.1)
  return paper_8b_eval("eval_alchemy_hard", "alchemy_hard", env)
