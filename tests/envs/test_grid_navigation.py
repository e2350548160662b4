"""GridNavigation: cost field, witness path, moves and reveal, pack persistence, reward, rendering, expert."""

import random

import numpy as np
import pytest

from codjax.agents.cod import run_text_packs
from codjax.envs import make
from codjax.envs.base import Turn
from codjax.envs.experts import make_policy
from codjax.envs.grid_navigation import env as gn
from codjax.envs.grid_navigation import expert as gne


def move(r, c):
  return f"I move.\n<answer>{r},{c}</answer>"


def test_presets_and_validation():
  assert make("grid_navigation").cfg == gn.GridConfig(**gn.PRESETS["27b_train"])
  assert make("grid_navigation", preset="8b").cfg.reveal_radius == 2
  ev = make("grid_navigation", preset="eval", num_bumps=2).cfg
  assert (ev.grid_min, ev.grid_max, ev.num_bumps) == (10, 14, 2)
  for bad in [dict(preset="27b"), dict(grid_min=1), dict(grid_min=9, grid_max=8), dict(num_bumps=0),
              dict(min_scale=0.0), dict(min_scale=0.5, max_scale=0.4), dict(min_rounds=0),
              dict(reveal_radius=-1), dict(grid_min=8.5), dict(unknown=3)]:
    with pytest.raises(ValueError):
      make("grid_navigation", **bad)


@pytest.mark.parametrize("preset", ["8b", "27b_train", "eval"])
def test_cost_field(preset):
  cfg = gn.GridConfig(**gn.PRESETS[preset])
  for seed in range(20):
    c = gn.cost_field(seed, cfg)
    assert c.dtype.kind == "i" and cfg.grid_min <= c.shape[0] <= cfg.grid_max and c.shape[0] == c.shape[1]
    assert c.min() == 0 and c.max() == 99
    np.testing.assert_array_equal(c, gn.cost_field(seed, cfg))
  # smooth: adjacent cells differ much less than random pairs
  c = gn.cost_field(3, cfg).astype(float)
  assert np.abs(np.diff(c, axis=0)).mean() < 0.5 * np.abs(c.ravel()[:, None] - c.ravel()[None]).mean()


def test_witness_path_guarantee_and_replay():
  fam = make("grid_navigation", preset="eval")
  for seed in range(25):
    envs = fam.sample_pack(seed, 2)
    for env in envs:
      t = env.task
      assert fam.cfg.min_rounds <= t.num_rounds <= fam.cfg.max_rounds == 5
      assert len(t.witness) == t.num_rounds and t.witness[-1] == t.goal != t.start
      cells = [t.start, *t.witness]
      assert all((a[0] == b[0]) != (a[1] == b[1]) for a, b in zip(cells, cells[1:]))
    env = envs[0]
    env.reset()
    entered = []
    for k, cell in enumerate(env.task.witness):
      entered += [int(env._costs[c]) for c in gn.entered_cells(env.task.start if k == 0 else
                                                                  env.task.witness[k - 1], cell)]
      res = env.step(move(*cell))
      assert res.done == (k == env.task.num_rounds - 1)
    assert res.reward == pytest.approx(1 - np.mean(entered) / 100) == res.info["raw_reward"]
    assert "Success" in res.info["feedback"] and "Final observed cost grid:" in res.info["feedback"]


def test_entered_cells():
  assert gn.entered_cells((2, 1), (2, 4)) == [(2, 2), (2, 3), (2, 4)]
  assert gn.entered_cells((2, 4), (2, 1)) == [(2, 3), (2, 2), (2, 1)]
  assert gn.entered_cells((0, 3), (3, 3)) == [(1, 3), (2, 3), (3, 3)]
  assert gn.entered_cells((3, 3), (2, 3)) == [(2, 3)]


def _fresh_task(fam, seed):
  env = fam.sample_pack(seed, 1)[0]
  env.reset()
  return env


