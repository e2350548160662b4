"""codjax.workflows.credit: per-episode scores of rolled-out trajectories, against values worked out by hand.

CoD credit (paper App. A): solve j of a rollout gets the mean of its rewards-to-go (r_j, ..., r_{S-1}), the
update after task k the mean of (h_k, r_{k+1}, ..., r_{S-1}); the advantage subtracts the mean over the G
rollouts of the same pack at the same position. GRPO: (R - mean) / std (ddof 1) over the pack's rollouts,
R the sum of task rewards, shared by every episode of the trajectory. RED-Weight (Eq. 3): if the
token-weighted score sum is negative, every score s becomes s exp(s / T) with T solving
sum_j s_j exp(s_j / T) L_j = 0 (L_j the episode's loss tokens), T >= t_min.
"""

import math

import numpy as np
import pytest

from codjax.agents.cod import CodTrajectory, Pack
from codjax.agents.episode import Episode
from codjax.workflows.credit import apply_red, cod_episode_scores, grpo_episode_scores


def _traj(pack_id, repeat_id, task_rewards, hint_rewards=None):
  pack = Pack(env_name="toy", family=None, pack_seed=0, task_seeds=tuple(range(len(task_rewards))), pack_id=pack_id)
  solve = [Episode(kind="solve", position=j, pack_id=pack_id, repeat_id=repeat_id, reward=r, loss_mask=[1])
           for j, r in enumerate(task_rewards)]
  update = [Episode(kind="update", position=k, pack_id=pack_id, repeat_id=repeat_id, reward=h, loss_mask=[1])
            for k, h in enumerate(hint_rewards or [])]
  return CodTrajectory(pack=pack, repeat_id=repeat_id, solve_episodes=solve, update_episodes=update,
                       hints=[""] * len(task_rewards))


def _by_episode(scored):
  """{(pack_id, repeat_id, kind, position): score}; every episode is scored exactly once."""
  out = {(ep.pack_id, ep.repeat_id, ep.kind, ep.position): s for ep, s in scored}
  assert len(out) == len(scored)
  return out


@pytest.fixture
def trajs():
  # pack 5: G = 2 rollouts of S = 3 tasks with update episodes; pack 2: S = 2 without updates (use_hints off).
  # Given out of order: scores must not depend on the order the workflow returns trajectories in.
  return [_traj(5, 1, [0.0, 1.0, 0.0], [-0.1, 0.0]),
          _traj(2, 0, [1.0, 1.0]),
          _traj(5, 0, [1.0, 0.0, 1.0], [0.0, -0.1]),
          _traj(2, 1, [0.0, 1.0])]


def test_cod_mean_returns_to_episodes_and_positions(trajs):
  got = _by_episode(cod_episode_scores(trajs))
  want = {
      # pack 5 solve returns: rollout 0 (2/3, 1/2, 1), rollout 1 (1/3, 1/2, 0); baselines (1/2, 1/2, 1/2)
      (5, 0, "solve", 0): 1 / 6, (5, 0, "solve", 1): 0.0, (5, 0, "solve", 2): 0.5,
      (5, 1, "solve", 0): -1 / 6, (5, 1, "solve", 1): 0.0, (5, 1, "solve", 2): -0.5,
      # pack 5 update returns: rollout 0 ((0 + 0 + 1) / 3, (-0.1 + 1) / 2) = (1/3, 0.45),
      # rollout 1 ((-0.1 + 1 + 0) / 3, (0 + 0) / 2) = (0.3, 0); baselines (19/60, 0.225)
      (5, 0, "update", 0): 1 / 60, (5, 0, "update", 1): 0.225,
      (5, 1, "update", 0): -1 / 60, (5, 1, "update", 1): -0.225,
      # pack 2 solve returns: rollout 0 (1, 1), rollout 1 (1/2, 1); baselines (3/4, 1)
      (2, 0, "solve", 0): 0.25, (2, 0, "solve", 1): 0.0,
      (2, 1, "solve", 0): -0.25, (2, 1, "solve", 1): 0.0,
  }
  assert got.keys() == want.keys()
  for k, v in want.items():
    assert got[k] == pytest.approx(v, abs=1e-12), k


