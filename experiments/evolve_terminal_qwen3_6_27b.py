"""GRPO of Qwen3.6-27B on evolved TerminalSimulator lineages with the EL scheduler (Environment Evolution paper
(arXiv 2609.04128), Sec. 5; every value cited in ``codjax/train/paper_configs.py: paper_evolution_base``).

  python launch/evolve.py --env=terminal_simulator --lineages=500 --out=lineages/terminal
  python launch/train.py --config=experiments/evolve_terminal_qwen3_6_27b.py --config.model.path=<Qwen3.6-27B>
  python launch/train.py --config=experiments/evolve_terminal_qwen3_6_27b.py --config.data.lineages.scheduler=random

Method: docs/methods/environment_evolution.md. Results: docs/results.md.
"""

from codjax.train.paper_configs import QWEN36_27B_PATH, paper_evolution_base


def get_config():
  return paper_evolution_base("evolve_terminal_qwen3_6_27b", "qwen3.6-27b", QWEN36_27B_PATH, "lineages/terminal")
