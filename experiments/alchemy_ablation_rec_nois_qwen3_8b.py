"""Figure 8, "REC-OneSide-NoIS" (paper Appendix A, Eq. (2)): CoD-Train of Qwen3-8B on Alchemy-Random with the
one-side clipping mask, no importance weight and no adaptive RED-Weight.

Mirrors the reference's ``alchemy_abl_no_adaptive_red.yaml`` (agentscope-ai/Trinity-RFT
``examples/research_cod/exp_plan_final/train/``: NoIS kept, adaptive RED removed). Everything else is Table 1
(``codjax/train/paper_configs.py``).

  python launch/train.py --config=experiments/alchemy_ablation_rec_nois_qwen3_8b.py \\
      --config.model.path=/path/to/Qwen3-8B

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_base


def get_config():
  # CoD paper Tab. 2 (easy): Alchemy-Random's training parameters; Tab. 1: solve-task length penalty 0.1
  envs = {"alchemy": env_entry("alchemy_random", "easy", length_penalty_coef=0.1)}
  c = paper_8b_base("alchemy_ablation_rec_nois_qwen3_8b", envs)
  c.algorithm.loss = "rec_oneside_nois"  # CoD paper Appendix A, Eq. (2): REC-OneSide-NoIS
  c.algorithm.red_weight = False  # alchemy_abl_no_adaptive_red.yaml: no adaptive RED
  return c
