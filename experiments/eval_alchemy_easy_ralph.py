"""Benchmark: Alchemy-Random easy in the Ralph loop (paper Sec. 3.3 and Figure 4, setting A: "performance
improvements can be observed for evaluation on Alchemy-Random and TerminalSimulator (in both CoD-Deploy and
Ralph-loop settings)"). ``eval_alchemy_easy.py`` with ``eval.packing = "ralph_sample"``: each of the 500 packs
solves its first test task 8 times, with context updates in between (Trinity-RFT ``cod_workflow.py``,
``packing_strategy``; the Ralph loop is CoD-Deploy whose task sequence repeats one task, paper Sec. 3.3).
Everything else (500 packs of 8, Table 1's evaluation limits, temperature 1.0) is the CoD benchmark's.

  python launch/evaluate.py --config=experiments/eval_alchemy_easy_ralph.py --config.model.path=CKPT --out=DIR

Method: docs/methods/cod.md. Results: docs/results.md.
"""

import os

from codjax.train.paper_configs import ralph_eval_config


def get_config():
  return ralph_eval_config(os.path.join(os.path.dirname(os.path.abspath(__file__)), "eval_alchemy_easy.py"))
