"""FrozenLake-Obscure: grid navigation whose action-to-direction mapping is hidden (CoD paper Sec. 3.2.1).

Rules. A ``side x side`` map of safe ice ``_`` and holes ``O`` holds a start and a goal ``G``. The agent answers
``<answer>Direction k</answer>`` with k in 1..4; each ``Direction k`` moves one cell up/down/left/right according
to a hidden permutation; moving off the edge leaves the position unchanged. A hole ends the episode with raw
reward 0, the goal with raw reward 1; after ``budget`` turns the episode ends with 0. Text that does not hold a
unique answer block matching ``[Dd]irection\\s+(\\d+)``, or names a number outside 1..4, ends the episode at once
with reward 0 (format error). On success the reward is the length-penalised
``r = max(0, 1 - c * steps_used / budget)`` with c = ``length_penalty_coef`` (0.1, paper Table 1; the form is
agentscope-ai/Trinity-RFT ``connect_the_dots/base_workflow.py``'s, see docs/methods/cod.md).

Maps (the generator of modelscope/Trinity-RFT ``trinity/common/workflows/envs/frozen_lake/utils.py``,
``generate_random_map``): with ``np.random.default_rng(task_seed)`` (the same stream as gymnasium's
``seeding.np_random``) draw a board of ice/holes with P(ice) = p, then start and goal (distinct), and accept
the board when a depth-first search from the start with a visited set, pruning nodes with
``steps > env_max_steps``, pops a cell adjacent to the goal. Every accepted map therefore has a path of at most
``env_max_steps + 1`` moves. The side and p of a task are drawn from ``random.Random(task_seed)``.
Two shaping knobs (0 = off, the published generator; codjax's own handles for environment evolution,
docs/methods/environment_evolution.md): an accepted board must also have a shortest path of at least
``min_path`` moves and one at least ``min_detour`` moves longer than the start-goal Manhattan distance (holes
force a bend); rejected boards draw again from the same stream.

Mapping modes: ``per_pack`` (default) uses ``random.Random(pack_seed).shuffle(["Down","Right","Up","Left"])`` and
``Direction k = list[k-1]``, shared by every task of the pack; ``per_task`` does the same with the task seed;
``global`` uses one mapping for everything (``mapping_index`` into the 24 permutations in
``itertools.permutations`` order, or the default 1=Down 2=Right 3=Up 4=Left).

Presets (``train``, ``hard``, ``tiny``) are in ``presets.py``; ``make("frozenlake_obscure", preset=..., **overrides)``.

Text options: ``feedback_style="coordinates"`` (Trinity-RFT's wording, from/to coordinates) or ``"relative"``
(the direction actually moved, or blocked); ``text_style="full"`` (Trinity-RFT's layout, paper Appendix C
Table 4: map re-rendered every turn with tab-separated cells) or ``"compact"``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
import re
from collections import deque
from typing import Any, Sequence

import numpy as np

from codjax.envs.base import EnvFamily, StepResult, TaskEnv
from codjax.envs.cod_protocol import extract_answer
from codjax.envs.frozenlake.presets import PRESETS
from codjax.envs.helpers import check_int, config_from_preset, pack_args
from codjax.envs.registry import register

DIRECTIONS = ("Down", "Right", "Up", "Left")  # Trinity-RFT's shuffle order
DELTAS = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}
ALL_PERMUTATIONS = tuple(itertools.permutations(DIRECTIONS))
DEFAULT_MAPPING = {1: "Down", 2: "Right", 3: "Up", 4: "Left"}

SUCCESS_FEEDBACK = "Success! Reached the goal (G)."
HOLE_FEEDBACK = "Failed: Fell into a hole (O). Avoid holes by planning a safe path."
PARSE_ERROR_FEEDBACK = ("Invalid format: could not parse action. Expected format: {your reasoning process here}"
                        "<answer>Direction X</answer>, where X is 1, 2, 3, or 4. Game over.")
_ACTION_RE = re.compile(r"[Dd]irection\s+(\d+)")
_HINT_PAIR_RE = re.compile(r"\b([1-4])\s*=\s*(up|down|left|right)\b", re.IGNORECASE)
_HINT_SLOT_RE = re.compile(r"\b(up|down|left|right)\s*=\s*([1-4])\b", re.IGNORECASE)
_MAX_SHAPED_ATTEMPTS = 20000

_SYSTEM_FULL = """\
You are playing FrozenLake-Obscure. Walk from your position (P) to the goal (G) on a grid without falling into a hole.

