"""Tests of codjax.rl.advantages: CoD returns/advantages, adaptive RED-Weight, GRPO and ORBIT returns."""

import math

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize

from codjax.rl import advantages as adv


def _reference_returns(r, h, returns, window=None, gamma=None):
  """The Appendix-A returns written term by term (loops are fine in a test)."""
  g, s = r.shape

  def aggregate(seq):
    if returns == "mean":
      return sum(seq) / len(seq)
    if returns == "window":
      head = seq[:window]
      return sum(head) / len(head)
    return sum(gamma**n * x for n, x in enumerate(seq))

  solve = np.array([[aggregate(list(r[i, j:])) for j in range(s)] for i in range(g)])
  hint = np.array([[aggregate([h[i, k]] + list(r[i, k + 1:])) for k in range(s - 1)] for i in range(g)])
  return solve, hint.reshape(g, s - 1)


def test_cod_advantages_hand_case():
  r = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
  h = np.array([[0.0, -0.1], [-0.1, 0.0]])
  solve, hint = adv.cod_advantages(r, h)
  # Solve returns: row 0 (2/3, 1/2, 1), row 1 zeros; baselines (1/3, 1/4, 1/2).
  np.testing.assert_allclose(solve, [[1 / 3, 0.25, 0.5], [-1 / 3, -0.25, -0.5]], atol=1e-12)
  # Update returns: row 0 (mean(0, 0, 1), mean(-0.1, 1)) = (1/3, 0.45); row 1 (mean(-0.1, 0, 0), mean(0, 0)).
  b0, b1 = (1 / 3 - 1 / 30) / 2, 0.45 / 2
  np.testing.assert_allclose(hint, [[1 / 3 - b0, 0.45 - b1], [-1 / 30 - b0, -b1]], atol=1e-12)


def test_paper_indexing_of_update_returns():
  """R^z_{i,j} = (r^z_{i,j} + sum_{l>=j} r^x_{i,l}) / (S-j+1), with the paper's z_j = our update after j-1."""
  rng = np.random.default_rng(0)
  r, h = rng.random((3, 5)), rng.random((3, 4))
  _, hint = adv.cod_returns(r, h)
  s = 5
  for j in range(1, s):
    expected = (h[:, j - 1] + r[:, j:].sum(axis=1)) / (s - j + 1)
    np.testing.assert_allclose(hint[:, j - 1], expected, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(g=st.integers(1, 5), s=st.integers(1, 6), mode=st.sampled_from(adv.RETURN_MODES),
       window=st.integers(1, 7), gamma=st.floats(0.0, 1.0), seed=st.integers(0, 2**31 - 1))
def test_cod_advantages_match_formulas(g, s, mode, window, gamma, seed):
  rng = np.random.default_rng(seed)
  r = rng.uniform(-0.1, 1.0, (g, s))
  h = rng.choice([0.0, -0.1], (g, s - 1))
  solve_ret, hint_ret = _reference_returns(r, h, mode, window, gamma)
  solve, hint = adv.cod_advantages(r, h, returns=mode, window=window, gamma=gamma)
  np.testing.assert_allclose(solve, solve_ret - solve_ret.mean(0), atol=1e-12)
  np.testing.assert_allclose(hint, hint_ret - hint_ret.mean(0), atol=1e-12)
  # Per-position group baselines: every position sums to zero over the G repeats.
  np.testing.assert_allclose(solve.sum(0), 0.0, atol=1e-12)
  np.testing.assert_allclose(hint.sum(0), 0.0, atol=1e-12)


def test_window_and_discount_limits():
  rng = np.random.default_rng(1)
  r, h = rng.random((4, 5)), rng.random((4, 4))
  mean = adv.cod_returns(r, h)
  for a, b in zip(adv.cod_returns(r, h, returns="window", window=5), mean):
    np.testing.assert_allclose(a, b, rtol=1e-12)
  own = adv.cod_returns(r, h, returns="window", window=1)
  np.testing.assert_allclose(own[0], r, rtol=1e-12)
  np.testing.assert_allclose(own[1], h, rtol=1e-12)
  undiscounted = adv.cod_returns(r, h, returns="discounted", gamma=1.0)
  np.testing.assert_allclose(undiscounted[0][:, 0], r.sum(1), rtol=1e-12)
  np.testing.assert_allclose(adv.cod_returns(r, h, returns="discounted", gamma=0.0)[0], r, rtol=1e-12)


def test_cod_advantages_jax_in_jax_out_and_jit():
  rng = np.random.default_rng(2)
  r, h = rng.random((8, 4)).astype(np.float32), rng.random((8, 3)).astype(np.float32)
  expected = adv.cod_advantages(r, h)
  got = jax.jit(adv.cod_advantages)(jnp.asarray(r), jnp.asarray(h))
  for e, x in zip(expected, got):
    assert isinstance(x, jax.Array) and x.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(x), e, atol=1e-6)
  assert isinstance(expected[0], np.ndarray)


def test_single_task_pack_has_no_updates():
  solve, hint = adv.cod_advantages(np.array([[1.0], [0.0]]), np.zeros((2, 0)))
  np.testing.assert_allclose(solve, [[0.5], [-0.5]])
  assert hint.shape == (2, 0)


@pytest.mark.parametrize("kwargs", [dict(returns="median"), dict(returns="window"),
                                    dict(returns="window", window=0), dict(returns="discounted"),
                                    dict(returns="discounted", gamma=1.5)])
def test_cod_advantages_bad_options(kwargs):
  with pytest.raises(ValueError):
    adv.cod_advantages(np.zeros((2, 3)), np.zeros((2, 2)), **kwargs)


