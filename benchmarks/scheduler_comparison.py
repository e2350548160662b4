"""EL vs random scheduling from two runs' metrics (Environment Evolution paper, arXiv 2609.04128, Sec. 5.4,
Figure 5; docs/methods/environment_evolution.md).

  python benchmarks/scheduler_comparison.py --runs=runs/evolve_tiny_maze,runs/evolve_tiny_maze_random

Reads each run's ``metrics.jsonl`` (written by the trainer with ``data.lineages`` set) and prints, per step and
over all steps: the fraction of partially solved groups (some but not all of the B rollouts of an environment
succeed: the groups that carry a GRPO signal), the mean pass rate of the scheduled environments (the
scheduler's reward r, ``codjax.evolve.task_source``), the trainer's ``reward_mean`` and the mean generation of
the scheduled environments. Standard errors over steps (each step's value is one observation).
"""

from __future__ import annotations

import json
import os

from absl import app
from absl import flags
import numpy as np

_RUNS = flags.DEFINE_list("runs", None, "Run directories to compare (labels: their base names).", required=True)
KEYS = (("sched/partial_groups", "partial"), ("sched/pass_rate", "pass rate"), ("reward_mean", "reward"),
        ("sched/batch_generation", "generation"))


def read(run: str) -> list[dict]:
  path = os.path.join(run, "metrics.jsonl")
  with open(path) as f:
    rows = [json.loads(line) for line in f if line.strip()]
  rows = [r for r in rows if "sched/pass_rate" in r]
  if not rows:
    raise ValueError(f"{path} holds no lineage-scheduling metrics (was data.lineages.dir set?)")
  return rows


def main(argv):
  del argv
  runs = {os.path.basename(os.path.normpath(r)): read(r) for r in _RUNS.value}
  steps = sorted({r["step"] for rows in runs.values() for r in rows})
  head = "step " + " ".join(f"{name[:18] + ' ' + label:>28}" for name in runs for _, label in KEYS)
  print(head)
  for s in steps:
    line = f"{s:>4} "
    for rows in runs.values():
      row = next((r for r in rows if r["step"] == s), None)
      line += " ".join(f"{row[k]:>28.3f}" if row else f"{'-':>28}" for k, _ in KEYS)
    print(line)
  print("\nover all steps (mean +- s.e. over steps)")
  for name, rows in runs.items():
    parts = []
    for key, label in KEYS:
      v = np.array([r[key] for r in rows], np.float64)
      parts.append(f"{label} {v.mean():.3f} +- {v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0:.3f}")
    print(f"  {name}: {len(rows)} steps; " + "; ".join(parts))


if __name__ == "__main__":
  app.run(main)
