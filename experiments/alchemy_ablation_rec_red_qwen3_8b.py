"""Figure 8, the final method (paper Appendix A, Eq. (3)): CoD-Train of Qwen3-8B on Alchemy-Random with
REC-OneSide-NoIS and adaptive RED-Weight (bisection, T > 0.8).

The reference has no Alchemy-only run with the full algorithm in ``exp_plan_final``; this is the algorithm
block of ``frozen_lake_obscure.yaml`` (cod_reference.md 4.1) on the Alchemy data of the two ablation yamls,
i.e. Table 1 unchanged (``codjax/train/paper_configs.py``).
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_base


def get_config():
  # Table 2 (easy) Alchemy: the training parameters (cod_reference 2.2); length penalty 0.1 (Table 1).
  envs = {"alchemy": env_entry("alchemy_random", "easy", length_penalty_coef=0.1)}
  c = paper_8b_base("alchemy_ablation_rec_red_qwen3_8b", envs)
  c.algorithm.loss = "rec_oneside_nois"  # Appendix A Eq. (3) = Eq. (2) on RED-reweighted advantages
  c.algorithm.red_weight = True  # Table 1: adaptive RED-Weight, bisection with T > 0.8
  return c
