"""CoD-Train of Qwen3.6-27B on PDE-Discovery (CoD paper Sec. 3.4; agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/train/pde_discovery_cod_600steps_hard.yaml``, "the yaml" below).

Qwen3.6-27B is the codjax preset ``qwen3.6-27b`` (the Qwen3.5/3.6 Gated DeltaNet / gated-attention hybrid,
``codjax.models.qwen3_5``); the checkpoint path is a placeholder (``--config.model.path``). See
``codjax/train/paper_configs.py: paper_27b_base`` for loading, the rollout engine and memory planning
(``launch/plan_memory.py --config=experiments/pde_discovery_qwen3_6_27b.py``).

  python launch/train.py --config=experiments/pde_discovery_qwen3_6_27b.py --config.model.path=<Qwen3.6-27B>

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_27b_base


def get_config():
  # Trinity-RFT physical_full_train.json: the training family (40 templates, 1-2 reaction terms), "train" preset
  envs = {"pde": env_entry("pde_discovery", "train")}
  # the yaml: prompt / response / model_len 18000 / 4000 / 22001
  c = paper_27b_base("pde_discovery_qwen3_6_27b", envs, prompt_tokens=18_000, response_tokens=4_000,
                     seq_len=22_001)
  c.total_steps = 600  # the yaml: buffer.total_steps 600 explore steps (38% of an epoch)
  c.checkpoint.every = 25  # the yaml: save every 25
  return c
