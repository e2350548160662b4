"""The sparse-regression tool of PDE-Discovery (STRidge screening + support enumeration; CoD paper Sec. 3.2.2,
as in agentscope-ai/Trinity-RFT ``connect_the_dots/pde_discovery/regression.py``).

Given samples ``(u_i, y_i)`` and a term list, with ``Theta`` the library columns ``phi_k(u_i)``:

1. columns with non-finite values or norm <= 1e-12 are dropped; the rest are scaled to unit norm;
2. screening: up to 8 rounds of ridge ``(A^T A + alpha I)^-1 A^T y`` on the active scaled columns, dropping
   terms whose unscaled |coefficient| < threshold;
3. candidate supports: dictionary mode enumerates every subset of 1..max_terms terms plus the screened
   support; candidate mode uses exactly the supports of the given equations;
4. each support is refit without scaling (ridge 1e-8), terms with |c| < threshold are removed and the rest
   refit until none is removed; coefficients are rounded to 3 decimals;
5. score = max_i |y_i - Theta c|; candidates are ranked by score (distinct supports only).

Reported diagnostics: the condition number of the scaled library restricted to the best support and of the
whole chosen library (both capped at 1e12), the condition penalty ``max(0, log10 kappa - log10
kappa_threshold)``, the closest different-support alternative and the relative margin
``(alt_err - best_err) / best_err``.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from codjax.envs.pde import dictionary

KAPPA_CAP = 1e12
SCREEN_ROUNDS = 8
REFIT_RIDGE = 1e-8


@dataclasses.dataclass(frozen=True)
class Candidate:
  coefs: np.ndarray  # (15,), rounded to 3 decimals
  max_error: float

  @property
  def support(self) -> tuple[int, ...]:
    return tuple(int(k) for k in np.flatnonzero(self.coefs))


@dataclasses.dataclass(frozen=True)
class RegressionResult:
  ranked: tuple[Candidate, ...]  # distinct supports, best first
  kappa_selected: float
  kappa_full: float
  kappa_penalty: float
  residuals: np.ndarray  # y - prediction of the best candidate
  predictions: np.ndarray
  dropped_terms: tuple[int, ...]

  @property
  def best(self) -> Candidate:
    return self.ranked[0]

  @property
  def alternative(self) -> Candidate | None:
    return self.ranked[1] if len(self.ranked) > 1 else None

  @property
  def margin(self) -> float | None:
    alt = self.alternative
    if alt is None:
      return None
    return (alt.max_error - self.best.max_error) / max(self.best.max_error, 1e-12)

  def matches(self, coefs: np.ndarray, rel: float = 1e-9) -> Candidate | None:
    """The scored candidate equal to ``coefs`` (same support, coefficients within ``rel``), if any."""
    for c in self.ranked:
      if np.array_equal(c.coefs != 0, coefs != 0) and np.all(
          np.abs(c.coefs - coefs) <= rel * np.maximum(np.abs(c.coefs), 1e-12)):
        return c
    return None


def _cond(A: np.ndarray) -> float:
  if A.size == 0:
    return 1.0
  s = np.linalg.svd(A, compute_uv=False)
  if s.size < A.shape[1] or s[-1] <= s[0] / KAPPA_CAP:
    return KAPPA_CAP
  return float(min(KAPPA_CAP, s[0] / s[-1]))


def sparse_regression(u: np.ndarray, y: np.ndarray, terms: list[int], *, alpha: float = 0.05,
                      threshold: float = 0.05, max_terms: int = 2,
                      candidate_supports: list[tuple[int, ...]] | None = None,
                      kappa_threshold: float = 100.0) -> RegressionResult:
  """Runs the tool (see module docstring). ``terms`` are dictionary indices; samples must be non-empty."""
  u = np.asarray(u, float)
  y = np.asarray(y, float)
  theta_all = dictionary.library(u, terms)
  norms = np.linalg.norm(theta_all, axis=0)
  ok = np.all(np.isfinite(theta_all), axis=0) & (norms > 1e-12)
  cols = [k for k, good in zip(terms, ok) if good]
  dropped = tuple(k for k, good in zip(terms, ok) if not good)
  theta = theta_all[:, ok]
  norms = norms[ok]
  pos = {k: i for i, k in enumerate(cols)}
  scaled = theta / norms if cols else theta

  # screening (STRidge-like) on scaled columns
  active = list(range(len(cols)))
  for _ in range(SCREEN_ROUNDS):
    if not active:
      break
    A = scaled[:, active]
    w = np.linalg.solve(A.T @ A + alpha * np.eye(len(active)), A.T @ y)
    keep = [i for i, wi in zip(active, w / norms[active]) if abs(wi) >= threshold]
    if len(keep) == len(active):
      break
    active = keep
  screened = tuple(cols[i] for i in active)

  if candidate_supports is None:
    supports = [s for r in range(1, min(max_terms, len(cols)) + 1) for s in itertools.combinations(cols, r)]
    if screened and screened not in supports:
      supports.append(screened)
  else:
    supports = [tuple(k for k in s if k in pos) for s in candidate_supports]

  gram = theta.T @ theta
  rhs = theta.T @ y
  best_by_support: dict[tuple[int, ...], Candidate] = {}

  def record(idx: list[int], c: np.ndarray) -> None:
    coefs = np.zeros(dictionary.NUM_TERMS)
    if idx:
      coefs[[cols[i] for i in idx]] = np.round(c, 3)
      coefs[np.abs(coefs) < 5e-4] = 0.0
    pred = theta[:, idx] @ coefs[[cols[i] for i in idx]] if idx else np.zeros_like(y)
    cand = Candidate(coefs, float(np.max(np.abs(y - pred))))
    key = cand.support
    if key not in best_by_support or cand.max_error < best_by_support[key].max_error:
      best_by_support[key] = cand

  def refit(idx: list[int]) -> None:
    while idx:
      c = np.linalg.solve(gram[np.ix_(idx, idx)] + REFIT_RIDGE * np.eye(len(idx)), rhs[idx])
      small = np.abs(c) < threshold
      if not small.any():
        break
      idx = [i for i, s in zip(idx, small) if not s]
    record(idx, c if idx else np.zeros(0))

  by_size: dict[int, list[list[int]]] = {}
  for sup in supports:
    by_size.setdefault(len(sup), []).append([pos[k] for k in sup])
  for r, group in by_size.items():
    if r == 0:
      record([], np.zeros(0))
      continue
    combos = np.array(group)  # batched first refit of every support of this size
    G = gram[combos[:, :, None], combos[:, None, :]] + REFIT_RIDGE * np.eye(r)
    C = np.linalg.solve(G, rhs[combos][..., None])[..., 0]
    for idx, c in zip(group, C):
      if np.all(np.abs(c) >= threshold):
        record(idx, c)
      else:
        refit(idx)
  ranked = tuple(sorted(best_by_support.values(), key=lambda c: (c.max_error, len(c.support))))
  best = ranked[0]
  sel = [pos[k] for k in best.support]
  kappa_sel = _cond(scaled[:, sel]) if sel else 1.0
  kappa_full = _cond(scaled)
  pred = theta[:, sel] @ best.coefs[list(best.support)] if sel else np.zeros_like(y)
  return RegressionResult(ranked, kappa_sel, kappa_full,
                          max(0.0, float(np.log10(kappa_sel) - np.log10(kappa_threshold))), y - pred, pred,
                          dropped)