@pytest.mark.parametrize("text,format_error", [
    ("no answer", True), ("<answer>1;2</answer>", True), ("<answer>1,2</answer><answer>1,2</answer>", True),
    ("<answer>99,0</answer>", False), ("<answer>-1,0</answer>", False)])
def test_invalid_moves_end_with_zero(text, format_error):
  env = _fresh_task(make("grid_navigation"), 4)
  res = env.step(text)
  assert res.done and res.reward == 0.0 and res.info["format_error"] == format_error
  assert res.info["feedback"].startswith("Invalid action:") and res.info["feedback"].endswith("Game over.")


def test_same_cell_and_diagonal_moves_are_illegal():
  fam = make("grid_navigation")
  env = _fresh_task(fam, 4)
  r, c = env.task.start
  assert "leave the current cell" in env.step(move(r, c)).info["feedback"]
  env = _fresh_task(fam, 4)
  n = env._n
  assert "not in the row or column" in env.step(move((r + 1) % n, (c + 1) % n)).info["feedback"]


def test_exact_rounds_and_reveal_radius():
  fam = make("grid_navigation", preset="8b", min_rounds=4, max_rounds=4)
  env = _fresh_task(fam, 9)
  n, (r, c), goal = env._n, env.task.start, env.task.goal
  revealed = env._state.revealed
  assert revealed.sum() == np.sum(np.abs(np.arange(n)[:, None] - r) <= 2) * np.sum(np.abs(np.arange(n) - c) <= 2)
  # go to the goal's row/column in two moves, bounce, and check the episode does not end early
  path = [(goal[0], c), goal] if c != goal[1] and r != goal[0] else [goal]
  while len(path) < 4:
    last = path[-1]
    path += [(last[0], (last[1] + 1) % n), last]
  for k, cell in enumerate(path[:4]):
    res = env.step(move(*cell))
    assert res.done == (k == 3)
    if not res.done:
      assert f"Current position: ({cell[0]},{cell[1]})" in res.observation
      assert "Cumulative normalized loss" in res.observation
  assert (res.reward > 0) == (path[3] == goal)
  for cell in gn.entered_cells((r, c), path[0]):
    assert revealed[max(0, cell[0] - 2):cell[0] + 3, max(0, cell[1] - 2):cell[1] + 3].all()


def test_missing_the_goal_scores_zero():
  fam = make("grid_navigation", min_rounds=3, max_rounds=3)
  env = _fresh_task(fam, 2)
  n, (r, c) = env._n, env.task.start
  last = (r, (c + 3) % n) if (r, (c + 3) % n) != env.task.goal else (r, (c + 4) % n)
  for cell in [(r, (c + 1) % n), (r, (c + 2) % n), last]:
    res = env.step(move(*cell))
  assert res.done and res.reward == 0.0 and "Failure" in res.info["feedback"]


def test_reveal_persists_within_a_pack_only():
  fam = make("grid_navigation")
  envs = fam.sample_pack(17, 3)
  first = envs[0]
  first.reset()
  first.step(move(*first.task.witness[0]))
  shown_after = envs[1].reset()[1].count("?")
  fresh_pack = fam.sample_pack(17, 3)  # another trajectory of the same pack (concurrent repeat)
  fresh_pack[0].reset()
  assert fresh_pack[1].reset()[1].count("?") > shown_after
  assert envs[0]._state is envs[2]._state and fresh_pack[0]._state is not envs[0]._state
  other = fam.sample_pack(18, 2)
  assert other[0]._state is not envs[0]._state and not other[0]._state.revealed.any()


