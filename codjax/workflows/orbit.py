"""The trainer's ``orbit`` workflow: ORBIT's multi-episode meta-RL (ORBIT paper, arXiv
2602.04089, Sec. 3; docs/methods/orbit.md).

* config: the ``orbit`` block of an experiment (``orbit_config``; fields of ``codjax.agents.orbit.OrbitSettings``).
* rollout: ``codjax.agents.orbit.run_orbit`` over the trainer's packs; a pack of size T (``data.pack_size``,
  ``eval.pack_size``) is one task instance played for T episodes in one conversation, K = ``data.repeats``
  trajectories per instance.
* score: GRPO on the trajectory reward R = success count (paper Sec. 3.1-3.2; A.4 item 1): over the K
  trajectories of one instance, A_i = (R_i - mean_j R_j) / (std_j R_j + 1e-6) with ddof 1 (verl), or
  A_i = R_i - mean_j R_j as in the paper's equation when ``algorithm.grpo_normalize_std`` is False. A_i is
  shared by every generated token of trajectory i (the trainer broadcasts one score per sequence); the
  loss aggregation (``seq-mean-token-mean`` in ORBIT's configs) is the loss config's business.
* metrics: Ep1..EpT success per environment and overall, the success count, episodes played, overflows,
  format errors and token counts of one training step.
* summarize / table / compare: ``codjax.workflows.orbit_summary`` (evaluation and the oracle's regret live in ``eval/``).
"""

from __future__ import annotations

import dataclasses

import ml_collections
import numpy as np

from codjax.agents.orbit import OrbitSettings, OrbitTrajectory, run_orbit, settings_from_config
from codjax.rl.advantages import grpo_advantages
from codjax.workflows import orbit_metrics, orbit_summary
from codjax.workflows.registry import register_workflow


def orbit_config(**overrides) -> ml_collections.ConfigDict:
  """The ``orbit`` block of an experiment config (fields of ``OrbitSettings``; defaults are ORBIT's code)."""
  return ml_collections.ConfigDict(dataclasses.asdict(settings_from_config(overrides)))


def set_orbit_loss(algorithm: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Sets an experiment's ``algorithm`` block to ORBIT's loss (paper Sec. 3.2 and 4.2; docs/methods/orbit.md; cited
  field by field in experiments/orbit_qwen3_8b.py): GRPO on the success count with verl's std normalisation,
  PPO-style clipped surrogate with the asymmetric clip (0.2, 0.28) and verl's dual clip 3, seq-mean-token-mean
  aggregation, no RED-Weight, no KL, no entropy term. Returns the block."""
  algorithm.update(dict(advantage="grpo", grpo_normalize_std=True, red_weight=False, loss="ppo", eps_low=0.2,
                        eps_high=0.28, dual_clip=3.0, aggregation="seq-mean-token-mean", kl_type="", kl_coef=0.0,
                        entropy_coef=0.0))
  return algorithm


def orbit_settings(cfg) -> OrbitSettings:
  return settings_from_config(cfg.get("orbit"))


class OrbitWorkflowSpec:
  name = "orbit"
  unit = "episode"  # compare's per_position: the episode of the instance

  def check_config(self, cfg) -> None:
    """Raises ValueError for settings this workflow cannot run."""
    orbit_settings(cfg)
    if cfg.algorithm.advantage != "grpo":
      raise ValueError(f"workflow 'orbit' needs algorithm.advantage='grpo', got {cfg.algorithm.advantage!r}")

  def rollout(self, backend, packs, repeats, cfg, on_done=None, on_progress=None) -> list[OrbitTrajectory]:
    return run_orbit(backend, packs, repeats, orbit_settings(cfg), on_done, on_progress)

  def to_record(self, traj: OrbitTrajectory) -> dict:
    return traj.to_record()

  def from_record(self, rec: dict, pack, cfg) -> OrbitTrajectory:
    return OrbitTrajectory.from_record(rec, pack, orbit_settings(cfg))

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
      s = orbit_summary.success_matrix(ts)
      for k, p in enumerate(orbit_metrics.per_episode_success(s), start=1):
        m[f"orbit/{env}/ep{k}_success"] = float(p)
      m[f"orbit/{env}/success_count"] = float(np.mean([t.success_count for t in ts]))
      m[f"orbit/{env}/num_episodes"] = float(np.mean([len(t.games) for t in ts]))
    if len({t.num_episodes for t in trajs}) == 1:
      s = orbit_summary.success_matrix(trajs)
      for k, p in enumerate(orbit_metrics.per_episode_success(s), start=1):
        m[f"episode_{k}/success_rate"] = float(p)
      m["episode/success_count"] = orbit_metrics.success_count(s)
      m["episode/success_rate"] = orbit_metrics.any_success_rate(s)
    m.update(orbit_summary.outcome_metrics(trajs))
    m.update(orbit_summary.token_metrics(trajs))
    return m

  def summarize(self, trajs) -> dict:
    return orbit_summary.summarize(trajs)

  def table(self, results: dict) -> str:
    return orbit_summary.format_table(results)

  def compare(self, before: dict, after: dict) -> dict:
    """Paired change of the success count (and per episode) between two evaluations of the same instances."""
    return orbit_summary.compare(before, after)


register_workflow(OrbitWorkflowSpec())
