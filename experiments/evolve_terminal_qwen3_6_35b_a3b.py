"""GRPO of Qwen3.6-35B-A3B (MoE) on evolved TerminalSimulator lineages with the EL scheduler (Environment
Evolution paper (arXiv 2609.04128), Sec. 5; values cited in ``codjax/train/paper_configs.py: paper_evolution_base``).

The paper stabilises the MoE run with R3 routing replay (Sec. 5.1), which codjax does not implement: the
rollout engine's expert choices are not replayed in the train step (the importance ratio absorbs the
difference, as for any off-policy token).

  python launch/train.py --config=experiments/evolve_terminal_qwen3_6_35b_a3b.py --config.model.path=<Qwen3.6-35B-A3B>

Method: docs/methods/environment_evolution.md. Results: docs/results.md.
"""

from codjax.train.paper_configs import QWEN36_35B_A3B_PATH, paper_evolution_base


def get_config():
  c = paper_evolution_base("evolve_terminal_qwen3_6_35b_a3b", "qwen3.6-35b-a3b", QWEN36_35B_A3B_PATH,
                           "lineages/terminal")
  c.mesh.data, c.mesh.fsdp, c.mesh.expert = 3, 1, 8  # codjax: experts split over 8 GPUs per replica (3 x 8 GPUs)
  return c
