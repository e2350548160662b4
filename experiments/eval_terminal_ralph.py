"""Benchmark: TerminalSimulator in the Ralph loop (paper Sec. 3.3, Figures 4 and 5: cross-domain evaluation
"in both CoD-Deploy and Ralph-loop settings"). ``eval_terminal.py`` with ``eval.packing = "ralph_sample"``:
each of the 500 packs solves its first test task 8 times, with context updates in between (Trinity-RFT
``cod_workflow.py``, ``packing_strategy``); everything else is the CoD benchmark's (500 packs of 8, agent action budget
12, composite ratio 0.5, Table 1's evaluation limits, temperature 1.0).

  python launch/evaluate.py --config=experiments/eval_terminal_ralph.py --config.model.path=CKPT --out=DIR

Method: docs/methods/cod.md. Results: docs/results.md.
"""

import os

from codjax.train.paper_configs import ralph_eval_config


def get_config():
  return ralph_eval_config(os.path.join(os.path.dirname(os.path.abspath(__file__)), "eval_terminal.py"))
