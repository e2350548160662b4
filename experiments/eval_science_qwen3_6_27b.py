"""Benchmark: PDE-Discovery, OptimalControl and GridNavigation for Qwen3.6-27B checkpoints
(cod_reference.md 4.2 ``eval_source_checkpoints_all_domains.yaml``): 500 packs of 8 test tasks per domain.

  python launch/evaluate.py --config=experiments/eval_science_qwen3_6_27b.py --config.model.path=CKPT

The model is the codjax preset ``qwen3.6-27b`` (the Qwen3.5/3.6 hybrid) at a placeholder path; see
``codjax/train/paper_configs.py: paper_27b_base``. The reference reads the test rows sequentially with fixed
PDE templates per pack (template p mod 25); codjax packs the first 4,000 rows of each test split in order,
the same for every checkpoint.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_27b_base


def get_config():
  envs = {
      # cod_reference 4.2: PDE eval family (25 support-disjoint templates), up to 3 reaction terms.
      "pde": env_entry("pde_discovery", "eval"),
      # cod_reference 2.5: the "hard" preset (test seed 2024 in the reference).
      "control": env_entry("optimal_control", "hard", process_noise_std=0.0, include_previous_control_policy=True),
      # cod_reference 2.6 / 4.2: grid size 10-14 with 5 bumps (the "eval" preset).
      "grid": env_entry("grid_navigation", "eval"),
  }
  # cod_reference 4.2: limits 27000 / 4000 / 32000.
  c = paper_27b_base("eval_science_qwen3_6_27b", envs, prompt_tokens=27_000, response_tokens=4_000, seq_len=32_000)
  c.total_steps = 0  # evaluation only
  c.model.dtype = "bfloat16"  # inference only: no optimizer updates to lose
  c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 6, 4, 1  # cod_reference 4.2: 6x4 GPUs
  c.seed = 1  # EVAL_SEED in {1, 2, 3} (cod_reference 4.2); override --config.seed for the other two
  c.data.pack_size = 8
  c.data.repeats = 1  # cod_reference 4.2: repeat_times 1
  c.cod.response_limit = 4_000  # cod_reference 4.2: restraint 4000
  c.train.num_microbatches = 1
  c.rollout.vllm.gpu_memory_utilization = 0.5
  c.eval.envs = envs
  c.eval.num_packs = 500  # 4,000 test rows / 8 per pack (cod_reference 4.2)
  c.eval.pack_size = 8  # cod_reference 4.2: pack 8
  c.eval.temperature = 1.0  # T1 / cod_reference 4.1: temperature 1.0
  c.eval.split = "test"
  c.eval.at_start, c.eval.at_end, c.eval.every = False, True, 0
  c.checkpoint.every = 0
  c.checkpoint.export_hf = False
  return c
