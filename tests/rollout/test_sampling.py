"""The sampler (``codjax.rollout.sampling``): top-p / top-k restriction of the sampling distribution, and
per-row keys (a row's draw depends on its own key alone; draws follow the sampling distribution)."""

import jax
import jax.numpy as jnp
import numpy as np

from codjax.rollout.sampling import NEG_INF, indexed_keys, process_logits, sample_tokens, seed_keys, token_keys

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
    t, lp = sample_tokens(jax.random.key(s)[None], z, jnp.float32(1.0), 0, jnp.float32(0.75), False)
    toks.append(int(t[0]))
    lps.append(float(lp[0]))
  assert set(toks) <= {0, 1} and set(toks) == {0, 1}
  for t, lp in zip(toks, lps):
    np.testing.assert_allclose(lp, np.log([0.5 / 0.8, 0.3 / 0.8][t]), atol=1e-5)


def test_each_row_is_drawn_from_its_own_key():
  """Row r's token is ``categorical(keys[r], z[r])`` whatever the other rows are: alone, in another order or
  next to other rows, it is the same draw."""
  z = jax.random.normal(jax.random.key(0), (6, 50)) * 2.0
  keys = seed_keys(range(100, 106))
  draw = jax.jit(lambda k, z: sample_tokens(k, z, jnp.float32(0.8), 10, jnp.float32(0.9), False))
  tok, lp = draw(keys, z)
  perm = np.array([4, 0, 5, 2, 1, 3])
  tok_p, lp_p = draw(keys[perm], z[perm])
  np.testing.assert_array_equal(np.asarray(tok_p), np.asarray(tok)[perm])
  np.testing.assert_array_equal(np.asarray(lp_p), np.asarray(lp)[perm])
  zr = process_logits(z, jnp.float32(0.8), 10, jnp.float32(0.9))
  for r in range(6):
    alone, _ = draw(keys[r:r + 1], z[r:r + 1])
    assert int(alone[0]) == int(tok[r]) == int(jax.random.categorical(keys[r], zr[r]))
  assert len(set(np.asarray(tok).tolist())) > 1


def test_seed_keys_are_jax_keys_of_the_seeds():
  for s, k in zip((0, 7, 2**31 + 5, 2**32 - 1), seed_keys([0, 7, 2**31 + 5, 2**32 - 1])):
    np.testing.assert_array_equal(jax.random.key_data(k), jax.random.key_data(jax.random.key(s)))
  base = jax.random.key(3)
  for r, k in enumerate(indexed_keys(base, 4)):
    np.testing.assert_array_equal(jax.random.key_data(k), jax.random.key_data(jax.random.fold_in(base, r)))
  for r, k in enumerate(indexed_keys(base, 4, start=9)):  # a later run of one call's rows
    np.testing.assert_array_equal(jax.random.key_data(k), jax.random.key_data(jax.random.fold_in(base, 9 + r)))
  for bad in (-1, 2**32):
    with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
      seed_keys([1, bad])


def within(counts, probs, n, sigmas=5.0):
  """Frequencies ``counts / n`` within ``sigmas`` binomial standard errors of ``probs``."""
  se = np.sqrt(probs * (1 - probs) / n) + 1e-12
  np.testing.assert_array_less(np.abs(counts / n - probs), sigmas * se + 1e-9)


def test_rows_with_distinct_keys_follow_their_distributions():
  """Many rows, each its own key, two interleaved distributions at T=0.7 with top-k 3: the row-wise draws'
  frequencies match softmax(z / T) restricted to the top 3 and renormalized (computed here in numpy)."""
  z = np.log(np.array([[0.4, 0.3, 0.2, 0.1], [0.05, 0.15, 0.3, 0.5]], np.float32))
  n = 4000
  rows = np.tile(z, (n, 1))  # row 2j: distribution 0, row 2j+1: distribution 1
  tok, lp = sample_tokens(indexed_keys(jax.random.key(11), 2 * n), jnp.asarray(rows), jnp.float32(0.7), 3,
                          jnp.float32(1.0), False)
  tok, lp = np.asarray(tok), np.asarray(lp)
  for d in range(2):
    zt = z[d] / 0.7
    keep = zt >= np.sort(zt)[-3]
    p = np.where(keep, np.exp(zt - zt.max()), 0.0)
    p /= p.sum()
    t = tok[d::2]
    within(np.bincount(t, minlength=4), p, n)
    np.testing.assert_allclose(lp[d::2], np.log(p[t]), atol=1e-5)


def test_successive_token_keys_give_fresh_draws():
  """The engine draws token t of a reply with ``fold_in(row_key, t)``: over the tokens of one row the draws
  are independent samples of the distribution, not one repeated draw."""
  probs = np.array([0.5, 0.25, 0.15, 0.1], np.float32)
  n = 4000
  keys = token_keys(jnp.broadcast_to(jax.random.key(5), (n,)), jnp.arange(n, dtype=jnp.int32))
  tok, _ = sample_tokens(keys, jnp.log(jnp.tile(jnp.asarray(probs), (n, 1))), jnp.float32(1.0), 0,
                         jnp.float32(1.0), False)
  within(np.bincount(np.asarray(tok), minlength=4), probs, n)
