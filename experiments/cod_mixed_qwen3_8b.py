"""Setting B (paper Sec. 3.3, Figure 5): CoD-Train of Qwen3-8B on a mixture of FrozenLake-Obscure and
Alchemy-Random in one RL process, task sequences of 4.

Mirrors ``exp_plan_final/train/mixed_flobs_alchran.yaml`` (cod_reference.md 4.1): Table 1 hyperparameters
(``codjax/train/paper_configs.py``), both domains' training parameters, 4x8 GPUs, one epoch over the two
datasets together.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import N_TRAIN, paper_8b_base


def get_config():
  # Each dataset has 50,000 training rows (Table 2 caption); a pack's domain is drawn in proportion to the
  # dataset sizes, i.e. 1:1, as one shuffled epoch over the concatenated rows would.
  envs = {
      # Table 2 (easy): side 4-5, frozen-tile probability 0.6-0.7, step limit 6, action budget 8; Table 1:
      # solve-task length penalty 0.1.
      "frozenlake": env_entry("frozenlake_obscure", "train", proportion=N_TRAIN, length_penalty_coef=0.1),
      # Table 2 (easy): 3-4 tiers, 3-4 base elements, 1 recipe per element, 8 rounds, unlimited materials
      # (the "easy" preset = the training parameters of cod_reference 2.2); length penalty 0.1 (4.1).
      "alchemy": env_entry("alchemy_random", "easy", proportion=N_TRAIN, length_penalty_coef=0.1),
  }
  c = paper_8b_base("cod_mixed_qwen3_8b", envs)
  c.total_steps = 2 * N_TRAIN // 32  # cod_reference 4.1: 1 epoch over 100k rows, 32 tasks per step = 3125
  c.mesh.data = 4  # cod_reference 4.1: 4x8 GPUs (data 4 x fsdp 8)
  # 448 sequences over 32 shards: 14 microbatches x 32 = 448 rows, one row per GPU per microbatch.
  c.train.num_microbatches = 14
  return c
