"""Benchmark: PDE-Discovery, OptimalControl and GridNavigation for Qwen3.6-27B checkpoints (CoD paper Sec. 3.4;
agentscope-ai/Trinity-RFT ``examples/research_cod/exp_plan_final/bench/eval_source_checkpoints_all_domains.yaml``):
500 packs of 8 test tasks per domain.

  python launch/evaluate.py --config=experiments/eval_science_qwen3_6_27b.py --config.model.path=CKPT

The model is the codjax preset ``qwen3.6-27b`` (the Qwen3.5/3.6 hybrid) at a placeholder path; see
``codjax/train/paper_configs.py: paper_27b_base``. The reference reads the test rows sequentially with fixed
PDE templates per pack (template p mod 25); codjax packs the first 4,000 rows of each test split in order,
the same for every checkpoint.

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_27b_base


def get_config():
  envs = {
      # the bench yaml: PDE eval family (25 support-disjoint templates, up to 3 reaction terms)
      "pde": env_entry("pde_discovery", "eval"),
      # the "hard" preset, no process noise (Trinity-RFT get_optimal_control_data.py: test seed 2024)
      "control": env_entry("optimal_control", "hard", process_noise_std=0.0, include_previous_control_policy=True),
      # the bench yaml: grid size 10-14 with 5 bumps (the "eval" preset)
      "grid": env_entry("grid_navigation", "eval"),
  }
  # the bench yaml: prompt / response / model_len limits 27000 / 4000 / 32000
  c = paper_27b_base("eval_science_qwen3_6_27b", envs, prompt_tokens=27_000, response_tokens=4_000, seq_len=32_000)
  c.total_steps = 0  # evaluation only
  c.model.dtype = "bfloat16"  # codjax: inference only, no optimizer updates to lose
  c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 6, 4, 1  # the bench yaml: 6x4 GPUs
  c.seed = 1  # the bench yaml: EVAL_SEED in {1, 2, 3}; override --config.seed for the other two
  c.data.pack_size = 8  # the bench yaml: pack 8
  c.data.repeats = 1  # the bench yaml: repeat_times 1
  c.cod.response_limit = 4_000  # the bench yaml: response restraint 4000
  c.train.num_microbatches = 1
  c.rollout.vllm.gpu_memory_utilization = 0.5  # codjax: no train step shares the GPU
  c.eval.envs = envs
  c.eval.num_packs = 500  # the bench yaml: 4,000 test rows / 8 per pack
  c.eval.pack_size = 8  # the bench yaml: pack 8
  c.eval.temperature = 1.0  # CoD paper Tab. 1: temperature 1.0
  c.eval.split = "test"
  c.eval.at_start, c.eval.at_end, c.eval.every = False, True, 0
  c.checkpoint.every = 0
  c.checkpoint.export_hf = False
  return c
