"""Benchmark: Alchemy-Random hard in the Ralph loop (paper Sec. 3.3 and Figure 5, setting B, whose results and
conclusions are "similar to those in setting A", including the Ralph-loop evaluation of Figure 4).
``eval_alchemy_hard.py`` with ``eval.packing = "ralph_sample"``: each of the 500 packs solves its first test
task 8 times, with context updates in between (Trinity-RFT ``cod_workflow.py``, ``packing_strategy``); everything
else is the CoD benchmark's (500 packs of 8, Table 1's evaluation limits, temperature 1.0).

  python launch/evaluate.py --config=experiments/eval_alchemy_hard_ralph.py --config.model.path=CKPT --out=DIR

Method: docs/methods/cod.md. Results: docs/results.md.
"""

import os

from codjax.train.paper_configs import ralph_eval_config


def get_config():
  return ralph_eval_config(os.path.join(os.path.dirname(os.path.abspath(__file__)), "eval_alchemy_hard.py"))
