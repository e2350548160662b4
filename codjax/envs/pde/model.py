"""Hidden model of a PDE-Discovery pack: reaction coefficients and initial conditions (CoD paper Sec. 3.2.2;
the sampling of agentscope-ai/Trinity-RFT ``connect_the_dots/pde_discovery/ground_truth.py`` and ``pde_numeric.py``).

With ``env_seed`` the pack seed (mod 2**64):

* template and coefficients: ``default_rng(SeedSequence([env_seed, 0]))`` picks a template uniformly among
  those with ``min..max`` terms (or the fixed ``template_index``), magnitudes ``|c| ~ U(0.5, 2.0)`` rounded to
  2 decimals with the template's signs; a candidate is rejected (up to 128 attempts, else the last one is
  kept) if any trajectory of the pack, simulated on the coarse grid, becomes non-finite or reaches
  ``|u| >= state_abs_limit``;
* initial amplitudes: ``[0, A_up]`` is split into S equal bands, one uniform draw per band
  (``SeedSequence([env_seed, 1])``), then shuffled; ``A_up`` is calibrated once per family by bisection on
  ``[0, limit]`` (resolution limit/64): ``A sin(pi x)`` must stay stable for every coefficient-box vertex
  (``|c| in {0.5, 2}``, template signs) of every eligible template;
* shape of trajectory j (``SeedSequence([env_seed, 2, j])``): ``M ~ U{1, 2}`` modes,
  ``m(x) = sum_{k<=M} N(0,1) sin(k pi x)`` scaled to max |m| = 1, shape ``sin(pi x) (m - min m)`` scaled to max
  1; ``u0 = amplitude * shape`` with zero endpoints. The task at pack position k (1-based) observes trajectory
  k - 1, except that a repeated task seed (Ralph packing) keeps its first position's trajectory (env.py).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np

from codjax.envs.pde import dictionary, solver
from codjax.envs.pde.families import load_family

COEF_MIN, COEF_MAX = 0.5, 2.0


@dataclasses.dataclass(frozen=True)
class PdeConfig:
  family: str = "train"
  min_reaction_terms: int = 1
  max_reaction_terms: int = 2
  ground_truth_template_index: int | None = None
  max_steps: int = 6
  point_budget: int = 6
  noise_level: float = 0.002
  kappa_threshold: float = 100.0
  state_abs_limit: float = 3.0
  stability_attempts: int = 128
  mode_count_min: int = 1
  mode_count_max: int = 2

  def validate(self) -> None:
    load_family(self.family)
    for name in ("min_reaction_terms", "max_reaction_terms", "max_steps", "point_budget", "stability_attempts",
                 "mode_count_min", "mode_count_max"):
      v = getattr(self, name)
      if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    if self.min_reaction_terms > self.max_reaction_terms:
      raise ValueError("min_reaction_terms must not exceed max_reaction_terms")
    if self.mode_count_min > self.mode_count_max:
      raise ValueError("mode_count_min must not exceed mode_count_max")
    for name in ("noise_level", "kappa_threshold", "state_abs_limit"):
      v = getattr(self, name)
      if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    if self.state_abs_limit <= 0 or self.kappa_threshold <= 0:
      raise ValueError("state_abs_limit and kappa_threshold must be > 0")
    if not eligible_templates(self):
      raise ValueError(f"no template of family {self.family!r} has {self.min_reaction_terms}.."
                       f"{self.max_reaction_terms} terms")
    idx = self.ground_truth_template_index
    if idx is not None:
      n = len(load_family(self.family))
      if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool) or not 0 <= idx < n:
        raise ValueError(f"ground_truth_template_index must be an int in [0, {n}), got {idx!r}")


def eligible_templates(cfg: PdeConfig) -> list[int]:
  fam = load_family(cfg.family)
  return [i for i, t in enumerate(fam) if cfg.min_reaction_terms <= len(t.terms) <= cfg.max_reaction_terms]


@functools.lru_cache(maxsize=64)
def amplitude_upper_bound(family: str, min_terms: int, max_terms: int, limit: float) -> float:
  """Largest ``A`` (on a limit/64 grid) keeping ``A sin(pi x)`` stable at every coefficient-box vertex."""
  fam = load_family(family)
  cols = []
  for t in fam:
    if not min_terms <= len(t.terms) <= max_terms:
      continue
    for mags in itertools.product((COEF_MIN, COEF_MAX), repeat=len(t.terms)):
      c = np.zeros(dictionary.NUM_TERMS)
      c[list(t.terms)] = np.array(t.signs) * np.array(mags)
      cols.append(c)
  coefs = np.stack(cols, axis=1)
  shape = np.sin(np.pi * solver.COARSE.x)
  lo, hi, res = 0.0, limit, limit / 64

  def stable(a: float) -> bool:
    u0 = np.repeat((a * shape)[:, None], coefs.shape[1], axis=1)
    return solver.simulate(u0, coefs, solver.COARSE, limit, keep=False)[1]

  if stable(limit - res):  # stability is monotone in A, so bisection would end at the top grid point
    return limit - res
  while hi - lo > res + 1e-12:
    mid = 0.5 * (lo + hi)
    lo, hi = (mid, hi) if stable(mid) else (lo, mid)
  return lo


@dataclasses.dataclass(frozen=True)
class Hidden:
  coefs: np.ndarray  # (15,) true reaction coefficients
  template_index: int
  amplitudes: np.ndarray  # (S,)
  mode_weights: tuple[np.ndarray, ...]  # per trajectory, the N(0,1) weights of sin(k pi x)

  def initial_condition(self, j: int, x: np.ndarray) -> np.ndarray:
    w = self.mode_weights[j]
    modes = sum(wk * np.sin((k + 1) * np.pi * x) for k, wk in enumerate(w))
    modes = modes / np.max(np.abs(modes))
    shape = np.sin(np.pi * x) * (modes - modes.min())
    shape = shape / shape.max()
    u0 = self.amplitudes[j] * shape
    u0[0] = u0[-1] = 0.0
    return u0


def _stable(coefs: np.ndarray, hidden_ics: np.ndarray, limit: float) -> bool:
  _, ok = solver.simulate(hidden_ics, coefs, solver.COARSE, limit, keep=False)
  return ok


@functools.lru_cache(maxsize=256)
def sample_hidden(cfg: PdeConfig, env_seed: int, num_traj: int) -> Hidden:
  """The pack's hidden model (pure function of its arguments; cached, treated as immutable)."""
  env_seed = int(env_seed) % 2**64
  a_up = amplitude_upper_bound(cfg.family, cfg.min_reaction_terms, cfg.max_reaction_terms, cfg.state_abs_limit)
  rng_amp = np.random.default_rng(np.random.SeedSequence([env_seed, 1]))
  edges = np.linspace(0.0, a_up, num_traj + 1)
  amps = rng_amp.uniform(edges[:-1], edges[1:])
  rng_amp.shuffle(amps)
  weights = []
  for j in range(num_traj):
    rj = np.random.default_rng(np.random.SeedSequence([env_seed, 2, j]))
    m = int(rj.integers(cfg.mode_count_min, cfg.mode_count_max + 1))
    weights.append(rj.standard_normal(m))
  proto = Hidden(np.zeros(dictionary.NUM_TERMS), -1, amps, tuple(weights))
  ics = np.stack([proto.initial_condition(j, solver.COARSE.x) for j in range(num_traj)], axis=1)
  fam = load_family(cfg.family)
  eligible = eligible_templates(cfg)
  rng = np.random.default_rng(np.random.SeedSequence([env_seed, 0]))
  coefs, idx = None, -1
  for _ in range(cfg.stability_attempts):
    idx = (cfg.ground_truth_template_index if cfg.ground_truth_template_index is not None
           else eligible[int(rng.integers(len(eligible)))])
    t = fam[idx]
    mags = np.round(rng.uniform(COEF_MIN, COEF_MAX, size=len(t.terms)), 2)
    signs = np.array([s if s != 0 else rng.choice((-1, 1)) for s in t.signs])
    coefs = np.zeros(dictionary.NUM_TERMS)
    coefs[list(t.terms)] = signs * mags
    if _stable(coefs, ics, cfg.state_abs_limit):
      break
  for arr in (coefs, amps, *weights):  # shared by every sample_pack call of this pack: read-only
    arr.setflags(write=False)
  return dataclasses.replace(proto, coefs=coefs, template_index=int(idx))


def dense_trajectory(hidden: Hidden, j: int, limit: float) -> solver.LazyTrajectory:
  """Trajectory j on the dense grid, integrated lazily as samples need it."""
  return solver.LazyTrajectory(hidden.initial_condition(j, solver.DENSE.x), hidden.coefs, solver.DENSE, limit)