def test_cod_advantages_bad_shapes():
  with pytest.raises(ValueError):
    adv.cod_advantages(np.zeros((2, 3)), np.zeros((2, 3)))
  with pytest.raises(ValueError):
    adv.cod_advantages(np.zeros(3), np.zeros(2))


def _score_sum(s, w, t):
  return float(np.sum(s * np.exp(s / t) * w))


def test_red_weight_none_when_sum_nonnegative():
  scores = np.array([0.5, -0.2, -0.1])
  counts = np.array([10, 10, 20])  # 5 - 2 - 2 = +1
  assert adv.red_weight_temperature(scores, counts) is None
  assert adv.red_weight_temperature(np.zeros(4), np.ones(4)) is None
  assert adv.apply_red_weight(scores, None) is scores


def test_red_weight_hand_case():
  # S(T) = e^{1/T} - 3 e^{-1/T}: root 2 / ln 3 = 1.8205. Midpoints 50.4 25.6 13.2 7.0 3.9 2.35 (all S < 0),
  # 1.575 (S > 0), 1.9625 (< 0), 1.76875 (> 0), 1.865625 (< 0), 1.8171875 (> 0): width 0.0484 < 0.05, stop.
  t = adv.red_weight_temperature(np.array([1.0, -1.0]), np.array([1, 3]))
  assert t == pytest.approx(1.8171875, abs=1e-12)
  assert abs(t - 2 / math.log(3)) < 0.05
  # max_iter bounds the number of midpoints.
  assert adv.red_weight_temperature(np.array([1.0, -1.0]), np.array([1, 3]), max_iter=3) == pytest.approx(13.2)
  weighted = adv.apply_red_weight(np.array([1.0, -1.0]), t)
  np.testing.assert_allclose(weighted, [math.exp(1 / t), -math.exp(-1 / t)])


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 40), seed=st.integers(0, 2**31 - 1), shift=st.floats(-0.6, 0.0))
def test_red_weight_bisection_brackets_the_root(n, seed, shift):
  rng = np.random.default_rng(seed)
  scores = rng.uniform(-1.0, 1.0, n) + shift
  counts = rng.integers(1, 500, n)
  t = adv.red_weight_temperature(scores, counts)
  if _score_sum(scores, counts, 1e9) >= 0:
    assert t is None
    return
  assert 0.8 <= t <= 100.0
  # S(T) decreases in T and S(inf) < 0, so S has at most one root T* above t_min.
  if _score_sum(scores, counts, 0.8) < 0:
    assert t < 0.8 + 0.05  # no T >= t_min balances the batch: clamped next to t_min
  elif _score_sum(scores, counts, 100.0) >= 0:
    assert t > 100.0 - 0.05  # the root lies beyond t_max
  else:
    root = optimize.brentq(lambda x: _score_sum(scores, counts, x), 0.8, 100.0, xtol=1e-10)
    assert abs(t - root) < 0.05
    # Equivalently, reweighting at T -+ tol brackets a zero token-weighted sum.
    assert _score_sum(scores, counts, max(t - 0.05, 0.8)) >= 0 >= _score_sum(scores, counts, t + 0.05)
  weighted = adv.apply_red_weight(scores, t)
  np.testing.assert_allclose(weighted, scores * np.exp(scores / t))


def test_red_weight_jax_scores():
  scores = jnp.array([0.3, -0.4, -0.2])
  t = adv.red_weight_temperature(scores, jnp.array([5, 5, 5]))
  assert isinstance(t, float)
  out = adv.apply_red_weight(scores, t)
  assert isinstance(out, jax.Array)
  assert abs(float(jnp.sum(out) * 5)) < 0.2


def test_grpo_advantages():
  rewards = np.array([1.0, 0.0, 3.0, 0.5, 2.0, 1.0, 7.0])
  groups = np.array([0, 0, 1, 0, 1, 1, 9])
  centered = adv.grpo_advantages(rewards, groups, normalize_std=False)
  np.testing.assert_allclose(centered, [0.5, -0.5, 1.0, 0.0, 0.0, -1.0, 0.0])
  normed = adv.grpo_advantages(rewards, groups)
  std0, std1 = np.std([1.0, 0.0, 0.5], ddof=1), np.std([3.0, 2.0, 1.0], ddof=1)
  expected = [0.5 / std0, -0.5 / std0, 1 / std1, 0.0, 0.0, -1 / std1, 0.0]
  np.testing.assert_allclose(normed, np.array(expected) * (1 - 1e-5), rtol=2e-5)
  got = jax.jit(adv.grpo_advantages)(jnp.asarray(rewards, jnp.float32), jnp.asarray(groups))
  assert isinstance(got, jax.Array)
  np.testing.assert_allclose(np.asarray(got), normed, rtol=1e-5, atol=1e-6)


def test_grpo_constant_group_is_zero():
  out = adv.grpo_advantages(np.array([2.0, 2.0, 2.0]), np.array([4, 4, 4]))
  np.testing.assert_array_equal(out, 0.0)


def test_orbit_success_count_then_grpo():
  successes = np.array([[1, 0, 1, 1], [0, 0, 0, 0], [True, True, False, False], [0, 1, 0, 0]])
  counts = adv.orbit_success_count(successes)
  np.testing.assert_array_equal(counts, [3, 0, 2, 1])
  a = adv.grpo_advantages(counts, np.zeros(4, int), normalize_std=False)
  np.testing.assert_allclose(a, [1.5, -1.5, 0.5, -0.5])
  np.testing.assert_array_equal(np.asarray(adv.orbit_success_count(jnp.asarray(successes))), counts)
