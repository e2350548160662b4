"""Benchmark: FrozenLake-Obscure hard (in-domain OOD; shiweijiezero/Trinity-RFT
``examples/research_cod/exp_plan_final/bench/eval_frozenlake_obscure_hard.yaml``).

500 packs of 8 test tasks (4,000 rows), one CoD trajectory per pack at temperature 1.0, Table 1's evaluation
limits (``codjax/train/paper_configs.py: paper_8b_eval``). Used for both FrozenLake- and Mixed-trained
checkpoints (the reference's ``bench/run_eval.sh``):

  python launch/evaluate.py --config=experiments/eval_frozenlake_hard.py --config.model.path=CKPT

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_eval


def get_config():
  # CoD paper Tab. 2 (hard): side 6-7, frozen-tile probability 0.6-0.7, step limit 8, action budget 10;
  # eval_frozenlake_obscure_hard.yaml: per-pack mapping, length penalty 0.1
  env = env_entry("frozenlake_obscure", "hard", length_penalty_coef=0.1)
  return paper_8b_eval("eval_frozenlake_hard", "frozenlake_hard", env)
