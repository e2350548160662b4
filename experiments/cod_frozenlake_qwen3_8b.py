"""Setting A (paper Sec. 3.3, Figure 4): CoD-Train of Qwen3-8B on FrozenLake-Obscure, task sequences of 4.

Mirrors the reference's ``frozen_lake_obscure.yaml`` (agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/train/``) with the paper's Table 1 hyperparameters; the shared values and
their citations are in ``codjax/train/paper_configs.py`` (which also lists where codjax departs from the
reference, and why).

  python launch/plan_memory.py --config=experiments/cod_frozenlake_qwen3_8b.py
  python launch/train.py --config=experiments/cod_frozenlake_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B

On one 8-GPU host: ``--config.mesh.data=1`` (the batch then has 8 shards; raise num_microbatches to 56 to
keep one row per GPU per microbatch).

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_base


def get_config():
  # CoD paper Tab. 2 (easy): side 4-5, frozen-tile probability 0.6-0.7, step limit 6, action budget 8 (the "train"
  # preset; per-pack hidden action mapping: frozen_lake_obscure.yaml); Tab. 1: solve-task length penalty 0.1
  envs = {"frozenlake": env_entry("frozenlake_obscure", "train", length_penalty_coef=0.1)}
  return paper_8b_base("cod_frozenlake_qwen3_8b", envs)
