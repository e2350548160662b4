"""Evolved lineages as the trainer's task source (``config.data.lineages``; Environment Evolution paper,
arXiv 2609.04128, Sec. 4.2 and Sec. 5.4; docs/methods/environment_evolution.md).

``LineageTaskSource`` stands where ``codjax.workflows.packs.PackSampler`` stands: ``next_packs(n)`` returns the
packs of one update, ``state()`` / ``restore(state)`` checkpoint it. Each update it asks the scheduler
(``codjax.evolve.scheduler``: ``el`` or ``random``) for ``n`` environments and turns each into a pack: the
environment's family (``Parameterisation.family``) with its instance seed as the pack seed, S task seeds
``derive_seed(seed, j)`` (a CoD pack of S tasks sharing the instance; ORBIT's T episodes of it). The trainer
rolls every pack out ``data.repeats`` = B times and hands the trajectories to ``observe``, which computes each
pack's pass rate p = (1/B) sum_b r_b and applies the scheduler's update (Eq. 2).

The per-rollout reward r_b (the paper assumes a binary one) is, by workflow (codjax's choice):

* CoD: the fraction of the pack's tasks solved (task reward > 0); with S = 1 the binary success itself;
* ORBIT: the success of episode T, the last of the pack's T episodes (the in-context learner passes an
  environment when it reliably solves it after exploring it), so tau = 6/8 with
  B = 8 asks for 7 of 8 groups ending in a win; with ORBIT's K = 4 groups use tau = 3/4 -> only 4/4 advances;
* EvoHarness: the fraction of the pack's tasks won.

``observe`` also reports what the paper's Figure 5 (Sec. 5.4) plots: the fraction of *partially solved*
groups (some but not all rollouts succeed: 1-7 of 8, the groups with a GRPO signal), the mean pass rate, and
the scheduler's state (mean active generation, live / exhausted / frozen lineages).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from codjax.agents.cod import Pack
from codjax.envs.base import derive_seed
from codjax.evolve import registry
from codjax.evolve.lineage import Lineage
from codjax.evolve.scheduler import Slot, make_scheduler


def rollout_success(traj) -> float:
  """r_b of one trajectory (module docstring)."""
  if hasattr(traj, "games"):  # ORBIT
    t = traj.pack.size
    return float(len(traj.games) >= t and bool(traj.games[t - 1].success))
  if hasattr(traj, "runs"):  # EvoHarness
    return float(traj.success_count) / max(1, len(traj.runs))
  rewards = np.asarray(traj.task_rewards, np.float64)  # CoD
  return float(np.mean(rewards > 0.0)) if rewards.size else 0.0


class LineageTaskSource:
  """Packs from the scheduler's active environments (module docstring)."""

  def __init__(self, lineages: Sequence[Lineage], scheduler: str = "el", pack_size: int = 1, tau: float = 6 / 8,
               stuck_limit: int = 0, seed: int = 0):
    if not lineages:
      raise ValueError("the lineage task source needs at least one lineage")
    self.lineages = list(lineages)
    self.pack_size = int(pack_size)
    self.scheduler = make_scheduler(scheduler, [[len(gen) for gen in lin.generations] for lin in self.lineages],
                                    tau=tau, stuck_limit=stuck_limit, seed=seed)
    self._families = {}
    self.k = 0
    self._pending: dict[int, Slot] = {}

  def _family(self, slot: Slot):
    node = self.lineages[slot.lineage].generations[slot.generation][slot.index]
    if node.id not in self._families:
      param = registry.get(node.point.family)  # one shared instance per name
      self._families[node.id] = (param, param.family(node.point), node)
    return self._families[node.id]

  def next_packs(self, n: int) -> list[Pack]:
    slots = self.scheduler.select(n)
    packs = []
    self._pending = {}
    for slot in slots:
      param, family, node = self._family(slot)
      seeds = tuple(derive_seed(node.point.seed, j) for j in range(self.pack_size))
      packs.append(Pack(param.env_name, family, node.point.seed, seeds, self.k))
      self._pending[self.k] = slot
      self.k += 1
    return packs

  def observe(self, packs: Sequence[Pack], trajs: Sequence) -> dict:
    """Pass rate per pack -> the scheduler's update; the Figure-5 metrics of this update."""
    by_pack: dict[int, list[float]] = {}
    for t in trajs:
      by_pack.setdefault(t.pack.pack_id, []).append(rollout_success(t))
    slots, rates, partial = [], [], []
    for p in packs:
      rs = by_pack.get(p.pack_id)
      if p.pack_id not in self._pending or not rs:
        raise ValueError(f"no pending environment or no rollouts for pack {p.pack_id}")
      slots.append(self._pending[p.pack_id])
      rates.append(float(np.mean(rs)))
      partial.append(0.0 < float(np.mean(rs)) < 1.0)
    moved = self.scheduler.update(slots, rates)
    gens = [s.generation for s in slots]
    m = {"sched/pass_rate": float(np.mean(rates)), "sched/partial_groups": float(np.mean(partial)),
         "sched/batch_generation": float(np.mean(gens)), "sched/advanced": float(moved["advanced"])}
    m.update(self.scheduler.metrics())
    return m

  def state(self) -> dict:
    return {"k": self.k, "scheduler": self.scheduler.state_dict()}

  def restore(self, state: dict) -> None:
    if "scheduler" not in state:
      raise ValueError("checkpoint holds a pack-sampler state, but this run trains on lineages")
    self.k = int(state["k"])
    self.scheduler.load_state_dict(state["scheduler"])
