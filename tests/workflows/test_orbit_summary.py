"""codjax.workflows.orbit_summary.compare: the paired change of an ORBIT evaluation (the trainer's eval/rl_effect.json)."""

import numpy as np
import pytest

from codjax.workflows.orbit_summary import compare


def test_compare_pairs_instances():
  before = {"instance_success": [[0, 0, 1], [1, 1, 1], [0, 0, 0], [0, 1, 1]]}
  after = {"instance_success": [[0, 1, 1], [1, 1, 1], [1, 1, 1], [0, 0, 1]]}
  c = compare(before, after)
  d = np.array([1, 0, 3, -1], float)  # success-count differences per instance, by hand
  assert c["n"] == 4 and c["metric"] == "success count"
  assert c["before"] == pytest.approx(6 / 4) and c["after"] == pytest.approx(9 / 4)
  assert c["mean"] == pytest.approx(d.mean()) and c["se"] == pytest.approx(d.std(ddof=1) / 2)
  per = np.array([[0, 1, 0], [0, 0, 0], [1, 1, 1], [0, -1, 0]], float)
  for k in range(3):
    assert c["per_position"][k][0] == pytest.approx(per[:, k].mean())
    assert c["per_position"][k][1] == pytest.approx(per[:, k].std(ddof=1) / 2)


def test_compare_refuses_unpaired_or_old_summaries():
  with pytest.raises(ValueError, match="differ in shape"):
    compare({"instance_success": [[0, 1, 1]]}, {"instance_success": [[0, 1, 1], [1, 1, 1]]})
  with pytest.raises(ValueError, match="instance_success"):
    compare({"episode_success": [0.5, 0.5, 0.5]}, {"instance_success": [[0, 1, 1]]})


def test_table_shows_exploration_under_failure():
  from codjax.workflows.orbit_summary import format_table

  row = {"episodes": 3, "episode_success": [0.25, 0.5, 0.75], "episode_success_se": [0.1, 0.1, 0.1],
         "episode/success_count": 1.5, "success_count_se": 0.2, "regret/ep3": 1.5,
         "explore/new_states_ep2_given_fail": 4.5, "explore/num_ep2_given_fail": 12.0,
         "explore/new_states_ep3_given_fail": float("nan"), "explore/num_ep3_given_fail": 0.0,
         "oracle_episode_success": [0.4, 0.6, 0.9], "oracle_regret/ep3": 0.4}
  head, line = format_table({"model": row}).splitlines()
  assert head.split()[3:] == ["Ep1", "Ep2", "Ep3", "count", "regret@T", "dS(Ep2|F)", "dS(Ep3|F)", "oracle@T",
                              "regret", "vs", "oracle"]
  assert line.split()[1:] == ["0.250+-0.100", "0.500+-0.100", "0.750+-0.100", "1.500+-0.200", "1.500", "4.50(12)",
                              "-", "0.900", "0.400"]
