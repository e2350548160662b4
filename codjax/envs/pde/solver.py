"""Semi-implicit solver of ``u_t = u_xx + f(u)`` and the regression target (CoD paper Sec. 3.2.2; the scheme
of agentscope-ai/Trinity-RFT ``connect_the_dots/pde_discovery/pde_numeric.py``).

Domain x in [0, 1], t in [0, 1], Dirichlet ``u(0) = u(1) = 0``; uniform grid ``x_i = i dx``,
``t_n = n dt`` with ``dx = 1/(nx-1)``, ``dt = 1/(nt-1)``. With ``D2`` the standard second difference on the
interior nodes, one step is

    (I - dt D2) u^{n+1} = clip(u^n + dt f(u^n), -L, L),    then  u^{n+1} <- clip(u^{n+1}, -L, L)

(diffusion implicit, reaction explicit; ``Stepper``). ``I - dt D2`` is a constant symmetric positive-definite tridiagonal
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


class Stepper:
  """One semi-implicit step for a batch of interior profiles ``(nx-2, B)`` or ``(nx-2,)``.

  ``coefs``: ``(15,)`` shared, or ``(15, B)`` per trajectory (each term is then evaluated only on the
  columns that use it). The factorization and the active terms are prepared once.
  """

  def __init__(self, coefs: np.ndarray, grid: Grid, limit: float = 3.0):
    coefs = np.asarray(coefs, dtype=float)
    if coefs.ndim == 2:
      self._terms = [(k, cols, coefs[k, cols]) for k in range(coefs.shape[0])
                     if (cols := np.flatnonzero(coefs[k])).size]
    else:
      self._terms = [(k, None, coefs[k]) for k in np.flatnonzero(coefs)]
    self._d, self._e = _factor(grid)
    self._dt = grid.dt
    self._limit = limit

  def advance(self, inner: np.ndarray) -> tuple[np.ndarray, bool]:
    """``(u^{n+1}, ok)``: ok is False when the explicit update ``u^n + dt f(u^n)`` reached the limit or is
    not finite (checked before clipping: after the clip the diffusion solve alone cannot reach the limit)."""
    rhs = inner.copy()
    for k, cols, w in self._terms:
      if cols is None:
        rhs += (self._dt * w) * dictionary.term_values(inner, k)
      else:
        rhs[:, cols] += (self._dt * w) * dictionary.term_values(inner[:, cols], k)
    ok = bool(np.max(np.abs(rhs), initial=0.0) < self._limit)  # NaN compares False
    np.clip(rhs, -self._limit, self._limit, out=rhs)
    new, _ = lapack.dpttrs(self._d, self._e, rhs)
    return np.clip(new, -self._limit, self._limit, out=new), ok


def simulate(u0: np.ndarray, coefs: np.ndarray, grid: Grid, limit: float = 3.0,
             keep: bool = True) -> tuple[np.ndarray | None, bool]:
  """Integrates a batch. ``u0``: ``(nx, B)`` initial profiles; ``coefs``: ``(15,)`` or ``(15, B)``.

  Returns ``(history, ok)``: the ``(nt, nx, B)`` history when ``keep`` (else None), and whether the state
  stayed finite with ``|u| < limit`` (``Stepper.advance``). With ``keep=False`` the loop stops early once the
  check fails.
  """
  stepper = Stepper(coefs, grid, limit)
  u = np.array(u0, dtype=float)
  inner = u[1:-1].copy()
  hist = np.zeros((grid.nt,) + u.shape) if keep else None
  if keep:
    hist[0, 1:-1] = inner
  ok = bool(np.max(np.abs(inner), initial=0.0) < limit)
  for n in range(1, grid.nt):
    inner, step_ok = stepper.advance(inner)
    if ok and not step_ok:
      ok = False
      if not keep:
        return None, False
    if keep:
      hist[n, 1:-1] = inner
  return hist, ok


class LazyTrajectory:
  """One trajectory, integrated on demand and kept: ``u`` and the residual target ``y`` (float32 rows).

  ``sample`` integrates only as far in time as the requested points need, so early-time samples stay cheap.
  ``y^n = (u^{n+1} - u^n)/dt - D2 u^{n+1}`` on interior nodes (row n exists once row n+1 of u does),
  ``y = f(u)`` on the last row and ``0 = f(0)`` on the boundary.
  """

  def __init__(self, u0: np.ndarray, coefs: np.ndarray, grid: Grid, limit: float = 3.0):
    self.grid = grid
    self._coefs = np.asarray(coefs, dtype=float)
    self._stepper = Stepper(self._coefs, grid, limit)
    self.u = np.zeros((grid.nt, grid.nx), np.float32)
    self.y = np.zeros((grid.nt, grid.nx), np.float32)
    self._inner = np.array(u0, dtype=float)[1:-1].copy()
    self.u[0, 1:-1] = self._inner
    self.rows = 0  # u rows 0..rows are integrated
    self._full = np.zeros(grid.nx)

  def ensure(self, n: int) -> None:
    """Makes rows 0..n of u and y valid."""
    last = self.grid.nt - 1
    while self.rows < min(n + 1, last):
      new, _ = self._stepper.advance(self._inner)
      self._full[1:-1] = new
      self.y[self.rows, 1:-1] = (new - self._inner) / self.grid.dt - _d2(self._full, self.grid.dx)
      self.rows += 1
      self.u[self.rows, 1:-1] = new
      self._inner = new
    if n >= last:
      self._full[1:-1] = self._inner
      self.y[last] = dictionary.reaction(self._full, self._coefs)

  def sample(self, x: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bilinear ``(u, y)`` at points ``(x, t)`` in [0, 1]^2."""
    top = int(min(np.floor(float(np.max(t)) / self.grid.dt), self.grid.nt - 2)) + 1
    self.ensure(top)
    return bilinear(self.u, self.grid, x, t), bilinear(self.y, self.grid, x, t)


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
