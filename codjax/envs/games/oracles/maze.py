"""Maze oracle: planning on a belief map that persists across episodes (orbit_evo.md A.6; paper Appendix C).

Belief. Every observation "(r,c). Around you, up leads to X, ..." (from any episode, or from the CoD hint)
fixes the type of the four neighbours of (r, c) (wall, path or goal) and marks (r, c) visited. Cells never
observed are unknown; the grid size is not assumed.

Planners (``planner=``):

* ``"frontier"`` (default; A.6): optimistic planning with unknown cells treated as open. If the goal has
  been seen, follow a shortest path to it through known-open and unknown cells (unknown cells are bounded
  to one ring around the known region); otherwise walk a shortest path through known-open cells to the
  nearest unknown cell (nearest-frontier exploration). Ties go to the first move in up, down, left, right
  order. Neighbours are always observed, so an optimistic step never bumps a wall: a wrong guess about an
  unknown cell only costs a detour after replanning.
* ``"shaped"`` (one reading of the paper's Appendix C): exhaustive finite-horizon planning for the turns
  left in the episode, maximising the shaped return 100 for entering the goal (the plan stops there), +1
  for entering a cell not visited in any episode and not earlier in the plan, -0.1 for re-entering a
  cell. Unknown cells within one ring of the known region count as enterable (optimism; a plan that only
  uses known cells circles around the start), known walls never (the paper's wall-bump penalty thus never
  applies). Memoised on (cell, turns left, cells newly visited by the plan).

Both replan after every observation. Neither knows the generator's prior (the goal is the farthest cell
from the start, 7..8 moves away), so they are reference algorithms, not Bayes-optimal players.
"""

from __future__ import annotations

import collections
import functools
import random
import re

from codjax.envs.games.maze import DIRS
from codjax.envs.games.oracles import base

_OBS_RE = re.compile(r"\((\d{1,4}),\s*(\d{1,4})\)\.\s*Around (?:you|it), up leads to (wall|path|goal), down leads to "
                     r"(wall|path|goal), left leads to (wall|path|goal), and right leads to (wall|path|goal)")
Cell = tuple[int, int]
_ORDER = ("up", "down", "left", "right")


class Belief:
  """Known cell types and visited cells, read from text."""

  def __init__(self, texts: list[str]):
    self.known: dict[Cell, str] = {}
    self.visited: set[Cell] = set()
    self.last: Cell | None = None
    for text in texts:
      for m in _OBS_RE.finditer(text):
        cell = (int(m.group(1)), int(m.group(2)))
        self.visited.add(cell)
        self.known.setdefault(cell, "path")
        for name, kind in zip(_ORDER, m.groups()[2:]):
          dr, dc = DIRS[name]
          self.known[(cell[0] + dr, cell[1] + dc)] = kind
        self.last = cell

  def open(self, cell: Cell) -> bool:
    return self.known.get(cell) in ("path", "goal")

  def goal(self) -> Cell | None:
    return next((c for c, k in self.known.items() if k == "goal"), None)

  def bullets(self) -> list[str]:
    lines = []
    for cell in sorted(self.visited):
      kinds = [self.known.get((cell[0] + DIRS[n][0], cell[1] + DIRS[n][1]), "wall") for n in _ORDER]
      lines.append(f"Maze cell ({cell[0]},{cell[1]}). Around it, up leads to {kinds[0]}, down leads to {kinds[1]}, "
                   f"left leads to {kinds[2]}, and right leads to {kinds[3]}.")
    return lines


def _step(cell: Cell, name: str) -> Cell:
  return cell[0] + DIRS[name][0], cell[1] + DIRS[name][1]


def frontier_move(belief: Belief, pos: Cell) -> str:
  """The ``"frontier"`` planner's move (module docstring)."""
  goal = belief.goal()
  rows = [c[0] for c in belief.known]
  cols = [c[1] for c in belief.known]
  box = (min(rows) - 1, max(rows) + 1, min(cols) - 1, max(cols) + 1)

  def passable(cell: Cell) -> bool:
    if cell in belief.known:
      return belief.known[cell] != "wall"
    return goal is not None and box[0] <= cell[0] <= box[1] and box[2] <= cell[1] <= box[3]

  first: dict[Cell, str] = {pos: ""}
  queue = collections.deque([pos])
  while queue:
    cell = queue.popleft()
    if cell != pos and (cell == goal or (goal is None and cell not in belief.known)):
      return first[cell]
    if goal is None and cell not in belief.known:
      continue
    for name in _ORDER:
      nxt = _step(cell, name)
      if nxt not in first and (passable(nxt) or (goal is None and nxt not in belief.known)):
        first[nxt] = first[cell] or name
        queue.append(nxt)
  return next((n for n in _ORDER if belief.open(_step(pos, n))), "up")


def shaped_move(belief: Belief, pos: Cell, turns_left: int) -> str:
  """The ``"shaped"`` planner's move (module docstring)."""
  rows = [c[0] for c in belief.known]
  cols = [c[1] for c in belief.known]
  box = (min(rows) - 1, max(rows) + 1, min(cols) - 1, max(cols) + 1)

  def enterable(cell: Cell) -> bool:
    if cell in belief.known:
      return belief.known[cell] != "wall"
    return box[0] <= cell[0] <= box[1] and box[2] <= cell[1] <= box[3]

  @functools.lru_cache(maxsize=None)
  def value(cell: Cell, h: int, fresh: frozenset) -> tuple[float, str]:
    if h == 0:
      return 0.0, ""
    best, best_move = float("-inf"), ""
    for name in _ORDER:
      nxt = _step(cell, name)
      if not enterable(nxt):
        continue
      if belief.known.get(nxt) == "goal":
        r = 100.0
      elif nxt in belief.visited or nxt in fresh:
        r = -0.1 + value(nxt, h - 1, fresh)[0]
      else:
        r = 1.0 + value(nxt, h - 1, fresh | {nxt})[0]
      if r > best + 1e-9:
        best, best_move = r, name
    return (best, best_move) if best_move else (0.0, "")

  move = value(pos, max(1, turns_left), frozenset())[1]
  return move or next((n for n in _ORDER if belief.open(_step(pos, n))), "up")


class Expert(base.GameExpert):
  """The Maze oracle as a text player (``planner`` = "frontier" or "shaped")."""

  game = "Maze"

  def __init__(self, planner: str = "frontier"):
    if planner not in ("frontier", "shaped"):
      raise ValueError(f"planner must be 'frontier' or 'shaped', got {planner!r}")
    self.planner = planner

  def knowledge_bullets(self, reading: base.Reading) -> list[str]:
    return Belief(reading.texts()).bullets()

  def act(self, reading: base.Reading, rng: random.Random) -> str:
    belief = Belief(reading.texts())
    here = Belief([reading.current]).last or belief.last
    if here is None:
      return "up"
    if self.planner == "shaped":
      horizon = reading.intro_int(r"You have {n} moves", 9) - reading.turns_used
      return shaped_move(belief, here, horizon)
    return frontier_move(belief, here)


class Random(base.RandomPlayer):
  game = "Maze"

  def random_action(self, reading: base.Reading, rng: random.Random) -> str:
    return rng.choice(_ORDER)
