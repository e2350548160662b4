"""Evaluation of EvoHarness trajectories (EvoHarness-RL, arXiv 2608.05446:
the paper's ALFWorld table layout, harness calls; docs/methods/evoharness.md).

* ``summarize``: success over tasks with its standard error (``codjax.workflows.stats.mean_se`` over trajectories'
  tasks), success per task family in the paper's column order (Pick, Look, Clean, Heat, Cool, Pick2, Avg; Avg
  is the mean over tasks, as the paper's), success per pack position (packs of several tasks), harness calls
  per task (episode) in total and by verb with each verb's share, turns, environment steps, invalid turns,
  the reward and its terms, token counts, and ``task_success`` (per trajectory, per position; for ``compare``).
* ``compare``: the paired change of success between two evaluations of the same tasks and sampling seeds.
* ``format_table``: the console table of ``{label: summary}``.
* ``step_metrics``: the trainer's per-step metrics of a batch (the same quantities, flat).
"""

from __future__ import annotations

import numpy as np

from codjax.agents.harness.actions import META_VERBS as VERBS
from codjax.workflows.stats import mean_se

#: ALFWorld task families in the paper's table order, with its column names (B.6)
FAMILY_COLUMNS = (("pick_and_place_simple", "Pick"), ("look_at_obj_in_light", "Look"),
                  ("pick_clean_then_place_in_recep", "Clean"), ("pick_heat_then_place_in_recep", "Heat"),
                  ("pick_cool_then_place_in_recep", "Cool"), ("pick_two_obj_and_place", "Pick2"))


def _runs(trajs):
  return [r for t in trajs for r in t.runs]


def call_metrics(trajs) -> dict:
  """Harness calls per task (episode): total and by verb, and each verb's share of all calls."""
  runs = _runs(trajs)
  n = max(len(runs), 1)
  per_verb = {v: sum(r.meta_calls()[v] for r in runs) for v in VERBS}
  total = sum(per_verb.values())
  out = {"calls_per_episode": total / n}
  for v in VERBS:
    out[f"calls_per_episode/{v}"] = per_verb[v] / n
    out[f"call_share/{v}"] = per_verb[v] / total if total else 0.0
  return out


def outcome_metrics(trajs) -> dict:
  runs = _runs(trajs)
  turns = sum(r.num_turns for r in runs)
  out = {"success_rate": float(np.mean([r.won for r in runs])) if runs else 0.0,
         "reward_mean": float(np.mean([r.reward for r in runs])) if runs else 0.0,
         "turns_mean": float(np.mean([r.num_turns for r in runs])) if runs else 0.0,
         "env_steps_mean": float(np.mean([r.env_steps for r in runs])) if runs else 0.0,
         "invalid_per_episode": float(np.mean([r.invalid for r in runs])) if runs else 0.0,
         "invalid_rate": float(sum(r.invalid for r in runs) / max(turns, 1)),
         "malformed_rate": float(sum(k == "malformed" for r in runs for k in r.kinds) / max(turns, 1)),
         "truncated_rate": float(np.mean([r.truncated for r in runs])) if runs else 0.0}
  terms = sorted({k for r in runs for k in r.reward_terms})
  for k in terms:
    out[f"reward/{k}"] = float(np.mean([r.reward_terms.get(k, 0.0) for r in runs]))
  return out


def token_metrics(trajs) -> dict:
  eps = [e for t in trajs for e in t.episodes()]
  gen = [n for e in eps for n in e.response_token_counts]
  return {"response_tokens_mean": float(np.mean(gen)) if gen else 0.0, "generated_tokens": float(sum(gen)),
          "prompt_tokens_mean": float(np.mean([len(e.tokens) - sum(e.response_token_counts) for e in eps]))
          if eps and any(e.tokens for e in eps) else 0.0}


def family_success(trajs) -> dict:
  """{column: (mean, se, n)} over the tasks of each family present."""
  out = {}
  for fam, col in FAMILY_COLUMNS:
    xs = [float(r.won) for r in _runs(trajs) if r.family == fam]
    if xs:
      m, se = mean_se(xs)
      out[col] = (m, se, len(xs))
  return out


