"""Benchmark: Alchemy-Random easy in the Ralph loop (paper Sec. 3.3 and Figure 4, setting A: "performance
improvements can be observed for evaluation on Alchemy-Random and TerminalSimulator (in both CoD-Deploy and
Ralph-loop settings)"). ``eval_alchemy_easy.py`` with ``eval.packing = "ralph_sample"``: each of the 500 packs
solves its first test task 8 times, with context updates in between (cod_reference.md sec. 1.1
``packing_strategy``; the Ralph loop is CoD-Deploy whose task sequence repeats one task, paper Sec. 3.3).
Everything else (500 packs of 8, Table 1's evaluation limits, temperature 1.0) is the CoD benchmark's.

  python launch/evaluate.py --config=experiments/eval_alchemy_easy_ralph.py --config.model.path=CKPT --out=DIR
"""

import os

from codjax.train.config import load_experiment


def get_config():
  here = os.path.dirname(os.path.abspath(__file__))
  c = load_experiment(os.path.join(here, "eval_alchemy_easy.py")).get_config()
  c.name = "eval_alchemy_easy_ralph"
  c.run_dir = f"runs/{c.name}"
  c.eval.packing = "ralph_sample"  # cod_reference 1.1: the pack's first task S times, same task index
  return c
