"""Advantage estimators: CoD credit assignment, adaptive RED-Weight, GRPO and ORBIT returns.

CoD credit assignment (CoD paper Appendix A; docs/methods/cod.md). A group holds G rollouts of one pack
of S tasks. ``task_rewards[i, j]`` is the outcome of solve episode j of rollout i, ``hint_rewards[i, k]`` the
(format) reward of the update episode written after task k, which conditions task k + 1. Each episode's
return aggregates the sequence of rewards it is credited with:

* solve j:          (r_j, r_{j+1}, ..., r_{S-1})
* update after k:   (h_k, r_{k+1}, ..., r_{S-1})

``returns="mean"`` (the paper's estimator) takes the mean of that sequence, i.e. in the paper's indexing
(its update z_j precedes x_j, so z_j here is "update after j - 1")

  R^x_{i,j} = 1/(S-j) sum_{l>=j} r^x_{i,l},     R^z_{i,j} = 1/(S-j+1) (r^z_{i,j} + sum_{l>=j} r^x_{i,l}).

The remark of Appendix A names two alternatives, implemented as in agentscope-ai/Trinity-RFT
``trinity/algorithm/advantage_fn/cod_advantage.py``: ``"window"`` averages only
the first ``window`` terms of the sequence, ``"discounted"`` is sum_n gamma^n * (n-th term). The baseline
is the per-position mean over the G rollouts and the advantage is return minus baseline, with no standard
deviation normalization, so every position's advantages sum to zero over the group.

Every estimator is linear in the rewards, so it is evaluated as one matrix product with a small static
[S, S] weight matrix; the functions accept numpy or jax arrays and return the same kind (jit-friendly for
jax inputs).

Adaptive RED-Weight (Appendix A Eq. 3; the bisection of Trinity-RFT ``cod_advantage.py``). With scores s_j and token
counts L_j over the whole batch, let S(T) = sum_j s_j exp(s_j / T) L_j and S(inf) = sum_j s_j L_j. If
S(inf) >= 0 nothing is reweighted. Otherwise T is found by bisection on [t_min, t_max]: mid = (lo + hi) / 2,
S(mid) < 0 -> hi = mid else lo = mid, at most ``max_iter`` times, stopping once hi - lo < tol; T is the last
midpoint evaluated and every score becomes s_j exp(s_j / T). S(T) decreases in T, so T is within ``tol`` of
the root of S (or of t_min when S(t_min) < 0 already).

GRPO (Shao et al. 2024; ORBIT paper (arXiv 2602.04089), Sec. 3.2, and its public training script
XiaofengLin7/ORBIT ``scripts/train_multi_task_multi_episode.sh``, which runs verl's GRPO with the group std):
A_i = (R_i - mean_g R) / (std_g R + eps) over the rollouts sharing a group id, std with ddof = 1 (verl/tunix
convention; a group of one gets advantage 0). ORBIT's trajectory return is the success count
R = sum_t 1[success at t] (ORBIT paper, Sec. 3.1).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Array = Any  # np.ndarray or jax.Array

RETURN_MODES = ("mean", "window", "discounted")


def _xp(*arrays: Array):
  """jax.numpy if any input is a jax array (or tracer), else numpy."""
  return jnp if any(isinstance(a, jax.Array) for a in arrays) else np


def _as_array(x: Array) -> Array:
  """Leaves jax arrays alone; anything else (lists, scalars, numpy) becomes a numpy array."""
  return x if isinstance(x, jax.Array) else np.asarray(x)


def _sequence_weights(n: int, returns: str, window: int | None, gamma: float | None) -> np.ndarray:
  """Weights over the n terms of a credited reward sequence (offset 0 first)."""
  offsets = np.arange(n)
  if returns == "mean":
    return np.full(n, 1.0 / n)
  if returns == "window":
    return np.where(offsets < window, 1.0 / min(window, n), 0.0)
  return np.power(gamma, offsets)


def _return_matrices(num_tasks: int, returns: str, window: int | None,
                     gamma: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Static weights so that solve returns = r @ Wx.T and hint returns = c * h + r @ Wz.T.

  Wx [S, S]: Wx[j, l] weights r_l in the return of solve j. Wz [S-1, S] and c [S-1] do the same for the
  update after task k, whose sequence is (h_k, r_{k+1}, ..., r_{S-1}).
  """
  s = num_tasks
  wx = np.zeros((s, s))
  for j in range(s):
    wx[j, j:] = _sequence_weights(s - j, returns, window, gamma)
  wz = np.zeros((max(s - 1, 0), s))
  c = np.zeros(max(s - 1, 0))
  for k in range(s - 1):
    w = _sequence_weights(s - k, returns, window, gamma)
    c[k] = w[0]
    wz[k, k + 1:] = w[1:]
  return wx, wz, c


