"""Scripted FrozenLake-Obscure policies that act only through the conversation text.

Knowledge is a set of the 24 direction permutations still consistent with what the text states (a 24-bit
mask): the hint (``- mapping: 1=Up 3=Left``; any ``Direction k = dir`` wording is read too) and every move
feedback (moved: ``Direction k`` is that direction; blocked at a cell: it points off the grid there; the final
feedback pins the last move when it reached the goal or a hole). A hint that contradicts the observations is
dropped. Intersecting permutations is exact constraint propagation (three known directions fix the fourth).

Solve turns are Bayes-optimal for the turn's expected reward: an expectimax over (cell, steps used, mask) with a
uniform prior over the consistent permutations, outcomes merged by the cell they lead to, value
``1 - c * steps / budget`` at the goal and 0 in a hole or out of steps; it is pruned by the all-direction BFS
distance (too far: 0) and by the known-direction BFS (a known shortest path: its value). Ties go to actions
without hole risk that reveal more, then to ``tie_break`` ("random" via the caller's rng, or "first").

Text is short and regular (SFT targets), in one of two scratchpad styles (``know_style``):

* ``pairs`` (the default): ``know 1=Up 3=Left; go Up`` or ``know none; try 2`` then
  ``<answer>Direction k</answer>``; update episodes answer ``know 1=Up 3=Left`` and a one-bullet hint block
  ``- mapping: 1=Up 3=Left`` (``- mapping: unknown`` when nothing is definite).
* ``slots`` (compact texts, for tiny models trained from scratch): four fixed slots in the order Up, Down,
  Left, Right, ``know Up=3 Down=? Left=? Right=4; go Right=4`` or ``...; try 2``, and the hint
  ``- mapping: Up=3 Down=? Left=? Right=4``. Same knowledge, but every step of it is a copy a small
  transformer learns quickly: the scratchpad changes one slot per observed move, the hint is the last scratchpad,
  and ``go Right=4`` repeats the slot the answer digit comes from.

``pairs`` is the default; ``auto`` picks ``slots`` for the compact text layout (observations with
``Goal at (r,c).``, the tiny preset) and ``pairs`` otherwise. Hints in either order (``3=Up`` or ``Up=3``) are
read. ``slots`` pays off when each slot ``Up=3`` is one token (the tiny demo's tokenizer isolates it, and each
``D3: moved up`` feedback, as a pre-token): every step is then a one-token copy. Measured on the tiny demo
(0.6M parameters, 2,000 SFT steps, 40 packs): slots with whole-slot tokens reached hint accuracy 0.79 and a
consistent answer digit in 95 % of ``go`` turns; slots or pairs with the slot split into ``Up``, ``=``, ``3``
stayed at 0.25-0.45 hint accuracy and 22-41 % consistent digits (a two-layer lookup a small model learns slowly).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections import deque
from typing import Sequence

from codjax.envs import cod_protocol as proto
from codjax.envs.experts import TextPolicy
from codjax.envs.frozenlake.env import ALL_PERMUTATIONS, DELTAS
from codjax.envs.helpers import split_trajectory

_FULL_MASK = (1 << len(ALL_PERMUTATIONS)) - 1
_DIRS = ("Up", "Down", "Left", "Right")
# _DIR_MASK[k][d]: permutations in which Direction k+1 is d
_DIR_MASK = [{d: sum(1 << i for i, p in enumerate(ALL_PERMUTATIONS) if p[k] == d) for d in _DIRS} for k in range(4)]

_POS = r"\(?(?:row=)?(\d+),\s*(?:col=)?(\d+)\)?"
_MOVE_HEAD_RE = re.compile(r"(?:Direction |\bD)(\d+)[.:]")
_FROM_TO_RE = re.compile(r"from \(row=(\d+), col=(\d+)\) to \(row=(\d+), col=(\d+)\)"
                         r"|\((\d+),(\d+)\) -> \((\d+),(\d+)\)")
_MOVED_RE = re.compile(r"moved (up|down|left|right) to " + _POS)
_STAYED_RE = re.compile(r"stayed at " + _POS)
_STEP_RE = re.compile(r"Step (\d+)/(\d+)")
_HINT_RE = re.compile(r"(?:direction\s*)?\b([1-4])\s*(?:=|:|->|→|is|maps to|corresponds to)\s*(up|down|left|right)\b",
                      re.IGNORECASE)
_SLOT_RE = re.compile(r"\b(up|down|left|right)\s*=\s*([1-4])\b", re.IGNORECASE)  # slot style: Up=3
_COMPACT_OBS_RE = re.compile(r"Goal at \(\d+,\d+\)\.")


@dataclasses.dataclass
class Move:
  """One move read from feedback text: action k, what it revealed, and the cell after it."""

  k: int
  allowed: frozenset[str]  # directions Direction k can still be
  after: tuple[int, int] | None


@dataclasses.dataclass
class Episode:
  """What the text of one FrozenLake episode says."""

  rows: list[str]  # 'P', '_', 'O', 'G' (full) cells per row
  goal: tuple[int, int]
  start: tuple[int, int]
  budget: int
  moves: list[Move]

  @property
  def position(self) -> tuple[int, int]:
    for mv in reversed(self.moves):
      if mv.after is not None:
        return mv.after
    return self.start


def parse_map(text: str) -> list[list[str]] | None:
  """Cells of the first map in an observation (full tab layout or compact space layout)."""
  for head in ("Current map:\n", "Map:\n"):
    if head in text:
      body = text.split(head, 1)[1]
      rows = []
      for line in body.split("\n"):
        cells = line.replace("\t", " ").split()
        if not cells or any(c not in ("P", "_", "O", "G", "X", "√") for c in cells):
          break
        rows.append(cells)
      if rows and all(len(r) == len(rows) for r in rows):
        return rows
  return None


def _side_moves(pos: tuple[int, int], size: int) -> frozenset[str]:
  """Directions that would leave the grid from pos (the only way a move is blocked)."""
  return frozenset(d for d, (dr, dc) in DELTAS.items() if not (0 <= pos[0] + dr < size and 0 <= pos[1] + dc < size))


def parse_move(line: str, before: tuple[int, int], size: int) -> Move | None:
  """Parses one move feedback (any of the four wordings)."""
  head = _MOVE_HEAD_RE.search(line)
  if head is None:
    return None
  k = int(head.group(1)) if len(head.group(1)) <= 2 else 0
  m = _MOVED_RE.search(line)
  if m:
    after = (int(m.group(2)), int(m.group(3)))
    return Move(k, frozenset([m.group(1).capitalize()]), after)
  m = _FROM_TO_RE.search(line)
  if m:
    g = [int(x) for x in m.groups() if x is not None]
    src, dst = (g[0], g[1]), (g[2], g[3])
    delta = (dst[0] - src[0], dst[1] - src[1])
    dirs = frozenset(d for d, v in DELTAS.items() if v == delta)
    return Move(k, dirs, dst)
  m = _STAYED_RE.search(line)
  if m:
    at = (int(m.group(1)), int(m.group(2)))
    return Move(k, _side_moves(at, size), at)
  return None


def parse_episode(observations: Sequence[str], actions: Sequence[str], final_feedback: str | None = None
                  ) -> Episode | None:
  """Reads map, goal, budget and moves from the observations (and the final feedback of a finished episode)."""
  if not observations:
    return None
  cells = parse_map(observations[0])
  if cells is None:
    return None
  size = len(cells)
  start = goal = None
  for r, row in enumerate(cells):
    for c, ch in enumerate(row):
      if ch in ("P", "X", "√"):
        start = (r, c)
      if ch in ("G", "√"):
        goal = (r, c)
  if start is None or goal is None:
    return None
  rows = ["".join("O" if ch in ("O", "X") else ("G" if (r, c) == goal else "_") for c, ch in enumerate(row))
          for r, row in enumerate(cells)]
  m = _STEP_RE.search(observations[-1])
  budget = int(m.group(2)) if m else 0
  ep = Episode(rows=rows, goal=goal, start=start, budget=budget, moves=[])
  for obs in observations[1:]:
    mv = parse_move(obs, ep.position, size)
    if mv is not None:
      ep.moves.append(mv)
  if final_feedback:
    mv = parse_move(final_feedback, ep.position, size)
    if mv is not None:
      ep.moves.append(mv)
    elif actions and len(actions) >= len(observations):
      k = _answer_k(actions[len(observations) - 1])
      if k is not None:
        pos = ep.position
        targets = None
        if final_feedback.startswith("Success"):
          targets = {goal}
        elif "hole" in final_feedback:
          targets = {(r, c) for r, row in enumerate(rows) for c, ch in enumerate(row) if ch == "O"}
        if targets is not None:
          dirs = frozenset(d for d, (dr, dc) in DELTAS.items() if (pos[0] + dr, pos[1] + dc) in targets)
          ep.moves.append(Move(k, dirs, None))
  return ep


def _answer_k(text: str) -> int | None:
  ans = proto.extract_answer(text)
  m = re.match(r"[Dd]irection\s+([1-4])\b", ans.strip()) if ans is not None else None
  return int(m.group(1)) if m else None


def mask_from_moves(moves: Sequence[Move]) -> int:
  mask = _FULL_MASK
  for mv in moves:
    if 1 <= mv.k <= 4:
      mask &= sum(_DIR_MASK[mv.k - 1][d] for d in mv.allowed)
  return mask


def hint_pairs(hint: str) -> list[tuple[int, str]]:
  """(k, direction) pairs stated in a hint, in either order (``3=Up``, ``Direction 3 is up``, ``Up=3``)."""
  pairs = [(int(k), d.capitalize()) for k, d in _HINT_RE.findall(hint or "")]
  return pairs + [(int(k), d.capitalize()) for d, k in _SLOT_RE.findall(hint or "")]


def mask_from_hint(hint: str) -> int:
  mask = _FULL_MASK
  for k, d in hint_pairs(hint):
    mask &= _DIR_MASK[k - 1][d]
  return mask


def combine(hint_mask: int, obs_mask: int) -> int:
  """Observations win over a contradicting hint."""
  both = hint_mask & obs_mask
  return both if both else obs_mask


def known_directions(mask: int) -> dict[int, str]:
  """Direction k -> direction for every k on which all consistent permutations agree."""
  out = {}
  if mask == 0:
    return out
  for k in range(4):
    for d in _DIRS:
      if mask & ~_DIR_MASK[k][d] == 0:
        out[k + 1] = d
  return out


def know_text(mask: int, style: str = "pairs") -> str:
  known = known_directions(mask)
  if style == "slots":
    by_dir = {d: k for k, d in known.items()}
    return " ".join(f"{d}={by_dir.get(d, '?')}" for d in _DIRS)
  return " ".join(f"{k}={d}" for k, d in sorted(known.items())) or "none"


def _style(know_style: str, messages: list[dict[str, str]]) -> str:
  if know_style != "auto":
    return know_style
  compact = any(m.get("role") == "user" and _COMPACT_OBS_RE.search(m.get("content", "")) for m in messages)
  return "slots" if compact else "pairs"


# --------------------------------------------------------------------------------------------- planner


class Planner:
  """Expectimax over (cell, steps used, permutation mask) for one map (module docstring)."""

  def __init__(self, rows: Sequence[str], goal: tuple[int, int], budget: int, coef: float = 0.1):
    self.rows = list(rows)
    self.size = len(rows)
    self.goal = goal
    self.budget = budget
    self.coef = coef
    self.cells = [(r, c) for r in range(self.size) for c in range(self.size)]
    self.nxt = {}
    for cell in self.cells:
      for d, (dr, dc) in DELTAS.items():
        nr, nc = cell[0] + dr, cell[1] + dc
        self.nxt[(cell, d)] = (nr, nc) if 0 <= nr < self.size and 0 <= nc < self.size else cell
    self._dist_cache: dict[frozenset[str], dict] = {}
    self._memo: dict = {}

  def _hole(self, cell) -> bool:
    return self.rows[cell[0]][cell[1]] == "O"

  def dist(self, dirs: frozenset[str]) -> dict:
    """BFS distance to the goal using only ``dirs`` (reverse search from the goal)."""
    if dirs not in self._dist_cache:
      dist = {self.goal: 0}
      queue = deque([self.goal])
      while queue:
        y = queue.popleft()
        for d in dirs:
          dr, dc = DELTAS[d]
          x = (y[0] - dr, y[1] - dc)
          if 0 <= x[0] < self.size and 0 <= x[1] < self.size and x not in dist and not self._hole(x):
            dist[x] = dist[y] + 1
            queue.append(x)
      self._dist_cache[dirs] = dist
    return self._dist_cache[dirs]

  def success_value(self, steps: int) -> float:
    return max(0.0, 1.0 - self.coef * steps / self.budget)

  def value(self, cell, t: int, mask: int) -> float:
    full = self.dist(frozenset(_DIRS)).get(cell)
    if full is None or t + full > self.budget:
      return 0.0
    known = frozenset(known_directions(mask).values())
    if self.dist(known).get(cell) == full:
      return self.success_value(t + full)
    key = (cell, t, mask)
    if key not in self._memo:
      self._memo[key] = max(self.q_value(cell, t, mask, k) for k in range(1, 5))
    return self._memo[key]

  def outcomes(self, cell, mask: int, k: int) -> dict:
    out: dict = {}
    for d in _DIRS:
      sub = mask & _DIR_MASK[k - 1][d]
      if sub:
        nxt = self.nxt[(cell, d)]
        out[nxt] = out.get(nxt, 0) | sub
    return out

  def q_value(self, cell, t: int, mask: int, k: int) -> float:
    total = mask.bit_count()
    val = 0.0
    for nxt, sub in self.outcomes(cell, mask, k).items():
      if self._hole(nxt):
        v = 0.0
      elif nxt == self.goal:
        v = self.success_value(t + 1)
      elif t + 1 >= self.budget:
        v = 0.0
      else:
        v = self.value(nxt, t + 1, sub)
      val += v * sub.bit_count() / total
    return val

  def choose(self, cell, t: int, mask: int, rng: random.Random | None) -> int:
    """Best action; ties: no hole risk, then more distinct outcomes, then rng (or the smallest k)."""
    scored = []
    total = mask.bit_count()
    for k in range(1, 5):
      outs = self.outcomes(cell, mask, k)
      risk = sum(sub.bit_count() for nxt, sub in outs.items() if self._hole(nxt)) / total
      scored.append((round(self.q_value(cell, t, mask, k), 9), -risk, len(outs), k))
    best = max(s[:3] for s in scored)
    ties = [s[3] for s in scored if s[:3] == best]
    return rng.choice(ties) if rng is not None and len(ties) > 1 else ties[0]


# --------------------------------------------------------------------------------------------- policies


def _solve_context(messages: list[dict]) -> tuple[str, list[tuple[list[str], list[str]]]]:
  """The system prompt and the conversation's episodes as (observations, actions), oldest first.

  A conversation may hold several episodes in a row (ORBIT's multi-episode protocol); each starts at a user
  turn showing ``Step 1/``. Every episode shares the pack's direction mapping."""
  system = next((m["content"] for m in messages if m.get("role") == "system"), "")
  episodes: list[tuple[list[str], list[str]]] = []
  for m in messages:
    role, text = m.get("role"), m.get("content", "")
    if role == "user":
      starts = _STEP_RE.search(text) is not None and _STEP_RE.search(text).group(1) == "1"
      if starts or not episodes:
        episodes.append(([], []))
      episodes[-1][0].append(text)
    elif role == "assistant" and episodes:
      episodes[-1][1].append(text)
  return system, episodes


class FrozenLakeExpert(TextPolicy):
  """Careful FrozenLake-Obscure agent (module docstring)."""

  def __init__(self, tie_break: str = "random", length_penalty_coef: float = 0.1, know_style: str = "pairs"):
    if tie_break not in ("random", "first"):
      raise ValueError(f"tie_break must be 'random' or 'first', got {tie_break!r}")
    if know_style not in ("auto", "pairs", "slots"):
      raise ValueError(f"know_style must be 'auto', 'pairs' or 'slots', got {know_style!r}")
    self.tie_break = tie_break
    self.know_style = know_style
    self.coef = length_penalty_coef

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    if proto.is_update_prompt(messages):
      return self._update(messages)
    system, episodes = _solve_context(messages)
    if not episodes:
      return "cannot read the map; try 1\n<answer>Direction 1</answer>"
    obs, acts = episodes[-1]
    ep = parse_episode(obs, acts)
    if ep is None or ep.budget <= 0:
      return "cannot read the map; try 1\n<answer>Direction 1</answer>"
    mask = combine(mask_from_hint(proto.hint_from_system_prompt(system)), mask_from_moves(ep.moves))
    for prev_obs, prev_acts in episodes[:-1]:  # earlier episodes of the conversation: same mapping
      prev = parse_episode(prev_obs, prev_acts[:len(prev_obs)])
      if prev is not None:
        mask = combine(mask, mask_from_moves(prev.moves))
    if mask == 0:
      mask = _FULL_MASK
    step = int(_STEP_RE.findall(obs[-1])[-1][0]) if _STEP_RE.search(obs[-1]) else len(obs)
    planner = Planner(ep.rows, ep.goal, ep.budget, self.coef)
    k = planner.choose(ep.position, step - 1, mask, rng if self.tie_break == "random" else None)
    known = known_directions(mask)
    style = _style(self.know_style, messages)
    plan = f"try {k}"
    if k in known:
      plan = f"go {known[k]}={k}" if style == "slots" else f"go {known[k]}"
    return f"know {know_text(mask, style)}; {plan}\n<answer>Direction {k}</answer>"

  def _update(self, messages: list[dict[str, str]]) -> str:
    user = next(m["content"] for m in messages if m.get("role") == "user"
                and m.get("content", "").startswith(proto.PREV_HINTS_HEADER))
    parsed = proto.parse_update_user_prompt(user)
    obs, acts = split_trajectory(parsed.trajectory)
    ep = parse_episode(obs, acts, parsed.feedback)
    obs_mask = mask_from_moves(ep.moves) if ep is not None else _FULL_MASK
    mask = combine(mask_from_hint(parsed.prev_hint), obs_mask)
    text = know_text(mask, _style(self.know_style, messages))
    mapping = "unknown" if text == "none" else text
    return proto.format_hint_block([f"mapping: {mapping}"], reasoning=f"know {text}")


class FrozenLakeRandom(TextPolicy):
  """Uniformly random legal action; update episodes return an empty-handed hint."""

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    if proto.is_update_prompt(messages):
      return proto.format_hint_block(["mapping: unknown"], reasoning="random policy")
    return f"random\n<answer>Direction {rng.randint(1, 4)}</answer>"
