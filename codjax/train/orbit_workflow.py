"""The trainer's ``orbit`` workflow: ORBIT's multi-episode meta-RL (ORBIT paper Sec. 3; orbit_evo.md A.2, A.4, A.5).

* rollout: ``codjax.agents.orbit.run_orbit`` over the trainer's packs; a pack of size T (``data.pack_size``,
  ``eval.pack_size``) is one task instance played for T episodes in one conversation, K = ``data.repeats``
  trajectories per instance. Protocol switches come from the config block ``orbit`` (``orbit_config``).
* score: GRPO on the trajectory reward R = success count (paper Sec. 3.1-3.2; A.4 item 1): over the K
  trajectories of one instance, A_i = (R_i - mean_j R_j) / (std_j R_j + 1e-6) with ddof 1 (verl), or
  A_i = R_i - mean_j R_j as in the paper's equation when ``algorithm.grpo_normalize_std`` is False. A_i is
  shared by every generated token of trajectory i (the trainer broadcasts one score per sequence); the
  loss aggregation (``seq-mean-token-mean`` in ORBIT's configs) is the loss config's business.
* metrics: Ep1..EpT success per environment and overall, the success count, episodes played, overflows,
  format errors and token counts of one training step.
* summarize / table: evaluation with ``codjax.eval.orbit_metrics`` (per-episode success with standard
  errors, success count, in-context regret with J* = 1, the exploration metric of the paper's Table 4) and,
  for the games with an oracle (paper App. C: Maze and Mastermind), the oracle's per-episode success on the
  very same instances and the regret against it.
"""

from __future__ import annotations

import dataclasses
import math

import ml_collections
import numpy as np

from codjax.agents.episode import PolicyBackend
from codjax.agents.orbit import OrbitSettings, OrbitTrajectory, run_orbit, settings_from_config
from codjax.eval import orbit_metrics
from codjax.rl.advantages import grpo_advantages
from codjax.train.workflows import register_workflow

#: games whose scripted player is an oracle (paper Appendix C), used for the regret against the oracle
ORACLE_GAMES = ("maze", "mastermind")


def orbit_config(**overrides) -> ml_collections.ConfigDict:
  """The ``orbit`` block of an experiment config (fields of ``OrbitSettings``; defaults are ORBIT's code)."""
  return ml_collections.ConfigDict(dataclasses.asdict(settings_from_config(overrides)))


def orbit_settings(cfg) -> OrbitSettings:
  return settings_from_config(cfg.get("orbit"))


def _success_matrix(trajs: list[OrbitTrajectory]) -> np.ndarray:
  sizes = {t.num_episodes for t in trajs}
  if len(sizes) != 1:
    raise ValueError(f"trajectories mix episode counts {sorted(sizes)}; summarize one T at a time")
  return np.stack([t.success_row() for t in trajs])


def _token_metrics(trajs: list[OrbitTrajectory]) -> dict:
  eps = [t.episode for t in trajs]
  gen = [n for e in eps for n in e.response_token_counts]
  return {"response_tokens_mean": float(np.mean(gen)) if gen else 0.0, "generated_tokens": float(sum(gen)),
          "trajectory_tokens_mean": float(np.mean([len(e.tokens) for e in eps])),
          "truncated_trajectories": float(sum(e.truncated for e in eps))}


def _outcome_metrics(trajs: list[OrbitTrajectory]) -> dict:
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
  return orbit_metrics.per_episode_success(_success_matrix(ref))


class OrbitWorkflowSpec:
  name = "orbit"

  def check_config(self, cfg) -> None:
    """Raises ValueError for settings this workflow cannot run."""
    orbit_settings(cfg)
    if cfg.algorithm.advantage != "grpo":
      raise ValueError(f"workflow 'orbit' needs algorithm.advantage='grpo', got {cfg.algorithm.advantage!r}")

  def rollout(self, backend, packs, repeats, cfg) -> list[OrbitTrajectory]:
    return run_orbit(backend, packs, repeats, orbit_settings(cfg))

  def score(self, trajs, cfg):
    self.check_config(cfg)
    if not trajs:
      return []
    rewards = np.array([t.reward for t in trajs], np.float64)
    groups = np.array([t.pack.pack_id for t in trajs])
    adv = np.asarray(grpo_advantages(rewards, groups, normalize_std=bool(cfg.algorithm.grpo_normalize_std)))
    return [(t.episode, float(a)) for t, a in zip(trajs, adv)]

  def metrics(self, trajs) -> dict:
    m = {}
    by_env: dict[str, list[OrbitTrajectory]] = {}
    for t in trajs:
      by_env.setdefault(t.pack.env_name, []).append(t)
    for env, ts in by_env.items():
      s = _success_matrix(ts)
      for k, p in enumerate(orbit_metrics.per_episode_success(s), start=1):
        m[f"orbit/{env}/ep{k}_success"] = float(p)
      m[f"orbit/{env}/success_count"] = float(np.mean([t.success_count for t in ts]))
      m[f"orbit/{env}/num_episodes"] = float(np.mean([len(t.games) for t in ts]))
    if len({t.num_episodes for t in trajs}) == 1:
      s = _success_matrix(trajs)
      for k, p in enumerate(orbit_metrics.per_episode_success(s), start=1):
        m[f"episode_{k}/success_rate"] = float(p)
      m["episode/success_count"] = orbit_metrics.success_count(s)
      m["episode/success_rate"] = orbit_metrics.any_success_rate(s)
    m.update(_outcome_metrics(trajs))
    m.update(_token_metrics(trajs))
    return m

  def summarize(self, trajs) -> dict:
    if not trajs:
      raise ValueError("no trajectories to summarize")
    s = _success_matrix(trajs)
    n, t_eps = s.shape
    oracle = oracle_success(trajs, trajs[0].settings)
    out = orbit_metrics.summarize(s, [t.states() for t in trajs], oracle_rates=oracle)
    se = s.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.zeros(t_eps)
    out.update(n=int(n), episodes=int(t_eps), env=sorted({t.pack.env_name for t in trajs}),
               episode_success=orbit_metrics.per_episode_success(s).tolist(), episode_success_se=se.tolist())
    count = s.sum(axis=1)
    out["success_count_se"] = float(count.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    if oracle is not None:
      out["oracle_episode_success"] = oracle.tolist()
    out.update(_outcome_metrics(trajs))
    out.update(_token_metrics(trajs))
    return out

  def table(self, results: dict) -> str:
    width = max(r["episodes"] for r in results.values())
    head = f"{'policy / env':34s} " + " ".join(f"{'Ep' + str(k):>13s}" for k in range(1, width + 1))
    head += f" {'count':>13s} {'regret@T':>9s} {'oracle@T':>9s} {'regret vs oracle':>16s}"
    lines = [head]
    for name, r in results.items():
      t_eps = r["episodes"]
      cells = [f"{m:.3f}+-{s:.3f}" for m, s in zip(r["episode_success"], r["episode_success_se"])]
      cells += [""] * (width - len(cells))
      row = f"{name[:34]:34s} " + " ".join(f"{c:>13s}" for c in cells)
      row += f" {r['episode/success_count']:>6.3f}+-{r['success_count_se']:.3f} {r[f'regret/ep{t_eps}']:9.3f}"
      if "oracle_episode_success" in r:
        row += f" {r['oracle_episode_success'][-1]:9.3f} {r[f'oracle_regret/ep{t_eps}']:16.3f}"
      lines.append(row)
    return "\n".join(lines)


register_workflow(OrbitWorkflowSpec())
