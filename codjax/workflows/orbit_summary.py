"""Evaluation of ORBIT multi-episode trajectories (ORBIT paper Sec. 3-4, Tables 2 and 4;
docs/methods/orbit.md).

* ``summarize``: per-episode success Ep1..EpT with standard errors (``codjax.workflows.stats.mean_se`` over the N
  trajectories), the in-context gain EpT - Ep1 paired over instances, the success count and its s.e.,
  in-context regret with J* = 1 and the exploration metric of the paper's Table 4
  (``codjax.workflows.orbit_metrics``), outcome and token counts, and, for the games with an oracle (paper App. C:
  Maze and Mastermind), the oracle's per-episode success on the very same instances and the regret against it.
* ``oracle_success``: that oracle curve: the environment's scripted expert replayed through
  ``codjax.agents.orbit.run_orbit`` on the trajectories' own packs.
* ``compare``: the paired change between two evaluations of the same instances and sampling seeds (the
  trainer's ``eval/rl_effect.json``): success count over Ep1..EpT and every episode's success.
* ``format_table``: the console table of ``{label: summary}``.
* ``success_matrix``, ``outcome_metrics``, ``token_metrics``: the pieces the trainer's training metrics share.
"""

from __future__ import annotations

import numpy as np

from codjax.agents.episode import PolicyBackend
from codjax.agents.orbit import OrbitSettings, OrbitTrajectory, run_orbit
from codjax.workflows import orbit_metrics
from codjax.workflows.stats import mean_se

#: games whose scripted player is an oracle (paper Appendix C), used for the regret against the oracle
ORACLE_GAMES = ("maze", "mastermind")


def success_matrix(trajs: list[OrbitTrajectory]) -> np.ndarray:
  """``[N, T]`` 0/1 success of episodes 1..T; every trajectory must have the same T."""
  sizes = {t.num_episodes for t in trajs}
  if len(sizes) != 1:
    raise ValueError(f"trajectories mix episode counts {sorted(sizes)}; summarize one T at a time")
  return np.stack([t.success_row() for t in trajs])


def token_metrics(trajs: list[OrbitTrajectory]) -> dict:
  """Generated tokens (total, mean per reply), conversation length, truncated conversations."""
  eps = [t.episode for t in trajs]
  gen = [n for e in eps for n in e.response_token_counts]
  return {"response_tokens_mean": float(np.mean(gen)) if gen else 0.0, "generated_tokens": float(sum(gen)),
          "trajectory_tokens_mean": float(np.mean([len(e.tokens) for e in eps])),
          "truncated_trajectories": float(sum(e.truncated for e in eps))}


def outcome_metrics(trajs: list[OrbitTrajectory]) -> dict:
  """Reward, success count over all episodes played, episodes played, overflows, format-error share."""
  steps = sum(t.steps for t in trajs)
  return {"reward_mean": float(np.mean([t.reward for t in trajs])),
          "success_count_all_mean": float(np.mean([t.success_count for t in trajs])),
          "episode/num_episodes": float(np.mean([len(t.games) for t in trajs])),
          "overflow_rate": float(np.mean([t.overflow for t in trajs])),
          # share of environment steps whose reply did not fit the action format
          "format_error_rate": float(sum(g.format_errors for t in trajs for g in t.games) / max(steps, 1))}


def oracle_success(trajs: list[OrbitTrajectory], settings: OrbitSettings, seed: int = 0) -> np.ndarray | None:
  """Per-episode success [T] of the environment's oracle on the trajectories' own instances, or None."""
  names = {t.pack.env_name for t in trajs}
  if len(names) != 1 or next(iter(names)) not in ORACLE_GAMES:
    return None
  from codjax.envs.experts import make_policy

  packs = list({t.pack.pack_id: t.pack for t in trajs}.values())
  ref = run_orbit(PolicyBackend(make_policy(next(iter(names)), "expert"), seed), packs, 1, settings)
  return orbit_metrics.per_episode_success(success_matrix(ref))


