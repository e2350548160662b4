"""Rollout workflows the trainer can run, by name (``config.workflow``).

A workflow turns packs into trajectories with a backend, scores their episodes for the policy gradient,
and reports metrics:

  rollout(backend, packs, repeats, cfg) -> trajectories
  score(trajs, cfg) -> [(Episode, advantage)]            (before RED-Weight, which the trainer applies)
  metrics(trajs) -> {name: float}                          (training metrics of one step)
  summarize(trajs) -> dict                                 (evaluation summary, written to eval/*.json)
  table(results) -> str                                    (console table of {label: summary})

``cod`` is CoD-Train (paper Sec. 3); ORBIT's multi-episode protocol registers ``orbit``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from codjax.agents.cod import CodSettings, run_cod
from codjax.eval.cod_eval import format_table, summarize as cod_summarize
from codjax.train.credit import cod_episode_scores, grpo_episode_scores


class Workflow(Protocol):
  name: str

  def rollout(self, backend, packs, repeats: int, cfg): ...

  def score(self, trajs, cfg): ...

  def metrics(self, trajs) -> dict: ...

  def summarize(self, trajs) -> dict: ...

  def table(self, results: dict) -> str: ...


_WORKFLOWS: dict[str, Workflow] = {}


def register_workflow(w: Workflow) -> Workflow:
  _WORKFLOWS[w.name] = w
  return w


def get_workflow(name: str) -> Workflow:
  if name not in _WORKFLOWS and name == "orbit":
    import codjax.train.orbit_workflow  # noqa: F401  (registers itself)
  if name not in _WORKFLOWS:
    raise ValueError(f"unknown workflow {name!r}; known: {sorted(set(_WORKFLOWS) | {'orbit'})}")
  return _WORKFLOWS[name]


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

  def rollout(self, backend, packs, repeats, cfg):
    return run_cod(backend, packs, repeats, cod_settings(cfg))

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


register_workflow(CodWorkflowSpec())
