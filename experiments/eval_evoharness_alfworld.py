"""EvoHarness-RL (arXiv 2608.05446) evaluation on the household environment, seen and unseen.

The public evaluation config (EvoHarnessRL/EvoHarness-RL ``configs/eval/alfworld.yaml``): temperature 1.0, top-p
0.9, max 2048 tokens per reply, recall top-k 3, and ``charge_meta_actions = false`` (only environment actions
count toward the 70-step budget; harness calls are free). The bank is the trained run's, read-only. The table is
the paper's layout: success per task family (Pick, Look, Clean, Heat, Cool, Pick2) and Avg, with harness calls
per episode.

  python launch/evaluate.py --config=experiments/eval_evoharness_alfworld.py \\
      --config.model.path=runs/evoharness_alfworld_qwen3_8b/hf/step_150 --out=DIR

Method: docs/methods/evoharness.md. Results: docs/results.md.
"""

import os

from codjax.train.config import env_entry, load_experiment


def get_config():
  train = load_experiment(os.path.join(os.path.dirname(os.path.abspath(__file__)), "evoharness_alfworld_qwen3_8b.py"))
  c = train.get_config()
  c.name = "eval_evoharness_alfworld"
  c.run_dir = "runs/eval_evoharness_alfworld"
  c.model.path = "runs/evoharness_alfworld_qwen3_8b/hf/step_150"  # the exported policy
  c.total_steps = 0
  c.sft.steps = 0
  c.evoharness.charge_meta_actions = False  # configs/eval/alfworld.yaml: meta calls are free
  c.evoharness.recall_top_k = 3  # configs/eval/alfworld.yaml: recall_top_k 3
  c.evoharness.bank_path = "runs/evoharness_alfworld_qwen3_8b/harness/bank.json"  # the trained bank
  c.evoharness.consolidator = "none"  # common.yaml: validation reads the bank read-only
  c.rollout.max_response_tokens = 2048  # configs/eval/alfworld.yaml: max_tokens 2048
  c.eval.envs = {"seen": env_entry("alfworld_synth", "train", split="valid_seen"),
                 "unseen": env_entry("alfworld_synth", "train", split="valid_unseen")}
  c.eval.num_packs = 140  # configs/eval/alfworld.yaml: valid_seen 140 games (valid_unseen has 134; 140 here for both)
  c.eval.pack_size = 1
  c.eval.temperature = 1.0  # configs/eval/alfworld.yaml: temperature 1.0
  c.eval.top_p = c.rollout.top_p = 0.9  # configs/eval/alfworld.yaml: top-p 0.9
  c.eval.at_start = False
  c.eval.at_end = True
  c.eval.every = 0
  c.checkpoint.every = 0
  c.checkpoint.export_hf = False
  return c
