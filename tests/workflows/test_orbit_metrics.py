"""ORBIT metrics on hand-computed examples."""

import math

import numpy as np
import pytest

from codjax.workflows import orbit_metrics as om


def _s():
  # three trajectories, T = 3; the last one stopped after two episodes (its third counts as failed)
  return om.success_matrix([[0, 1, 1], [0, 0, 1], [1, 1]], 3)


def test_success_matrix_and_rates():
  s = _s()
  assert s.tolist() == [[0, 1, 1], [0, 0, 1], [1, 1, 0]]
  np.testing.assert_allclose(om.per_episode_success(s), [1 / 3, 2 / 3, 2 / 3])
  assert om.success_count(s) == pytest.approx(5 / 3)
  assert om.any_success_rate(s) == 1.0
  assert om.success_matrix([[1, 1, 1, 1]], 2).tolist() == [[1, 1]]
  with pytest.raises(ValueError):
    om.success_matrix([], 0)


def test_regrets():
  s = _s()
  np.testing.assert_allclose(om.in_context_regret(s), [2 / 3, 1.0, 4 / 3])
  np.testing.assert_allclose(om.in_context_regret(s, j_star=0.8), [0.8 - 1 / 3, 1.6 - 1, 2.4 - 5 / 3])
  np.testing.assert_allclose(om.oracle_regret(s, [0.367, 1.0, 1.0]), [0.367 - 1 / 3, 0.367 - 1 / 3 + 1 / 3,
                                                                       0.367 - 1 / 3 + 2 / 3])
  with pytest.raises(ValueError):
    om.oracle_regret(s, [1.0])


def test_new_states_after_failure():
  s = _s()
  states = [[{"a", "b"}, {"a", "c", "d"}, {"e"}],  # failed ep1: ep2 adds c, d (2); ep2 succeeded: not counted for k=3
            [{"a"}, {"a", "b"}, {"a", "b", "c", "x"}],  # failed ep1 and ep2: ep2 adds 1, ep3 adds 2
            [{"a"}, {"z"}, {"y"}]]  # succeeded in ep1: not counted
  out = om.new_states_after_failure(states, s)
  assert out[2] == (1.5, 2) and out[3] == (2.0, 1)
  assert om.unique_states(states) == pytest.approx((5 + 4 + 3) / 3)
  summary = om.summarize(s, states, oracle_rates=[1, 1, 1])
  assert summary["episode_2/success_rate"] == pytest.approx(2 / 3)
  assert summary["explore/new_states_ep3_given_fail"] == 2.0 and summary["explore/num_ep2_given_fail"] == 2.0
  assert summary["oracle_regret/ep3"] == pytest.approx(3 - 5 / 3)
  empty = om.new_states_after_failure([[{"a"}]], om.success_matrix([[1]], 2))
  assert math.isnan(empty[2][0]) and empty[2][1] == 0
