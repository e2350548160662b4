"""``attention_impl="blockwise"`` computes exactly the causal attention of ``jax.nn.dot_product_attention``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codjax.models import init_model, preset
from codjax.models.qwen3 import blockwise_causal_attention


def _qkv(b=2, t=300, n=4, k=2, h=32, seed=0):
  r = jax.random.split(jax.random.key(seed), 3)
  return (jax.random.normal(r[0], (b, t, n, h)), jax.random.normal(r[1], (b, t, k, h)),
          jax.random.normal(r[2], (b, t, k, h)))


@pytest.mark.parametrize("block", [64, 128, 512])
def test_values_and_gradients_equal_dense_causal(block):
  q, k, v = _qkv()  # T = 300: blocks of unequal length when block does not divide T
  w = jax.random.normal(jax.random.key(1), q.shape)

  def loss(fn, q, k, v):
    return jnp.sum(fn(q, k, v) * w)

  dense = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
  ours = lambda q, k, v: blockwise_causal_attention(q, k, v, block=block)  # noqa: E731
  np.testing.assert_allclose(ours(q, k, v), dense(q, k, v), atol=2e-5)
  g_ref = jax.grad(lambda *a: loss(dense, *a), argnums=(0, 1, 2))(q, k, v)
  g = jax.grad(lambda *a: loss(ours, *a), argnums=(0, 1, 2))(q, k, v)
  for a, b in zip(g, g_ref):
    np.testing.assert_allclose(a, b, atol=1e-4)


def test_segment_mask_is_respected():
  q, k, v = _qkv(t=200)
  seg = np.ones((2, 200), np.int32)
  seg[0, 90:] = 2  # two packed sequences in row 0; padding at the end of row 1
  seg[1, 170:] = 0
  seg = jnp.asarray(seg)
  causal = jnp.tril(jnp.ones((200, 200), bool))
  mask = ((seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] != 0) & causal)[:, None]
  ref = jax.nn.dot_product_attention(q, k, v, mask=mask)
  got = blockwise_causal_attention(q, k, v, mask, block=64)
  valid = np.asarray(seg != 0)
  np.testing.assert_allclose(np.asarray(got)[valid], np.asarray(ref)[valid], atol=2e-5)


def test_model_with_blockwise_attention_matches_xla():
  cfg = preset("tiny", num_key_value_heads=2)
  dense, block = init_model(cfg, seed=3), init_model(cfg.replace(attention_impl="blockwise"), seed=3)
  ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 260)))
  seg = jnp.asarray(np.repeat([[1] * 140 + [2] * 100 + [0] * 20], 2, axis=0))
  pos = jnp.asarray(np.repeat([list(range(140)) + list(range(100)) + [0] * 20], 2, axis=0))
  np.testing.assert_allclose(block(ids), dense(ids), atol=1e-4)
  valid = np.asarray(seg != 0)
  np.testing.assert_allclose(np.asarray(block(ids, pos, seg))[valid], np.asarray(dense(ids, pos, seg))[valid],
                             atol=1e-4)
