"""Benchmark: TerminalSimulator (cross-domain for both settings; agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/bench/eval_terminal.yaml``): 500 packs of 8 test tasks, Table 1's
evaluation limits (``codjax/train/paper_configs.py: paper_8b_eval``).

  python launch/evaluate.py --config=experiments/eval_terminal.py --config.model.path=CKPT

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_eval


def get_config():
  # CoD paper Tab. 2: agent action budget 12, composite-task ratio 0.5 (the "eval" preset; no length penalty)
  env = env_entry("terminal_simulator", "eval")
  return paper_8b_eval("eval_terminal", "terminal", env)
