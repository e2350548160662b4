"""Token sampling from logits: temperature, top-k, top-p, and the logprob of the drawn token.

The reported logprob is under the *sampling* distribution: log softmax of logits / temperature after the
top-k / top-p restriction (renormalized over the kept support). With top_k = 0 and top_p = 1 it equals the
trainer's log softmax(logits / temperature). Greedy (temperature 0) returns the argmax and its logprob under
softmax(logits).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

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


def sample_tokens(key, logits_bv, temperature, top_k: int, top_p, greedy: bool):
  """Returns (tokens [B], logprobs [B])."""
  if greedy:
    tok = jnp.argmax(logits_bv, axis=-1)
    lp = jax.nn.log_softmax(logits_bv.astype(jnp.float32), axis=-1)
    return tok.astype(jnp.int32), jnp.take_along_axis(lp, tok[:, None], axis=-1)[:, 0]
  z = process_logits(logits_bv, temperature, top_k, top_p)
  tok = jax.random.categorical(key, z, axis=-1)
  lp = jax.nn.log_softmax(z, axis=-1)
  return tok.astype(jnp.int32), jnp.take_along_axis(lp, tok[:, None], axis=-1)[:, 0]
