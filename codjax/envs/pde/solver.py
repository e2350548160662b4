"""Semi-implicit solver of ``u_t = u_xx + f(u)`` and the regression target (cod_reference.md 2.4).

Domain x in [0, 1], t in [0, 1], Dirichlet ``u(0) = u(1) = 0``; uniform grid ``x_i = i dx``,
``t_n = n dt`` with ``dx = 1/(nx-1)``, ``dt = 1/(nt-1)``. With ``D2`` the standard second difference on the
interior nodes, one step is

    (I - dt D2) u^{n+1} = clip(u^n + dt f(u^n), -L, L),    then  u^{n+1} <- clip(u^{n+1}, -L, L)

(diffusion implicit, reaction explicit). ``I - dt D2`` is a constant symmetric positive-definite tridiagonal
matrix, so it is factored once per grid (LAPACK ``pttrf`` via ``scipy.linalg.lapack``) and every step is a
banded back-substitution (``pttrs``), batched over trajectories as multiple right-hand sides. The scheme is
first order in time and second order in space. The "scheme-consistent residual" target is
``y^n = (u^{n+1} - u^n)/dt - D2 u^{n+1}`` on interior nodes (equal to ``f(u^n)`` whenever the clip is
inactive) and ``y = f(u)`` on the last time row and the boundary.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from scipy.linalg import lapack

from codjax.envs.pde import dictionary


@dataclasses.dataclass(frozen=True)
class Grid:
  nx: int
  nt: int

  @property
  def dx(self) -> float:
    return 1.0 / (self.nx - 1)

  @property
  def dt(self) -> float:
    return 1.0 / (self.nt - 1)

  @property
  def x(self) -> np.ndarray:
    return np.linspace(0.0, 1.0, self.nx)


DENSE = Grid(257, 2001)
COARSE = Grid(65, 401)


@functools.lru_cache(maxsize=16)
def _factor(grid: Grid) -> tuple[np.ndarray, np.ndarray]:
  """L D L^T factors of ``I - dt D2`` on the interior nodes."""
  r = grid.dt / grid.dx**2
  m = grid.nx - 2
  d, e, info = lapack.dpttrf(np.full(m, 1.0 + 2.0 * r), np.full(m - 1, -r))
  if info != 0:
    raise RuntimeError(f"tridiagonal factorization failed (info={info})")
  return d, e


def _d2(u: np.ndarray, dx: float) -> np.ndarray:
  """Second difference on interior nodes of ``u`` (shape ``(nx, ...)``) with zero Dirichlet values."""
  return (u[:-2] - 2.0 * u[1:-1] + u[2:]) / dx**2


def simulate(u0: np.ndarray, coefs: np.ndarray, grid: Grid, limit: float = 3.0,
             keep: bool = True) -> tuple[np.ndarray | None, bool]:
  """Integrates a batch. ``u0``: ``(nx, B)`` initial profiles; ``coefs``: ``(15,)`` or ``(15, B)``.

  Returns ``(history, ok)``: the ``(nt, nx, B)`` history when ``keep`` (else None), and whether the state
  stayed finite with ``|u| < limit``, checked on the explicit reaction update
  ``u^n + dt f(u^n)`` before it is clipped (after the clip the diffusion solve alone cannot reach the
  limit). With ``keep=False`` the loop stops early once the check fails.
  """
  u = np.array(u0, dtype=float)
  coefs = np.asarray(coefs, dtype=float)
  if coefs.ndim == 2:  # per-trajectory coefficients: evaluate each term only on the columns that use it
    terms = [(k, cols, coefs[k, cols]) for k in range(coefs.shape[0])
             if (cols := np.flatnonzero(coefs[k])).size]
  else:
    terms = [(k, None, coefs[k]) for k in np.flatnonzero(coefs)]
  d, e = _factor(grid)
  hist = np.zeros((grid.nt,) + u.shape) if keep else None
  inner = u[1:-1].copy()
  if keep:
    hist[0, 1:-1] = inner
  ok = bool(np.max(np.abs(inner), initial=0.0) < limit)
  for n in range(1, grid.nt):
    rhs = inner.copy()
    for k, cols, w in terms:
      if cols is None:
        rhs += (grid.dt * w) * dictionary.term_values(inner, k)
      else:
        rhs[:, cols] += (grid.dt * w) * dictionary.term_values(inner[:, cols], k)
    if ok and not np.max(np.abs(rhs)) < limit:  # the explicit update, before clipping; also catches NaN
      ok = False
      if not keep:
        return None, False
    np.clip(rhs, -limit, limit, out=rhs)
    new, _ = lapack.dpttrs(d, e, rhs)
    inner = np.clip(new, -limit, limit, out=new)
    if keep:
      hist[n, 1:-1] = inner
  return hist, ok


def residual_target(hist: np.ndarray, coefs: np.ndarray, grid: Grid) -> np.ndarray:
  """``y^n`` for one trajectory history ``(nt, nx)`` (see module docstring)."""
  y = np.empty_like(hist)
  y[:-1, 1:-1] = (hist[1:, 1:-1] - hist[:-1, 1:-1]) / grid.dt - _d2(hist[1:].T, grid.dx).T
  y[-1] = dictionary.reaction(hist[-1], coefs)
  y[:-1, 0] = dictionary.reaction(hist[:-1, 0], coefs)
  y[:-1, -1] = dictionary.reaction(hist[:-1, -1], coefs)
  return y


def bilinear(field: np.ndarray, grid: Grid, x: np.ndarray, t: np.ndarray) -> np.ndarray:
  """Bilinear interpolation of a ``(nt, nx)`` field at points ``(x, t)`` in [0,1]^2."""
  fx = np.clip(np.asarray(x, float) / grid.dx, 0.0, grid.nx - 1.0)
  ft = np.clip(np.asarray(t, float) / grid.dt, 0.0, grid.nt - 1.0)
  i0 = np.minimum(np.floor(fx).astype(int), grid.nx - 2)
  n0 = np.minimum(np.floor(ft).astype(int), grid.nt - 2)
  wx, wt = fx - i0, ft - n0
  f00, f01 = field[n0, i0], field[n0, i0 + 1]
  f10, f11 = field[n0 + 1, i0], field[n0 + 1, i0 + 1]
  return (1 - wt) * ((1 - wx) * f00 + wx * f01) + wt * ((1 - wx) * f10 + wx * f11)