## Map symbols
- P: you
- G: the goal
- _: safe ice
- O: a hole (falling in ends the game)

Rows are numbered from 0 at the top and columns from 0 at the left.

## Rules
1. Stay out of the holes (O).
2. Reaching the goal (G) wins the game.
3. The grid has hard borders: a move that would leave the grid keeps you where you are.

## Actions
Each turn, choose exactly one of: Direction 1, Direction 2, Direction 3, Direction 4.

## Hidden clue
Every action moves you one cell up, down, left or right, but which action goes which way is not told to you. \
Assume nothing about it. You can work it out by trying actions and watching how P moves, and from any hints \
you are given.

## Rewards
- Falling into a hole (O): 0
- Reaching the goal (G): 1

## How to answer
Think briefly about the next move, then end with your choice:

[THINKING]
<answer>Direction X</answer>

where X is 1, 2, 3 or 4.

Further requirements:
- Keep the reasoning short.
- Make exactly one move per turn.
- Your number of moves is limited, so aim for a short path to the goal.
- Trade off exploring and exploiting: what you learn about this environment on the way can help with later \
tasks in it."""

_SYSTEM_COMPACT = """\
FrozenLake-Obscure: walk from P to G; O is a hole (game over), _ is ice, rows/cols count from 0 at the top \
left, the edge blocks. Direction 1-4 each move one cell; which way is hidden, the same in every task here. \
Moves are limited. Reason briefly, then <answer>Direction X</answer>."""


@dataclasses.dataclass(frozen=True)
class FrozenLakeConfig:
  """Validated parameters of a FrozenLake-Obscure family (see module docstring)."""

  min_size: int = 4
  max_size: int = 5
  min_p: float = 0.6
  max_p: float = 0.7
  env_max_steps: int = 6
  agent_max_steps: int | None = 8
  budget_slack: int | None = None
  mapping_mode: str = "per_pack"
  mapping_index: int | None = None
  feedback_style: str = "coordinates"
  text_style: str = "full"
  length_penalty_coef: float = 0.1
  min_path: int = 0
  min_detour: int = 0

  def __post_init__(self):
    check_int("min_size", self.min_size, 2)
    check_int("max_size", self.max_size, self.min_size)
    if self.max_size > 32:
      raise ValueError(f"max_size must be <= 32, got {self.max_size}")
    for name in ("min_p", "max_p"):
      v = getattr(self, name)
      if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v <= 1.0:
        raise ValueError(f"{name} must be a number in (0, 1], got {v!r}")
    if self.max_p < self.min_p:
      raise ValueError(f"max_p ({self.max_p}) must be >= min_p ({self.min_p})")
    check_int("env_max_steps", self.env_max_steps, 0)
    if (self.agent_max_steps is None) == (self.budget_slack is None):
      raise ValueError("set exactly one of agent_max_steps (fixed budget) and budget_slack (shortest path + slack)")
    if self.agent_max_steps is not None:
      check_int("agent_max_steps", self.agent_max_steps, self.env_max_steps + 1)
    if self.budget_slack is not None:
      check_int("budget_slack", self.budget_slack, 0)
    if self.mapping_mode not in ("per_pack", "per_task", "global"):
      raise ValueError(f"mapping_mode must be 'per_pack', 'per_task' or 'global', got {self.mapping_mode!r}")
    if self.mapping_index is not None:
      check_int("mapping_index", self.mapping_index, 0)
      if self.mapping_index >= len(ALL_PERMUTATIONS):
        raise ValueError(f"mapping_index must be in [0, 24), got {self.mapping_index}")
      if self.mapping_mode != "global":
        raise ValueError("mapping_index is only used with mapping_mode='global'")
    if self.feedback_style not in ("coordinates", "relative"):
      raise ValueError(f"feedback_style must be 'coordinates' or 'relative', got {self.feedback_style!r}")
    if self.text_style not in ("full", "compact"):
      raise ValueError(f"text_style must be 'full' or 'compact', got {self.text_style!r}")
    c = self.length_penalty_coef
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 <= c <= 1.0:
      raise ValueError(f"length_penalty_coef must be a number in [0, 1], got {c!r}")
    check_int("min_path", self.min_path, 0, 4 * 32 * 32)
    check_int("min_detour", self.min_detour, 0, 4 * 32 * 32)


# --------------------------------------------------------------------------------------------- maps


def _dfs_valid(board: list[list[str]], start: tuple[int, int], max_steps: int) -> bool:
  """The published validity check: DFS with a visited set, pruning nodes with steps > max_steps."""
  size = len(board)
  frontier = [(start[0], start[1], 0)]
  visited = set()
  while frontier:
    r, c, steps = frontier.pop()
    if steps > max_steps or (r, c) in visited:
      continue
    visited.add((r, c))
    for dr, dc in ((1, 0), (0, 1), (-1, 0), (0, -1)):
      nr, nc = r + dr, c + dc
      if 0 <= nr < size and 0 <= nc < size:
        if board[nr][nc] == "G":
          return True
        if board[nr][nc] != "H":
          frontier.append((nr, nc, steps + 1))
  return False


@functools.lru_cache(maxsize=4096)
def generate_map(size: int, p: float, seed: int, max_steps: int, min_path: int = 0, min_detour: int = 0
                 ) -> tuple[str, ...]:
  """Rows of 'S'/'F'/'H'/'G' drawn as the published generator does (module docstring). With ``min_path`` or
  ``min_detour`` set, a valid board is also rejected (and the next one drawn from the same stream) unless its
  shortest path has at least ``min_path`` moves and exceeds the start-goal Manhattan distance by at least
  ``min_detour``; ValueError when no board qualifies within ``_MAX_SHAPED_ATTEMPTS`` draws."""
  rng = np.random.default_rng(seed)
  p = min(1.0, p)
  shaped = min_path > 0 or min_detour > 0
  attempts = 0
  while True:
    board = rng.choice(["F", "H"], (size, size), p=[p, 1 - p]).tolist()
    while True:
      sr, sc, gr, gc = (int(rng.integers(0, size)) for _ in range(4))
      if (sr, sc) != (gr, gc):
        break
    board[sr][sc] = "S"
    board[gr][gc] = "G"
    if _dfs_valid(board, (sr, sc), max_steps):
      if not shaped:
        return tuple("".join(row) for row in board)
      rows = tuple("".join(row) for row in board)
      sp = shortest_path_length(rows, (sr, sc), (gr, gc))
      if sp is not None and sp >= min_path and sp - abs(sr - gr) - abs(sc - gc) >= min_detour:
        return rows
    attempts += 1
    if shaped and attempts >= _MAX_SHAPED_ATTEMPTS:
      raise ValueError(f"no {size}x{size} map with a shortest path >= {min_path} and a detour >= {min_detour} "
                       f"in {_MAX_SHAPED_ATTEMPTS} draws (p={p:.2f}, seed {seed})")


def shortest_path_length(rows: Sequence[str], start: tuple[int, int], goal: tuple[int, int]) -> int | None:
  """BFS moves from start to goal avoiding holes ('H'), or None when unreachable."""
  size = len(rows)
  dist = {start: 0}
  queue = deque([start])
  while queue:
    cell = queue.popleft()
    if cell == goal:
      return dist[cell]
    for dr, dc in DELTAS.values():
      nr, nc = cell[0] + dr, cell[1] + dc
      if 0 <= nr < size and 0 <= nc < size and rows[nr][nc] != "H" and (nr, nc) not in dist:
        dist[(nr, nc)] = dist[cell] + 1
        queue.append((nr, nc))
  return None


def mapping_from_seed(seed: int) -> dict[int, str]:
  """``random.Random(seed).shuffle(["Down","Right","Up","Left"])``, then Direction k = list[k-1]."""
  dirs = list(DIRECTIONS)
  random.Random(seed).shuffle(dirs)
  return {k + 1: d for k, d in enumerate(dirs)}


@dataclasses.dataclass(frozen=True)
class TaskInstance:
  """The hidden content of one task: map rows, start, goal, mapping and step budget."""

  rows: tuple[str, ...]
  start: tuple[int, int]
  goal: tuple[int, int]
  mapping: dict[int, str]
  budget: int


def task_instance(cfg: FrozenLakeConfig, task_seed: int, mapping: dict[int, str]) -> TaskInstance:
  r = random.Random(task_seed)
  size = r.randint(cfg.min_size, cfg.max_size)
  p = r.uniform(cfg.min_p, cfg.max_p)
  rows = generate_map(size, p, task_seed, cfg.env_max_steps, cfg.min_path, cfg.min_detour)
  start = next((i, row.index("S")) for i, row in enumerate(rows) if "S" in row)
  goal = next((i, row.index("G")) for i, row in enumerate(rows) if "G" in row)
  if cfg.agent_max_steps is not None:
    budget = cfg.agent_max_steps
  else:
    budget = shortest_path_length(rows, start, goal) + cfg.budget_slack
  return TaskInstance(rows=rows, start=start, goal=goal, mapping=mapping, budget=budget)


# --------------------------------------------------------------------------------------------- text


def _pos_text(pos: tuple[int, int], compact: bool) -> str:
  return f"({pos[0]},{pos[1]})" if compact else f"(row={pos[0]}, col={pos[1]})"


def render_map(rows: Sequence[str], player: tuple[int, int], compact: bool) -> str:
  """Reference cells ``" P \\t"`` etc. (full) or space-separated symbols (compact); X/√ mark hole/goal."""
  out = []
  for r, row in enumerate(rows):
    cells = []
    for c, ch in enumerate(row):
      if (r, c) == player:
        sym = "X" if ch == "H" else ("√" if ch == "G" else "P")
      else:
        sym = {"H": "O", "G": "G"}.get(ch, "_")
      cells.append(sym)
    out.append(" ".join(cells) if compact else "".join(f" {s} \t" for s in cells))
  return "\n".join(out)


def move_feedback(k: int, direction: str, before: tuple[int, int], after: tuple[int, int], style: str,
                  compact: bool) -> str:
  """Feedback for one executed move in the configured wording."""
  moved = before != after
  if compact:
    head = f"D{k}: "
    if style == "relative":
      return head + (f"moved {direction.lower()} to {_pos_text(after, True)}" if moved
                     else f"blocked, stayed at {_pos_text(after, True)}")
    return head + (f"{_pos_text(before, True)} -> {_pos_text(after, True)}" if moved
                   else f"stayed at {_pos_text(after, True)}")
  if style == "relative":
    if moved:
      return f"You executed action Direction {k}: you moved {direction.lower()} to {_pos_text(after, False)}."
    return f"You executed action Direction {k}: you were blocked by the edge and stayed at {_pos_text(after, False)}."
  if moved:
    return (f"You executed action Direction {k}. Your position changed from (row={before[0]}, col={before[1]}) "
            f"to (row={after[0]}, col={after[1]}).")
  return (f"You executed action Direction {k}. Your position did not change (stayed at row={after[0]}, "
          f"col={after[1]}). This may be because you tried to move beyond the edge of the map.")


# --------------------------------------------------------------------------------------------- env


class FrozenLakeTask(TaskEnv):
  """One FrozenLake-Obscure task (single use)."""

  def __init__(self, cfg: FrozenLakeConfig, inst: TaskInstance):
    self.cfg = cfg
    self.inst = inst
    self.max_turns = inst.budget
    self._compact = cfg.text_style == "compact"
    self._pos = inst.start
    self._steps = 0
    self._done = False
    self._feedback_line: str | None = None
    self._last_feedback = ""

  # -- text
  def system_prompt(self) -> str:
    return _SYSTEM_COMPACT if self._compact else _SYSTEM_FULL

  def _observation(self) -> str:
    step = f"Step {self._steps + 1}/{self.inst.budget}"
    goal = _pos_text(self.inst.goal, self._compact)
    if self._compact:
      if self._steps == 0:
        # the player's cell is stated as well as drawn: a tiny model need not count rows and columns
        return (f"{step}\nMap:\n{render_map(self.inst.rows, self._pos, True)}\n"
                f"You at {_pos_text(self._pos, True)}. Goal at {goal}.")
      return f"{step}\n{self._feedback_line}\nGoal at {goal}."  # goal restated: each decision is local
    parts = [step]
    if self._feedback_line:
      parts.append(self._feedback_line)
    parts.append("Current map:\n" + render_map(self.inst.rows, self._pos, False))
    parts.append(f"You have not reached the goal {goal} yet. Please decide your next action.")
    return "\n\n".join(parts)

  # -- protocol
  def reset(self) -> tuple[str, str]:
    return self.system_prompt(), self._observation()

  def step(self, action_text: str) -> StepResult:
    if self._done:
      return StepResult("", 0.0, True, {"feedback": self._last_feedback, "format_error": False, "raw_reward": 0.0})
    self._steps += 1
    k = _parse_direction(action_text if isinstance(action_text, str) else "")
    if k is None or k not in self.inst.mapping:
      fb = PARSE_ERROR_FEEDBACK if k is None else (
          f"Invalid format: Direction {k} is not a valid action. Expected: Direction 1, 2, 3, or 4. Game over.")
      return self._finish(fb, raw=0.0, format_error=True)
    direction = self.inst.mapping[k]
    before = self._pos
    dr, dc = DELTAS[direction]
    size = len(self.inst.rows)
    nr, nc = before[0] + dr, before[1] + dc
    if 0 <= nr < size and 0 <= nc < size:
      self._pos = (nr, nc)
    self._feedback_line = move_feedback(k, direction, before, self._pos, self.cfg.feedback_style, self._compact)
    cell = self.inst.rows[self._pos[0]][self._pos[1]]
    prefix = self._feedback_line + " " if self.cfg.feedback_style == "relative" else ""
    if cell == "H":
      return self._finish(prefix + HOLE_FEEDBACK, raw=0.0)
    if cell == "G":
      return self._finish(prefix + SUCCESS_FEEDBACK, raw=1.0)
    if self._steps >= self.inst.budget:
      return self._finish(prefix + f"Failed: Ran out of steps ({self._steps}/{self.inst.budget}) without reaching "
                          "the goal. Try to find a shorter path.", raw=0.0)
    self._last_feedback = self._feedback_line
    return StepResult(self._observation(), 0.0, False,
                      {"feedback": self._feedback_line, "format_error": False, "raw_reward": 0.0})

  def _finish(self, feedback: str, raw: float, format_error: bool = False) -> StepResult:
    self._done = True
    self._last_feedback = feedback
    reward = 0.0
    if raw > 0:
      reward = max(0.0, raw - self.cfg.length_penalty_coef * self._steps / self.inst.budget)
    obs = render_map(self.inst.rows, self._pos, self._compact) + "\n" + feedback
    return StepResult(obs, reward, True, {"feedback": feedback, "format_error": format_error, "raw_reward": raw,
                                          "steps": self._steps})


def _parse_direction(text: str) -> int | None:
  """``Direction k`` at the start of the unique answer block; None when absent (k may be out of range)."""
  ans = extract_answer(text)
  if ans is None:
    return None
  m = _ACTION_RE.match(ans.strip())
  if m is None:
    return None
  digits = m.group(1)
  return int(digits) if len(digits) <= 9 else 10**9


class FrozenLakeFamily(EnvFamily):
  """FrozenLake-Obscure with fixed parameters; packs share the direction mapping (per_pack mode)."""

  name = "frozenlake_obscure"

  def __init__(self, cfg: FrozenLakeConfig):
    self.cfg = cfg

  def mapping_for(self, pack_seed: int, task_seed: int) -> dict[int, str]:
    if self.cfg.mapping_mode == "per_pack":
      return mapping_from_seed(pack_seed)
    if self.cfg.mapping_mode == "per_task":
      return mapping_from_seed(task_seed)
    if self.cfg.mapping_index is not None:
      return {k + 1: d for k, d in enumerate(ALL_PERMUTATIONS[self.cfg.mapping_index])}
    return dict(DEFAULT_MAPPING)

  def score_hint(self, pack_seed: int, hint: str) -> float | None:
    """Fraction of the ``k=Direction`` (or ``Direction=k``) pairs in the hint that match the pack's hidden
    mapping (per_pack); None when the hint states no pair."""
    if self.cfg.mapping_mode != "per_pack":
      return None
    pairs = [(int(k), d) for k, d in _HINT_PAIR_RE.findall(hint)]
    pairs += [(int(k), d) for d, k in _HINT_SLOT_RE.findall(hint)]
    if not pairs:
      return None
    truth = mapping_from_seed(pack_seed)
    return sum(truth.get(k) == d.capitalize() for k, d in pairs) / len(pairs)

  def sample_pack(self, pack_seed: int, num_tasks: int, task_seeds: Sequence[int] | None = None) -> list[TaskEnv]:
    pack_seed, seeds = pack_args(pack_seed, num_tasks, task_seeds)
    return [FrozenLakeTask(self.cfg, task_instance(self.cfg, s, self.mapping_for(pack_seed, s))) for s in seeds]


def build_config(preset: str = "train", **overrides: Any) -> FrozenLakeConfig:
  """The named preset (presets.py) with field overrides. Overriding one of ``agent_max_steps`` (fixed budget)
  and ``budget_slack`` (shortest path + slack) clears the other."""
  overrides = dict(overrides)
  if "agent_max_steps" in overrides and "budget_slack" not in overrides:
    overrides["budget_slack"] = None
  if "budget_slack" in overrides and "agent_max_steps" not in overrides:
    overrides["agent_max_steps"] = None
  return config_from_preset(FrozenLakeConfig, PRESETS, preset, overrides, env="frozenlake_obscure")


@register("frozenlake_obscure")
def make_frozenlake(preset: str = "train", **overrides: Any) -> FrozenLakeFamily:
  return FrozenLakeFamily(build_config(preset, **overrides))
