"""Which evolved environment each lineage trains on: the Evolution-Lineage scheduler and its random baseline.

**EL scheduler** (Environment Evolution paper, arXiv 2609.04128, Sec. 4.2, Eq. 2;
docs/methods/environment_evolution.md). Lineage i keeps an active index (g_i, k_i), starting at its first
environment. At update u the active environment is rolled out B times (the GRPO group)
and p_u = (1/B) sum_b r_{u,b} is its pass rate. Then

    (g, k) <- (g, k)          if p_u <= tau
              (g, k + 1)      if p_u >  tau and k + 1 < N_{i,g}
              (g + 1, 0)      if p_u >  tau and k + 1 = N_{i,g}                                    (Eq. 2)

with tau = 6/8 (with B = 8: advance only when at least 7 of 8 rollouts succeed). Indices here are 0-based and
generation 0 is the seed environment. Left open by the paper, codjax's choice: a lineage whose last environment
is passed is **exhausted**; one that stays ``stuck_limit`` consecutive updates without advancing is
**frozen** (0: never); both leave the pool. Each update draws ``n`` lineages uniformly without replacement
among the live ones (with replacement only when fewer than ``n`` are live), each contributing its active
environment; no live lineage left is an error with a clear message. The transition is computed for all
observed lineages at once with ``np.where`` (the rule above, nothing else).

**Random scheduler** (the paper's baseline, Sec. 4.2 and Sec. 5.4, Figure 5): each update draws ``n``
environments uniformly over every environment of every lineage (with replacement); the pass rates are
recorded, nothing moves.

Both are deterministic functions of (seed, update index) and their state (``state_dict`` /
``load_state_dict``, plain JSON) restores a run exactly.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from codjax.envs.base import derive_seed

ACTIVE, EXHAUSTED, FROZEN = 0, 1, 2
STATUS_NAMES = ("active", "exhausted", "frozen")


@dataclasses.dataclass(frozen=True)
class Slot:
  """One scheduled environment: lineage ``lineage``, generation ``generation``, index ``index``."""

  lineage: int
  generation: int
  index: int


def advance(g: np.ndarray, k: np.ndarray, n_in_gen: np.ndarray, pass_rate: np.ndarray,
            tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Eq. 2 for a batch of lineages: the new (g, k) and whether each advanced."""
  up = pass_rate > tau + 1e-12
  last = k + 1 >= n_in_gen
  g_new = np.where(up & last, g + 1, g)
  k_new = np.where(up & ~last, k + 1, np.where(up & last, 0, k))
  return g_new, k_new, up