def test_cod_discounted_returns(trajs):
  got = _by_episode(cod_episode_scores(trajs[::2], returns="discounted", gamma=0.5))  # pack 5 only
  want = {
      # solve returns sum_n 0.5^n r_{j+n}: rollout 0 (1.25, 0.5, 1), rollout 1 (0.5, 1, 0)
      (5, 0, "solve", 0): 0.375, (5, 0, "solve", 1): -0.25, (5, 0, "solve", 2): 0.5,
      (5, 1, "solve", 0): -0.375, (5, 1, "solve", 1): 0.25, (5, 1, "solve", 2): -0.5,
      # update returns h_k + 0.5 r_{k+1} + 0.25 r_{k+2}: rollout 0 (0.25, 0.4), rollout 1 (0.4, 0)
      (5, 0, "update", 0): -0.075, (5, 0, "update", 1): 0.2,
      (5, 1, "update", 0): 0.075, (5, 1, "update", 1): -0.2,
  }
  assert got.keys() == want.keys()
  for k, v in want.items():
    assert got[k] == pytest.approx(v, abs=1e-12), k


@pytest.mark.parametrize("normalize_std", [True, False])
def test_grpo_scores_every_episode_of_a_trajectory(normalize_std):
  trajs = [_traj(5, 0, [1.0, 1.0], [0.0]), _traj(5, 1, [0.0, 1.0], [-0.1]), _traj(5, 2, [0.0, 0.0], [0.0]),
           _traj(2, 0, [1.0, 1.0]), _traj(2, 1, [0.0, 1.0])]
  got = grpo_episode_scores(trajs, normalize_std=normalize_std)
  # returns: pack 5 (2, 1, 0) -> mean 1, std 1; pack 2 (2, 1) -> mean 1.5, std sqrt(0.5)
  adv = {(5, 0): 1.0, (5, 1): 0.0, (5, 2): -1.0, (2, 0): 0.5, (2, 1): -0.5}
  if normalize_std:
    adv[(2, 0)], adv[(2, 1)] = 0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5)
  assert len(got) == sum(len(t.episodes()) for t in trajs)
  for ep, s in got:
    assert s == pytest.approx(adv[(ep.pack_id, ep.repeat_id)], rel=1e-5, abs=1e-6)


def _scored(scores, loss_tokens):
  return [(Episode(kind="solve", position=i, loss_mask=[1] * n + [0] * 3), s)
          for i, (s, n) in enumerate(zip(scores, loss_tokens))]


def test_red_weight_is_token_weighted_and_solves_for_zero_mean():
  # scores (1, -1, -1) with 1, 2 and 1 loss tokens: 1 e^{1/T} - 3 e^{-1/T} = 0 at T = 2 / ln 3, where
  # e^{1/T} = sqrt(3): the scores become (sqrt(3), -1/sqrt(3), -1/sqrt(3)). (Weighting episodes equally
  # would give T = 2 / ln 2 instead.)
  scored = _scored([1.0, -1.0, -1.0], [1, 2, 1])
  new, temp = apply_red(scored, t_min=0.8, t_max=100.0, max_iter=200, tol=1e-9)
  assert temp == pytest.approx(2 / math.log(3), abs=1e-7)
  np.testing.assert_allclose([s for _, s in new], [math.sqrt(3), -1 / math.sqrt(3), -1 / math.sqrt(3)], rtol=1e-7)
  assert [ep for ep, _ in new] == [ep for ep, _ in scored]  # same episodes, same order


def test_red_weight_temperature_floor():
  # 1 e^{1/T} - 1000 e^{-1/T} = 0 at T = 2 / ln 1000 = 0.29 < t_min: T stops at t_min = 0.8
  new, temp = apply_red(_scored([1.0, -1.0], [1, 1000]), t_min=0.8, t_max=100.0, max_iter=200, tol=1e-9)
  assert temp == pytest.approx(0.8, abs=1e-7)
  np.testing.assert_allclose([s for _, s in new], [math.exp(1.25), -math.exp(-1.25)], rtol=1e-7)


def test_red_weight_leaves_a_non_negative_batch_alone():
  # token-weighted sum 1 * 5 - 1 - 1 = 3 >= 0 (the episode-weighted sum, -1, would have triggered it)
  scored = _scored([1.0, -1.0, -1.0], [5, 1, 1])
  new, temp = apply_red(scored, t_min=0.8, t_max=100.0, max_iter=50, tol=1e-3)
  assert temp is None and [s for _, s in new] == [1.0, -1.0, -1.0]
  assert apply_red([], 0.8, 100.0, 50, 1e-3) == ([], None)
