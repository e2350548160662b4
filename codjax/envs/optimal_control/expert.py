"""Scripted OptimalControl policies acting through text only (environment: CoD paper Sec. 3.2.2; env.py).

``ControlExpert``:

* solve: if the hint states identified dynamics ``a = .., b = ..``, it plans the open-loop controls
  ``u_0..u_{T-1}`` in [-1, 1] by bounded linear least squares on the exact quadratic loss (x_T and v_T are
  linear in u; the loss weights are read from the system prompt) and submits them as a chain ``ifelse(lt(t, k), u, ...)`` (runs of equal values merged).
  Without identified dynamics it submits a short probing pulse so the rollout table identifies a and b.
* update: fits ``v_{t+1} = a v_t + b u_t`` by least squares on the rollout table in the feedback, pools the
  estimate with the previous hint's (weighted by transition counts) and writes it back as a hint bullet.

``ControlRandom`` submits a random linear feedback law and writes an uninformative hint.
"""

from __future__ import annotations

import random
import re

import numpy as np
from scipy.optimize import lsq_linear

from codjax.envs.cod_protocol import format_hint_block, hint_from_system_prompt, is_update_prompt
from codjax.envs.cod_protocol import parse_update_user_prompt
from codjax.envs.experts import TextPolicy

_NUM = r"(-?\d+(?:\.\d+)?)"
_HINT_RE = re.compile(rf"a = {_NUM}, b = {_NUM} \(least squares on (\d+) transitions\)")
_ROW_RE = re.compile(rf"^(\d+) \| {_NUM} \| {_NUM} \| (?:{_NUM}|--)$", re.MULTILINE)
_INIT_RE = re.compile(rf"Initial state: x0 = {_NUM}, v0 = {_NUM}")
_TARGET_RE = re.compile(rf"Target state: x_target = {_NUM}, v_target = {_NUM}")
_HORIZON_RE = re.compile(r"The rollout has (\d+) steps")
_OBJECTIVE_RE = re.compile(rf"\+ {_NUM} \* \(v_T - v_target\)\^2 \+ {_NUM} \* sum_t u_t\^2")
PROBE = "ifelse(lt(t, 1), 0.5, 0)"


def _answer(expr: str) -> str:
  return f"<answer><action_expression>{expr}</action_expression></answer>"


def parse_dynamics_hint(hint: str) -> tuple[float, float, int] | None:
  """``(a, b, transitions)`` from the hint; None when absent or implausible (|a| <= 5, 1e-3 <= |b| <= 10)."""
  m = _HINT_RE.search(hint)
  if m is None:
    return None
  a, b, n = float(m.group(1)), float(m.group(2)), int(m.group(3))
  return (a, b, n) if abs(a) <= 5 and 1e-3 <= abs(b) <= 10 and 0 < n < 10**6 else None


