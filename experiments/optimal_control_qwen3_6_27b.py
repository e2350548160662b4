"""CoD-Train of Qwen3.6-27B on OptimalControl (CoD paper Sec. 3.4; agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/train/optimal_control_improve.yaml``, "the yaml" below).

Qwen3.6-27B is the codjax preset ``qwen3.6-27b`` (the Qwen3.5/3.6 hybrid); the checkpoint path is a placeholder
(``--config.model.path``), see ``codjax/train/paper_configs.py: paper_27b_base``. The yaml's train_batch_size
480 is the number of single-turn experiences one explore step yields (8 packs x 8 repeats x 7 episodes = 448,
padded); codjax trains on exactly the episodes of each step.

  python launch/train.py --config=experiments/optimal_control_qwen3_6_27b.py --config.model.path=<Qwen3.6-27B>

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import EPOCH_STEPS_8B, paper_27b_base


def get_config():
  # the "hard" preset (x0 +-2, v0 +-1.5, target +-8, horizon 12, control penalty 0.03); the yaml: no process
  # noise, include_previous_control_policy true
  envs = {"control": env_entry("optimal_control", "hard", process_noise_std=0.0, include_previous_control_policy=True)}
  # the yaml: prompt / response 12000 / 4000 (model_len 40000 is vLLM's context cap); a control task is a
  # single turn (max_step_num 1), so an episode fits 12,000 + 4,000 tokens
  c = paper_27b_base("optimal_control_qwen3_6_27b", envs, prompt_tokens=12_000, response_tokens=4_000,
                     seq_len=16_000)
  c.total_steps = EPOCH_STEPS_8B  # the yaml: 1 epoch of 50,000 rows, 32 tasks per step
  c.checkpoint.every = 100  # the yaml: save every 100
  return c
