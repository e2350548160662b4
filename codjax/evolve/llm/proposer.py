"""The proposer's output and its rules (loop 1 of the Environment Evolution paper, arXiv 2609.04128, Sec. 4.1
and Eq. 1; docs/methods/environment_evolution.md).

The model extracts the parent's (scenario, skill) sequence and returns an edited one. ``parse_proposal``
checks the reply against the parameterisation and the parent, and returns a ``Proposal`` or raises
``ValueError`` with the reason:

* the extracted sequence must equal the parent's recorded one;
* the new sequence must be allowed (vocabulary, one local machine, skills available in their scenario, length
  bounds: ``Parameterisation.compatible``);
* direction: ``scenario`` keeps every skill and changes scenarios only, each to a rarer one (higher novelty);
  ``skill`` keeps every scenario and changes skills only, each to a rarer one under its scenario; ``length``
  only inserts pairs (the old sequence is a subsequence of the new);
* effort: ``low`` touches one pair (or inserts one), ``high`` one contiguous span (or one contiguous block of
  insertions), ``max`` any subset.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from codjax.evolve.base import Pair, Parameterisation


@dataclasses.dataclass(frozen=True)
class Proposal:
  old: tuple[Pair, ...]
  new: tuple[Pair, ...]
  plan: str


def _pairs(obj: Any, what: str) -> tuple[Pair, ...]:
  if not isinstance(obj, list) or not obj or len(obj) > 64:
    raise ValueError(f"{what} must be a non-empty list of [scenario, skill] pairs")
  try:
    return tuple(Pair.from_json(p) for p in obj)
  except ValueError as e:
    raise ValueError(f"{what}: {e}") from None


def _contiguous(idx: Sequence[int]) -> bool:
  return bool(idx) and list(idx) == list(range(idx[0], idx[0] + len(idx)))


def _insertions(old: Sequence[Pair], new: Sequence[Pair]) -> list[int] | None:
  """Positions in ``new`` of the inserted pairs when ``old`` is a subsequence of ``new`` (leftmost match)."""
  kept, j = [], 0
  for i, p in enumerate(new):
    if j < len(old) and p == old[j]:
      kept.append(i)
      j += 1
  if j < len(old):
    return None
  return [i for i in range(len(new)) if i not in set(kept)]


def edit_problem(param: Parameterisation, old: Sequence[Pair], new: Sequence[Pair], direction: str,
                 effort: str) -> str:
  """Why ``new`` is not a ``direction``/``effort`` edit of ``old`` ('' when it is one; module docstring)."""
  if not param.compatible(new):
    return f"the new sequence is not allowed (vocabulary, one local machine, skills per scenario, 1..{param.max_pairs} pairs)"
  if direction in ("scenario", "skill"):
    if len(new) != len(old):
      return f"direction {direction}: the sequence length must stay {len(old)}"
    keep = "skill" if direction == "scenario" else "scenario"
    if any(getattr(a, keep) != getattr(b, keep) for a, b in zip(old, new)):
      return f"direction {direction}: every {keep} must stay as it was"
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    for i in changed:
      a, b = old[i], new[i]
      before = param.novelty(a.scenario) if direction == "scenario" else param.rarity(a.skill, a.scenario)
      after = param.novelty(b.scenario) if direction == "scenario" else param.rarity(b.skill, b.scenario)
      if not after > before:
        return f"direction {direction}: pair {i} must become rarer ({a.to_json()} -> {b.to_json()} is not)"
  elif direction == "length":
    if len(new) <= len(old):
      return "direction length: the new sequence must be longer"
    changed = _insertions(old, new)
    if changed is None:
      return "direction length: the old pairs must all stay, in order (only insertions)"
  else:
    return f"unknown direction {direction!r}"
  if not changed:
    return f"direction {direction}: the sequence did not change"
  if effort == "low" and len(changed) != 1:
    return f"effort low: exactly one pair may change, {len(changed)} did"
  if effort == "high" and not _contiguous(changed):
    return f"effort high: the changed pairs {changed} are not one contiguous span"
  if effort not in ("low", "high", "max"):
    return f"unknown effort {effort!r}"
  return ""


def parse_proposal(obj: Any, param: Parameterisation, parent: Sequence[Pair], direction: str,
                   effort: str) -> Proposal:
  """The proposal in a parsed reply (module docstring), or ValueError with the reason."""
  if not isinstance(obj, dict):
    raise ValueError("the proposal must be a JSON object")
  extracted = _pairs(obj.get("parent_pairs"), "parent_pairs")
  if extracted != tuple(parent):
    raise ValueError("the extracted sequence does not match the parent's recorded sequence "
                     f"{[p.to_json() for p in parent]}")
  new = _pairs(obj.get("pairs"), "pairs")
  plan = obj.get("plan")
  if not isinstance(plan, str) or not plan.strip() or len(plan) > 2000:
    raise ValueError("plan must be a non-empty string of at most 2000 characters")
  problem = edit_problem(param, parent, new, direction, effort)
  if problem:
    raise ValueError(problem)
  return Proposal(tuple(parent), new, plan.strip())
