"""Minesweeper, "only-reveal" (ORBIT training game, paper Appendix B.1; axon-rl/gem
``gem/envs/game_env/minesweeper.py`` with the win rule of XiaofengLin7/ORBIT ``envs/custom_minesweeper.py``:
5x5 board, 5 mines, H = 8).

Rules. Actions ``\\boxed{reveal r c}`` and ``\\boxed{flag r c}`` (0-based row and column). Revealing a safe
cell shows its number of adjacent mines (8-neighbourhood) and flood-fills: every revealed 0 reveals its
unflagged neighbours, breadth first. Revealing a mine loses ("Game over! ..."); this check comes first, so
revealing a flagged mine also loses (GEM's order). Revealing all safe cells wins; flags are never needed
(ORBIT's only-reveal rule). A cell off the board, revealing a revealed or flagged cell, flagging a revealed
cell or an unknown verb is invalid (turn spent, raw reward 0); ``flag`` on a flagged cell removes the flag.
Content that is not ``word int int`` is a format error (common.py). Raw reward (GEM): newly revealed cells /
number of safe cells.

Mine layout. Faithful (GEM): the mines are placed at the first reveal, uniformly among the cells outside
the 3x3 block around that first click, so the layout is a deterministic function of (pack seed, first
click): an episode that opens on the same cell meets the same board, another first click may meet another
board. codjax draws it from ``random.Random(derive_seed(pack_seed, salt, row, col))`` (explicit, never a
global RNG). With ``faithful=False`` the layout depends on the pack seed only (uniform over all cells), so
every episode of a pack shares one board and the first click is not protected.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import random
import re
from typing import Any

from codjax.envs import helpers
from codjax.envs.base import derive_seed
from codjax.envs.games import common
from codjax.envs.registry import register

_ACTION_RE = re.compile(r"([a-zA-Z]+)\s+(\d+)\s+(\d+)")
_SALT = 5004
Cell = tuple[int, int]


def neighbours(cell: Cell, rows: int, cols: int) -> list[Cell]:
  r, c = cell
  return [(r + dr, c + dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1)
          if (dr or dc) and 0 <= r + dr < rows and 0 <= c + dc < cols]


def render_board(rows: int, cols: int, shown: dict[Cell, str]) -> str:
  """Column indices over rows of ``.`` (hidden), digits (revealed) or ``F`` (flagged), each row numbered."""
  lines = ["   " + "".join(f"{c:>3}" for c in range(cols))]
  for r in range(rows):
    lines.append(f"{r:>3}" + "".join(f"{shown.get((r, c), '.'):>3}" for c in range(cols)))
  return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class MinesweeperConfig:
  rows: int = 5
  cols: int = 5
  mines: int = 5
  max_turns: int = 8
  faithful: bool = True

  def __post_init__(self):
    helpers.check_int("rows", self.rows, 2, 30)
    helpers.check_int("cols", self.cols, 2, 30)
    free = self.rows * self.cols - (9 if self.faithful else 1)
    helpers.check_int("mines", self.mines, 1, max(1, free))
    if self.mines > free:
      raise ValueError(f"mines ({self.mines}) leaves no room on a {self.rows}x{self.cols} board")
    helpers.check_int("max_turns", self.max_turns, 1, 1000)
    helpers.check_bool("faithful", self.faithful)


@dataclasses.dataclass(frozen=True)
class MinesweeperInstance:
  """The hidden board of a pack: ``layout(first_click)`` is the mine set (module docstring)."""

  pack_seed: int
  rows: int
  cols: int
  mines: int
  faithful: bool

  def layout(self, first_click: Cell) -> frozenset[Cell]:
    return _layout(self, first_click if self.faithful else None)


@functools.lru_cache(maxsize=4096)
def _layout(inst: MinesweeperInstance, first_click: Cell | None) -> frozenset[Cell]:
  cells = [(r, c) for r in range(inst.rows) for c in range(inst.cols)]
  if first_click is None:
    rng = random.Random(derive_seed(inst.pack_seed, _SALT))
    allowed = cells
  else:
    rng = random.Random(derive_seed(inst.pack_seed, _SALT, *first_click))
    fr, fc = first_click
    allowed = [(r, c) for r, c in cells if abs(r - fr) > 1 or abs(c - fc) > 1]
  return frozenset(rng.sample(allowed, inst.mines))


def make_instance(cfg: MinesweeperConfig, pack_seed: int) -> MinesweeperInstance:
  return MinesweeperInstance(pack_seed, cfg.rows, cfg.cols, cfg.mines, cfg.faithful)


class MinesweeperTask(common.GemTask):
  game = "Minesweeper"

  def __init__(self, cfg: MinesweeperConfig, inst: MinesweeperInstance, episode_seed: int):
    super().__init__(cfg.max_turns, episode_seed, cfg.faithful)
    self.cfg = cfg
    self.instance = inst
    self._new_episode()

  def _new_episode(self) -> None:
    self.mines: frozenset[Cell] | None = None
    self._revealed: dict[Cell, int] = {}
    self._flags: set[Cell] = set()

  def instructions(self) -> str:
    c = self.cfg
    return (f"{common.title(self.game)}\n"
            f"The board has {c.rows} rows and {c.cols} columns (numbered from 0) and hides {c.mines} mines. Reveal "
            "every cell that is not a mine to win; revealing a mine ends the game. You have "
            f"{c.max_turns} turns.\n"
            "Each turn, give one command inside \\boxed{}:\n"
            "- \\boxed{reveal r c} reveals the cell in row r, column c.\n"
            "- \\boxed{flag r c} puts a flag on (or removes it from) a cell you think is a mine.\n"
            "On the board, '.' is an unrevealed cell, a digit is a revealed cell showing how many of its 8 "
            "neighbours are mines (a 0 also opens its neighbours), and 'F' is a flag. Do not pick revealed or "
            "flagged cells.")

  def board(self) -> str:
    shown = {cell: str(n) for cell, n in self._revealed.items()}
    shown.update({cell: "F" for cell in self._flags})
    return "Current board:\n" + render_board(self.cfg.rows, self.cfg.cols, shown)

  def _count(self, cell: Cell) -> int:
    return sum(n in self.mines for n in neighbours(cell, self.cfg.rows, self.cfg.cols))

  def _flood(self, start: Cell) -> int:
    queue = collections.deque([start])
    self._revealed[start] = self._count(start)
    new = 1
    while queue:
      cell = queue.popleft()
      if self._revealed[cell]:
        continue
      for n in neighbours(cell, self.cfg.rows, self.cfg.cols):
        if n not in self._revealed and n not in self._flags:
          self._revealed[n] = self._count(n)
          new += 1
          queue.append(n)
    return new

  def play(self, content: str) -> common.Outcome:
    t = self.turn
    m = _ACTION_RE.fullmatch(content)
    if m is None:
      return common.Outcome(f"At turn {t}, no command was found. Answer like \\boxed{{reveal 2 3}}.",
                            format_error=True)
    verb, r, c = m.group(1).lower(), common.parse_int(m.group(2)), common.parse_int(m.group(3))
    cell = (r, c)
    if not (0 <= r < self.cfg.rows and 0 <= c < self.cfg.cols):
      return common.Outcome(f"At turn {t}, cell ({r}, {c}) is outside the board.", invalid=True)
    if verb == "reveal":
      if self.mines is None:
        self.mines = self.instance.layout(cell)
      if cell in self.mines:
        return common.Outcome(f"Game over! You hit a mine at ({r}, {c}).", ended=True, state_key=(verb, r, c))
      if cell in self._revealed or cell in self._flags:
        return common.Outcome(f"At turn {t}, cell ({r}, {c}) is already revealed or flagged.", invalid=True)
      safe = self.cfg.rows * self.cfg.cols - self.cfg.mines
      reward = self._flood(cell) / safe
      if len(self._revealed) == safe:
        return common.Outcome("Congratulations! You revealed every safe cell.", raw_reward=reward, ended=True,
                              success=True, state_key=(verb, r, c))
      return common.Outcome(f"At turn {t}, you revealed cell ({r}, {c}).", raw_reward=reward,
                            state_key=(verb, r, c))
    if verb == "flag":
      if cell in self._revealed:
        return common.Outcome(f"At turn {t}, cell ({r}, {c}) is already revealed and cannot be flagged.",
                              invalid=True)
      self._flags ^= {cell}
      action = "placed a flag on" if cell in self._flags else "removed the flag from"
      return common.Outcome(f"At turn {t}, you {action} cell ({r}, {c}).", state_key=(verb, r, c))
    return common.Outcome(f"At turn {t}, '{verb[:20]}' is not a command; use reveal or flag.", invalid=True)


PRESETS: dict[str, dict[str, Any]] = {"orbit": {}}


@register("minesweeper")
def make_family(preset: str = "orbit", **overrides: Any) -> common.GameFamily:
  """``make("minesweeper", rows=5, cols=5, mines=5, max_turns=8, faithful=True)``."""
  cfg = helpers.config_from_preset(MinesweeperConfig, PRESETS, preset, overrides, env="minesweeper")
  return common.GameFamily("minesweeper", cfg, make_instance, MinesweeperTask)