def fit_dynamics(table_text: str) -> tuple[float, float, int] | None:
  """Least-squares (a, b) from ``t | x | v | u`` rows; None when the rows do not identify both."""
  rows = {int(m.group(1)): (float(m.group(3)), m.group(4)) for m in _ROW_RE.finditer(table_text)}
  feats, target = [], []
  for t, (v, u) in rows.items():
    if u is not None and t + 1 in rows:
      feats.append((v, float(u)))
      target.append(rows[t + 1][0])
  if len(feats) < 2:
    return None
  A, y = np.asarray(feats), np.asarray(target)
  if not (np.all(np.isfinite(A)) and np.all(np.isfinite(y))) or np.linalg.matrix_rank(A, tol=1e-6) < 2:
    return None
  (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
  return float(a), float(b), len(feats)


def plan_controls(a: float, b: float, x0: float, v0: float, xt: float, vt: float, horizon: int,
                  velocity_weight: float = 2.0, control_penalty: float = 0.03) -> np.ndarray:
  """Open-loop minimizer of the control loss over u in [-1, 1]^T (bounded least squares)."""
  T = horizon
  # v_s = a^s v0 + sum_{t<s} a^{s-1-t} b u_t ; x_T = x0 + sum_{s=1..T} v_s
  Gv = np.zeros((T + 1, T))
  for s in range(1, T + 1):
    for t in range(s):
      Gv[s, t] = a ** (s - 1 - t) * b
  free_v = np.array([a ** s * v0 for s in range(T + 1)])
  x_row, x_free = Gv[1:].sum(0), x0 + free_v[1:].sum()
  A = np.vstack([x_row, np.sqrt(velocity_weight) * Gv[T], np.sqrt(control_penalty) * np.eye(T)])
  rhs = np.concatenate([[xt - x_free, np.sqrt(velocity_weight) * (vt - free_v[T])], np.zeros(T)])
  return lsq_linear(A, rhs, bounds=(-1.0, 1.0)).x


def controls_expression(us: np.ndarray) -> str:
  """``ifelse(lt(t, k), u, ...)`` over runs of equal (3-decimal) controls."""
  vals = [f"{u:.3f}".rstrip("0").rstrip(".") if abs(u) >= 5e-4 else "0" for u in us]
  runs: list[tuple[int, str]] = []  # (end step exclusive, value)
  for t, v in enumerate(vals):
    if runs and runs[-1][1] == v:
      runs[-1] = (t + 1, v)
    else:
      runs.append((t + 1, v))
  expr = runs[-1][1]
  for end, v in reversed(runs[:-1]):
    expr = f"ifelse(lt(t, {end}), {v}, {expr})"
  return expr


class ControlExpert(TextPolicy):
  """Identify (a, b) from rollout tables, carry them in the hint, then plan optimally."""

  def respond(self, messages, rng: random.Random) -> str:
    if is_update_prompt(messages):
      return self._update(messages[-1]["content"])
    obs = messages[-1]["content"]
    dyn = parse_dynamics_hint(hint_from_system_prompt(messages[0]["content"]))
    m0, m1, mh = _INIT_RE.search(obs), _TARGET_RE.search(obs), _HORIZON_RE.search(obs)
    if dyn is None or not (m0 and m1 and mh):
      return ("The dynamics are not identified yet, so I send one short pulse; the rollout table will "
              "reveal a and b.\n" + _answer(PROBE))
    a, b, _ = dyn
    x0, v0 = float(m0.group(1)), float(m0.group(2))
    xt, vt = float(m1.group(1)), float(m1.group(2))
    mo = _OBJECTIVE_RE.search(messages[0]["content"])
    weights = (float(mo.group(1)), float(mo.group(2))) if mo else (2.0, 0.03)
    us = plan_controls(a, b, x0, v0, xt, vt, min(int(mh.group(1)), 64), *weights)
    return (f"Using a = {a:.4f}, b = {b:.4f} from the hints, I plan the controls by bounded least squares "
            "on the loss.\n" + _answer(controls_expression(us)))

  def _update(self, user: str) -> str:
    parsed = parse_update_user_prompt(user)
    prev = parse_dynamics_hint(parsed.prev_hint)
    new = fit_dynamics(parsed.feedback)
    est = new or prev
    if new and prev:
      n = prev[2] + new[2]
      est = ((prev[0] * prev[2] + new[0] * new[2]) / n, (prev[1] * prev[2] + new[1] * new[2]) / n, n)
    if est is None:
      return format_hint_block(["Dynamics not identified yet: submit a law with a clear control pulse so "
                                "the rollout table shows how v responds to u."],
                               "The rollout did not identify the dynamics.")
    a, b, n = est
    bullets = [f"Dynamics: a = {a:.4f}, b = {b:.4f} (least squares on {n} transitions)",
               "With a and b known, x_T and v_T are linear in the controls: choose u_0..u_{T-1} in [-1, 1] by "
               "bounded least squares on the loss and submit them as ifelse(lt(t, k), u, ...)."]
    return format_hint_block(bullets, "I fit v_{t+1} = a v_t + b u_t to the rollout table.")


class ControlRandom(TextPolicy):
  """A random linear feedback law; an uninformative hint."""

  def respond(self, messages, rng: random.Random) -> str:
    if is_update_prompt(messages):
      return format_hint_block(["No reliable lesson yet."], "Nothing to add.")
    k1, k2 = rng.uniform(-1, 1), rng.uniform(-1, 1)
    return ("A random proportional-derivative law.\n"
            + _answer(f"clip({k1:.2f} * (x_target - x) + {k2:.2f} * v, -1, 1)"))
