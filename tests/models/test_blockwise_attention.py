"""``attention_impl="blockwise"`` computes exactly the causal attention of ``jax.nn.dot_product_attention``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codjax.models import init_model, preset
from codjax.models.qwen3 import blockwise_causal_attention

pytestmark = pytest.mark.slow  # value and gradient checks of whole models (~80 s)


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


def test_gradients_with_segment_mask_equal_dense():
  """The hand-written backward honours the packed-segment mask (no gradient crosses a segment boundary)."""
  q, k, v = _qkv(t=200, seed=4)
  seg = np.ones((2, 200), np.int32)
  seg[0, 90:] = 2
  seg[1, 170:] = 0
  seg = jnp.asarray(seg)
  causal = jnp.tril(jnp.ones((200, 200), bool))
  mask = ((seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] != 0) & causal)[:, None]
  w = jax.random.normal(jax.random.key(5), q.shape) * (seg != 0)[:, :, None, None]

  def loss(fn, q, k, v):
    return jnp.sum(fn(q, k, v) * w)

  g_ref = jax.grad(lambda *a: loss(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=mask), *a),
                   argnums=(0, 1, 2))(q, k, v)
  g = jax.jit(jax.grad(lambda *a: loss(lambda q, k, v: blockwise_causal_attention(q, k, v, mask, block=64), *a),
                       argnums=(0, 1, 2)))(q, k, v)
  for a, b in zip(g, g_ref):
    np.testing.assert_allclose(a, b, atol=1e-4)
  # keys of row 0's second sequence get no gradient from queries of its first sequence and vice versa
  g_first = jax.grad(lambda k: jnp.sum(blockwise_causal_attention(q, k, v, mask, block=64)[0, :90] * w[0, :90]))(k)
  assert float(jnp.max(jnp.abs(g_first[0, 90:]))) == 0.0
  assert float(jnp.max(jnp.abs(g_first[0, :90]))) > 0.0


def test_bfloat16_values_and_gradients_close_to_float32():
  q, k, v = _qkv(t=256, seed=6)
  w = jax.random.normal(jax.random.key(7), q.shape)
  bf = lambda x: x.astype(jnp.bfloat16)  # noqa: E731

  def grads(q, k, v):
    return jax.grad(lambda q, k, v: jnp.sum(blockwise_causal_attention(q, k, v).astype(jnp.float32) * w),
                    argnums=(0, 1, 2))(q, k, v)

  out16 = blockwise_causal_attention(bf(q), bf(k), bf(v))
  assert out16.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(out16, np.float32), blockwise_causal_attention(q, k, v), atol=3e-2)
  for a, b in zip(grads(bf(q), bf(k), bf(v)), grads(q, k, v)):
    assert a.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(a, np.float32), b, atol=0.1, rtol=0.05)


@pytest.mark.parametrize("remat", ["none", "full"])
def test_model_gradients_match_xla(remat):
  cfg = preset("tiny", num_key_value_heads=2, remat=remat)
  dense, block = init_model(cfg, seed=3), init_model(cfg.replace(attention_impl="blockwise"), seed=3)
  ids = jnp.asarray(np.random.default_rng(1).integers(0, cfg.vocab_size, (2, 200)))

  def grads(model):
    from flax import nnx
    gdef, params = nnx.split(model)
    loss = lambda p: jnp.mean(jax.nn.logsumexp(nnx.merge(gdef, p)(ids), axis=-1))  # noqa: E731
    return jax.tree.leaves(jax.jit(jax.grad(loss))(params))

  for a, b in zip(grads(block), grads(dense)):
    np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-3)
