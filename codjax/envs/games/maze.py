"""Maze with local observations only (ORBIT held-out test game, paper Appendix B.5; generator and text as in
XiaofengLin7/ORBIT ``envs/maze_env_adapter.py``).

Generator (pack seed, explicit ``random.Random`` streams; attempt a = 0, 1, ... uses derive_seed(seed, a)):

1. Shape (width, height) uniform from ``shapes`` ((6,6), (7,6), (7,7), (6,7)); an all-wall height x width grid.
2. Start: a uniform interior cell (the border ring stays wall).
3. Branched growth: repeatedly pick a random cell of the active front, shuffle the 4 directions and carve
   into interior wall neighbours that have at most 1 open neighbour, at most 1 carve (probability 0.7) or
   2 carves per pick; carved cells join the front; a cell that cannot carve leaves it.
4. Extensions: for max(2, n_dead_ends // 3) random dead ends (capped at their number), open one carvable
   wall neighbour and, with probability 0.6, keep extending randomly for 2-5 more carvable cells.
5. Loops (a second stream): randint(2, max(3, H*W // 30)) times, try up to 100 random interior walls and
   open the first with exactly 2 open neighbours.
6. Connectivity: every open cell not reachable from the start is joined to the nearest reachable cell
   (Manhattan) by an L-shaped carve.
7. Goal: the reachable cell farthest from the start by BFS (ties: smallest (row, col)); L = its distance.
   The attempt is rejected unless ``min_path <= L <= max_path`` (7..8).

Episode (H = 9). The observation is the absolute position (x = row, y = column) and the type of the 4
neighbours (wall, path or goal; outside the grid is wall): "You are at (2,3). Around you, up leads to path,
down leads to wall, ...". ``\\boxed{up|down|left|right}`` (case ignored) moves one cell; into a wall: "You
hit the wall", no move; anything else: "Invalid action", no move; both spend the turn (``format_error`` in
info for the latter). Reaching the goal wins ("... arrived at the goal! Let's play again"); playing turn H
elsewhere fails ("... reached the maximum number of turns (9). Let's play again"). Every episode starts
at the same start cell; ``info["state_key"]`` is the position after the move.

Text (``text=``). ``"full"`` is the wording above. ``"compact"`` (the ``compact`` preset, for small models
trained from scratch: experiments/orbit_tiny_learns.py) says the same things in a few words and drops the
per-turn request line (the instructions give the answer format once): ``"moved up, at (2,3): up path, down
wall, left wall, right path"``, ``"hit a wall, at (2,3): ..."``, ``"reached the goal! episode won"``, ``"out of
moves (9), episode lost"``. Rules, instances and rewards are identical.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import random
from typing import Any

from codjax.envs import helpers
from codjax.envs.base import derive_seed
from codjax.envs.games import common
from codjax.envs.registry import register

WALL, PATH, GOAL = "#", ".", "G"
DIRS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
SHAPES = ((6, 6), (7, 6), (7, 7), (6, 7))  # (width, height)
_SALT = 5007
TEXTS = ("full", "compact")
Cell = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class MazeConfig:
  max_turns: int = 9
  min_path: int = 7
  max_path: int = 8
  shapes: tuple[tuple[int, int], ...] = SHAPES
  text: str = "full"  # "full" | "compact" (module docstring)
  # environment evolution (codjax's knobs, docs/methods/environment_evolution.md): the probability of a single
  # carve per growth pick (step 3; lower gives a bushier tree with more junctions and dead ends) and extra loop
  # openings on top of the generator's own count (step 5); 0.7 and 0 leave the generator exactly as described
  # above
  single_carve: float = 0.7
  loops: int = 0

  def __post_init__(self):
    if self.text not in TEXTS:
      raise ValueError(f"text must be one of {TEXTS}, got {self.text!r}")
    helpers.check_int("max_turns", self.max_turns, 1, 1000)
    helpers.check_int("min_path", self.min_path, 1, 200)
    helpers.check_int("max_path", self.max_path, self.min_path, 200)
    helpers.check_prob("single_carve", self.single_carve)
    helpers.check_int("loops", self.loops, 0, 50)
    shapes = tuple(tuple(s) for s in self.shapes) if isinstance(self.shapes, (list, tuple)) else None
    if not shapes or any(len(s) != 2 for s in shapes):
      raise ValueError(f"shapes must be a non-empty list of (width, height) pairs, got {self.shapes!r}")
    for w, h in shapes:
      helpers.check_int("shape width", w, 3, 40)
      helpers.check_int("shape height", h, 3, 40)
    object.__setattr__(self, "shapes", shapes)


@dataclasses.dataclass(frozen=True)
class MazeInstance:
  rows: tuple[str, ...]  # '#' wall, '.' path, 'G' goal
  start: Cell
  goal: Cell
  shortest: int

  def cell_type(self, cell: Cell) -> str:
    r, c = cell
    if not (0 <= r < len(self.rows) and 0 <= c < len(self.rows[0])):
      return "wall"
    return {WALL: "wall", PATH: "path", GOAL: "goal"}[self.rows[r][c]]


def _neighbours(cell: Cell) -> list[Cell]:
  return [(cell[0] + dr, cell[1] + dc) for dr, dc in DIRS.values()]


def bfs(open_cells: set[Cell], start: Cell) -> dict[Cell, int]:
  dist = {start: 0}
  queue = collections.deque([start])
  while queue:
    cell = queue.popleft()
    for n in _neighbours(cell):
      if n in open_cells and n not in dist:
        dist[n] = dist[cell] + 1
        queue.append(n)
  return dist


def _attempt(seed: int, shapes: tuple[tuple[int, int], ...], single_carve: float = 0.7, loops: int = 0) -> MazeInstance:
  """One run of generator steps 1-7 (module docstring)."""
  rng = random.Random(seed)
  width, height = rng.choice(shapes)
  opened: set[Cell] = set()

  def interior(cell: Cell) -> bool:
    return 1 <= cell[0] <= height - 2 and 1 <= cell[1] <= width - 2

  def open_count(cell: Cell) -> int:
    return sum(n in opened for n in _neighbours(cell))

  def carvable(cell: Cell) -> bool:
    return interior(cell) and cell not in opened and open_count(cell) <= 1

  start = (rng.randint(1, height - 2), rng.randint(1, width - 2))
  opened.add(start)
  front = [start]
  while front:  # 3. branched growth
    i = rng.randrange(len(front))
    dirs = list(DIRS.values())
    rng.shuffle(dirs)
    branches = 1 if rng.random() < single_carve else 2
    carved = 0
    for dr, dc in dirs:
      n = (front[i][0] + dr, front[i][1] + dc)
      if carvable(n):
        opened.add(n)
        front.append(n)
        carved += 1
        if carved >= branches:
          break
    if not carved:
      front.pop(i)
  dead_ends = sorted(c for c in opened if open_count(c) == 1)  # 4. extensions
  for cell in rng.sample(dead_ends, min(len(dead_ends), max(2, len(dead_ends) // 3))):
    options = [n for n in _neighbours(cell) if carvable(n)]
    if not options:
      continue
    cur = rng.choice(options)
    opened.add(cur)
    if rng.random() < 0.6:
      for _ in range(rng.randint(2, 5)):
        options = [n for n in _neighbours(cur) if carvable(n)]
        if not options:
          break
        cur = rng.choice(options)
        opened.add(cur)
  loop_rng = random.Random(derive_seed(seed, 42))  # 5. loops
  for _ in range(loop_rng.randint(2, max(3, height * width // 30)) + loops):
    for _ in range(100):
      cell = (loop_rng.randint(1, height - 2), loop_rng.randint(1, width - 2))
      if cell not in opened and open_count(cell) == 2:
        opened.add(cell)
        break
  dist = bfs(opened, start)  # 6. connectivity
  for cell in sorted(opened):
    if cell in dist:
      continue
    target = min(dist, key=lambda t: (abs(t[0] - cell[0]) + abs(t[1] - cell[1]), t))
    (r0, c0), (r1, c1) = cell, target
    step_r = 1 if r1 >= r0 else -1
    step_c = 1 if c1 >= c0 else -1
    opened.update((r, c0) for r in range(r0, r1 + step_r, step_r))
    opened.update((r1, c) for c in range(c0, c1 + step_c, step_c))
    dist = bfs(opened, start)
  far = max(dist.values())  # 7. goal
  goal = min(c for c, d in dist.items() if d == far)
  rows = tuple("".join(GOAL if (r, c) == goal else (PATH if (r, c) in opened else WALL) for c in range(width))
               for r in range(height))
  return MazeInstance(rows=rows, start=start, goal=goal, shortest=far)


@functools.lru_cache(maxsize=8192)
def generate(pack_seed: int, shapes: tuple[tuple[int, int], ...], min_path: int, max_path: int,
             single_carve: float = 0.7, loops: int = 0) -> MazeInstance:
  """The maze of a pack: the first attempt whose shortest start-goal path lies in [min_path, max_path]."""
  for attempt in range(1000):
    inst = _attempt(derive_seed(pack_seed, _SALT, attempt), shapes, single_carve, loops)
    if min_path <= inst.shortest <= max_path:
      return inst
  raise ValueError(f"no maze with a shortest path in [{min_path}, {max_path}] in 1000 attempts "
                   f"(pack_seed={pack_seed}, shapes={shapes})")


def make_instance(cfg: MazeConfig, pack_seed: int) -> MazeInstance:
  return generate(pack_seed, cfg.shapes, cfg.min_path, cfg.max_path, cfg.single_carve, cfg.loops)


def surroundings(inst: MazeInstance, cell: Cell) -> str:
  kinds = {name: inst.cell_type((cell[0] + dr, cell[1] + dc)) for name, (dr, dc) in DIRS.items()}
  return (f"Around you, up leads to {kinds['up']}, down leads to {kinds['down']}, left leads to {kinds['left']}, "
          f"and right leads to {kinds['right']}.")


def compact_view(inst: MazeInstance, cell: Cell) -> str:
  """``"(2,3): up path, down wall, left wall, right path"`` (the compact text's position and neighbours)."""
  kinds = [f"{name} {inst.cell_type((cell[0] + dr, cell[1] + dc))}" for name, (dr, dc) in DIRS.items()]
  return f"({cell[0]},{cell[1]}): " + ", ".join(kinds)


class MazeTask(common.GameTask):
  game = "Maze"

  def __init__(self, cfg: MazeConfig, inst: MazeInstance, episode_seed: int):
    super().__init__(cfg.max_turns, episode_seed)
    self.cfg = cfg
    self.instance = inst
    self.position = inst.start

  def _new_episode(self) -> None:
    self.position = self.instance.start

  @property
  def initial_state_key(self) -> Cell:
    return self.instance.start

  def _here(self) -> str:
    p = self.position
    if self.cfg.text == "compact":
      return "at " + compact_view(self.instance, p)
    return f"You are at ({p[0]},{p[1]}). {surroundings(self.instance, p)}"

  def instructions(self) -> str:
    s = self.instance.start
    if self.cfg.text == "compact":
      return (f"{common.title(self.game)}\n"
              f"Walk from START to the hidden GOAL in at most {self.max_turns} moves; you see only the 4 cells next "
              "to you, positions are (row,col). Answer \\boxed{up}, \\boxed{down}, \\boxed{left} or \\boxed{right}.\n"
              f"START {compact_view(self.instance, s)}")
    return (f"{common.title(self.game)}\n"
            "Walk from the START cell to the GOAL cell of a hidden grid maze in as few moves as you can. You only see "
            "the four cells next to you; positions are (row, column), with row numbers growing downwards. You have "
            f"{self.max_turns} moves per episode.\n"
            f"You are at the START position ({s[0]},{s[1]}). {surroundings(self.instance, s)}")

  def prompt_line(self) -> str:
    if self.cfg.text == "compact":
      return ""
    return "Choose your next move from up/down/left/right and put it in \\boxed{}."

  def play(self, content: str) -> common.Outcome:
    compact = self.cfg.text == "compact"
    move = content.lower()
    if move not in DIRS:
      head = "invalid move," if compact else "Invalid action: use up, down, left or right."
      return common.Outcome(f"{head} {self._here()}", format_error=True, state_key=self.position)
    dr, dc = DIRS[move]
    target = (self.position[0] + dr, self.position[1] + dc)
    kind = self.instance.cell_type(target)
    if kind == "goal":
      self.position = target
      won = "reached the goal! episode won" if compact else "Congratulations! You arrived at the goal! Let's play again."
      return common.Outcome(won, raw_reward=1.0, ended=True, success=True, state_key=target)
    if kind == "wall":
      head = "hit a wall," if compact else "You hit the wall and stay in place."
    else:
      self.position = target
      head = f"moved {move}," if compact else f"You moved {move}."
    return common.Outcome(f"{head} {self._here()}", state_key=self.position)

  def timeout(self, out: common.Outcome) -> common.Outcome:
    if self.cfg.text == "compact":
      line = f"out of moves ({self.max_turns}), episode lost"
    else:
      line = f"You have reached the maximum number of turns ({self.max_turns}). Let's play again."
    return dataclasses.replace(out, message=f"{out.message}\n{line}", ended=True, success=False)


PRESETS: dict[str, dict[str, Any]] = {"orbit": {}, "compact": {"text": "compact"}}


@register("maze")
def make_family(preset: str = "orbit", **overrides: Any) -> common.GameFamily:
  """``make("maze", max_turns=9, min_path=7, max_path=8, shapes=((6, 6), (7, 6), (7, 7), (6, 7)), text="full")``;
  preset ``compact`` is the ORBIT game with the compact text."""
  cfg = helpers.config_from_preset(MazeConfig, PRESETS, preset, overrides, env="maze")
  return common.GameFamily("maze", cfg, make_instance, MazeTask)
