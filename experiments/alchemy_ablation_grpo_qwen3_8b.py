"""Figure 8, "vanilla GRPO" (paper Appendix A, Eq. (1)): CoD-Train of Qwen3-8B on Alchemy-Random with the
importance-weighted, one-side-clipped gradient and no adaptive RED-Weight.

codjax's ``ppo`` loss, -min(rho A, clip(rho, 1 - eps, 1 + eps) A) with a differentiable ratio, has exactly the
Eq. (1) gradient A rho M grad log pi (``codjax/rl/losses.py``). Mirrors the reference's
``alchemy_abl_no_adaptive_red_is.yaml`` (agentscope-ai/Trinity-RFT ``examples/research_cod/exp_plan_final/train/``:
REC-OneSide-IS without adaptive RED, the same gradient). Everything else is Table 1
(``codjax/train/paper_configs.py``); the advantage is still CoD's per-position credit, as in all three Figure 8
runs.

  python launch/train.py --config=experiments/alchemy_ablation_grpo_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_base


def get_config():
  # CoD paper Tab. 2 (easy): Alchemy-Random's training parameters; Tab. 1: solve-task length penalty 0.1
  envs = {"alchemy": env_entry("alchemy_random", "easy", length_penalty_coef=0.1)}
  c = paper_8b_base("alchemy_ablation_grpo_qwen3_8b", envs)
  c.algorithm.loss = "ppo"  # CoD paper Appendix A, Eq. (1): IS weight with the one-side clipping mask
  c.algorithm.red_weight = False  # alchemy_abl_no_adaptive_red_is.yaml: no adaptive RED
  return c
