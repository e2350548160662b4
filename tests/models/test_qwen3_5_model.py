"""Qwen35's compute choices keep its math: per-layer remat (full, dots), the unrolled layer loop and a
non-periodic layer pattern give the same logits and gradients as the scanned, un-rematted model."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from codjax.models.config import preset
from codjax.models.qwen3_5 import init_model

pytestmark = pytest.mark.slow  # four jit compiles of forward + backward, two decode programs (~40 s)

IDS = jnp.asarray(np.random.default_rng(0).integers(0, 512, (2, 24)))
SEG = jnp.asarray([[1] * 12 + [2] * 12, [1] * 20 + [0] * 4])
POS = jnp.asarray([list(range(12)) * 2, list(range(20)) + [0] * 4])


def _logits_and_grads(**over):
  graphdef, state = nnx.split(init_model(preset("tiny-hybrid-moe", delta_chunk_size=8, **over), seed=0))

  def loss(state):
    logits = nnx.merge(graphdef, state)(IDS, POS, SEG)
    return jnp.mean(logits ** 2), logits

  (_, logits), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(state)
  return np.asarray(logits), {k: np.asarray(v[...]) for k, v in nnx.to_flat_state(grads)}


@functools.cache
def _reference():
  return _logits_and_grads()


@pytest.mark.parametrize("over", [dict(remat="full"), dict(remat="dots"), dict(scan_layers=False)])
def test_compute_choices_keep_logits_and_gradients(over):
  ref_logits, ref_grads = _reference()
  logits, grads = _logits_and_grads(**over)
  # float32 reassociation only (XLA fuses the unrolled loop differently): ~1e-6 on logits of size ~1
  np.testing.assert_allclose(logits, ref_logits, atol=1e-5)
  assert grads.keys() == ref_grads.keys()
  for k in ref_grads:
    np.testing.assert_allclose(grads[k], ref_grads[k], atol=1e-6, rtol=1e-4, err_msg=str(k))


def test_non_periodic_layer_pattern_runs_as_one_block():
  types = ("full_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention")
  cfg = preset("tiny-hybrid", num_hidden_layers=5, layer_types=types, delta_chunk_size=8)
  assert cfg.layer_period == 5 and cfg.full_layers == (0, 3)
  m = init_model(cfg, seed=1)
  full = np.asarray(nnx.jit(lambda m, ids: m(ids))(m, IDS))
  unrolled = np.asarray(nnx.jit(lambda m, ids: m(ids))(init_model(cfg.replace(scan_layers=False), seed=1), IDS))
  np.testing.assert_allclose(full, unrolled, atol=1e-5)
  # the cached path agrees with the full forward on this pattern too
  h = nnx.jit(lambda m, ids: m.forward_cached(ids, jnp.zeros((2,), jnp.int32), m.init_cache(2, 32))[0])(m, IDS)
  np.testing.assert_allclose(np.asarray(m.logits(h)), full, atol=1e-4)


@pytest.mark.parametrize("name", ["tiny-hybrid", "tiny-hybrid-moe"])
def test_decode_form_fused_inputs_and_decode_head_equal_the_full_forward(name):
  """The decode loop's pieces (per-layer weights with fused input projections, the lm_head prepared once by
  ``decode_head``) give the full forward's hidden state and logits for the next token, fused or not."""
  cfg = preset(name)
  m = init_model(cfg, 0)
  b, p = 2, 9
  toks = IDS[:, :p + 1].astype(jnp.int32)
  fused_part = "moe_in_dx" if cfg.is_moe else "mlp_in_dx"
  layers = m.split_layers(fuse_inputs=True)
  assert {"lin_in_dx", fused_part} <= set(layers[0]) and "attn_in_dx" in layers[cfg.full_layers[0]]
  assert not {"lin_in_dx", fused_part} & set(m.split_layers(fuse_inputs=False)[0])

  @nnx.jit(static_argnums=1)
  def step(m, fuse):
    _, cache = m.forward_cached(toks[:, :p], jnp.zeros((b,), jnp.int32), m.init_cache(b, 16))
    h, _ = m.forward_cached_unrolled(toks[:, p:], jnp.full((b,), p, jnp.int32), m.split_layers(fuse_inputs=fuse),
                                     m.cache_layers(cache))
    return h[:, 0], m.decode_logits(h[:, 0], m.decode_head()), m(toks)[:, p], m.hidden_states(toks)[:, p]

  # unfused MoE inputs are the training path's moe_block, tested against transformers elsewhere
  for fuse in (True,) if cfg.is_moe else (False, True):
    h, logits, want_logits, want_h = step(m, fuse)
    np.testing.assert_allclose(np.asarray(h), np.asarray(want_h), atol=2e-5, rtol=0)
    assert logits.dtype == jnp.float32 and logits.shape == (b, cfg.vocab_size)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(want_logits), atol=2e-5, rtol=0)
