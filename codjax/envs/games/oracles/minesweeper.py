"""Minesweeper scripted player: exact constraint enumeration, with knowledge carried across episodes.

A faithful board is a function of (instance, first click) (minesweeper.py), so the player always opens on
the same cell: the first click of the earliest episode it can read (or of the CoD hint), else the centre.
Evidence from every episode that opened there (revealed counts, the mine that ended an episode) holds for
the current one too. The player enumerates every mine layout that fits the evidence and the current board
(with ``first_click_safe``, mines avoid the 3x3 block around the first click, as GEM places them), then
reveals the unrevealed cell with the lowest mine probability, breaking ties by the highest probability
of showing a 0 (which opens its neighbours), then by the most cells the reveal opens on average (when at
most 64 layouts remain), then row-major. It never flags (flags are not needed to win). When the evidence
fits no layout it drops the 3x3 prior, then the evidence of other episodes. Boards with more than
``max_layouts`` candidate layouts fall back to the first unrevealed cell with no revealed neighbour.
"""

from __future__ import annotations

import collections
import itertools
import math
import random
import re

from codjax.envs.games.minesweeper import neighbours
from codjax.envs.games.oracles import base

Cell = tuple[int, int]
_ACTION_RE = re.compile(r"([a-zA-Z]+)\s+(\d{1,4})\s+(\d{1,4})")
_MINE_RE = re.compile(r"You hit a mine at \((\d{1,4}), (\d{1,4})\)")
_FIRST_RE = re.compile(r"Minesweeper first click: \((\d{1,4}), (\d{1,4})\)")
_SAFE_LIST_RE = re.compile(r"Minesweeper after that first click, safe cells \(row,col\)=count:((?: \(\d{1,4},\d{1,4}\)=\d)+)")
_MINE_LIST_RE = re.compile(r"Minesweeper after that first click, mines at:((?: \(\d{1,4},\d{1,4}\))+)")
_PAIR_RE = re.compile(r"\((\d{1,4}),(\d{1,4})\)(?:=(\d))?")


def parse_boards(text: str, rows: int) -> list[dict[Cell, str]]:
  """Every rendered board in ``text``: cell -> '.', 'F' or a digit."""
  boards = []
  for block in text.split("Current board:\n")[1:]:
    board = {}
    for line in block.splitlines()[1:rows + 1]:
      parts = line.split()
      if len(parts) < 2 or not parts[0].isdecimal() or len(parts[0]) > 4:
        break
      r = int(parts[0])
      board.update({(r, c): sym for c, sym in enumerate(parts[1:])})
    boards.append(board)
  return boards


def _reveal_cell(content: str) -> Cell | None:
  m = _ACTION_RE.fullmatch(content)
  if m and m.group(1).lower() == "reveal":
    return int(m.group(2)), int(m.group(3))
  return None


class Knowledge:
  """Evidence valid for boards opened at ``first`` (module docstring)."""

  def __init__(self, reading: base.Reading, rows: int, cols: int):
    self.rows, self.cols = rows, cols
    self.first: Cell | None = None
    self.safe: dict[Cell, int] = {}
    self.mines: set[Cell] = set()
    for m in _FIRST_RE.finditer(reading.hint):
      self.first = (int(m.group(1)), int(m.group(2)))
    if self.first is not None:
      self._read_hint(reading.hint)
    for episode in reading.episodes:
      opened = next((c for c in map(lambda x: _reveal_cell(x.content), episode) if c is not None), None)
      if opened is None:
        continue
      if self.first is None:
        self.first = opened
      if opened != self.first:
        continue
      for x in episode:
        self.mines.update((int(a), int(b)) for a, b in _MINE_RE.findall(x.reply))
        for board in parse_boards(x.reply, rows):
          self.safe.update({cell: int(s) for cell, s in board.items() if s.isdecimal() and len(s) == 1})

  def _read_hint(self, hint: str) -> None:
    for m in _SAFE_LIST_RE.finditer(hint):
      self.safe.update({(int(a), int(b)): int(n) for a, b, n in _PAIR_RE.findall(m.group(1))})
    for m in _MINE_LIST_RE.finditer(hint):
      self.mines.update((int(a), int(b)) for a, b, _ in _PAIR_RE.findall(m.group(1)))

  def bullets(self) -> list[str]:
    if self.first is None:
      return ["Minesweeper: no cell has been revealed yet."]
    out = [f"Minesweeper first click: ({self.first[0]}, {self.first[1]}). The mine layout is the same whenever the "
           "first reveal is this cell."]
    if self.safe:
      out.append("Minesweeper after that first click, safe cells (row,col)=count:" +
                 "".join(f" ({r},{c})={n}" for (r, c), n in sorted(self.safe.items())))
    if self.mines:
      mines = "".join(f" ({r},{c})" for r, c in sorted(self.mines))
      out.append(f"Minesweeper after that first click, mines at:{mines}")
    return out


