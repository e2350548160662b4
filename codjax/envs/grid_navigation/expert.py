"""Scripted GridNavigation policies acting through text only (environment: CoD paper Sec. 3.2.2; env.py).

``GridExpert`` (solve): parses the goal, position, rounds left, the observed cost grid and the moves already
made from the conversation, and plans the remaining moves exactly: over all rook paths with exactly the
remaining number of moves that end on the goal, it minimizes the task's mean entered cost (moves already made
included). Unrevealed cells get an estimated cost: by default the mean of the revealed costs; when the hint
records the validated smoothness technique, an inverse-distance-weighted interpolation (power ``IDW_POWER``)
of the revealed costs. The ratio objective is minimized with Dinkelbach's iteration
``lambda <- (C0 + C(P)) / (n0 + N(P))``, where each P minimizes ``sum(cost - lambda)`` by dynamic
programming over (cell, moves left) with min-plus products.

``GridExpert`` (update): from the last observed cost grid of the trajectory it records the revealed-cost
statistics and checks spatial smoothness (mean |difference| of adjacent revealed cells against that of all
revealed pairs); when smoothness holds it records the interpolation technique, plus the route's outcome.

``GridRandom`` plays uniformly random legal rook moves and writes an uninformative hint.
"""

from __future__ import annotations

import random
import re

import numpy as np

from codjax.envs.cod_protocol import format_hint_block, hint_from_system_prompt, is_update_prompt
from codjax.envs.cod_protocol import parse_update_user_prompt
from codjax.envs.experts import TextPolicy

IDW_POWER = 4.0
IDW_MARKER = "inverse-distance interpolation"
_GOAL_RE = re.compile(r"Goal: \((\d+),(\d+)\)")
_POS_RE = re.compile(r"Current position: \((\d+),(\d+)\)")
_LEFT_RE = re.compile(r"(\d+) moves? left")
_ENTERED_RE = re.compile(r"through (\d+) entered cells")
_LOSS_RE = re.compile(r"Cumulative normalized loss: (\d+(?:\.\d+)?)")
_GRID_HEADERS = ("Observed cost grid ('?' = not revealed yet):\n", "Final observed cost grid:\n",
                 "Observed cost grid:\n")


def parse_grid(text: str) -> tuple[np.ndarray, np.ndarray] | None:
  """The last rendered grid in ``text`` as ``(costs, revealed)``; costs of hidden cells are 0."""
  idx = max((text.rfind(h), h) for h in _GRID_HEADERS)
  if idx[0] < 0:
    return None
  lines = text[idx[0] + len(idx[1]):].split("\n")
  n = len(lines[0].split())
  if n == 0 or len(lines) < n + 1:
    return None
  costs = np.zeros((n, n))
  revealed = np.zeros((n, n), dtype=bool)
  for r in range(n):
    row = lines[1 + r][3:]
    for c in range(n):
      cell = row[3 * c:3 * c + 3].strip()
      if cell != "?":
        if not cell.isdigit():
          return None
        costs[r, c] = float(cell)
        revealed[r, c] = True
  return costs, revealed


