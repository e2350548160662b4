"""Token sampling from logits: temperature, top-k, top-p, and the logprob of the drawn token.

The reported logprob is under the *sampling* distribution: log softmax of logits / temperature after the
top-k / top-p restriction (renormalized over the kept support). With top_k = 0 and top_p = 1 it equals the
trainer's log softmax(logits / temperature). Greedy (temperature 0) returns the argmax and its logprob under
softmax(logits).

Keys are per row: row r of a batch draws its token from ``keys_b[r]`` alone (a categorical draw vmapped over
rows), so a row's token does not depend on the other rows, their number or their order. A sampler that must
be batch-composition invariant derives each row's key from that request's own seed and the index of the
token in its reply (``token_keys``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

NEG_INF = -1e30


def process_logits(logits_bv, temperature, top_k: int, top_p):
  """Scaled and restricted logits (masked entries at -inf-like). ``top_k`` is static; others traced."""
  z = logits_bv.astype(jnp.float32) / jnp.maximum(temperature, 1e-6)
  if top_k > 0:
    kth = jax.lax.top_k(z, top_k)[0][:, -1:]
    z = jnp.where(z < kth, NEG_INF, z)

  def nucleus(z):
    sorted_z = jnp.sort(z, axis=-1)[:, ::-1]
    probs = jax.nn.softmax(sorted_z, axis=-1)
    cum = jnp.cumsum(probs, axis=-1)
    # keep the smallest prefix whose mass reaches top_p (always at least one token)
    cutoff_idx = jnp.sum(cum - probs < top_p, axis=-1, keepdims=True) - 1
    cutoff = jnp.take_along_axis(sorted_z, jnp.maximum(cutoff_idx, 0), axis=-1)
    return jnp.where(z < cutoff, NEG_INF, z)

  # the vocabulary sort runs only when top_p restricts anything (a decode step spent ~10% of its time in it)
  return jax.lax.cond(jnp.asarray(top_p) < 1.0, nucleus, lambda z: z, z)


def seed_keys(seeds) -> jax.Array:
  """``jax.random.key(seeds[r])`` for every r, as one [B] key array. Seeds must lie in [0, 2**32): with 64-bit
  types off, ``jax.random.key`` keeps only the low 32 bits, so larger seeds would silently collide."""
  seeds = [int(s) for s in seeds]
  bad = [s for s in seeds if not 0 <= s < 2**32]
  if bad:
    raise ValueError(f"sampling seeds must be in [0, 2**32), got {bad[:3]}")
  return jax.vmap(jax.random.key)(jnp.asarray(np.array(seeds, np.uint32)))


def indexed_keys(key, n: int, start: int = 0) -> jax.Array:
  """``fold_in(key, r)`` for r in [start, start + n), as one [n] key array (the row keys of a call keyed by
  ``key``). ``start`` is a traced value: every start with one ``n`` runs the same compiled program."""
  rows = jnp.arange(n, dtype=jnp.uint32) + jnp.asarray(start, jnp.uint32)
  return jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, rows)


def token_keys(row_keys_b, index_b):
  """The key of token ``index_b[r]`` of row ``r``'s reply: ``fold_in(row_keys_b[r], index_b[r])`` ([B] keys)."""
  return jax.vmap(jax.random.fold_in)(row_keys_b, index_b)


def sample_tokens(keys_b, logits_bv, temperature, top_k: int, top_p, greedy: bool):
  """Returns (tokens [B], logprobs [B]); row r is drawn with ``keys_b[r]`` (a [B] key array) alone."""
  if greedy:
    tok = jnp.argmax(logits_bv, axis=-1)
    lp = jax.nn.log_softmax(logits_bv.astype(jnp.float32), axis=-1)
    return tok.astype(jnp.int32), jnp.take_along_axis(lp, tok[:, None], axis=-1)[:, 0]
  z = process_logits(logits_bv, temperature, top_k, top_p)
  tok = jax.vmap(jax.random.categorical)(keys_b, z)
  lp = jax.nn.log_softmax(z, axis=-1)
  return tok.astype(jnp.int32), jnp.take_along_axis(lp, tok[:, None], axis=-1)[:, 0]