class Expert(base.GameExpert):
  game = "Minesweeper"

  def __init__(self, first_click_safe: bool = True, max_layouts: int = 200_000):
    self.first_click_safe = first_click_safe
    self.max_layouts = max_layouts

  @staticmethod
  def _shape(reading: base.Reading) -> tuple[int, int, int]:
    return (reading.intro_int(r"has {n} rows", 5), reading.intro_int(r"and {n} columns", 5),
            reading.intro_int(r"hides {n} mines", 5))

  def knowledge_bullets(self, reading: base.Reading) -> list[str]:
    rows, cols, _ = self._shape(reading)
    return Knowledge(reading, rows, cols).bullets()

  def act(self, reading: base.Reading, rng: random.Random) -> str:
    rows, cols, n_mines = self._shape(reading)
    k = Knowledge(reading, rows, cols)
    opened = [c for c in (_reveal_cell(x.content) for x in reading.episodes[-1]) if c is not None]
    first = k.first if k.first is not None else (rows // 2, cols // 2)
    if not opened:
      return f"reveal {first[0]} {first[1]}"
    boards = parse_boards(reading.current, rows)
    board = boards[-1] if boards else {}
    here = {cell: int(s) for cell, s in board.items() if s.isdecimal() and len(s) == 1}
    hidden = [(r, c) for r in range(rows) for c in range(cols) if board.get((r, c), ".") == "."]
    if not hidden:
      return f"reveal {first[0]} {first[1]}"
    attempts = [({**k.safe, **here}, k.mines, self.first_click_safe), ({**k.safe, **here}, k.mines, False),
                (here, set(), False)]
    for safe, mines, prior in attempts:
      layouts = self._layouts(rows, cols, n_mines, safe, mines, first if prior else None)
      if layouts:
        return "reveal {} {}".format(*self._choose(rows, cols, hidden, layouts))
      if layouts is None:
        break
    lone = [cell for cell in hidden if not any(n in here for n in neighbours(cell, rows, cols))]
    return "reveal {} {}".format(*(lone or hidden)[0])

  def _layouts(self, rows: int, cols: int, n_mines: int, safe: dict[Cell, int], mines: set[Cell],
               first: Cell | None) -> list[frozenset[Cell]] | None:
    """All mine sets fitting the evidence ([] if none; None if there are too many to enumerate)."""
    if any(cell in safe for cell in mines):
      return []
    blocked = set(safe) | set(mines)
    if first is not None:
      blocked |= {(first[0] + dr, first[1] + dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1)}
    free = [(r, c) for r in range(rows) for c in range(cols) if (r, c) not in blocked]
    need = n_mines - len(mines)
    if need < 0 or need > len(free):
      return []
    if math.comb(len(free), need) > self.max_layouts:
      return None
    checks = [(cell, n, set(neighbours(cell, rows, cols))) for cell, n in safe.items()]
    out = []
    for combo in itertools.combinations(free, need):
      layout = mines.union(combo)
      if all(len(nb & layout) == n for _, n, nb in checks):
        out.append(frozenset(layout))
    return out

  def _choose(self, rows: int, cols: int, hidden: list[Cell], layouts: list[frozenset[Cell]]) -> Cell:
    p_mine = collections.Counter(cell for layout in layouts for cell in layout)
    p_zero = collections.Counter(cell for layout in layouts for cell in hidden if cell not in layout and not any(
        n in layout for n in neighbours(cell, rows, cols)))
    opened = collections.Counter()
    if len(layouts) <= 64:
      for layout in layouts:
        for cell in hidden:
          if cell not in layout:
            opened[cell] += _flood_size(cell, layout, set(hidden), rows, cols)
    return min(hidden, key=lambda cell: (p_mine[cell], -p_zero[cell], -opened[cell], cell))


def _flood_size(start: Cell, layout: frozenset[Cell], hidden: set[Cell], rows: int, cols: int) -> int:
  seen, queue = {start}, collections.deque([start])
  while queue:
    cell = queue.popleft()
    if any(n in layout for n in neighbours(cell, rows, cols)):
      continue
    for n in neighbours(cell, rows, cols):
      if n in hidden and n not in seen:
        seen.add(n)
        queue.append(n)
  return len(seen)


class Random(base.RandomPlayer):
  game = "Minesweeper"

  def random_action(self, reading: base.Reading, rng: random.Random) -> str:
    rows, cols, _ = Expert._shape(reading)
    return f"reveal {rng.randrange(rows)} {rng.randrange(cols)}"

