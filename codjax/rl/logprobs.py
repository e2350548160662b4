"""Token log-probabilities over a large vocabulary without materializing [B, T, V] logits.

log pi(y_t) = z_t[y_t] - logsumexp_v z_t[v],   z_t = h_t W / tau   (tau = rollout temperature)
H_t = logsumexp(z_t) - sum_v softmax(z_t)_v z_t[v]   (entropy of the sampling distribution)

The vocabulary is split into C chunks and scanned with an online logsumexp (running max m, running
sum s = sum exp(z - m), running u = sum exp(z - m) z and the target logit). Each chunk body is rematerialized
in the backward pass, so peak memory holds one [B, T, V/C] chunk instead of the full [B, T, V] float32 logits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from codjax.models.matmul import matmul


def _scores(h_btd, w_dv):
  """h [B, T, D] @ w [D, V] -> [B, T, V] as one 2-D ``matmul`` (its CPU weight gradient is x^T dz)."""
  b, t, d = h_btd.shape
  return matmul(h_btd.reshape(b * t, d), w_dv).reshape(b, t, -1)


def vocab_chunks(vocab: int, target: int) -> int:
  """The largest divisor of ``vocab`` that is <= ``target`` chunks (1 if none fits). ``target = 0`` picks
  chunks of about 16k vocabulary entries (e.g. 151,936 -> 8 chunks of 18,992)."""
  if target <= 0:
    target = max(1, -(-vocab // 16384))
  target = max(1, min(target, vocab))
  for c in range(target, 0, -1):
    if vocab % c == 0:
      return c
  return 1


def token_logprobs_and_entropy(hidden_btd, w_dv, targets_bt, *, temperature: float = 1.0,
                               num_chunks: int = 1, compute_dtype=jnp.float32):
  """Returns (logp [B, T], entropy [B, T]) of ``targets_bt`` under softmax(hidden @ w / temperature)."""
  d, v = w_dv.shape
  c = vocab_chunks(v, num_chunks)
  if c == 1:  # one chunk: plain logsumexp (the scan + remat path would keep ~5 logits-sized temporaries)
    z = _scores(hidden_btd.astype(compute_dtype), w_dv.astype(compute_dtype)).astype(jnp.float32) / temperature
    lse = jax.nn.logsumexp(z, axis=-1)
    tgt = jnp.take_along_axis(z, targets_bt[..., None], axis=-1)[..., 0]
    ent = lse - jnp.sum(jax.nn.softmax(z, axis=-1) * z, axis=-1)
    return tgt - lse, ent
  vc = v // c
  h = hidden_btd.astype(compute_dtype)
  w_cdv = w_dv.astype(compute_dtype).reshape(d, c, vc).transpose(1, 0, 2)
  inv_t = 1.0 / temperature
  b, t = targets_bt.shape
  init = (jnp.full((b, t), -jnp.inf, jnp.float32), jnp.zeros((b, t), jnp.float32),
          jnp.zeros((b, t), jnp.float32), jnp.zeros((b, t), jnp.float32))

  @jax.checkpoint
  def body(carry, xs):
    m, s, u, tgt = carry
    w_c, k = xs
    z = _scores(h, w_c).astype(jnp.float32) * inv_t
    m_new = jnp.maximum(m, jnp.max(z, axis=-1))
    scale = jnp.exp(m - m_new)
    e = jnp.exp(z - m_new[..., None])
    s = s * scale + jnp.sum(e, axis=-1)
    u = u * scale + jnp.sum(e * z, axis=-1)
    local = targets_bt - k * vc
    in_chunk = (local >= 0) & (local < vc)
    picked = jnp.take_along_axis(z, jnp.clip(local, 0, vc - 1)[..., None], axis=-1)[..., 0]
    tgt = tgt + jnp.where(in_chunk, picked, 0.0)
    return (m_new, s, u, tgt), None

  (m, s, u, tgt), _ = jax.lax.scan(body, init, (w_cdv, jnp.arange(c)))
  lse = m + jnp.log(s)
  return tgt - lse, lse - u / s


def shifted_token_logprobs(model, tokens_bt, positions_bt=None, segment_ids_bt=None, *, temperature=1.0,
                           num_chunks: int = 1, with_aux: bool = False, index_bm=None):
  """logp[b, t] = log pi(tokens[b, t] | tokens[b, <t]) (0 at t = 0), and the entropy at the same places;
  ``with_aux``: also the model's auxiliary loss (the MoE load-balancing loss, ``hidden_states_and_aux``).

  ``index_bm`` (int [B, M], ``loss_index``): only the positions t = index[b, m] >= 1 are scored (0 entries are
  padding); logp and entropy are 0 elsewhere. The LM head and its softmax then run on B M rows instead of B T:
  a loss that weights only those positions (the masked losses of ``codjax.rl.losses``) gets the same value and
  gradient up to float rounding, for the vocabulary products of a fraction of the tokens (SFT and RL train only
  on the replies, ~20 % of a CoD episode's tokens)."""
  aux = None
  if with_aux:
    hidden, aux = model.hidden_states_and_aux(tokens_bt, positions_bt, segment_ids_bt)
  else:
    hidden = model.hidden_states(tokens_bt, positions_bt, segment_ids_bt)
  if index_bm is not None:
    logp, ent = _indexed_logprobs(model, hidden, tokens_bt, index_bm, temperature, num_chunks)
    return (logp, ent, aux) if with_aux else (logp, ent)
  nxt = jnp.roll(tokens_bt, -1, axis=1)
  logp, ent = token_logprobs_and_entropy(hidden, model.lm_head_weight(), nxt, temperature=temperature,
                                         num_chunks=num_chunks, compute_dtype=model.cfg.jnp_dtype)
  pad = jnp.zeros_like(logp[:, :1])
  out = jnp.concatenate([pad, logp[:, :-1]], axis=1), jnp.concatenate([pad, ent[:, :-1]], axis=1)
  return out + (aux,) if with_aux else out


def _indexed_logprobs(model, hidden_btd, tokens_bt, index_bm, temperature, num_chunks):
  """``shifted_token_logprobs`` at the positions ``index_bm`` only (see there), scattered back to [B, T]."""
  index_bm = index_bm.astype(jnp.int32)
  h_bmd = jnp.take_along_axis(hidden_btd, jnp.maximum(index_bm - 1, 0)[..., None], axis=1)
  targets_bm = jnp.take_along_axis(tokens_bt, index_bm, axis=1)
  logp_bm, ent_bm = token_logprobs_and_entropy(h_bmd, model.lm_head_weight(), targets_bm, temperature=temperature,
                                               num_chunks=num_chunks, compute_dtype=model.cfg.jnp_dtype)
  valid = index_bm > 0
  rows = jnp.arange(tokens_bt.shape[0])[:, None]

  def scatter(x_bm):
    zeros = jnp.zeros(tokens_bt.shape, x_bm.dtype)
    return zeros.at[rows, index_bm].add(jnp.where(valid, x_bm, 0.0))  # padding adds 0 at t = 0

  return scatter(logp_bm), scatter(ent_bm)