def success_matrix(trajs) -> np.ndarray:
  """[N, T] task success (trajectory, pack position); every trajectory has the same T."""
  sizes = {len(t.runs) for t in trajs}
  if len(sizes) != 1:
    raise ValueError(f"trajectories mix task counts {sorted(sizes)}")
  return np.array([[float(r.won) for r in t.runs] for t in trajs], np.float64)


def summarize(trajs) -> dict:
  """The evaluation summary of one environment's trajectories (module docstring), JSON-ready."""
  if not trajs:
    raise ValueError("no trajectories to summarize")
  s = success_matrix(trajs)
  n, t_tasks = s.shape
  out = {"n": int(n), "tasks_per_pack": int(t_tasks), "env": sorted({t.pack.env_name for t in trajs})}
  out["success"], out["success_se"] = mean_se(s.reshape(-1))
  pos_m, pos_se = mean_se(s)
  out["position_success"] = np.atleast_1d(pos_m).tolist()
  out["position_success_se"] = np.atleast_1d(pos_se).tolist()
  fams = family_success(trajs)
  out["family_success"] = {col: m for col, (m, _, _) in fams.items()}
  out["family_success_se"] = {col: se for col, (_, se, _) in fams.items()}
  out["family_n"] = {col: k for col, (_, _, k) in fams.items()}
  out["task_success"] = s.astype(int).tolist()
  out.update(outcome_metrics(trajs))
  out.update(call_metrics(trajs))
  out.update(token_metrics(trajs))
  return out


def step_metrics(trajs) -> dict:
  """Training metrics of one step's batch (flat names; ``evoharness/`` prefixes the harness's)."""
  m = {f"evoharness/{k}": v for k, v in {**outcome_metrics(trajs), **call_metrics(trajs)}.items()}
  for col, (mean, _, _) in family_success(trajs).items():
    m[f"evoharness/success/{col}"] = mean
  m.update(token_metrics(trajs))
  m["reward_mean"] = m["evoharness/reward_mean"]
  return m


def compare(before: dict, after: dict) -> dict:
  """Paired difference after - before of task success over the same tasks (same order): ``mean``/``se`` over
  trajectories of the mean success of their tasks, ``per_position`` [[mean, se], ...] per pack position."""
  a = np.asarray(before.get("task_success", []), np.float64)
  b = np.asarray(after.get("task_success", []), np.float64)
  if a.size == 0 or b.size == 0:
    raise ValueError("both evaluations need per-task successes ('task_success')")
  if a.shape != b.shape:
    raise ValueError(f"evaluations differ in shape: {a.shape} vs {b.shape}")
  d = b - a
  mean, se = mean_se(d.mean(axis=1))
  per = [[float(m), float(e)] for m, e in zip(*(np.atleast_1d(x) for x in mean_se(d)))]
  return {"n": int(d.shape[0]), "metric": "success", "before": float(a.mean()), "after": float(b.mean()),
          "mean": float(mean), "se": float(se), "per_position": per}


def format_table(results: dict) -> str:
  """One row per ``{label: summary}``: success per family in the paper's layout and Avg (+- s.e.), then
  harness calls per episode (and the top verb's share), turns and invalid turns per episode."""
  cols = [c for _, c in FAMILY_COLUMNS]
  head = f"{'policy / env':34s} " + " ".join(f"{c:>6s}" for c in cols) + f" {'Avg':>13s} {'calls/ep':>9s}"
  head += f" {'top verb':>13s} {'turns':>6s} {'invalid':>7s}"
  lines = [head]
  for name, r in results.items():
    fam = r.get("family_success", {})
    row = f"{name[:34]:34s} " + " ".join(f"{100 * fam[c]:6.1f}" if c in fam else f"{'-':>6s}" for c in cols)
    row += f" {100 * r['success']:6.1f}+-{100 * r['success_se']:4.1f} {r['calls_per_episode']:9.2f}"
    shares = {v: r.get(f"call_share/{v}", 0.0) for v in VERBS}
    top = max(shares, key=shares.get)
    row += f" {f'{top} {100 * shares[top]:.0f}%' if r['calls_per_episode'] else '-':>13s}"
    row += f" {r['turns_mean']:6.1f} {r['invalid_per_episode']:7.2f}"
    lines.append(row)
  return "\n".join(lines)
