"""Lineages as the trainer's task source: packs of the active environments, pass rates into Eq. 2."""

from types import SimpleNamespace

import pytest

from codjax.evolve.evolution import EvolveSettings, grow
from codjax.evolve.task_source import LineageTaskSource, rollout_success


def _cod(pack, rewards):
  return SimpleNamespace(pack=pack, task_rewards=rewards)


def _orbit(pack, wins):
  return SimpleNamespace(pack=pack, games=[SimpleNamespace(success=w) for w in wins])


def test_rollout_success_per_workflow():
  pack = SimpleNamespace(size=3, pack_id=0)
  assert rollout_success(_cod(pack, [1.0, 0.0, 0.4])) == pytest.approx(2 / 3)
  assert rollout_success(_orbit(pack, [False, False, True])) == 1.0  # episode T won
  assert rollout_success(_orbit(pack, [True, False, False])) == 0.0  # won early, lost episode T
  assert rollout_success(_orbit(pack, [False, True])) == 0.0  # episode T never reached
  assert rollout_success(SimpleNamespace(pack=pack, runs=[1, 2, 3, 4], success_count=3)) == 0.75


@pytest.fixture
def lineages(tmp_path, maze_param):
  lins = [grow(maze_param, str(tmp_path), f"L{i}", maze_param.seed_point(i, 100 + i),
               EvolveSettings(generations=2, width=2, repair_budget=2, seed=i)) for i in range(2)]
  assert all(lin is not None and len(lin.generations) == 3 for lin in lins)
  return lins


def test_packs_follow_the_el_scheduler_and_state_restores(lineages):
  src = LineageTaskSource(lineages, "el", pack_size=3, tau=0.75, seed=0)
  packs = src.next_packs(2)
  assert sorted(p.pack_id for p in packs) == [0, 1]
  for p in packs:
    node = lineages[src._pending[p.pack_id].lineage].generations[0][0]
    assert p.pack_seed == node.point.seed and p.size == 3 and p.env_name == "maze"
    assert len(p.family.sample_pack(p.pack_seed, 3)) == 3
  # lineage of pack 0 passes (8/8 of its B=8 rollouts), the other fails (6/8 = tau: stays)
  trajs = [_cod(packs[0], [1.0] * 3) for _ in range(8)] + [_cod(packs[1], [1.0] * 3)] * 6 + \
          [_cod(packs[1], [0.0] * 3)] * 2
  m = src.observe(packs, trajs)
  won = src._pending[0].lineage
  assert (src.scheduler.g[won], src.scheduler.k[won]) == (1, 0)
  assert (src.scheduler.g[1 - won], src.scheduler.k[1 - won]) == (0, 0)
  assert m["sched/pass_rate"] == pytest.approx((1.0 + 0.75) / 2) and m["sched/partial_groups"] == 0.5
  state = src.state()
  other = LineageTaskSource(lineages, "el", pack_size=3, tau=0.75, seed=0)
  other.restore(state)
  assert [(p.pack_seed, p.pack_id) for p in other.next_packs(2)] == [(p.pack_seed, p.pack_id) for p in
                                                                     src.next_packs(2)]
  with pytest.raises(ValueError, match="pack-sampler state"):
    other.restore({"k": 3, "cursors": [0]})


def test_observe_rejects_trajectories_of_unknown_packs(lineages):
  src = LineageTaskSource(lineages, "random", pack_size=1, seed=0)
  packs = src.next_packs(1)
  stray = SimpleNamespace(size=1, pack_id=99)
  with pytest.raises(ValueError, match="pack 99"):
    src.observe([stray], [_cod(stray, [1.0])])
  assert src.observe(packs, [_cod(packs[0], [1.0])])["sched/pass_rate"] == 1.0
