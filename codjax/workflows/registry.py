"""The name -> workflow table behind ``config.workflow``.

A workflow turns packs into trajectories with a backend, scores their episodes for the policy gradient,
and reports metrics:

  rollout(backend, packs, repeats, cfg, on_done=None) -> trajectories   (on_done(j, traj) as each finishes)
  score(trajs, cfg) -> [(Episode, advantage)]            (before RED-Weight, which the trainer applies)
  metrics(trajs) -> {name: float}                          (training metrics of one step)
  summarize(trajs) -> dict                                 (evaluation summary, written to eval/*.json)
  table(results) -> str                                    (console table of {label: summary})
  to_record(traj) -> dict; from_record(rec, pack, cfg)     (JSON record of one trajectory: resumable evaluation)

A workflow module registers itself here at import (``register_workflow(Spec())``) and imports nothing but this
module of the trainer's workflow machinery; ``codjax.workflows`` imports every known workflow module, so
looking a name up through it always sees all of them.
"""

from __future__ import annotations

from typing import Protocol


class Workflow(Protocol):
  name: str
  unit: str  # what compare's per_position entries index: a pack position (CoD) or an episode (ORBIT)

  # on_done(j, trajectory) as each finishes; on_progress(packs done, fractional) for progress bars
  def rollout(self, backend, packs, repeats: int, cfg, on_done=None, on_progress=None): ...

  def score(self, trajs, cfg): ...

  def metrics(self, trajs) -> dict: ...

  def summarize(self, trajs) -> dict: ...

  def table(self, results: dict) -> str: ...

  def compare(self, before: dict, after: dict) -> dict: ...  # paired change: n, metric, before, after, mean, se, per_position

  def to_record(self, traj) -> dict: ...

  def from_record(self, rec: dict, pack, cfg): ...


_WORKFLOWS: dict[str, Workflow] = {}


def _kind(w) -> str:
  return f"{type(w).__module__}.{type(w).__qualname__}"


def register_workflow(w: Workflow) -> Workflow:
  """Adds ``w`` under ``w.name``; a second, different workflow under a taken name is an error."""
  name = getattr(w, "name", None)
  if not isinstance(name, str) or not name:
    raise ValueError(f"a workflow needs a non-empty string name, got {name!r}")
  if name in _WORKFLOWS and _kind(_WORKFLOWS[name]) != _kind(w):  # (a module reload registers its class again)
    raise ValueError(f"workflow {name!r} is already registered by {_kind(_WORKFLOWS[name])}")
  _WORKFLOWS[name] = w
  return w


def get_workflow(name: str) -> Workflow:
  """The registered workflow ``name`` (ValueError naming the known ones otherwise)."""
  if name not in _WORKFLOWS:
    raise ValueError(f"unknown workflow {name!r}; known: {sorted(_WORKFLOWS)}")
  return _WORKFLOWS[name]


def workflow_names() -> list[str]:
  return sorted(_WORKFLOWS)
