"""Maze oracle: planning on a belief map that persists across episodes (ORBIT paper Appendix C; the planners are
codjax's, docs/methods/orbit.md).

Belief. Every observation "(r,c). Around you, up leads to X, ..." (from any episode, or from the CoD hint)
fixes the type of the four neighbours of (r, c) (wall, path or goal) and marks (r, c) visited. Cells never
observed are unknown; the grid size is not assumed.

Planners (``planner=``):

* ``"frontier"`` (default; codjax's choice): optimistic planning with unknown cells treated as open. If the
  goal has been seen, follow a shortest path to it through known-open and unknown cells (unknown cells are
  bounded to one ring around the known region); otherwise walk a shortest path through known-open cells to the
  nearest unknown cell (nearest-frontier exploration). Ties go to the first move in up, down, left, right
  order. Neighbours are always observed, so an optimistic step never bumps a wall: a wrong guess about an
  unknown cell only costs a detour after replanning.
* ``"shaped"`` (one reading of the paper's Appendix C): exhaustive finite-horizon planning for the turns
  left in the episode, maximising the shaped return 100 for entering the goal (the plan stops there), +1
  for entering a cell not visited in any episode and not earlier in the plan, -0.1 for re-entering a
  cell. Unknown cells within one ring of the known region count as enterable (optimism; a plan that only
  uses known cells circles around the start), known walls never (the paper's wall-bump penalty thus never
  applies). Memoised on (cell, turns left, cells newly visited by the plan).

* ``"replay"`` (a copy-friendly scripted player for small models, ``experiments/orbit_tiny_learns.py``): no
  map. If an earlier episode reached the goal, take at the current cell the move that the latest such
  episode made on its *last* visit there (following last exits through a walk that reached the goal is its
  loop-erased path, so this reaches the goal without detours); otherwise explore: step onto the goal when it
  is next to you (``take_goal``, default on), else a uniformly random open neighbour, never straight back the
  way the last move came unless it is the only one. Each move is then
  either a copy keyed on the position text or a choice among the observed open neighbours.

The frontier and shaped planners replan after every observation. None knows the generator's prior (the goal
is the farthest cell from the start, 7..8 moves away), so they are reference algorithms, not Bayes-optimal
players.
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
# the compact text (maze.py, ``text="compact"``): "(2,3): up path, down wall, left wall, right path"
_COMPACT_RE = re.compile(r"\((\d{1,4}),\s*(\d{1,4})\):\s*up (wall|path|goal), down (wall|path|goal), "
                         r"left (wall|path|goal), right (wall|path|goal)")
Cell = tuple[int, int]
_ORDER = ("up", "down", "left", "right")
_REVERSE = {"up": "down", "down": "up", "left": "right", "right": "left"}
PLANNERS = ("frontier", "shaped", "replay")
GOAL_REACHED = ("arrived at the goal", "reached the goal")  # the full and the compact text
MOVED = ("You moved", "moved ")


class Belief:
  """Known cell types and visited cells, read from text."""

  def __init__(self, texts: list[str]):
    self.known: dict[Cell, str] = {}
    self.visited: set[Cell] = set()
    self.last: Cell | None = None
    for text in texts:
      found = sorted([*_OBS_RE.finditer(text), *_COMPACT_RE.finditer(text)], key=lambda m: m.start())
      for m in found:
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


def _position(text: str) -> Cell | None:
  """The last "(r,c). Around you ..." position of a text (None when it holds none)."""
  return Belief([text]).last


def last_exits(intro: str, exchanges: list[base.Exchange]) -> dict[Cell, str]:
  """cell -> the move made on the last visit of that cell, over one episode's exchanges."""
  exits: dict[Cell, str] = {}
  here = _position(intro)
  for x in exchanges:
    move = x.content.lower()
    if here is not None and move in DIRS:
      exits[here] = move
    here = _position(x.reply) or here
  return exits