def test_render_grid_and_trajectory():
  costs = np.array([[0, 5], [99, 12]])
  revealed = np.array([[True, False], [True, True]])
  assert gn.render_grid(costs, revealed) == "     0  1\n  0  0  ?\n  1 99 12"
  env = _fresh_task(make("grid_navigation"), 5)
  system, obs = env.reset()
  res = env.step(move(*env.task.witness[0]))
  text = env.render_trajectory(system, [Turn(obs, move(*env.task.witness[0]))])
  assert text.startswith("System:\n") and "Step 1:\nObservation:" in text
  assert f"Target: ({env.task.goal[0]},{env.task.goal[1]})" in text and "Normalized loss:" in text
  assert text.rstrip().endswith(gn.render_grid(env._costs, env._state.revealed).split("\n")[-1])
  assert not res.done or res.reward >= 0


def _brute_force(est, pos, goal, k, c0, n0):
  n = est.shape[0]
  best = np.inf
  firsts = {}

  def nbrs(cell):
    r, c = cell
    return [(r, j) for j in range(n) if j != c] + [(i, c) for i in range(n) if i != r]

  stack = [(pos, [], c0, n0)]
  while stack:
    cell, path, cs, ns = stack.pop()
    if len(path) == k:
      if cell == goal:
        val = cs / ns
        best = min(best, val)
        firsts[path[0]] = min(firsts.get(path[0], np.inf), val)
      continue
    for nxt in nbrs(cell):
      cells = gn.entered_cells(cell, nxt)
      stack.append((nxt, path + [nxt], cs + sum(est[x] for x in cells), ns + len(cells)))
  return best, firsts


def test_planner_is_exact_on_small_grids():
  rng = np.random.default_rng(0)
  for trial in range(12):
    n = 4
    est = rng.integers(0, 100, size=(n, n)).astype(float)
    pos = tuple(int(v) for v in rng.integers(0, n, 2))
    goal = tuple(int(v) for v in rng.integers(0, n, 2))
    k = 2 + trial % 2
    c0, n0 = (float(rng.integers(0, 300)), int(rng.integers(1, 6))) if trial % 3 else (0.0, 0)
    best, firsts = _brute_force(est, pos, goal, k, c0, n0)
    assert np.isfinite(best)  # with 2+ moves on a 4x4 grid every goal is reachable
    first = gne.plan_move(est, pos, goal, k, c0, n0)
    assert firsts[first] == pytest.approx(best)


def test_expert_parses_grid_and_reaches_goals():
  fam = make("grid_navigation")
  env = fam.sample_pack(1, 1)[0]
  _, obs = env.reset()
  costs, revealed = gne.parse_grid(obs)
  np.testing.assert_array_equal(revealed, env._state.revealed)
  np.testing.assert_array_equal(costs[revealed], env._costs[revealed])
  trajs = run_text_packs(make_policy("grid_navigation", "expert"), fam, list(range(20)), 4)
  rewards = np.stack([t.task_rewards for t in trajs])
  assert (rewards > 0).mean() == 1.0 and rewards.mean() > 0.8
  assert all(ok for t in trajs for ok in t.hint_parse_ok)


def test_expert_hints_raise_later_rewards():
  fam = make("grid_navigation")
  expert = make_policy("grid_navigation", "expert")
  seeds = list(range(100, 160))
  on = np.stack([t.task_rewards for t in run_text_packs(expert, fam, seeds, 4, use_hints=True)])
  off = np.stack([t.task_rewards for t in run_text_packs(expert, fam, seeds, 4, use_hints=False)])
  assert np.allclose(on[:, 0], off[:, 0])
  diff = (on[:, 1:] - off[:, 1:]).mean(axis=1)
  assert diff.mean() > 2 * diff.std(ddof=1) / np.sqrt(len(diff))
  rand = np.stack([t.task_rewards for t in run_text_packs(make_policy("grid_navigation", "random"), fam,
                                                           seeds[:20], 4)])
  assert rand.mean() < 0.2


def test_random_policy_moves_legally():
  env = _fresh_task(make("grid_navigation"), 3)
  msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": env._observation("")}]
  res = env.step(make_policy("grid_navigation", "random").respond(msgs, random.Random(0)))
  assert not res.info["format_error"] and "Invalid" not in res.info["feedback"]
