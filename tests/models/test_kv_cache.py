"""KV-cache prefill/decode equals the full forward, token by token, at per-row offsets."""

import jax
import jax.numpy as jnp
import numpy as np

from codjax.models import init_model, preset

import pytest

pytestmark = pytest.mark.slow  # cached decode against the full forward (~6 s)


def test_cached_decode_matches_full_forward():
  model = init_model(preset("tiny", num_key_value_heads=2, tie_word_embeddings=False), seed=1)
  rng = np.random.default_rng(0)
  b, t = 3, 12
  ids = rng.integers(0, 512, (b, t))
  full = np.asarray(model(jnp.asarray(ids)))
  cache = model.init_cache(b, 32)
  fwd = jax.jit(lambda tok, start, c: model.forward_cached(tok, start, c))
  # ragged prefill: row r prefills its first p_r tokens (padded chunk of 6), then decodes one token at a time
  prefill = np.array([5, 3, 6])
  chunk = np.zeros((b, 6), np.int64)
  for r in range(b):
    chunk[r, :prefill[r]] = ids[r, :prefill[r]]
  hid, cache = fwd(jnp.asarray(chunk), jnp.zeros((b,), jnp.int32), cache)
  for r in range(b):
    got = np.asarray(model.logits(hid[r, :prefill[r]]))
    np.testing.assert_allclose(got, full[r, :prefill[r]], atol=1e-4)
  pos = prefill.copy()
  while (pos < t).any():
    tok = ids[np.arange(b), np.minimum(pos, t - 1)][:, None]
    hid, cache = fwd(jnp.asarray(tok), jnp.asarray(np.minimum(pos, t - 1), jnp.int32), cache)
    for r in range(b):
      if pos[r] < t:
        np.testing.assert_allclose(np.asarray(model.logits(hid[r, 0])), full[r, pos[r]], atol=1e-4)
    pos += 1


@pytest.mark.parametrize("n, window", [(48, 640), (64, 128), (16, 768)])
def test_span_write_back_writes_each_rows_span_at_its_slot(n, window):
  """``Qwen3.cache_put_span``: row b's positions [s_b, s_b + n) (s_b = start_b clipped to [0, W - n]) of every
  layer's window caches land at its slot, and nothing else changes: a numpy loop over rows and layers
  computes the expected caches; the whole-window write-back gives the same bits when the windows differ from
  the cache only inside the spans (the engine's case)."""
  from codjax.models.qwen3 import Qwen3, flat_kv

  layers_n, slots_n, kv, h, max_len = 3, 7, 2, 32, 1024
  rng = np.random.default_rng(n)
  ck = rng.standard_normal((layers_n, slots_n, kv, h, max_len)).astype(np.float32)
  cv = rng.standard_normal((layers_n, slots_n, kv, max_len, h)).astype(np.float32)
  slots = np.array([5, 2, 6, 1], np.int32)
  starts = np.array([0, window - n + 5, window // 3, window - n], np.int32)  # the second clamps to W - n
  s_b = np.clip(starts, 0, window - n)
  # windows as the engine holds them (rows flattened B K), new values inside each row's span only
  wins = []
  for l in range(layers_n):
    k, v = ck[l][slots][..., :window].copy(), cv[l][slots][:, :, :window].copy()
    for b in range(len(slots)):
      k[b, :, :, s_b[b]:s_b[b] + n] = rng.standard_normal((kv, h, n))
      v[b, :, s_b[b]:s_b[b] + n] = rng.standard_normal((kv, n, h))
    wins.append((k, v))
  want_k, want_v = ck.copy(), cv.copy()
  for l, (k, v) in enumerate(wins):
    for b, slot in enumerate(slots):
      want_k[l, slot, :, :, s_b[b]:s_b[b] + n] = k[b, :, :, s_b[b]:s_b[b] + n]
      want_v[l, slot, :, s_b[b]:s_b[b] + n] = v[b, :, s_b[b]:s_b[b] + n]
  layers = [flat_kv(jnp.asarray(k), jnp.asarray(v)) for k, v in wins]
  cache = (jnp.asarray(ck), jnp.asarray(cv))
  got = jax.jit(Qwen3.cache_put_span, static_argnums=4)(cache, layers, jnp.asarray(slots), jnp.asarray(starts), n)
  np.testing.assert_array_equal(np.asarray(got[0]), want_k)
  np.testing.assert_array_equal(np.asarray(got[1]), want_v)
  whole = jax.jit(Qwen3.cache_put_layers, static_argnums=3)(cache, layers, jnp.asarray(slots), window)
  for a, b in zip(got, whole):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
