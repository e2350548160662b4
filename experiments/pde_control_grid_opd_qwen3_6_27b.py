"""Multi-teacher on-policy distillation of a Qwen3.6-27B student over PDE, Control and Grid (CoD paper Sec. 3.4,
Figure 7; agentscope-ai/Trinity-RFT ``examples/research_cod/exp_plan_final/train/pde_control_grid_opd.yaml``,
"the yaml" below).

The teachers (the yaml's auxiliary models) are chosen by each sample's domain (``algorithm.teachers``, data-env label
-> HF directory; ``codjax/train/teachers.py``): PDE -> the PDE CoD-RL checkpoint at step 75, Control -> step
200, Grid -> step 100 (HF exports of ``pde_discovery_qwen3_6_27b``, ``optimal_control_qwen3_6_27b``,
``grid_navigation_qwen3_6_27b``; the paths below are placeholders, set them with
``--config.algorithm.teachers.a_pde=...``); they score the student's exact tokens at the rollout
temperature 1.0, on both solve and update episodes.

The student is the codjax preset ``qwen3.6-27b`` (the Qwen3.5/3.6 hybrid) at a placeholder path
(``--config.model.path``); see ``codjax/train/paper_configs.py: paper_27b_base``.

  python launch/train.py --config=experiments/pde_control_grid_opd_qwen3_6_27b.py --config.model.path=<Qwen3.6-27B>

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import N_TRAIN, paper_27b_base


def get_config():
  # the yaml: three tasksets in config order PDE, Control, Grid (each 50,000 rows: equal shares)
  envs = {
      "a_pde": env_entry("pde_discovery", "train", proportion=N_TRAIN),
      "b_control": env_entry("optimal_control", "hard", proportion=N_TRAIN, process_noise_std=0.0,
                             include_previous_control_policy=True),
      "c_grid": env_entry("grid_navigation", "27b_train", proportion=N_TRAIN),
  }
  # the yaml: prompt / response / model_len 22000 / 4000 / 26001
  c = paper_27b_base("pde_control_grid_opd_qwen3_6_27b", envs, prompt_tokens=22_000, response_tokens=4_000,
                     seq_len=26_001)
  c.data.repeats = 1  # the yaml: repeat_times 1 (no group)
  c.data.packs_per_step = 64  # the yaml: batch_size 256 raw tasks / pack 4
  c.algorithm.loss = "opd"  # Trinity-RFT rec_policy_loss.py: -A logp, A = logp_teacher - sg(logp), no clipping
  c.algorithm.teachers = {  # the yaml: one teacher per taskset (placeholder paths)
      "a_pde": "checkpoints/pde_discovery_qwen3_6_27b/hf/step_75",
      "b_control": "checkpoints/optimal_control_qwen3_6_27b/hf/step_200",
      "c_grid": "checkpoints/grid_navigation_qwen3_6_27b/hf/step_100",
  }
  c.algorithm.advantage = "grpo"  # unused by the opd loss; "cod" would need a group (repeats >= 2)
  c.algorithm.grpo_normalize_std = False
  c.algorithm.red_weight = False  # the yaml: no RL reward term, nothing to reweight
  c.rollout.sync_interval = 1  # the yaml: sync_interval 1
  c.optim.warmup_steps = 10  # the yaml: lr 1e-6 with lr_warmup_steps 10, constant
  c.total_steps = 200  # the yaml: trainer.total_steps 200
  c.checkpoint.every = 5  # the yaml: save_interval 5
  # 64 packs x 7 episodes = 448 sequences: 19 microbatches x 24 shards, one row per GPU per microbatch.
  c.train.num_microbatches = 19
  return c
