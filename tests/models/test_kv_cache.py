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
