"""Setting B (paper Sec. 3.3, Figure 5): CoD-Train of Qwen3-8B on a mixture of FrozenLake-Obscure and
Alchemy-Random in one RL process, task sequences of 4.

Mirrors the reference's ``mixed_flobs_alchran.yaml`` (agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/train/``): Table 1 hyperparameters (``codjax/train/paper_configs.py``),
both domains' training parameters, 4x8 GPUs, one epoch over the two datasets together.

  python launch/train.py --config=experiments/cod_mixed_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import N_TRAIN, paper_8b_base


def get_config():
  # CoD paper Tab. 2 caption: 50,000 training rows per dataset; a pack's domain is drawn in proportion (1:1)
  envs = {
      # CoD paper Tab. 2 (easy): side 4-5, frozen-tile p 0.6-0.7, step limit 6, budget 8; Tab. 1: penalty 0.1
      "frozenlake": env_entry("frozenlake_obscure", "train", proportion=N_TRAIN, length_penalty_coef=0.1),
      # CoD paper Tab. 2 (easy): 3-4 tiers, 3-4 base elements, 1 recipe each, 8 rounds, unlimited; penalty 0.1
      "alchemy": env_entry("alchemy_random", "easy", proportion=N_TRAIN, length_penalty_coef=0.1),
  }
  c = paper_8b_base("cod_mixed_qwen3_8b", envs)
  c.total_steps = 2 * N_TRAIN // 32  # mixed_flobs_alchran.yaml: 1 epoch over 100k rows, 32 tasks per step = 3125
  c.mesh.data = 4  # mixed_flobs_alchran.yaml: 4x8 GPUs (data 4 x fsdp 8)
  # 448 sequences over 32 shards: 14 microbatches x 32 = 448 rows, one row per GPU per microbatch.
  c.train.num_microbatches = 14
  return c
