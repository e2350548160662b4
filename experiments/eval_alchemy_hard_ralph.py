"""Benchmark: Alchemy-Random hard in the Ralph loop (paper Sec. 3.3 and Figure 5, setting B, whose results and
conclusions are "similar to those in setting A", including the Ralph-loop evaluation of Figure 4).
``eval_alchemy_hard.py`` with ``eval.packing = "ralph_sample"``: each of the 500 packs solves its first test
task 8 times, with context updates in between (cod_reference.md sec. 1.1 ``packing_strategy``); everything
else is the CoD benchmark's (500 packs of 8, Table 1's evaluation limits, temperature 1.0).

  python launch/evaluate.py --config=experiments/eval_alchemy_hard_ralph.py --config.model.path=CKPT --out=DIR
"""

import os

from codjax.train.config import load_experiment


def get_config():
  here = os.path.dirname(os.path.abspath(__file__))
  c = load_experiment(os.path.join(here, "eval_alchemy_hard.py")).get_config()
  c.name = "eval_alchemy_hard_ralph"
  c.run_dir = f"runs/{c.name}"
  c.eval.packing = "ralph_sample"  # cod_reference 1.1: the pack's first task S times, same task index
  return c