def candidates(reading: base.Reading, here: Cell, take_goal: bool = True) -> list[str]:
  """The exploring moves of the ``"replay"`` player at ``here``: the goal if it is next to it (``take_goal``),
  else the open neighbours other than straight back the way the last move came (all open ones at a dead end)."""
  belief = Belief([reading.current])
  options = [n for n in _ORDER if belief.open(_step(here, n))]
  goal = [n for n in options if belief.known.get(_step(here, n)) == "goal"]
  if goal and take_goal:
    return goal
  current = reading.episodes[-1] if reading.episodes else []
  if current and current[-1].reply.startswith(MOVED):
    back = _REVERSE.get(current[-1].content.lower())
    options = [n for n in options if n != back] or options
  return options


def replay_move(reading: base.Reading, here: Cell, rng: random.Random, take_goal: bool = True) -> str:
  """The ``"replay"`` player's move (module docstring)."""
  for intro, exchanges in reversed(list(zip(reading.intros[:-1], reading.episodes[:-1]))):
    if exchanges and any(g in exchanges[-1].reply for g in GOAL_REACHED):
      move = last_exits(intro, exchanges).get(here)
      if move is not None:
        return move
      break
  options = candidates(reading, here, take_goal)
  return rng.choice(options) if options else rng.choice(_ORDER)


NOTES = ("", "position", "options")


def noted(reading: base.Reading, move: str, note: str, take_goal: bool = True) -> str:
  """The reply ``\\boxed{move}`` with its note in front (``note`` of the players): ``"position"`` names the
  current cell, ``"(2,3) \\boxed{up}"``; ``"options"`` also lists the exploring moves (``candidates``),
  ``"(2,3) up right \\boxed{up}"``."""
  box = f"\\boxed{{{move}}}"
  here = _position(reading.current)
  if not note or here is None:
    return box
  head = f"({here[0]},{here[1]}) "
  if note == "options":
    head += "".join(f"{n} " for n in candidates(reading, here, take_goal))
  return head + box


def _check_note(note: str) -> str:
  if note not in NOTES:
    raise ValueError(f"note must be one of {NOTES}, got {note!r}")
  return note


class _Noting:
  """Writes the ``note`` (``noted``) in front of the move box of every solve reply of the player it is mixed
  into (``self.note``, ``self.take_goal``)."""

  def solve_reply(self, reading: base.Reading, content: str) -> str:
    return noted(reading, content, self.note, self.take_goal)


class Expert(_Noting, base.GameExpert):
  """The Maze oracle as a text player (``planner`` = "frontier" or "shaped"), or the ``"replay"`` player.

  ``note`` (``noted``): every reply names the current position (``"position"``), and the exploring moves
  (``"options"``), before its move box: a scratchpad of one or two tokens that makes "the move made here last
  time" a plain copy of what followed the same note in the model's own earlier replies, and exploring a pick
  among the moves just written (experiments/orbit_tiny_learns.py)."""

  game = "Maze"

  def __init__(self, planner: str = "frontier", note: str = "", take_goal: bool = True):
    if planner not in PLANNERS:
      raise ValueError(f"planner must be one of {PLANNERS}, got {planner!r}")
    self.planner = planner
    self.note = _check_note(note)
    self.take_goal = bool(take_goal)

  def knowledge_bullets(self, reading: base.Reading) -> list[str]:
    return Belief(reading.texts()).bullets()

  def act(self, reading: base.Reading, rng: random.Random) -> str:
    belief = Belief(reading.texts())
    here = Belief([reading.current]).last or belief.last
    if here is None:
      return "up"
    if self.planner == "replay":
      return replay_move(reading, here, rng, self.take_goal)
    if self.planner == "shaped":
      horizon = reading.intro_int(r"You have {n} moves", 9) - reading.turns_used
      return shaped_move(belief, here, horizon)
    return frontier_move(belief, here)


class Random(_Noting, base.RandomPlayer):
  """Uniformly random moves; ``note`` as the expert's."""

  game = "Maze"

  def __init__(self, note: str = "", take_goal: bool = True):
    self.note = _check_note(note)
    self.take_goal = bool(take_goal)  # only shapes the note's list of exploring moves

  def random_action(self, reading: base.Reading, rng: random.Random) -> str:
    return rng.choice(_ORDER)