def _move_matrix(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(sum of w over entered cells, number of entered cells) for every rook move ``i -> j``; inf if none."""
  n = w.shape[0]
  N = n * n
  M = np.full((N, N), np.inf)
  K = np.zeros((N, N))
  idx = np.arange(n)
  c0, c1 = idx[:, None], idx[None, :]
  count = np.abs(c1 - c0).astype(float)
  for axis in (0, 1):
    lines = w if axis == 0 else w.T  # rows of w (moves along a row), then columns
    P = np.concatenate([np.zeros((n, 1)), np.cumsum(lines, axis=1)], axis=1)
    for k in range(n):
      seg = np.where(c1 > c0, P[k][c1 + 1] - P[k][c0 + 1], P[k][c0] - P[k][c1])
      np.fill_diagonal(seg, np.inf)
      cells = k * n + idx if axis == 0 else idx * n + k
      M[np.ix_(cells, cells)] = seg
      K[np.ix_(cells, cells)] = count
  return M, K


def plan_move(est: np.ndarray, pos: tuple[int, int], goal: tuple[int, int], moves_left: int, c0: float,
              n0: int) -> tuple[int, int]:
  """First move of a path minimizing (c0 + C(P)) / (n0 + N(P)) over exact-length rook paths to the goal."""
  n = est.shape[0]
  start, target = pos[0] * n + pos[1], goal[0] * n + goal[1]
  cost_m, count_m = _move_matrix(est)
  lam = c0 / n0 if n0 else float(est.mean())
  best = None
  for _ in range(30):
    M = cost_m - lam * count_m
    V = [np.full(n * n, np.inf)]
    V[0][target] = 0.0
    for _k in range(moves_left):
      V.append((M + V[-1][None, :]).min(axis=1))
    path, cell = [], start
    for k in range(moves_left, 0, -1):
      cell = int(np.argmin(M[cell] + V[k - 1]))
      path.append(cell)
    if not np.isfinite(V[moves_left][start]):
      break
    prev = start
    c_sum = n_sum = 0.0
    for cell in path:
      c_sum += cost_m[prev, cell]
      n_sum += count_m[prev, cell]
      prev = cell
    new_lam = (c0 + c_sum) / max(1.0, n0 + n_sum)
    best = path[0]
    if abs(new_lam - lam) < 1e-9:
      break
    lam = new_lam
  if best is None:  # unreachable in exactly moves_left moves (cannot happen for valid tasks): any legal move
    r, c = pos
    return (r, (c + 1) % n) if n > 1 else pos
  return divmod(best, n)


def idw_estimate(costs: np.ndarray, revealed: np.ndarray, power: float = IDW_POWER) -> np.ndarray:
  """Revealed costs where known; inverse-distance-weighted interpolation of them elsewhere."""
  n = costs.shape[0]
  rr, cc = np.nonzero(revealed)
  R, C = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
  d2 = (R[..., None] - rr) ** 2 + (C[..., None] - cc) ** 2
  w = 1.0 / np.maximum(d2, 1e-12) ** (power / 2)
  return np.where(revealed, costs, (w * costs[revealed]).sum(-1) / w.sum(-1))


def smoothness_ratio(costs: np.ndarray, revealed: np.ndarray) -> float | None:
  """Mean |difference| of adjacent revealed cells over that of all revealed pairs (small = smooth)."""
  adj = [np.abs(a - b)[m] for a, b, m in (
      (costs[1:], costs[:-1], revealed[1:] & revealed[:-1]),
      (costs[:, 1:], costs[:, :-1], revealed[:, 1:] & revealed[:, :-1]))]
  adj_diffs = np.concatenate(adj)
  vals = costs[revealed]
  if adj_diffs.size < 4 or vals.size < 4:
    return None
  spread = np.abs(vals[:, None] - vals[None, :]).mean()
  return float(adj_diffs.mean() / spread) if spread > 0 else None


def _answer(cell: tuple[int, int]) -> str:
  return f"<answer>{cell[0]},{cell[1]}</answer>"


def _history(messages) -> tuple[float, int]:
  """Total entered cost and count of the moves already made in this task (from the feedback lines)."""
  n0, loss = 0, 0.0
  for m in messages[2:]:
    if m["role"] == "user":
      e, lo = _ENTERED_RE.search(m["content"]), _LOSS_RE.search(m["content"])
      if e and lo:
        n0 += int(e.group(1))
        loss = float(lo.group(1))
  return loss * 100.0 * n0, n0


class GridExpert(TextPolicy):
  """Exact planner on revealed costs; unrevealed cells interpolated (when the hint says so) or at the mean."""

  def respond(self, messages, rng: random.Random) -> str:
    if is_update_prompt(messages):
      return self._update(messages[-1]["content"])
    obs = messages[-1]["content"]
    parsed = parse_grid(obs)
    g, p, left = _GOAL_RE.search(obs), _POS_RE.search(obs), _LEFT_RE.search(obs)
    if parsed is None or not (g and p and left):
      return "I cannot read the board; I stay consistent with the format.\n<answer>0,0</answer>"
    costs, revealed = parsed
    smooth = IDW_MARKER in hint_from_system_prompt(messages[0]["content"])
    if smooth:
      est = idw_estimate(costs, revealed)
    else:
      est = np.where(revealed, costs, costs[revealed].mean() if revealed.any() else 0.0)
    c0, n0 = _history(messages)
    goal, pos = (int(g.group(1)), int(g.group(2))), (int(p.group(1)), int(p.group(2)))
    move = plan_move(est, pos, goal, int(left.group(1)), c0, n0)
    how = "interpolated from nearby revealed costs (hint)" if smooth else "at the mean revealed cost"
    return (f"Planning all {left.group(1)} remaining moves for the lowest mean cost, unrevealed cells "
            f"{how}.\n{_answer(move)}")

  def _update(self, user: str) -> str:
    parsed = parse_update_user_prompt(user)
    grid = parse_grid(parsed.trajectory) or parse_grid(parsed.feedback)
    bullets = []
    ratio = smoothness_ratio(*grid) if grid is not None else None
    if grid is not None and grid[1].any():
      vals = grid[0][grid[1]]
      bullets.append(f"Revealed costs: mean {vals.mean():.1f}, median {np.median(vals):.0f}, "
                     f"range {vals.min():.0f}-{vals.max():.0f} over {int(grid[1].sum())} cells.")
    if ratio is not None and ratio < 0.5:
      bullets.append(f"Costs vary smoothly (adjacent cells differ {ratio:.2f}x as much as random pairs): "
                     f"estimate unrevealed cells by {IDW_MARKER} of revealed costs.")
    elif IDW_MARKER in parsed.prev_hint:
      bullets.append(f"Costs vary smoothly: estimate unrevealed cells by {IDW_MARKER} of revealed costs.")
    loss = re.search(r"Normalized loss: (\d+(?:\.\d+)?)", parsed.trajectory)
    if loss:
      ok = "Success" in parsed.feedback
      bullets.append(f"Last task: {'reached the goal' if ok else 'missed the goal'} with normalized loss "
                     f"{loss.group(1)}.")
    bullets.append("Revealed cells persist between tasks; long moves across cheap cells lower the mean cost.")
    return format_hint_block(bullets, "I summarize what the revealed costs say about planning.")


class GridRandom(TextPolicy):
  """Uniformly random legal rook moves; an uninformative hint."""

  def respond(self, messages, rng: random.Random) -> str:
    if is_update_prompt(messages):
      return format_hint_block(["No reliable lesson yet."], "Nothing to add.")
    obs = messages[-1]["content"]
    parsed, p = parse_grid(obs), _POS_RE.search(obs)
    if parsed is None or p is None:
      return "<answer>0,0</answer>"
    n = parsed[0].shape[0]
    r, c = int(p.group(1)), int(p.group(2))
    moves = [(r, k) for k in range(n) if k != c] + [(k, c) for k in range(n) if k != r]
    return f"A random move.\n{_answer(rng.choice(moves))}"