class ELScheduler:
  """Evolution-Lineage scheduling over lineages of ``sizes[i][g]`` environments (module docstring)."""

  kind = "el"

  def __init__(self, sizes: Sequence[Sequence[int]], tau: float = 6 / 8, stuck_limit: int = 0, seed: int = 0):
    if not sizes or any(not s or any(int(n) < 1 for n in s) for s in sizes):
      raise ValueError("every lineage needs at least one generation of at least one environment")
    if not 0.0 <= float(tau) < 1.0:
      raise ValueError(f"tau must be in [0, 1), got {tau!r}")
    if isinstance(stuck_limit, bool) or not isinstance(stuck_limit, int) or stuck_limit < 0:
      raise ValueError(f"stuck_limit must be an integer >= 0, got {stuck_limit!r}")
    self.sizes = [[int(n) for n in s] for s in sizes]
    self.tau, self.stuck_limit, self.seed = float(tau), stuck_limit, int(seed)
    m = len(self.sizes)
    self.g = np.zeros(m, np.int64)
    self.k = np.zeros(m, np.int64)
    self.status = np.full(m, ACTIVE, np.int64)
    self.stuck = np.zeros(m, np.int64)
    self.updates = 0

  def live(self) -> np.ndarray:
    return np.flatnonzero(self.status == ACTIVE)

  def select(self, n: int) -> list[Slot]:
    """The active environments of ``n`` lineages for the next update (module docstring)."""
    live = self.live()
    if live.size == 0:
      raise ValueError("every lineage is exhausted or frozen: no environment left to train on "
                       "(evolve longer lineages or lower the number of updates)")
    rng = np.random.default_rng(derive_seed(self.seed, 4441, self.updates))
    pick = rng.choice(live, size=n, replace=live.size < n)
    return [Slot(int(i), int(self.g[i]), int(self.k[i])) for i in pick]

  def update(self, slots: Sequence[Slot], pass_rates: Sequence[float]) -> dict:
    """Applies Eq. 2 to the lineages observed at this update; returns counts of what happened."""
    if len(slots) != len(pass_rates):
      raise ValueError("one pass rate per slot")
    seen: dict[int, list[float]] = {}
    for s, p in zip(slots, pass_rates):
      if (int(self.g[s.lineage]), int(self.k[s.lineage])) == (s.generation, s.index):
        seen.setdefault(s.lineage, []).append(float(p))
    idx = np.array(sorted(seen), np.int64)
    out = {"advanced": 0, "exhausted": 0, "frozen": 0}
    self.updates += 1
    if idx.size:
      p = np.array([np.mean(seen[i]) for i in idx], np.float64)  # a lineage drawn twice: one pooled group
      n_in_gen = np.array([self.sizes[i][self.g[i]] for i in idx], np.int64)
      g_new, k_new, up = advance(self.g[idx], self.k[idx], n_in_gen, p, self.tau)
      self.g[idx], self.k[idx] = g_new, k_new
      self.stuck[idx] = np.where(up, 0, self.stuck[idx] + 1)
      done = np.array([self.g[i] >= len(self.sizes[i]) for i in idx], bool)
      self.status[idx[done]] = EXHAUSTED
      self.g[idx[done]] = np.array([len(self.sizes[i]) - 1 for i in idx[done]], np.int64)
      self.k[idx[done]] = np.array([self.sizes[i][-1] - 1 for i in idx[done]], np.int64)
      if self.stuck_limit:
        frz = (self.stuck[idx] >= self.stuck_limit) & (self.status[idx] == ACTIVE)
        self.status[idx[frz]] = FROZEN
        out["frozen"] = int(frz.sum())
      out["advanced"], out["exhausted"] = int(up.sum()), int(done.sum())
    return out

  def metrics(self) -> dict:
    """Where the lineages stand: mean active generation, how many are live, exhausted, frozen."""
    return {"sched/mean_generation": float(self.g.mean()), "sched/live": float((self.status == ACTIVE).sum()),
            "sched/exhausted": float((self.status == EXHAUSTED).sum()),
            "sched/frozen": float((self.status == FROZEN).sum())}

  def state_dict(self) -> dict:
    return {"kind": self.kind, "g": self.g.tolist(), "k": self.k.tolist(), "status": self.status.tolist(),
            "stuck": self.stuck.tolist(), "updates": self.updates}

  def load_state_dict(self, state: dict) -> None:
    if state.get("kind") != self.kind:
      raise ValueError(f"scheduler state of kind {state.get('kind')!r} cannot restore a {self.kind!r} scheduler")
    m = len(self.sizes)
    arrays = {key: np.asarray(state[key], np.int64) for key in ("g", "k", "status", "stuck")}
    if any(a.shape != (m,) for a in arrays.values()):
      raise ValueError(f"scheduler state is for {len(state['g'])} lineages, the run has {m}")
    for i in range(m):
      g, k = int(arrays["g"][i]), int(arrays["k"][i])
      if not (0 <= g < len(self.sizes[i]) and 0 <= k < self.sizes[i][g]):
        raise ValueError(f"scheduler state points lineage {i} at (g={g}, k={k}), outside its environments")
    self.g, self.k, self.status, self.stuck = arrays["g"], arrays["k"], arrays["status"], arrays["stuck"]
    self.updates = int(state["updates"])


class RandomScheduler:
  """Uniform over every environment of every lineage (module docstring)."""

  kind = "random"

  def __init__(self, sizes: Sequence[Sequence[int]], seed: int = 0, **unused):
    del unused
    if not sizes or any(not s or any(int(n) < 1 for n in s) for s in sizes):
      raise ValueError("every lineage needs at least one generation of at least one environment")
    self.sizes = [[int(n) for n in s] for s in sizes]
    self.all = [Slot(i, g, k) for i, s in enumerate(self.sizes) for g, n in enumerate(s) for k in range(n)]
    self.seed = int(seed)
    self.updates = 0

  def select(self, n: int) -> list[Slot]:
    rng = np.random.default_rng(derive_seed(self.seed, 4441, self.updates))
    return [self.all[int(j)] for j in rng.integers(0, len(self.all), size=n)]

  def update(self, slots, pass_rates) -> dict:
    del slots, pass_rates
    self.updates += 1
    return {"advanced": 0, "exhausted": 0, "frozen": 0}

  def metrics(self) -> dict:
    return {}

  def state_dict(self) -> dict:
    return {"kind": self.kind, "updates": self.updates}

  def load_state_dict(self, state: dict) -> None:
    if state.get("kind") != self.kind:
      raise ValueError(f"scheduler state of kind {state.get('kind')!r} cannot restore a {self.kind!r} scheduler")
    self.updates = int(state["updates"])


SCHEDULERS = {"el": ELScheduler, "random": RandomScheduler}


def make_scheduler(kind: str, sizes, tau: float = 6 / 8, stuck_limit: int = 0, seed: int = 0):
  if kind not in SCHEDULERS:
    raise ValueError(f"scheduler must be one of {sorted(SCHEDULERS)}, got {kind!r}")
  if kind == "el":
    return ELScheduler(sizes, tau=tau, stuck_limit=stuck_limit, seed=seed)
  return RandomScheduler(sizes, seed=seed)
