"""The trainer's ``cod`` workflow: CoD-Train (paper Sec. 3) over ``codjax.agents.cod.run_cod``.

Scores are the CoD episode advantages (``algorithm.advantage = "cod"``) or GRPO over the repeats of a pack;
evaluation summaries and tables are ``codjax.workflows.cod_summary``'s.
"""

from __future__ import annotations

import numpy as np

from codjax.agents.cod import CodSettings, CodTrajectory, run_cod
from codjax.workflows.cod_summary import compare, format_table, summarize as cod_summarize
from codjax.workflows.credit import cod_episode_scores, grpo_episode_scores
from codjax.workflows.registry import register_workflow


def cod_settings(cfg) -> CodSettings:
  return CodSettings(use_hints=bool(cfg.cod.use_hints), hint_penalty=float(cfg.cod.hint_penalty),
                     response_limit=int(cfg.cod.response_limit) or None, protocol=str(cfg.cod.protocol))


def cod_rollout_metrics(trajs, prefix: str = "") -> dict:
  """Per-position solve rewards, hint parse rate, format errors, response lengths, truncations."""
  m = {}
  by_env: dict[str, list] = {}
  for t in trajs:
    by_env.setdefault(t.pack.env_name, []).append(t)
  for env, ts in by_env.items():
    r = np.stack([t.task_rewards for t in ts])
    for k in range(r.shape[1]):
      m[f"{prefix}reward/{env}/pos{k}"] = float(r[:, k].mean())
  m[f"{prefix}reward_mean"] = float(np.concatenate([t.task_rewards for t in trajs]).mean())
  upd = [e for t in trajs for e in t.update_episodes]
  if upd:
    m[f"{prefix}hint_parse_rate"] = float(np.mean([not e.format_error for e in upd]))
  solves = [e for t in trajs for e in t.solve_episodes]
  m[f"{prefix}format_error_rate"] = float(np.mean([e.format_error for e in solves]))
  eps = [e for t in trajs for e in t.episodes()]
  gen = [n for e in eps for n in e.response_token_counts]
  m[f"{prefix}response_tokens_mean"] = float(np.mean(gen)) if gen else 0.0
  m[f"{prefix}generated_tokens"] = float(sum(gen))
  m[f"{prefix}truncated_episodes"] = float(sum(e.truncated for e in eps))
  return m


class CodWorkflowSpec:
  name = "cod"
  unit = "position"  # compare's per_position: the pack position

  def rollout(self, backend, packs, repeats, cfg, on_done=None, on_progress=None):
    return run_cod(backend, packs, repeats, cod_settings(cfg), on_done, on_progress)

  def score(self, trajs, cfg):
    a = cfg.algorithm
    if a.advantage == "cod":
      return cod_episode_scores(trajs, a.returns, a.window or None, a.gamma)
    return grpo_episode_scores(trajs, bool(a.grpo_normalize_std))

  def metrics(self, trajs) -> dict:
    return cod_rollout_metrics(trajs)

  def summarize(self, trajs) -> dict:
    return cod_summarize(trajs)

  def table(self, results: dict) -> str:
    return format_table(results)

  def compare(self, before: dict, after: dict) -> dict:
    """Paired change of the mean solve reward (and per position) between two evaluations of the same packs."""
    out = compare(before, after)
    out.update(metric="mean solve reward", before=float(before["mean_reward"]), after=float(after["mean_reward"]))
    return out

  def to_record(self, traj: CodTrajectory) -> dict:
    return traj.to_record()

  def from_record(self, rec: dict, pack, cfg) -> CodTrajectory:
    del cfg
    return CodTrajectory.from_record(rec, pack)


register_workflow(CodWorkflowSpec())
