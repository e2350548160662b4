"""Figure 8, "REC-OneSide-NoIS" (paper Appendix A, Eq. (2)): CoD-Train of Qwen3-8B on Alchemy-Random with the
one-side clipping mask, no importance weight and no adaptive RED-Weight.

Mirrors the reference's ``exp_plan_final/train/alchemy_abl_no_adaptive_red.yaml`` (NoIS kept, adaptive RED
removed; cod_reference.md 3.2, 4.1). Everything else is Table 1 (``codjax/train/paper_configs.py``).
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_base


def get_config():
  # Table 2 (easy) Alchemy: the training parameters (cod_reference 2.2); length penalty 0.1 (Table 1).
  envs = {"alchemy": env_entry("alchemy_random", "easy", length_penalty_coef=0.1)}
  c = paper_8b_base("alchemy_ablation_rec_nois_qwen3_8b", envs)
  c.algorithm.loss = "rec_oneside_nois"  # Appendix A Eq. (2)
  c.algorithm.red_weight = False  # cod_reference 4.1: no adaptive RED
  return c
