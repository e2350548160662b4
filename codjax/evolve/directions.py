"""The three direction edits at an effort, on a pair sequence (Environment Evolution paper, arXiv 2609.04128,
Sec. 4.1; docs/methods/environment_evolution.md).

The direction decides what kind of edit, the effort how much of the sequence it touches:

* effort ``low``: one pair (uniform); ``high``: one contiguous span of ceil(f n) pairs, f ~ U(0.4, 0.7), at a
  uniform start; ``max``: any non-empty subset (each pair with probability 1/2, redrawn while empty). The
  scopes are the paper's; the span sizes and the probability 1/2 are codjax's choice.
* ``scenario``: every chosen pair whose scenario has a strictly rarer alternative (higher novelty
  -log p_T(sigma) under ``Parameterisation.scenario_freq``) gets one, uniform among the rarer ones; the skill
  stays. ``skill``: the same with the skill's rarity -log p_T(kappa | sigma). ``length``: inserts pairs
  (``Parameterisation.new_pair``) before one uniform position: 1 (low), ceil(f n) (high), or a uniform count
  in [1, n] (max), clipped to ``max_pairs``.

An edit that changes nothing (no rarer alternative at any chosen pair, the sequence already at
``max_pairs``) or leaves the vocabulary fails: ``edit`` returns None and the lineage falls back to another
direction. Because every replacement is strictly rarer and insertions add pairs, the novelty + rarity part of
the difficulty never decreases under an edit; the verifier-measured oracle length decides the rest.
"""

from __future__ import annotations

import dataclasses
import math
import random

from codjax.evolve.base import DIRECTIONS, EFFORTS, EnvPoint, Pair, Parameterisation


def chosen_indices(n: int, effort: str, rng: random.Random) -> list[int]:
  """Indices of the pairs an edit at ``effort`` touches (module docstring)."""
  if effort not in EFFORTS:
    raise ValueError(f"effort must be one of {EFFORTS}, got {effort!r}")
  if n <= 0:
    return []
  if effort == "low":
    return [rng.randrange(n)]
  if effort == "high":
    span = max(1, min(n, math.ceil(rng.uniform(0.4, 0.7) * n)))
    start = rng.randrange(n - span + 1)
    return list(range(start, start + span))
  while True:
    idx = [i for i in range(n) if rng.random() < 0.5]
    if idx:
      return idx


def insert_count(n: int, effort: str, rng: random.Random) -> int:
  """How many pairs the length direction inserts into a sequence of ``n``."""
  if effort not in EFFORTS:
    raise ValueError(f"effort must be one of {EFFORTS}, got {effort!r}")
  if effort == "low":
    return 1
  if effort == "high":
    return max(1, math.ceil(rng.uniform(0.4, 0.7) * n))
  return rng.randint(1, max(1, n))


def _rarer_scenario(param: Parameterisation, pair: Pair, rng: random.Random) -> Pair | None:
  cur = param.novelty(pair.scenario)
  options = [s for s in sorted(param.scenario_freq) if param.novelty(s) > cur + 1e-12
             and param.skill_prob(pair.skill, s) > 0.0]
  return Pair(rng.choice(options), pair.skill) if options else None


def _rarer_skill(param: Parameterisation, pair: Pair, rng: random.Random) -> Pair | None:
  cur = param.rarity(pair.skill, pair.scenario)
  options = [k for k in sorted(param.skill_freq) if param.skill_prob(k, pair.scenario) > 0.0
             and param.rarity(k, pair.scenario) > cur + 1e-12]
  return Pair(pair.scenario, rng.choice(options)) if options else None


def edit_pairs(param: Parameterisation, pairs: tuple[Pair, ...], direction: str, effort: str,
               rng: random.Random) -> tuple[Pair, ...] | None:
  """The edited pair sequence, or None when the direction cannot edit it (module docstring)."""
  if direction not in DIRECTIONS:
    raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
  out = list(pairs)
  if direction == "length":
    room = param.max_pairs - len(out)
    if room <= 0:
      return None
    k = min(room, insert_count(len(out), effort, rng))
    at = rng.randrange(len(out) + 1)
    for _ in range(k):
      out.insert(at, param.new_pair(out, at, rng))
  else:
    change = _rarer_scenario if direction == "scenario" else _rarer_skill
    changed = False
    for i in chosen_indices(len(out), effort, rng):
      new = change(param, out[i], rng)
      if new is not None:
        out[i] = new
        changed = True
    if not changed:
      return None
  out_t = tuple(out)
  if out_t == tuple(pairs) or not param.compatible(out_t):
    return None
  return out_t


def edit(param: Parameterisation, point: EnvPoint, direction: str, effort: str, rng: random.Random,
         seed: int | None = None) -> EnvPoint | None:
  """A child point: ``point``'s pairs edited along ``direction`` at ``effort``; the instance seed stays unless
  ``seed`` is given (a repair re-draws the instance of the same pair sequence)."""
  pairs = edit_pairs(param, point.pairs, direction, effort, rng)
  if pairs is None:
    return None
  return dataclasses.replace(point, pairs=pairs, seed=point.seed if seed is None else int(seed))