def cod_returns(task_rewards: Array, hint_rewards: Array, *, returns: str = "mean",
                window: int | None = None, gamma: float | None = None) -> tuple[Array, Array]:
  """Per-episode returns (solve [G, S], update [G, S-1]) of a group; see the module docstring."""
  if returns not in RETURN_MODES:
    raise ValueError(f"returns must be one of {RETURN_MODES}, got {returns!r}")
  if returns == "window" and (window is None or int(window) < 1):
    raise ValueError(f"returns='window' needs an integer window >= 1, got {window!r}")
  if returns == "discounted" and (gamma is None or not 0.0 <= float(gamma) <= 1.0):
    raise ValueError(f"returns='discounted' needs gamma in [0, 1], got {gamma!r}")
  task_rewards, hint_rewards = _as_array(task_rewards), _as_array(hint_rewards)
  if task_rewards.ndim != 2 or hint_rewards.ndim != 2:
    raise ValueError("task_rewards must be [G, S] and hint_rewards [G, S-1]")
  g, s = task_rewards.shape
  if hint_rewards.shape != (g, max(s - 1, 0)):
    raise ValueError(f"hint_rewards must have shape {(g, max(s - 1, 0))}, got {tuple(hint_rewards.shape)}")
  xp = _xp(task_rewards, hint_rewards)
  dtype = xp.result_type(task_rewards.dtype, hint_rewards.dtype, xp.float32)
  wx, wz, c = _return_matrices(s, returns, None if window is None else int(window), gamma)
  r = task_rewards.astype(dtype)
  h = hint_rewards.astype(dtype)
  solve = r @ xp.asarray(wx, dtype=dtype).T
  hint = h * xp.asarray(c, dtype=dtype) + r @ xp.asarray(wz, dtype=dtype).T
  return solve, hint


def cod_advantages(task_rewards: Array, hint_rewards: Array, *, returns: str = "mean",
                   window: int | None = None, gamma: float | None = None) -> tuple[Array, Array]:
  """CoD advantages (solve_adv [G, S], hint_adv [G, S-1]): return minus the per-position group mean."""
  solve, hint = cod_returns(task_rewards, hint_rewards, returns=returns, window=window, gamma=gamma)
  return (solve - solve.mean(axis=0, keepdims=True), hint - hint.mean(axis=0, keepdims=True))


def _weighted_score_sum(scores: np.ndarray, weights: np.ndarray, temperature: float) -> float:
  """S(T) = sum_j s_j exp(s_j / T) L_j."""
  return float(np.sum(scores * np.exp(scores / temperature) * weights))


def red_weight_temperature(scores: Array, token_counts: Array, t_min: float = 0.8, t_max: float = 100.0,
                           max_iter: int = 20, tol: float = 0.05) -> float | None:
  """Adaptive RED-Weight temperature of a batch, or None when no reweighting is needed.

  scores: the per-sample advantages of the whole batch; token_counts: their response-token counts (the
  token weighting of Trinity-RFT's ``cod_advantage.py``). Host-side; see the module docstring for the bisection.
  """
  if not 0.0 < t_min < t_max or max_iter < 1 or tol <= 0.0:
    raise ValueError(f"need 0 < t_min < t_max, max_iter >= 1 and tol > 0, got {t_min}, {t_max}, {max_iter}, {tol}")
  s = np.asarray(scores, dtype=np.float64).ravel()
  w = np.asarray(token_counts, dtype=np.float64).ravel()
  if s.shape != w.shape:
    raise ValueError(f"scores and token_counts differ in size: {s.shape} vs {w.shape}")
  if np.sum(s * w) >= 0.0:
    return None
  lo, hi = float(t_min), float(t_max)
  mid = hi
  for _ in range(max_iter):
    mid = 0.5 * (lo + hi)
    if _weighted_score_sum(s, w, mid) < 0.0:
      hi = mid
    else:
      lo = mid
    if hi - lo < tol:
      break
  return mid


def apply_red_weight(scores: Array, temperature: float | None) -> Array:
  """s * exp(s / T) (Eq. 3 weighting); unchanged when temperature is None."""
  if temperature is None:
    return scores
  scores = _as_array(scores)
  xp = _xp(scores)
  return scores * xp.exp(scores / temperature)


def grpo_advantages(rewards: Array, group_ids: Array, normalize_std: bool = True,
                    eps: float = 1e-6) -> Array:
  """GRPO advantages of rollouts [N] grouped by ``group_ids`` [N] (any integer labels, any order)."""
  rewards, group_ids = _as_array(rewards), _as_array(group_ids)
  if rewards.ndim != 1 or group_ids.shape != rewards.shape:
    raise ValueError("rewards and group_ids must both be [N]")
  xp = _xp(rewards, group_ids)
  r = rewards.astype(xp.result_type(rewards.dtype, xp.float32))
  same = (group_ids[:, None] == group_ids[None, :]).astype(r.dtype)  # [N, N] group membership
  count = same.sum(axis=1)
  mean = (same @ r) / count
  centered = r - mean
  if not normalize_std:
    return centered
  sq_dev = same * (r[None, :] - mean[:, None]) ** 2
  var = sq_dev.sum(axis=1) / xp.maximum(count - 1.0, 1.0)
  return centered / (xp.sqrt(var) + eps)


def orbit_success_count(successes: Array) -> Array:
  """ORBIT trajectory return R = sum_t 1[success at t] for successes [N, T] (bool or 0/1)."""
  successes = _as_array(successes)
  if successes.ndim != 2:
    raise ValueError("successes must be [N, T]")
  xp = _xp(successes)
  return (successes != 0).astype(xp.float32).sum(axis=1)
