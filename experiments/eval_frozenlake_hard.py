"""Benchmark: FrozenLake-Obscure hard (in-domain OOD; cod_reference.md 4.2 ``eval_frozenlake_obscure_hard.yaml``).

500 packs of 8 test tasks (4,000 rows), one CoD trajectory per pack at temperature 1.0, Table 1's evaluation
limits (``codjax/train/paper_configs.py: paper_8b_eval``). Used for both FrozenLake- and Mixed-trained
checkpoints (cod_reference 4.2, run_eval.sh):

  python launch/evaluate.py --config=experiments/eval_frozenlake_hard.py --config.model.path=CKPT
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_eval


def get_config():
  # Table 2 (hard): side 6-7, frozen-tile probability 0.6-0.7, environment step limit 8, agent action budget
  # 10; per-pack mapping and length penalty 0.1 (cod_reference 4.2).
  env = env_entry("frozenlake_obscure", "hard", length_penalty_coef=0.1)
  return paper_8b_eval("eval_frozenlake_hard", "frozenlake_hard", env)
