"""CoD-Deploy evaluation: per-position solve reward (the paper's primary metric) and secondary metrics."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from codjax.agents.cod import CodSettings, CodTrajectory, Pack, run_cod
from codjax.workflows.stats import mean_se as _mean_se  # (mean, s.e.) of a 1-D sample: two floats


def summarize(trajs: Sequence[CodTrajectory]) -> dict:
  """Mean +- standard error per position, plus format-error rate, hint-parse rate and token counts."""
  if not trajs:
    raise ValueError("no trajectories to summarize")
  r = np.stack([t.task_rewards for t in trajs])  # [N, S]
  fmt = np.stack([[e.format_error for e in t.solve_episodes] for t in trajs]).astype(float)
  out = {"n": int(r.shape[0]), "pack_size": int(r.shape[1]), "reward_mean": [], "reward_se": [],
         "format_error_rate": fmt.mean(axis=0).tolist()}
  for k in range(r.shape[1]):
    m, se = _mean_se(r[:, k])
    out["reward_mean"].append(m)
    out["reward_se"].append(se)
  m, se = _mean_se(r[:, -1] - r[:, 0])
  out["last_minus_first"], out["last_minus_first_se"] = m, se
  out["mean_reward"] = float(r.mean())
  out["mean_reward_se"] = _mean_se(r.mean(axis=1))[1]
  out["pack_rewards"] = r.tolist()  # [N, S], for paired comparisons between checkpoints
  upd = [e for t in trajs for e in t.update_episodes]
  out["hint_parse_rate"] = float(np.mean([not e.format_error for e in upd])) if upd else float("nan")
  # accuracy of the stated facts about the hidden structure (environments that define it, e.g. FrozenLake)
  acc = [t.pack.family.score_hint(t.pack.pack_seed, e.info.get("new_hint", "")) for t in trajs
         for e in t.update_episodes if not e.format_error]
  acc = [a for a in acc if a is not None]
  out["hint_accuracy"] = float(np.mean(acc)) if acc else float("nan")
  out["hints_with_facts"] = float(len(acc) / len(upd)) if upd else float("nan")
  eps = [e for t in trajs for e in t.episodes()]
  gen = [n for e in eps for n in e.response_token_counts]
  out["response_tokens_mean"] = float(np.mean(gen)) if gen else 0.0
  out["generated_tokens"] = int(sum(gen))
  out["truncated_episodes"] = int(sum(e.truncated for e in eps))
  out["solve_turns_mean"] = float(np.mean([e.num_turns for t in trajs for e in t.solve_episodes]))
  return out


def evaluate_packs(backend, packs: Sequence[Pack], settings: CodSettings | None = None, repeats: int = 1
                   ) -> tuple[dict, list[CodTrajectory]]:
  trajs = run_cod(backend, packs, repeats, settings)
  return summarize(trajs), trajs


def format_table(results: dict[str, dict]) -> str:
  """A text table: one row per named result, one column per position (mean +- s.e.)."""
  lines = []
  width = max(r["pack_size"] for r in results.values())
  head = f"{'policy / env':34s} " + " ".join(f"{'pos' + str(k):>13s}" for k in range(width))
  head += f" {'last-first':>14s} {'hint parse':>10s} {'hint acc':>8s}"
  lines.append(head)
  for name, r in results.items():
    cells = [f"{m:.3f}+-{s:.3f}" for m, s in zip(r["reward_mean"], r["reward_se"])]
    cells += [""] * (width - len(cells))
    row = f"{name[:34]:34s} " + " ".join(f"{c:>13s}" for c in cells)
    row += f" {r['last_minus_first']:+.3f}+-{r['last_minus_first_se']:.3f} {r['hint_parse_rate']:10.3f}"
    row += f" {r.get('hint_accuracy', float('nan')):8.3f}"
    lines.append(row)
  return "\n".join(lines)


def compare(before: dict, after: dict) -> dict:
  """Paired difference after - before of the mean solve reward (same packs, same order): mean and s.e.
  per position and over all positions."""
  a, b = np.asarray(before["pack_rewards"]), np.asarray(after["pack_rewards"])
  if a.shape != b.shape:
    raise ValueError(f"evaluations differ in shape: {a.shape} vs {b.shape}")
  d = b - a
  out = {"n": int(d.shape[0])}
  out["per_position"] = [_mean_se(d[:, k]) for k in range(d.shape[1])]
  out["mean"], out["se"] = _mean_se(d.mean(axis=1))
  return out