def summarize(trajs: list[OrbitTrajectory]) -> dict:
  """The evaluation summary of one environment's trajectories (module docstring), JSON-ready."""
  if not trajs:
    raise ValueError("no trajectories to summarize")
  s = success_matrix(trajs)
  n, t_eps = s.shape
  oracle = oracle_success(trajs, trajs[0].settings)
  out = orbit_metrics.summarize(s, [t.states() for t in trajs], oracle_rates=oracle)
  _, se = mean_se(s)
  out.update(n=int(n), episodes=int(t_eps), env=sorted({t.pack.env_name for t in trajs}),
             episode_success=orbit_metrics.per_episode_success(s).tolist(), episode_success_se=se.tolist())
  out["success_count_se"] = mean_se(s.sum(axis=1))[1]
  out["instance_success"] = s.astype(int).tolist()  # [N][T], instance order = pack order (for ``compare``)
  # the in-context gain EpT - Ep1, paired over instances (ORBIT's claim: later episodes beat the first)
  out["ep_last_minus_first"], out["ep_last_minus_first_se"] = mean_se(s[:, -1] - s[:, 0])
  if oracle is not None:
    out["oracle_episode_success"] = oracle.tolist()
  out.update(outcome_metrics(trajs))
  out.update(token_metrics(trajs))
  return out


def compare(before: dict, after: dict) -> dict:
  """Paired difference after - before over the same instances (same order): the success count over
  Ep1..EpT (``mean``, ``se``) and every episode's success (``per_position``: [[mean, se], ...]), with the two
  success counts (``before``, ``after``)."""
  a = np.asarray(before.get("instance_success", []), np.float64)
  b = np.asarray(after.get("instance_success", []), np.float64)
  if a.size == 0 or b.size == 0:
    raise ValueError("both evaluations need per-instance successes ('instance_success'); re-evaluate with this version")
  if a.shape != b.shape:
    raise ValueError(f"evaluations differ in shape: {a.shape} vs {b.shape}")
  d = b - a
  mean, se = mean_se(d.sum(axis=1))
  per = [[float(m), float(e)] for m, e in zip(*mean_se(d))]
  return {"n": int(d.shape[0]), "metric": "success count", "before": float(a.sum(axis=1).mean()),
          "after": float(b.sum(axis=1).mean()), "mean": float(mean), "se": float(se), "per_position": per}


def format_table(results: dict) -> str:
  """One row per ``{label: summary}``: Ep1..EpT success +- s.e., success count, regret@T, the exploration
  metric of the paper's Table 4 (new states in episode k after failing every earlier one, with the number of
  such trajectories; k = 2..T) and, where the game has an oracle, the oracle's Ep T success and the regret
  against it."""
  width = max(r["episodes"] for r in results.values())
  head = f"{'policy / env':34s} " + " ".join(f"{'Ep' + str(k):>13s}" for k in range(1, width + 1))
  head += f" {'count':>13s} {'regret@T':>9s}" + "".join(f" {f'dS(Ep{k}|F)':>12s}" for k in range(2, width + 1))
  head += f" {'oracle@T':>9s} {'regret vs oracle':>16s}"
  lines = [head]
  for name, r in results.items():
    t_eps = r["episodes"]
    cells = [f"{m:.3f}+-{s:.3f}" for m, s in zip(r["episode_success"], r["episode_success_se"])]
    cells += [""] * (width - len(cells))
    row = f"{name[:34]:34s} " + " ".join(f"{c:>13s}" for c in cells)
    row += f" {r['episode/success_count']:>6.3f}+-{r['success_count_se']:.3f} {r[f'regret/ep{t_eps}']:9.3f}"
    for k in range(2, width + 1):
      mean, num = r.get(f"explore/new_states_ep{k}_given_fail"), r.get(f"explore/num_ep{k}_given_fail")
      row += f" {f'{mean:.2f}({int(num)})' if mean is not None and num else '-':>12s}"
    if "oracle_episode_success" in r:
      row += f" {r['oracle_episode_success'][-1]:9.3f} {r[f'oracle_regret/ep{t_eps}']:16.3f}"
    lines.append(row)
  return "\n".join(lines)
