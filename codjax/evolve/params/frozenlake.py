"""FrozenLake-Obscure (CoD paper, Sec. 3.2.1) as an evolvable environment; the parameterisation is codjax's
choice (docs/methods/environment_evolution.md).

A point's pairs are the moves of the walk from the start to the goal: pair t is one move of the shortest path
(scenario = the layout and rendering the move happens in, skill = the hole pattern it has to get through).
The pairs set the constructor of ``codjax.envs.make("frozenlake_obscure", ...)`` as follows (L = number of
pairs, n_x = number of pairs whose scenario or skill is x):

* shortest path (``min_path``) >= L + 2 n_detour; detour over the Manhattan distance (``min_detour``)
  >= 2 n_detour: a ``detour`` pair is a bend around holes, two extra moves (length L);
* ice probability p in [0.6 - 0.05 n_thin_ice, 0.7 - 0.05 n_thin_ice] (floors 0.35 / 0.45): ``thin_ice`` pairs
  make the board holier, so more moves carry a hole risk while the mapping is unknown (skill rarity);
* board side = min(12, 3 + ceil((L + 2 n_detour) / 3) + n_wide): a ``wide`` pair adds a row and a column
  (scenario novelty: more cells and more of them off the path); any ``compact`` pair switches to the compact
  text layout, where the map is shown once and later turns state only the move (scenario novelty);
* budget = shortest path + ``SLACK`` turns (``budget_slack``); the DFS bound ``env_max_steps`` = side^2, so
  every reachable goal is accepted and the shaping knobs decide the path length.

The pack's hidden mapping (``Direction k`` -> a direction, ``per_pack``) is the answer that must not leak.
Reference frequencies: scenarios ``square`` 0.80 / ``wide`` 0.15 / ``compact`` 0.05, skills ``walk`` 0.75 /
``detour`` 0.18 / ``thin_ice`` 0.07 (the reference data are plain 4-5 boards with paths that seldom bend, so
bends, holier ice, bigger boards and the compact layout are the rarer cases; the numbers are declared, not
fitted). Seeds are 4-6 plain moves on the reference's ice density, the reference train difficulty (paths of at
most 7 moves) pushed to its long end so that a random walk seldom wins.
"""

from __future__ import annotations

import math
from typing import Sequence

from codjax.envs.base import TaskEnv
from codjax.evolve.base import EnvPoint, Pair, Parameterisation
from codjax.evolve.registry import register

SLACK = 4  # turns beyond the shortest path: room to discover the hidden mapping
MAX_SIDE = 12


@register
class FrozenLakeParams(Parameterisation):
  """Pairs = moves of the walk (module docstring)."""

  name = "frozenlake_obscure"
  env_name = "frozenlake_obscure"
  scenario_freq = {"square": 0.80, "wide": 0.15, "compact": 0.05}
  skill_freq = {"walk": 0.75, "detour": 0.18, "thin_ice": 0.07}
  min_pairs = 3
  max_pairs = 12
  oracle_episodes = 3

  def env_params(self, point: EnvPoint) -> dict:
    pairs = self.checked_pairs(point)
    n = len(pairs)
    count = _counter(pairs)
    detour, thin, wide = count("detour"), count("thin_ice"), count("wide")
    path = n + 2 * detour
    side = min(MAX_SIDE, 3 + math.ceil(path / 3) + wide)
    return dict(
        preset="train",
        min_size=side, max_size=side,
        min_p=round(max(0.35, 0.6 - 0.05 * thin), 4), max_p=round(max(0.45, 0.7 - 0.05 * thin), 4),
        env_max_steps=side * side, budget_slack=SLACK,
        min_path=path, min_detour=2 * detour,
        text_style="compact" if count("compact") else "full",
    )

  def seed_pairs(self, index: int) -> tuple[Pair, ...]:
    return (Pair("square", "walk"),) * (4 + int(index) % 3)

  def constant_action(self) -> str:
    return "<answer>Direction 1</answer>"

  def answer_strings(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    del point
    out: list[str] = []
    for k, d in sorted(tasks[0].inst.mapping.items()) if tasks else ():
      out += [f"Direction {k} is {d}", f"Direction {k} = {d}", f"Direction {k}: {d}", f"Direction {k} moves {d}",
              f"{k}={d}", f"{d}={k}"]
    return out

  def quality_problems(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    from codjax.envs.frozenlake.env import shortest_path_length

    params = self.env_params(point)
    problems = []
    for i, task in enumerate(tasks):
      inst = task.inst
      sp = shortest_path_length(inst.rows, inst.start, inst.goal)
      if len(inst.rows) != params["min_size"]:
        problems.append(f"task {i}: board side {len(inst.rows)}, expected {params['min_size']}")
      if sp is None or sp < params["min_path"]:
        problems.append(f"task {i}: shortest path {sp} below the {params['min_path']} moves of the pairs")
        continue
      if inst.budget != sp + SLACK:
        problems.append(f"task {i}: budget {inst.budget} is not the shortest path {sp} + {SLACK}")
      (sr, sc), (gr, gc) = inst.start, inst.goal
      if (sr == gr or sc == gc) and sp == abs(sr - gr) + abs(sc - gc):
        problems.append(f"task {i}: the goal lies on a straight hole-free line from the start "
                        "(one repeated action wins under a quarter of the mappings)")
    return problems


def _counter(pairs: Sequence[Pair]):
  def count(value: str) -> int:
    return sum(p.scenario == value or p.skill == value for p in pairs)
  return count
