"""Figure 8, the final method (paper Appendix A, Eq. (3)): CoD-Train of Qwen3-8B on Alchemy-Random with
REC-OneSide-NoIS and adaptive RED-Weight (bisection, T > 0.8).

The reference (agentscope-ai/Trinity-RFT ``examples/research_cod/exp_plan_final/train/``) has no Alchemy-only run
with the full algorithm; this is the algorithm block of ``frozen_lake_obscure.yaml`` on the Alchemy data of the
two ablation yamls, i.e. Table 1 unchanged (``codjax/train/paper_configs.py``).

  python launch/train.py --config=experiments/alchemy_ablation_rec_red_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B

Method: docs/methods/cod.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_base


def get_config():
  # CoD paper Tab. 2 (easy): Alchemy-Random's training parameters; Tab. 1: solve-task length penalty 0.1
  envs = {"alchemy": env_entry("alchemy_random", "easy", length_penalty_coef=0.1)}
  c = paper_8b_base("alchemy_ablation_rec_red_qwen3_8b", envs)
  c.algorithm.loss = "rec_oneside_nois"  # CoD paper Appendix A, Eq. (3) = Eq. (2) on RED-reweighted advantages
  c.algorithm.red_weight = True  # CoD paper Tab. 1: adaptive RED-Weight, bisection with T > 0.8
  return c
