"""Top-p / top-k restriction of the sampling distribution (``codjax.rollout.sampling``)."""

import jax
import jax.numpy as jnp
import numpy as np

from codjax.rollout.sampling import NEG_INF, process_logits, sample_tokens

import pytest

pytestmark = pytest.mark.slow  # large sampling statistics (~15 s)


def test_top_p_keeps_the_smallest_prefix_reaching_the_mass():
  probs = np.array([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]], np.float32)
  z = jnp.log(jnp.asarray(probs))
  fn = jax.jit(lambda z, p: process_logits(z, 1.0, 0, p))  # top_p traced: one program for every value
  kept = lambda p: np.asarray(fn(z, jnp.float32(p))) > NEG_INF / 2  # noqa: E731
  np.testing.assert_array_equal(kept(0.5), [[1, 0, 0, 0], [0, 0, 0, 1]])
  np.testing.assert_array_equal(kept(0.75), [[1, 1, 0, 0], [0, 0, 1, 1]])
  np.testing.assert_array_equal(kept(0.9), [[1, 1, 1, 0], [0, 1, 1, 1]])
  # top_p = 1 leaves the logits untouched (no restriction, not even of float-rounding tails)
  np.testing.assert_array_equal(np.asarray(fn(z, jnp.float32(1.0))), np.asarray(z))


def test_sampled_logprob_is_under_the_restricted_distribution():
  z = jnp.log(jnp.asarray([[0.5, 0.3, 0.15, 0.05]]))
  toks, lps = [], []
  for s in range(40):
    t, lp = sample_tokens(jax.random.key(s), z, jnp.float32(1.0), 0, jnp.float32(0.75), False)
    toks.append(int(t[0]))
    lps.append(float(lp[0]))
  assert set(toks) <= {0, 1} and set(toks) == {0, 1}
  for t, lp in zip(toks, lps):
    np.testing.assert_allclose(lp, np.log([0.5 / 0.8, 0.3 / 0.8][t]), atol=1e-5)
