"""GridNavigation: rook moves over a hidden, smooth cost field revealed by walking (CoD paper Sec. 3.2.2).

Rules and generator follow agentscope-ai/Trinity-RFT ``trinity/common/workflows/connect_the_dots/grid_navigation/``
(``env.py``, ``workflow.py``); docs/methods/cod.md.

Cost field per pack (``default_rng(pack_seed)``): side ``n ~ U{grid_min..grid_max}``; a sum of K anisotropic
Gaussian bumps on [0,1]^2 evaluated at the cell centres (centre uniform, long scale ~ U(min, max), short
scale ~ U(min, long), angle ~ U(0, pi), amplitude ~ U(0.8, 1.2)); min-max normalized to ``z`` and
``cost = rint(99 z^2)`` in 0..99.

Task (``default_rng(task_seed)``): ``N ~ U{min_rounds..max_rounds}`` moves, a uniform start, and a goal at the
end of a random rook walk of N moves (resampled until goal != start), so an N-move path always exists.
A move ``<answer>row,col</answer>`` must stay in the grid, leave the current cell and share its row or
column; it *enters* every crossed cell and the destination. Entered cells (and the start, where the agent
stands) reveal their Chebyshev-radius neighbourhood; revealed cells persist across the tasks of one pack
trajectory (state created by each ``sample_pack`` call). The task ends after exactly N moves; an invalid
move ends it with reward 0. Reward: ``1 - mean(entered costs)/100`` if the final cell is the goal, else 0.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

import numpy as np

from codjax.envs.base import EnvFamily, StepResult, TaskEnv, Turn
from codjax.envs.cod_protocol import extract_answer
from codjax.envs.grid_navigation.presets import PRESETS
from codjax.envs.helpers import config_from_preset, pack_args
from codjax.envs.registry import register

_MOVE_RE = re.compile(r"\s*(-?\d+)\s*,\s*(-?\d+)\s*")


@dataclasses.dataclass(frozen=True)
class GridConfig:
  grid_min: int = 8
  grid_max: int = 12
  num_bumps: int = 4
  min_scale: float = 0.15
  max_scale: float = 0.45
  min_rounds: int = 3
  max_rounds: int = 5
  reveal_radius: int = 1

  def validate(self) -> None:
    for name in ("grid_min", "grid_max", "num_bumps", "min_rounds", "max_rounds", "reveal_radius"):
      v = getattr(self, name)
      if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
        raise ValueError(f"{name} must be an int, got {v!r}")
    if not 2 <= self.grid_min <= self.grid_max <= 64:
      raise ValueError(f"need 2 <= grid_min <= grid_max <= 64, got {self.grid_min}, {self.grid_max}")
    if not 1 <= self.num_bumps <= 64:
      raise ValueError(f"num_bumps must be in [1, 64], got {self.num_bumps}")
    if not 0 < self.min_scale <= self.max_scale:
      raise ValueError(f"need 0 < min_scale <= max_scale, got {self.min_scale}, {self.max_scale}")
    if not 1 <= self.min_rounds <= self.max_rounds <= 64:
      raise ValueError(f"need 1 <= min_rounds <= max_rounds <= 64, got {self.min_rounds}, {self.max_rounds}")
    if not 0 <= self.reveal_radius <= 64:
      raise ValueError(f"reveal_radius must be in [0, 64], got {self.reveal_radius}")


def cost_field(pack_seed: int, cfg: GridConfig) -> np.ndarray:
  """Integer costs in 0..99 (shape ``(n, n)``) from anisotropic Gaussian bumps (see module docstring)."""
  rng = np.random.default_rng(int(pack_seed) % 2**64)
  n = int(rng.integers(cfg.grid_min, cfg.grid_max + 1))
  centres = (np.arange(n) + 0.5) / n
  rr, cc = np.meshgrid(centres, centres, indexing="ij")
  field = np.zeros((n, n))
  for _ in range(cfg.num_bumps):
    cy, cx = rng.uniform(0, 1, size=2)
    long = rng.uniform(cfg.min_scale, cfg.max_scale)
    short = rng.uniform(cfg.min_scale, long)
    ang = rng.uniform(0, np.pi)
    amp = rng.uniform(0.8, 1.2)
    dy, dx = rr - cy, cc - cx
    p = dx * np.cos(ang) + dy * np.sin(ang)
    q = -dx * np.sin(ang) + dy * np.cos(ang)
    field += amp * np.exp(-0.5 * ((p / long) ** 2 + (q / short) ** 2))
  span = field.max() - field.min()
  z = (field - field.min()) / span if span > 0 else np.zeros_like(field)
  return np.rint(99 * z**2).astype(int)


def rook_step(cell: tuple[int, int], n: int, rng: np.random.Generator) -> tuple[int, int]:
  r, c = cell
  if rng.integers(2) == 0:
    return (int((r + rng.integers(1, n)) % n), c)  # a uniformly chosen different row
  return (r, int((c + rng.integers(1, n)) % n))


@dataclasses.dataclass(frozen=True)
class GridTask:
  start: tuple[int, int]
  goal: tuple[int, int]
  num_rounds: int
  witness: tuple[tuple[int, int], ...]  # the rook walk that defined the goal (start excluded)


def sample_task(task_seed: int, n: int, cfg: GridConfig) -> GridTask:
  rng = np.random.default_rng(int(task_seed) % 2**64)
  rounds = int(rng.integers(cfg.min_rounds, cfg.max_rounds + 1))
  start = (int(rng.integers(n)), int(rng.integers(n)))
  while True:
    walk, cell = [], start
    for _ in range(rounds):
      cell = rook_step(cell, n, rng)
      walk.append(cell)
    if cell != start:
      return GridTask(start, cell, rounds, tuple(walk))


def entered_cells(a: tuple[int, int], b: tuple[int, int]) -> list[tuple[int, int]]:
  """Cells entered by a rook move from ``a`` to ``b``: every crossed cell and ``b`` (not ``a``)."""
  (r0, c0), (r1, c1) = a, b
  if r0 == r1:
    step = 1 if c1 > c0 else -1
    return [(r0, c) for c in range(c0 + step, c1 + step, step)]
  step = 1 if r1 > r0 else -1
  return [(r, c0) for r in range(r0 + step, r1 + step, step)]


def render_grid(costs: np.ndarray, revealed: np.ndarray) -> str:
  """Header row of column indices, then one row per grid row; 3-character right-aligned cells, '?' hidden."""
  n = costs.shape[0]
  lines = ["   " + "".join(f"{c:>3d}" for c in range(n))]
  for r in range(n):
    cells = "".join(f"{int(costs[r, c]):>3d}" if revealed[r, c] else "  ?" for c in range(n))
    lines.append(f"{r:>3d}{cells}")
  return "\n".join(lines)


def _system_prompt(cfg: GridConfig, n: int) -> str:
  return (
      f"You walk on a {n}x{n} grid (rows and columns numbered 0..{n - 1}). Each cell has a hidden integer "
      "cost between 0 and 99; the costs vary smoothly in space and stay the same for every task in this "
      "stream of tasks. A cell's cost becomes visible once you have been near it: every cell you enter "
      f"reveals all cells within Chebyshev distance {cfg.reveal_radius} (so does your starting cell), and "
      "revealed cells stay visible in later tasks.\n\n"
      "Each round you make one rook move: jump to any other cell in your current row or column. A move "
      "enters every cell it crosses and its destination (not the cell you leave), and you pay the cost of "
      "each entered cell. The task lasts exactly the stated number of rounds; reaching the goal early does "
      "not end it, so you must be on the goal after the final round.\n\n"
      "Loss = mean cost of all entered cells / 100 (a visit-weighted average, not the path length or the "
      "total cost). Reward = 1 - loss if you finish on the goal, otherwise 0. An invalid move ends the task "
      "with reward 0.\n\n"
      "Explore broadly while it is cheap to learn the cost landscape, then exploit the cheap regions you "
      "have found. Reason briefly, then give your move as <answer>row,col</answer>.")


class GridPackState:
  """Mutable state of one CoD trajectory over a pack: which cells are revealed."""

  def __init__(self, n: int):
    self.revealed = np.zeros((n, n), dtype=bool)


class GridTaskEnv(TaskEnv):

  def __init__(self, cfg: GridConfig, costs: np.ndarray, task: GridTask, state: GridPackState, position: int,
               num_tasks: int):
    self._cfg, self._costs, self.task, self._state = cfg, costs, task, state
    self._n = costs.shape[0]
    self._pos_idx, self._num = position, num_tasks
    self.max_turns = task.num_rounds
    self.pos = task.start
    self.round = 0
    self.entered: list[int] = []
    self._done = False
    self._last_feedback = ""

  def _reveal(self, cell: tuple[int, int]) -> None:
    k = self._cfg.reveal_radius
    r, c = cell
    self._state.revealed[max(0, r - k):r + k + 1, max(0, c - k):c + k + 1] = True

  def _grid(self) -> str:
    return render_grid(self._costs, self._state.revealed)

  def _observation(self, feedback: str) -> str:
    left = self.task.num_rounds - self.round
    head = (f"Task {self._pos_idx + 1}/{self._num}. Goal: ({self.task.goal[0]},{self.task.goal[1]}). "
            f"Current position: ({self.pos[0]},{self.pos[1]}). Round {self.round + 1} of "
            f"{self.task.num_rounds}: {left} move{'s' if left != 1 else ''} left, including this one.")
    parts = [feedback, head] if feedback else [head]
    parts.append("Observed cost grid ('?' = not revealed yet):\n" + self._grid())
    return "\n\n".join(parts)

  def reset(self) -> tuple[str, str]:
    self._reveal(self.pos)
    return _system_prompt(self._cfg, self._n), self._observation("")

  def _end(self, feedback: str, reward: float, format_error: bool) -> StepResult:
    self._done = True
    self._last_feedback = feedback
    return StepResult(feedback, reward, True,
                      {"feedback": feedback, "format_error": format_error, "raw_reward": reward})

  def _loss(self) -> float:
    return float(np.mean(self.entered)) / 100.0 if self.entered else 0.0

  def step(self, action_text: str) -> StepResult:
    if self._done:
      return self._end("The task is already finished.", 0.0, False)
    inner = extract_answer(action_text if isinstance(action_text, str) else "")
    m = _MOVE_RE.fullmatch(inner) if inner is not None else None
    if m is None:
      return self._end("Invalid action: expected exactly one <answer>row,col</answer>. Game over.", 0.0, True)
    dest = (int(m.group(1)), int(m.group(2)))
    n = self._n
    if not (0 <= dest[0] < n and 0 <= dest[1] < n):
      return self._end(f"Invalid action: ({dest[0]},{dest[1]}) is outside the {n}x{n} grid. Game over.",
                       0.0, False)
    if dest == self.pos:
      return self._end("Invalid action: a move must leave the current cell. Game over.", 0.0, False)
    if dest[0] != self.pos[0] and dest[1] != self.pos[1]:
      return self._end(f"Invalid action: ({dest[0]},{dest[1]}) is not in the row or column of "
                       f"({self.pos[0]},{self.pos[1]}). Game over.", 0.0, False)
    cells = entered_cells(self.pos, dest)
    for cell in cells:
      self._reveal(cell)
      self.entered.append(int(self._costs[cell]))
    self.pos = dest
    self.round += 1
    path = " -> ".join(f"({r},{c})" for r, c in cells)
    fb = (f"You moved to ({dest[0]},{dest[1]}) through {len(cells)} entered cells: {path}. "
          f"Cumulative normalized loss: {self._loss():.4f}.")
    if self.round < self.task.num_rounds:
      self._last_feedback = fb
      return StepResult(self._observation(fb), 0.0, False, {"feedback": fb, "format_error": False,
                                                            "raw_reward": 0.0})
    g = self.task.goal
    if self.pos == g:
      reward = 1.0 - self._loss()
      end = f"Success: you finished on the goal ({g[0]},{g[1]}). Reward: {reward:.4f}."
    else:
      reward = 0.0
      end = (f"Failure: after the final round you are at ({self.pos[0]},{self.pos[1]}), not the goal "
             f"({g[0]},{g[1]}). Reward: 0.")
    return self._end(f"{fb}\n{end}\nFinal observed cost grid:\n{self._grid()}", reward, False)

  def render_trajectory(self, system_prompt: str, turns: Sequence[Turn]) -> str:
    """Default rendering plus final position, target, normalized loss and the observed grid (as Trinity-RFT's
    ``grid_navigation/workflow.py`` renders it)."""
    base = super().render_trajectory(system_prompt, turns)
    g = self.task.goal
    return (f"{base}\n\nFinal position: ({self.pos[0]},{self.pos[1]})\nTarget: ({g[0]},{g[1]})\n"
            f"Normalized loss: {self._loss():.4f}\nObserved cost grid:\n{self._grid()}")


class GridFamily(EnvFamily):
  name = "grid_navigation"

  def __init__(self, cfg: GridConfig):
    cfg.validate()
    self.cfg = cfg

  def sample_pack(self, pack_seed: int, num_tasks: int, task_seeds: Sequence[int] | None = None):
    pack_seed, seeds = pack_args(pack_seed, num_tasks, task_seeds)
    costs = cost_field(pack_seed, self.cfg)
    n = costs.shape[0]
    state = GridPackState(n)
    return [GridTaskEnv(self.cfg, costs, sample_task(s, n, self.cfg), state, i, num_tasks)
            for i, s in enumerate(seeds)]


@register("grid_navigation")
def make_grid_navigation(preset: str = "27b_train", **overrides: Any) -> GridFamily:
  """``preset`` in {8b, 27b_train, eval} (presets.py); any ``GridConfig`` field may be overridden."""
  return GridFamily(config_from_preset(GridConfig, PRESETS, preset, overrides, env="grid_navigation"))
