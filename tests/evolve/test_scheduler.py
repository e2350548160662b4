"""The Evolution-Lineage scheduler's transitions are exactly Eq. 2 (Environment Evolution paper,
arXiv 2609.04128, Sec. 4.2), and its state restores."""

import json

import numpy as np
import pytest

from codjax.evolve.scheduler import ELScheduler, RandomScheduler, Slot, advance, make_scheduler


def _at(s: ELScheduler, i: int) -> tuple[int, int, int]:
  return int(s.g[i]), int(s.k[i]), int(s.status[i])


def test_eq2_on_a_hand_built_pass_rate_sequence_with_the_six_of_eight_boundary():
  # lineage 0: generations of 1, 2 and 1 environments
  s = ELScheduler([[1, 2, 1]], tau=6 / 8)
  steps = [  # (pass rate of the active environment, expected (g, k, status) afterwards)
      (6 / 8, (0, 0, 0)),   # 6/8 is not > 6/8: stay
      (0.0, (0, 0, 0)),
      (7 / 8, (1, 0, 0)),   # 7/8 > 6/8 and k is the last of generation 0: next generation
      (7 / 8, (1, 1, 0)),   # not the last of generation 1: next environment of the same generation
      (5 / 8, (1, 1, 0)),
      (6 / 8, (1, 1, 0)),
      (8 / 8, (2, 0, 0)),
      (7 / 8, (2, 0, 1)),   # the last environment passed: exhausted (stays pointed at it)
  ]
  for p, want in steps:
    slot = s.select(1)[0] if s.status[0] == 0 else None
    assert slot == Slot(0, s.g[0], s.k[0])
    s.update([slot], [p])
    assert _at(s, 0) == want, (p, want)
  with pytest.raises(ValueError, match="exhausted or frozen"):
    s.select(1)


def test_advance_is_vectorised_eq2():
  g = np.array([0, 0, 1, 2]); k = np.array([0, 1, 0, 0]); n = np.array([2, 2, 1, 3])
  p = np.array([0.875, 0.875, 0.75, 1.0])
  g2, k2, up = advance(g, k, n, p, 0.75)
  assert g2.tolist() == [0, 1, 1, 2] and k2.tolist() == [1, 0, 0, 1] and up.tolist() == [True, True, False, True]


def test_stuck_lineages_freeze_and_leave_the_pool():
  s = ELScheduler([[1, 1], [1, 1]], tau=0.75, stuck_limit=3)
  for _ in range(3):
    s.update([Slot(0, 0, 0), Slot(1, 0, 0)], [0.5, 1.0 if s.g[1] == 0 else 0.0])
  assert _at(s, 0) == (0, 0, 2)  # 3 updates without advancing: frozen
  assert s.status[1] == 0 and s.g[1] == 1
  assert {sl.lineage for sl in s.select(4)} == {1}  # only the live lineage is drawn


def test_a_stale_slot_is_ignored_and_only_live_lineages_are_drawn_without_replacement():
  s = ELScheduler([[1, 1]] * 5, tau=0.75, seed=3)
  slots = s.select(5)
  assert sorted(sl.lineage for sl in slots) == [0, 1, 2, 3, 4]
  s.update([Slot(2, 1, 0)], [1.0])  # lineage 2 is not at generation 1: nothing moves
  assert s.g.tolist() == [0] * 5


def test_state_round_trips_through_json_and_continues_identically():
  a = ELScheduler([[1, 2, 1], [2, 1], [1]], tau=0.75, stuck_limit=4, seed=7)
  rates = [1.0, 0.25, 0.875, 0.0, 1.0, 0.5]
  for u in range(3):
    sl = a.select(2)
    a.update(sl, rates[2 * u:2 * u + 2])
  b = ELScheduler([[1, 2, 1], [2, 1], [1]], tau=0.75, stuck_limit=4, seed=7)
  b.load_state_dict(json.loads(json.dumps(a.state_dict())))
  for u in range(3):
    sa, sb = a.select(2), b.select(2)
    assert sa == sb
    a.update(sa, [0.9, 0.1]); b.update(sb, [0.9, 0.1])
  assert a.state_dict() == b.state_dict()


def test_bad_state_and_bad_settings_are_clear_errors():
  s = ELScheduler([[1, 1]], tau=0.75)
  with pytest.raises(ValueError, match="outside its environments"):
    s.load_state_dict({"kind": "el", "g": [5], "k": [0], "status": [0], "stuck": [0], "updates": 1})
  with pytest.raises(ValueError, match="for 2 lineages"):
    s.load_state_dict({"kind": "el", "g": [0, 0], "k": [0, 0], "status": [0, 0], "stuck": [0, 0], "updates": 1})
  with pytest.raises(ValueError, match="cannot restore"):
    s.load_state_dict(RandomScheduler([[1]]).state_dict())
  with pytest.raises(ValueError, match="tau"):
    ELScheduler([[1]], tau=1.0)
  with pytest.raises(ValueError, match="scheduler must be"):
    make_scheduler("fifo", [[1]])


def test_random_scheduling_draws_over_every_environment_and_never_moves():
  s = RandomScheduler([[1, 2], [1]], seed=0)
  drawn = set()
  for _ in range(50):
    sl = s.select(4)
    s.update(sl, [1.0] * 4)
    drawn |= {(x.lineage, x.generation, x.index) for x in sl}
  assert drawn == {(0, 0, 0), (0, 1, 0), (0, 1, 1), (1, 0, 0)}
