"""GRPO of Qwen3.6-35B-A3B (MoE) on evolved TerminalSimulator lineages with the EL scheduler (Environment
Evolution paper (arXiv 2609.04128), Sec. 5; values cited in ``codjax/train/paper_configs.py: paper_evolution_base``).

The paper stabilises the MoE run with R3 routing replay (Sec. 5.1), which codjax does not implement: the
rollout engine's expert choices are not replayed in the train step (the importance ratio absorbs the
difference, as for any off-policy token).

  python launch/train.py --config=experiments/evolve_terminal_qwen3_6_35b_a3b.py --config.model.path=<Qwen3.6-35B-A3B>

Mesh: 3 x 8 GPUs of 141 GiB (H200), data=3 x fsdp=4 x expert=2. The plan (``launch/plan_memory.py
--config=experiments/evolve_terminal_qwen3_6_35b_a3b.py --device_memory_gib=141``) puts it at 132.7 GiB per
device. Experts over all 8 GPUs of a replica (fsdp=1, expert=8) needs 173.7 GiB: the expert axis splits only
the routed experts' weights, and the rest of the model (its 248k-row embedding and head among it) and its
gradients and AdamW state would be whole on every device; fsdp=8 with no expert axis also fits (125.8 GiB).

Method: docs/methods/environment_evolution.md. Results: docs/results.md.
"""

from codjax.train.paper_configs import QWEN36_35B_A3B_PATH, paper_evolution_base


def get_config():
  c = paper_evolution_base("evolve_terminal_qwen3_6_35b_a3b", "qwen3.6-35b-a3b", QWEN36_35B_A3B_PATH,
                           "lineages/terminal")
  # codjax: 3 replicas of 8 GPUs, each 4-way fsdp x 2-way experts: the layout that fits 141 GiB (docstring)
  c.mesh.data, c.mesh.fsdp, c.mesh.expert = 3, 4, 2
  return c
