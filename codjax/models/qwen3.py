"""Flax NNX port of the dense Qwen3 decoder.

Per layer (pre-norm), with D = hidden, N = query heads, K = key/value heads, H = head_dim, F = MLP width:

  h = RMSNorm(x);  q = h W_q [B,T,N,H];  k = h W_k, v = h W_v [B,T,K,H]
  q, k = RMSNorm_H(q), RMSNorm_H(k)          (q_norm / k_norm over head_dim, *before* RoPE)
  q, k = RoPE(q, pos), RoPE(k, pos)           (rotate-half convention, inv_freq = theta^(-2i/H))
  x = x + softmax(q k^T / sqrt(H) + mask) v W_o   (grouped-query attention: N/K query heads per kv head)
  x = x + W_down (silu(RMSNorm(x) W_gate) * (RMSNorm(x) W_up))

RMSNorm(x) = w * x / sqrt(mean(x^2) + eps), computed in float32 and cast back (as Hugging Face does).
Logits = RMSNorm(x_L) W_lm (W_lm = W_embed^T when embeddings are tied), returned in float32.

Layer weights are stacked along a leading layer axis and the layers run under ``jax.lax.scan`` (as in
MaxText), so compile time does not grow with depth; ``cfg.scan_layers=False`` runs the full-sequence forward
as a Python loop over per-layer slices instead (MaxText's ``scan_layers`` switch: longer compiles, a faster
train step on XLA CPU); ``cfg.remat`` wraps the layer in ``jax.checkpoint``.
Two entry points: ``__call__`` (full sequence, causal, padding and packed segments via ``segment_ids`` and
``positions``) for training and scoring, and ``forward_cached`` (KV-cache prefill/decode of a chunk at
per-row offsets) for sampling. Full-sequence attention goes through ``jax.nn.dot_product_attention`` with
``cfg.attention_impl`` (``xla`` on CPU, ``cudnn`` on GPU) or, with ``attention_impl="blockwise"``, through
``blockwise_causal_attention`` (exact, per query block; faster on CPU). Cached attention reads keys stored
transposed and values head-major (``cached_attention``), the layouts its matmuls consume directly.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from codjax.models.config import Qwen3Config
from codjax.models.matmul import PanelWeight, matmul

# Logical axes of every parameter: the model's half of the sharding seam, passed to the functions of
# codjax.parallel.sharding (which hold the rules and never import models). Layer params carry a leading
# "layers" axis.
PARAM_LOGICAL_AXES: dict[str, tuple[str | None, ...]] = {
    "embed_vd": ("vocab", "embed"),
    "final_norm_d": (None,),
    "lm_head_dv": ("embed", "vocab"),
    "attn_norm_ld": ("layers", None),
    "q_ldnh": ("layers", "embed", "q_heads", None),
    "k_ldkh": ("layers", "embed", "kv_heads", None),
    "v_ldkh": ("layers", "embed", "kv_heads", None),
    "o_lnhd": ("layers", "q_heads", None, "embed"),
    "q_norm_lh": ("layers", None),
    "k_norm_lh": ("layers", None),
    "mlp_norm_ld": ("layers", None),
    "gate_ldf": ("layers", "embed", "mlp"),
    "up_ldf": ("layers", "embed", "mlp"),
    "down_lfd": ("layers", "mlp", "embed"),
}

BLOCK_Q = 128  # query block of ``blockwise_causal_attention``

LAYER_PARAM_NAMES = ("attn_norm_ld", "q_ldnh", "k_ldkh", "v_ldkh", "o_lnhd", "q_norm_lh", "k_norm_lh",
                     "mlp_norm_ld", "gate_ldf", "up_ldf", "down_lfd")


def rms_norm(x, w, eps: float):
  """w * x / sqrt(mean(x^2) + eps) in float32, cast back to x's dtype before scaling (HF order)."""
  x32 = x.astype(jnp.float32)
  y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  return w.astype(x.dtype) * y.astype(x.dtype)


def rope_sin_cos(positions_bt, head_dim: int, theta: float):
  """sin/cos tables [B, T, H/2] for integer positions (float32)."""
  inv_freq = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
  ang = positions_bt.astype(jnp.float32)[..., None] * inv_freq
  return jnp.sin(ang), jnp.cos(ang)


def apply_rope(x_btnh, sin_bth, cos_bth):
  """Rotate-half RoPE: [x1, x2] -> [x1 cos - x2 sin, x2 cos + x1 sin] (matches HF Qwen3)."""
  h = x_btnh.shape[-1] // 2
  x1, x2 = x_btnh[..., :h].astype(jnp.float32), x_btnh[..., h:].astype(jnp.float32)
  s, c = sin_bth[:, :, None, :], cos_bth[:, :, None, :]
  out = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
  return out.astype(x_btnh.dtype)


@dataclasses.dataclass(frozen=True)
class AttnSpec:
  """How attention is masked for one call (static parts only)."""

  is_causal: bool  # True: plain causal attention (mask may be None)
  implementation: str


def _proj(x_btd, w_d___):
  """``'BTD,D...->BT...'`` as one 2-D matmul on [B*T, D] (``codjax.models.matmul``): XLA on CPU then writes
  no transposed copies of the activation gradient (measured ~10% of a train step against the 3-D einsum)."""
  b, t, d = x_btd.shape
  y = matmul(x_btd.reshape(b * t, d), w_d___.reshape(d, -1))
  return y.reshape((b, t) + w_d___.shape[1:])


def _group_heads(x_btnh, kv_heads: int):
  """[B, T, N, H] -> [B, K, G, T, H] (query head n = k G + g uses kv head k)."""
  b, t, n, h = x_btnh.shape
  return x_btnh.reshape(b, t, kv_heads, n // kv_heads, h).transpose(0, 2, 3, 1, 4)


def _ungroup_heads(x_bkgth):
  """[B, K, G, T, H] -> [B, T, N, H], the inverse of ``_group_heads``."""
  b, k, g, t, h = x_bkgth.shape
  return x_bkgth.transpose(0, 3, 1, 2, 4).reshape(b, t, k * g, h)


def cached_attention(q_bcnh, kT_xhs, v_xsh, mask_bcs):
  """Grouped-query attention of C new queries over a KV cache stored in matmul-ready layouts.

  o[b,c,n] = sum_s softmax_s(q[b,c,n] . k[b,n//G,s] / sqrt(H) | mask[b,c,s]) v[b,n//G,s], G = N/K. The cache
  rows are (row, kv head) pairs flattened, x = b K + k: keys transposed ``kT_xhs`` [B K, H, S], values
  ``v_xsh`` [B K, S, H], so both products are plain batched matmuls ([G C, H] @ [H, S] and [G C, S] @ [S, H])
  whose operands are the cache buffers themselves. With the [B, S, K, H] layout XLA on CPU copied the whole
  cache into the matmul layout on every decode step; with [B, K, H, S] buffers the dot read a reshaped view of
  the updated cache, and XLA duplicated the in-place update into a second, copied buffer (three cache copies
  per layer and step inside the decode loop). Scores and softmax in float32; masked slots get the float32
  minimum (a row with no visible slot, a padding row, averages its values instead of producing NaN).
  """
  b, c, n, h = q_bcnh.shape
  kh = kT_xhs.shape[0] // b
  g = n // kh
  q = _group_heads(q_bcnh, kh).reshape(b * kh, g * c, h)
  s = jnp.einsum("xqh,xhs->xqs", q, kT_xhs, preferred_element_type=jnp.float32) * (h ** -0.5)
  mask = jnp.broadcast_to(mask_bcs[:, None, None], (b, kh, g) + mask_bcs.shape[1:]).reshape(b * kh, g * c, -1)
  s = jnp.where(mask, s, jnp.finfo(jnp.float32).min)
  p = jax.nn.softmax(s, axis=-1).astype(v_xsh.dtype)
  o = jnp.einsum("xqs,xsh->xqh", p, v_xsh)
  return _ungroup_heads(o.reshape(b, kh, g, c, h))


def write_cache(kT_xhs, v_xsh, k_btkh, v_btkh, start_b):
  """Writes a chunk's keys and values at slots ``start_b + [0, C)`` of flattened caches (``cached_attention``);
  a vmapped ``dynamic_update_slice`` over the B K rows (in place inside a loop, clamped at the end)."""
  b, c, kh, h = k_btkh.shape
  start_x = jnp.repeat(start_b, kh)
  k_xhc = k_btkh.transpose(0, 2, 3, 1).reshape(b * kh, h, c).astype(kT_xhs.dtype)
  v_xch = v_btkh.transpose(0, 2, 1, 3).reshape(b * kh, c, h).astype(v_xsh.dtype)
  kT_xhs = jax.vmap(lambda t, u, s: jax.lax.dynamic_update_slice(t, u, (0, s)))(kT_xhs, k_xhc, start_x)
  v_xsh = jax.vmap(lambda t, u, s: jax.lax.dynamic_update_slice(t, u, (s, 0)))(v_xsh, v_xch, start_x)
  return kT_xhs, v_xsh


def flat_kv(kT_bkhs, v_bksh):
  """[B, K, H, S] / [B, K, S, H] caches as the [B K, H, S] / [B K, S, H] rows ``cached_attention`` reads
  (already flattened caches are returned as they are)."""
  return (kT_bkhs.reshape((-1,) + kT_bkhs.shape[-2:]), v_bksh.reshape((-1,) + v_bksh.shape[-2:]))


def _query_blocks(t: int, block: int) -> list[tuple[int, int]]:
  """[a, e) of each query block."""
  return [(a, min(t, a + block)) for a in range(0, t, block)]


def _block_mask(a: int, e: int, b: int, mask_b1ts):
  """[B, 1, 1, e - a, e]: query a + i sees keys <= a + i (and ``mask_b1ts``, if given)."""
  m = jnp.broadcast_to((jnp.arange(e)[None, :] <= jnp.arange(a, e)[:, None])[None], (b, e - a, e))
  if mask_b1ts is not None:
    m = m & mask_b1ts[:, 0, a:e, :e]
  return m[:, None, None]


def _block_scores(q_bkgch, kT_bkhs, mask):
  """Masked float32 scores [B, K, G, C, e] of a query block against its key prefix."""
  s = jnp.einsum("bkgch,bkhs->bkgcs", q_bkgch, kT_bkhs, preferred_element_type=jnp.float32)
  return jnp.where(mask, s, jnp.finfo(jnp.float32).min)


def _blockwise_forward(q_btnh, k_btkh, v_btkh, mask_b1ts, block: int):
  """(output [B, T, N, H], residuals for the backward: scaled grouped queries [B, K, G, T, H], k^T
  [B, K, H, T], v [B, K, T, H] and the per-block probabilities [B, K, G, C, e])."""
  b, t, n, h = q_btnh.shape
  qh = _group_heads(q_btnh * jnp.asarray(h ** -0.5, q_btnh.dtype), k_btkh.shape[2])
  kT = k_btkh.transpose(0, 2, 3, 1)
  v = v_btkh.transpose(0, 2, 1, 3)
  outs, probs = [], []
  for a, e in _query_blocks(t, block):
    s = _block_scores(qh[:, :, :, a:e], kT[..., :e], _block_mask(a, e, b, mask_b1ts))
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    outs.append(jnp.einsum("bkgcs,bksh->bkgch", p.astype(v.dtype), v[:, :, :e]))
    probs.append(p)
  out = _ungroup_heads(jnp.concatenate(outs, axis=3) if len(outs) > 1 else outs[0])
  return out, (qh, kT, v, probs)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _blockwise(q_btnh, k_btkh, v_btkh, mask_b1ts, block: int):
  return _blockwise_forward(q_btnh, k_btkh, v_btkh, mask_b1ts, block)[0]


def _blockwise_fwd(q_btnh, k_btkh, v_btkh, mask_b1ts, block: int):
  out, operands = _blockwise_forward(q_btnh, k_btkh, v_btkh, mask_b1ts, block)
  return out, (out, operands)


def _blockwise_bwd(block: int, res, dout_btnh):
  """Softmax-attention backward per query block (P = saved probabilities, dO = output cotangent):
  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),  dQ = dS K / sqrt(H),  dK += dS^T Q / sqrt(H),  dV += P^T dO.
  dK (kept transposed, [B, K, H, T]) and dV accumulate in float32 over the blocks' key prefixes in place."""
  out, (qh, kT, v, probs) = res
  b, kh, h, t = kT.shape
  scale = jnp.asarray(h ** -0.5, qh.dtype)
  do = _group_heads(dout_btnh, kh)  # [B, K, G, T, H]
  rowdot = _group_heads(jnp.sum(dout_btnh.astype(jnp.float32) * out.astype(jnp.float32), axis=-1,
                                keepdims=True), kh)  # rowsum(dO * O): [B, K, G, T, 1]
  dkT = jnp.zeros((b, kh, h, t), jnp.float32)
  dv = jnp.zeros((b, kh, t, h), jnp.float32)
  dqs = []
  for p, (a, e) in zip(probs, _query_blocks(t, block)):
    do_b = do[:, :, :, a:e]
    dp = jnp.einsum("bkgch,bksh->bkgcs", do_b, v[:, :, :e], preferred_element_type=jnp.float32)
    ds = (p * (dp - rowdot[:, :, :, a:e])).astype(qh.dtype)
    dqs.append(jnp.einsum("bkgcs,bkhs->bkgch", ds, kT[..., :e]))
    dkT = dkT.at[..., :e].add(jnp.einsum("bkgch,bkgcs->bkhs", qh[:, :, :, a:e], ds,
                                         preferred_element_type=jnp.float32))
    dv = dv.at[:, :, :e].add(jnp.einsum("bkgcs,bkgch->bksh", p.astype(v.dtype), do_b,
                                        preferred_element_type=jnp.float32))
  dq = _ungroup_heads(jnp.concatenate(dqs, axis=3) if len(dqs) > 1 else dqs[0]) * scale
  return dq, dkT.transpose(0, 3, 1, 2).astype(kT.dtype), dv.transpose(0, 2, 1, 3).astype(v.dtype), None


_blockwise.defvjp(_blockwise_fwd, _blockwise_bwd)


def blockwise_causal_attention(q_btnh, k_btkh, v_btkh, mask_b1ts=None, block: int = BLOCK_Q):
  """Exact causal attention computed per block of ``block`` queries: block [a, e) attends keys [0, e) only,
  so the scores above the diagonal block are never formed (about half the FLOPs and saved probabilities of
  the dense [T, T] form for T >> block). Same math as ``jax.nn.dot_product_attention(is_causal=True)``;
  ``mask_b1ts`` (packed segments) is intersected with the causal mask; a query with no visible key (a padding
  row) averages the values of its prefix instead of producing NaN. Queries are grouped per kv head
  ([B, K, G, T, H]), keys kept transposed ([B, K, H, T]), so every product is a plain batched matmul; scores
  and softmax in float32.

  The backward is written by hand (``_blockwise_bwd``): it reuses the saved probabilities and accumulates
  the key and value gradients over the blocks in place, where autodiff of the blockwise forward zero-padded
  every block's prefix gradient to full length and added them (train step of the 42M benchmark model on XLA
  CPU: see benchmarks/README.md, "Fifth re-run").
  """
  return _blockwise(q_btnh, k_btkh, v_btkh, mask_b1ts, block)


def attention_core(q_btnh, k_btkh, v_btkh, mask_b1ts, spec: AttnSpec, dt, cache_kv=None, start_b=None):
  """Softmax attention of already normed and rotated q, k, v: full sequence (``spec``: blockwise, or
  ``jax.nn.dot_product_attention`` with its implementation) or, with ``cache_kv`` (k^T [B, K, H, S],
  v [B, K, S, H]), a cached chunk written at slots ``start_b``. Returns (o [B, T, N, H], new cache or None)."""
  if cache_kv is None and spec.implementation == "blockwise":
    return blockwise_causal_attention(q_btnh, k_btkh, v_btkh, None if spec.is_causal else mask_b1ts), None
  if cache_kv is None:
    return jax.nn.dot_product_attention(q_btnh, k_btkh, v_btkh, mask=mask_b1ts, is_causal=spec.is_causal,
                                        implementation=spec.implementation), None
  # the stacked cache's layer slices ([B, K, H, S] / [B, K, S, H]) or the decode loop's flattened rows: the
  # same rows either way, returned in the shape they came in
  (k_shape, v_shape), (ck, cv) = (c.shape for c in cache_kv), flat_kv(*cache_kv)
  ck, cv = write_cache(ck, cv, k_btkh, v_btkh, start_b)
  o = cached_attention(q_btnh, ck.astype(dt), cv.astype(dt), mask_b1ts[:, 0])
  return o, (ck.reshape(k_shape), cv.reshape(v_shape))


def _attention(cfg: Qwen3Config, p: dict[str, Any], h_btd, sin, cos, mask_b1ts, spec: AttnSpec,
               cache_kv=None, start_b=None, core=attention_core):
  dt = cfg.jnp_dtype
  q = _proj(h_btd, p["q_ldnh"].astype(dt))  # 'BTD,DNH->BTNH'
  k = _proj(h_btd, p["k_ldkh"].astype(dt))  # 'BTD,DKH->BTKH'
  v = _proj(h_btd, p["v_ldkh"].astype(dt))
  q = apply_rope(rms_norm(q, p["q_norm_lh"], cfg.rms_norm_eps), sin, cos)
  k = apply_rope(rms_norm(k, p["k_norm_lh"], cfg.rms_norm_eps), sin, cos)
  o, new_cache = core(q, k, v, mask_b1ts, spec, dt, cache_kv, start_b)
  b, t, n, h = o.shape
  w_o = p["o_lnhd"].astype(dt)
  d = w_o.shape[-1]
  out = matmul(o.reshape(b * t, n * h), w_o.reshape(n * h, d)).reshape(b, t, d)  # 'BTNH,NHD->BTD'
  return out, new_cache


def _mlp(cfg: Qwen3Config, p: dict[str, Any], h_btd):
  dt = cfg.jnp_dtype
  g = _proj(h_btd, p["gate_ldf"].astype(dt))  # 'BTD,DF->BTF'
  u = _proj(h_btd, p["up_ldf"].astype(dt))
  return _proj(jax.nn.silu(g) * u, p["down_lfd"].astype(dt))  # 'BTF,FD->BTD'



def _layer(cfg: Qwen3Config, p, x_btd, sin, cos, mask, spec: AttnSpec, cache_kv=None, start_b=None,
           core=attention_core):
  """One decoder layer; ``core``: the attention of already normed and rotated q, k, v (``attention_core``, or
  ``_packed_core`` for a prefill chunk given as its packed tokens)."""
  a, new_cache = _attention(cfg, p, rms_norm(x_btd, p["attn_norm_ld"], cfg.rms_norm_eps), sin, cos, mask,
                            spec, cache_kv, start_b, core)
  x_btd = x_btd + a
  x_btd = x_btd + _mlp(cfg, p, rms_norm(x_btd, p["mlp_norm_ld"], cfg.rms_norm_eps))
  return x_btd, new_cache


def _packed_core(to_bc, to_n, chunk_shape: tuple[int, int]):
  """An ``attention_core`` for a prefill chunk given as its N packed tokens ([1, N, ...] q, k, v): the row-wise
  work of ``_layer`` (norms, RoPE, the q/k/v/o and MLP products: nearly all of a chunk's FLOPs) then runs on the
  N tokens, and only attention, which needs each row's cache, on the padded [B, C] layout. ``to_bc`` [B C]: the
  packed token each padded slot takes (a pad slot takes any token: it is written past its row's valid length,
  as a pad token is); ``to_n`` [N]: the padded slot each packed token comes back from."""
  b, c = chunk_shape

  def core(q_1nnh, k_1nkh, v_1nkh, mask_b1ts, spec, dt, cache_kv, start_b):
    unpack = lambda t: t[0][to_bc].reshape((b, c) + t.shape[2:])
    o, new_cache = attention_core(unpack(q_1nnh), unpack(k_1nkh), unpack(v_1nkh), mask_b1ts, spec, dt, cache_kv,
                                  start_b)
    return o.reshape((b * c,) + o.shape[2:])[to_n][None], new_cache
  return core


def _remat(cfg: Qwen3Config, fn):
  if cfg.remat == "full":
    return jax.checkpoint(fn, static_argnums=())
  if cfg.remat == "dots":
    return jax.checkpoint(fn, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
  return fn


def _normal(rngs: nnx.Rngs, shape, std: float, dtype):
  return (std * jax.random.normal(rngs.params(), shape, jnp.float32)).astype(dtype)


class TokenEmbeddings:
  """The token-side pieces every codjax decoder shares (Qwen3, Qwen3.5/3.6): the input embedding ``embed_vd``
  [V, D], the output projection (``lm_head_dv`` [D, V], or the transposed embedding when
  ``cfg.tie_word_embeddings``) and float32 logits from final normed hidden states."""

  def lm_head_weight(self) -> jax.Array:
    """The [D, V] output projection (the transposed embedding when tied)."""
    if self.cfg.tie_word_embeddings:
      return self.embed_vd[...].T
    return self.lm_head_dv[...]

  def logits(self, hidden_btd) -> jax.Array:
    """float32 logits [..., V] from final hidden states (already normed)."""
    d = hidden_btd.shape[-1]
    lead = hidden_btd.shape[:-1]
    y = matmul(hidden_btd.astype(self.cfg.jnp_dtype).reshape(-1, d),
               self.lm_head_weight().astype(self.cfg.jnp_dtype))
    return y.reshape(lead + (-1,)).astype(jnp.float32)

  def decode_head(self) -> jax.Array:
    """The output projection prepared once per decode call, outside its token loop, for ``decode_logits``:
    in the compute dtype; on the CPU backend as [V, D] (the tied embedding itself, or one transposed copy
    of ``lm_head_dv``), elsewhere as [D, V]. XLA CPU multiplies a few decode rows by W_vd^T ~1.7x faster
    than by W_dv (4 x 256 by 256 x 32768: 7-8 ms against 12-14 ms; benchmarks/README.md), and the copy is
    made once per call, not per token (behind an optimization barrier, so XLA cannot fold it back)."""
    dt = self.cfg.jnp_dtype
    if jax.default_backend() != "cpu":
      return self.lm_head_weight().astype(dt)
    if self.cfg.tie_word_embeddings:
      return self.embed_vd[...].astype(dt)
    return jax.lax.optimization_barrier(self.lm_head_dv[...].astype(dt).T)

  def decode_logits(self, hidden_bd, head) -> jax.Array:
    """float32 logits [B, V] from final hidden states [B, D] and ``decode_head()`` (equal to ``logits``)."""
    h = hidden_bd.astype(self.cfg.jnp_dtype)
    spec = "bd,vd->bv" if jax.default_backend() == "cpu" else "bd,dv->bv"
    return jnp.einsum(spec, h, head).astype(jnp.float32)

  def embed(self, tokens_bt) -> jax.Array:
    return jnp.take(self.embed_vd[...], tokens_bt, axis=0).astype(self.cfg.jnp_dtype)


class Qwen3(TokenEmbeddings, nnx.Module):
  """Dense Qwen3 causal LM (see module docstring). Parameters use shape-suffixed names."""

  # Every parameter is cast to the compute dtype before it is used (the projections, the embedding gather,
  # the output head and RMSNorm's scale), so a sampler may store them in that dtype: the same logits from half
  # the bytes per decode step when parameters are float32 and compute bfloat16 (codjax.rollout.jax_engine).
  PARAMS_CAST_TO_COMPUTE_BEFORE_USE = True
  # A cache row's positions [0, n) hold the first n tokens' keys and values and nothing else depends on them,
  # so a sampler may copy any prefix of one row into another (shared prompt prefixes: codjax.rollout.jax_engine)
  PREFIX_COPY = True
  # ``forward_cached_unrolled`` over ``split_layers`` / ``cache_layers`` computes what ``forward_cached`` does,
  # layer for layer with the same products, so a sampler may prefill through it (bit-identical caches on the
  # CPU backend: tests/rollout/test_jax_engine.py)
  UNROLLED_PREFILL = True

  def __init__(self, cfg: Qwen3Config, *, rngs: nnx.Rngs, init_std: float = 0.02):
    self.cfg = cfg
    d, f, v, l = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_hidden_layers
    n, k, h = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    pd = cfg.jnp_param_dtype
    self.embed_vd = nnx.Param(_normal(rngs, (v, d), init_std, pd))
    self.attn_norm_ld = nnx.Param(jnp.ones((l, d), pd))
    self.q_ldnh = nnx.Param(_normal(rngs, (l, d, n, h), init_std, pd))
    self.k_ldkh = nnx.Param(_normal(rngs, (l, d, k, h), init_std, pd))
    self.v_ldkh = nnx.Param(_normal(rngs, (l, d, k, h), init_std, pd))
    self.o_lnhd = nnx.Param(_normal(rngs, (l, n, h, d), init_std, pd))
    self.q_norm_lh = nnx.Param(jnp.ones((l, h), pd))
    self.k_norm_lh = nnx.Param(jnp.ones((l, h), pd))
    self.mlp_norm_ld = nnx.Param(jnp.ones((l, d), pd))
    self.gate_ldf = nnx.Param(_normal(rngs, (l, d, f), init_std, pd))
    self.up_ldf = nnx.Param(_normal(rngs, (l, d, f), init_std, pd))
    self.down_lfd = nnx.Param(_normal(rngs, (l, f, d), init_std, pd))
    self.final_norm_d = nnx.Param(jnp.ones((d,), pd))
    if not cfg.tie_word_embeddings:
      self.lm_head_dv = nnx.Param(_normal(rngs, (d, v), init_std, pd))

  # -- helpers ------------------------------------------------------------------------------------------
  def _layer_params(self) -> dict[str, jax.Array]:
    return {name: getattr(self, name)[...] for name in LAYER_PARAM_NAMES}

  def split_layers(self) -> list[dict[str, jax.Array]]:
    """Per-layer parameter dicts (slices of the stacked weights), for ``forward_cached_unrolled``."""
    stacked = self._layer_params()
    return [{k: v[i] for k, v in stacked.items()} for i in range(self.cfg.num_hidden_layers)]

  # per-layer weight -> how many of its leading dims a product contracts (q: D of [D, N, H]; o: N, H of [N, H, D])
  PANEL_CONTRACT = {"q_ldnh": 1, "k_ldkh": 1, "v_ldkh": 1, "o_lnhd": 2, "gate_ldf": 1, "up_ldf": 1, "down_lfd": 1}

  @staticmethod
  def panel_layers(layers, panel: int):
    """``split_layers`` output with every weight product's matrix as column panels of ``panel`` columns
    (``codjax.models.matmul.PanelWeight``; one whose output width is not a multiple of ``panel`` stays as it
    is): the same values, the layout the decode loop's few-row products read fastest on CPU. The layer code
    takes either form."""
    def convert(name, w):
      contract = Qwen3.PANEL_CONTRACT.get(name)
      if contract is None or math.prod(w.shape[contract:]) % panel:
        return w
      return PanelWeight.from_array(w, contract, panel)
    return [{k: convert(k, v) for k, v in layer.items()} for layer in layers]


  # -- full-sequence forward ----------------------------------------------------------------------------
  def hidden_states(self, tokens_bt, positions_bt=None, segment_ids_bt=None) -> jax.Array:
    """Final normed hidden states [B, T, D].

    ``segment_ids_bt``: 0 marks padding; tokens attend causally to earlier tokens of the same nonzero
    segment (packed sequences). ``positions_bt`` restart at 0 for each packed sequence. Without segment ids
    the whole row is one causal sequence (right padding needs no mask: valid tokens never see later pads).
    """
    cfg = self.cfg
    b, t = tokens_bt.shape
    if positions_bt is None:
      positions_bt = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
    sin, cos = rope_sin_cos(positions_bt, cfg.head_dim, cfg.rope_theta)
    if segment_ids_bt is None:
      mask, spec = None, AttnSpec(True, cfg.attention_impl)
    else:
      seg = segment_ids_bt
      causal = jnp.tril(jnp.ones((t, t), bool))
      mask = (seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] != 0) & causal[None]
      mask = mask[:, None]
      spec = AttnSpec(False, cfg.attention_impl)

    def body(x, p):
      x, _ = _layer(cfg, p, x, sin, cos, mask, spec)
      return x, None

    layer = _remat(cfg, body)
    x = self.embed(tokens_bt)
    if cfg.scan_layers:
      x, _ = jax.lax.scan(layer, x, self._layer_params())
    else:
      for p in self.split_layers():
        x, _ = layer(x, p)
    return rms_norm(x, self.final_norm_d[...], cfg.rms_norm_eps)

  def __call__(self, tokens_bt, positions_bt=None, segment_ids_bt=None) -> jax.Array:
    """float32 logits [B, T, V]."""
    return self.logits(self.hidden_states(tokens_bt, positions_bt, segment_ids_bt))

  # -- KV cache -----------------------------------------------------------------------------------------
  def init_cache(self, batch: int, max_len: int, dtype=None) -> tuple[jax.Array, jax.Array]:
    """Zeroed caches (k^T [L, B, K, H, S], v [L, B, K, S, H]): the layouts ``cached_attention`` reads."""
    cfg = self.cfg
    l, k, h = cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim
    dt = dtype or cfg.jnp_dtype
    return jnp.zeros((l, batch, k, h, max_len), dt), jnp.zeros((l, batch, k, max_len, h), dt)

  def _chunk_inputs(self, c: int, start_b, s: int):
    """RoPE tables and the [B, 1, C, S] mask (query slot start_b + i sees key slots <= it) of a cached chunk."""
    pos_bc = start_b[:, None] + jnp.arange(c, dtype=jnp.int32)[None]
    sin, cos = rope_sin_cos(pos_bc, self.cfg.head_dim, self.cfg.rope_theta)
    mask = (jnp.arange(s, dtype=jnp.int32)[None, None, :] <= pos_bc[:, :, None])[:, None]
    return sin, cos, mask, AttnSpec(False, self.cfg.attention_impl)

  @staticmethod
  def cache_take(cache, slots_b, length: int):
    """The rows ``slots_b`` of the cache, positions [0, length) (the sampler's working window)."""
    ck, cv = cache
    return ck[:, slots_b, :, :, :length], cv[:, slots_b, :, :length]

  @staticmethod
  def cache_put(cache, sub, slots_b, length: int):
    """Writes a window from ``cache_take`` back."""
    (ck, cv), (sk, sv) = cache, sub
    return ck.at[:, slots_b, :, :, :length].set(sk), cv.at[:, slots_b, :, :length].set(sv)

  def cache_take_layers(self, cache, slots_b, length: int) -> list:
    """``cache_layers(cache_take(cache, slots_b, length))`` gathered layer by layer from the cache: one pass
    over the window's bytes instead of a gather and then a copy per layer (XLA CPU copies the slices). 8 rows
    over 512 / 768 positions of the 13M-parameter benchmark model, 2 vCPUs: ~1.6 / ~11 ms against ~11 / ~19."""
    ck, cv = cache
    return [flat_kv(ck[l][slots_b, :, :, :length], cv[l][slots_b, :, :length])
            for l in range(self.cfg.num_hidden_layers)]

  @staticmethod
  def cache_put_layers(cache, layers: list, slots_b, length: int):
    """Writes per-layer windows (``cache_take_layers`` form) back: ``cache_put(cache_stack(layers))``."""
    nl, _, kv_heads, h, _ = cache[0].shape
    b = slots_b.shape[0]
    like = (jax.ShapeDtypeStruct((nl, b, kv_heads, h, length), cache[0].dtype),
            jax.ShapeDtypeStruct((nl, b, kv_heads, length, h), cache[1].dtype))
    return Qwen3.cache_put(cache, Qwen3.cache_stack(layers, like), slots_b, length)

  @staticmethod
  def cache_put_span(cache, layers: list, slots_b, start_b, n: int):
    """Writes back only positions [s_b, s_b + n) of each row's per-layer window caches (``cache_layers``
    form, W positions), s_b = clip(start_b, 0, W - n): the positions a chunk of n tokens at ``start_b`` writes
    (``_write_kv`` clamps its updates the same way), or those n decode steps from ``start_b`` write (a step
    past the window's end lands on its last position, inside the span). The rest of the window is what
    ``cache_take`` read, so the cache comes out bit for bit as ``cache_put(cache_stack(layers))`` leaves it,
    without restacking and rewriting the whole window. Requires n <= W.

    One scatter per cache whose updates are whole [L, K, H, n] (k^T) / [L, K, n, H] (v) blocks, one per row at
    (slot_b, s_b): n contiguous positions per (layer, head, channel) row of k^T. A scatter indexed by slot and
    position instead writes one [L, K, H] column per position, strided by the cache length. Window take plus
    write-back, 13M-parameter benchmark model, 8 rows, 64 positions of a 640-position window, 2 vCPUs: 2.2 ms
    against 6.0 ms for the whole window (``benchmarks/cache_writeback.py``; benchmarks/README.md,
    2026-12-06)."""
    ck, cv = cache
    kv_heads, w = ck.shape[2], layers[0][0].shape[-1]
    b = slots_b.shape[0]
    s_b = jnp.clip(start_b.astype(jnp.int32), 0, w - n)
    s_x = jnp.repeat(s_b, kv_heads)  # the flattened B K rows
    def blocks(per_layer, axis):
      """Per layer [B K, ...] windows -> [B, L, K, ...]: each row's span, cut at its own start on ``axis``."""
      cut = jax.vmap(lambda r, st: jax.lax.dynamic_slice_in_dim(r, st, n, axis=axis))
      x = jnp.stack([cut(a, s_x) for a in per_layer])  # [L, B K, ...]
      return x.reshape(len(per_layer), b, kv_heads, *x.shape[2:]).swapaxes(0, 1)

    k_blkhn, v_blknh = blocks([k for k, _ in layers], 1), blocks([v for _, v in layers], 0)
    idx_b2 = jnp.stack([slots_b.astype(jnp.int32), s_b], axis=1)
    # operand dims (L, slot, K, ·, ·): the index pair addresses (slot, position); the update's [L, K, H, n] /
    # [L, K, n, H] block is the window at that corner (the slot axis inserted, size 1)
    put = lambda c, upd, pos_dim: jax.lax.scatter(
        c, idx_b2, upd, jax.lax.ScatterDimensionNumbers(update_window_dims=(1, 2, 3, 4), inserted_window_dims=(1,),
                                                        scatter_dims_to_operand_dims=(1, pos_dim)),
        indices_are_sorted=False, unique_indices=False, mode=jax.lax.GatherScatterMode.CLIP)
    return put(ck, k_blkhn, 4), put(cv, v_blknh, 3)

  def cache_layers(self, sub) -> list:
    """Per-layer caches in layer order, rows flattened (k^T [B K, H, S], v [B K, S, H]: ``flat_kv``), the
    form ``forward_cached_unrolled`` carries through the decode loop."""
    ck, cv = sub
    return [flat_kv(ck[l], cv[l]) for l in range(self.cfg.num_hidden_layers)]

  @staticmethod
  def cache_stack(layers: list, like):
    """Inverse of ``cache_layers`` (``like``: the window they came from, for its shapes)."""
    ck, cv = like
    return (jnp.stack([k for k, _ in layers]).reshape(ck.shape),
            jnp.stack([v for _, v in layers]).reshape(cv.shape))

  def forward_cached(self, tokens_bc, start_b, cache, valid_len_b=None):
    """Runs a chunk of C tokens per row at cache slots ``start_b + [0, C)``; returns (hidden [B,C,D], cache).
    ``valid_len_b`` is accepted for the samplers' common interface and not needed: causal masking already
    keeps a chunk's trailing pad tokens out of every valid token's output.

    Row b's earlier tokens occupy slots ``[0, start_b)`` contiguously; its positions equal its slots. Query
    slot s attends key slots <= s, so pad tokens at the end of a chunk never affect valid ones (they write
    garbage beyond the row's valid length, which the next chunk overwrites). Requires start_b + C <= S.
    """
    cfg = self.cfg
    ck, cv = cache
    sin, cos, mask, spec = self._chunk_inputs(tokens_bc.shape[1], start_b, ck.shape[-1])

    def body(x, xs):
      p, k_l, v_l = xs
      x, (k_l, v_l) = _layer(cfg, p, x, sin, cos, mask, spec, (k_l, v_l), start_b)
      return x, (k_l, v_l)

    x, (ck, cv) = jax.lax.scan(body, self.embed(tokens_bc), (self._layer_params(), ck, cv))
    return rms_norm(x, self.final_norm_d[...], cfg.rms_norm_eps), (ck, cv)

  def forward_cached_packed(self, tokens_1n, start_b, to_bc, to_n, chunk_shape: tuple[int, int], layers, caches):
    """``forward_cached_unrolled`` of a [B, C] chunk given as its N packed tokens ``tokens_1n`` [1, N] (``to_bc``
    / ``to_n``: ``_packed_core``): the products run on N rows instead of B C, so a chunk's padding (rows of
    uneven length, a single row padded to the kernel's floor) costs only its attention. Returns (hidden
    [1, N, D], per-layer caches); the caches equal ``forward_cached_unrolled``'s on every valid position."""
    cfg = self.cfg
    b, c = chunk_shape
    sin, cos, mask, spec = self._chunk_inputs(c, start_b, caches[0][0].shape[-1])
    # each packed token's RoPE tables are its padded slot's
    sin_1n, cos_1n = (t.reshape(b * c, -1)[to_n][None] for t in (sin, cos))
    core = _packed_core(to_bc, to_n, chunk_shape)
    x = self.embed(tokens_1n)
    new = []
    for p, kv in zip(layers, caches):
      x, kv = _layer(cfg, p, x, sin_1n, cos_1n, mask, spec, kv, start_b, core)
      new.append(kv)
    return rms_norm(x, self.final_norm_d[...], cfg.rms_norm_eps), new

  def forward_cached_unrolled(self, tokens_bc, start_b, layers, caches, valid_len_b=None):
    """``forward_cached`` with per-layer parameters (``split_layers``) and per-layer caches (``cache_layers``:
    [(k^T [B K, H, S], v [B K, S, H])]), unrolled over layers. Inside a token loop this avoids slicing the
    stacked weights and rewriting the stacked cache every token (XLA on CPU copies both: ~1.6x slower decoding)."""
    cfg = self.cfg
    sin, cos, mask, spec = self._chunk_inputs(tokens_bc.shape[1], start_b, caches[0][0].shape[-1])
    x = self.embed(tokens_bc)
    new = []
    for p, kv in zip(layers, caches):
      x, kv = _layer(cfg, p, x, sin, cos, mask, spec, kv, start_b)
      new.append(kv)
    return rms_norm(x, self.final_norm_d[...], cfg.rms_norm_eps), new


def init_model(cfg: Qwen3Config, seed: int = 0) -> Qwen3:
  return Qwen3(cfg, rngs=nnx.Rngs(params=seed))


def abstract_model(cfg: Qwen3Config) -> Qwen3:
  """A model whose parameters are ``jax.ShapeDtypeStruct`` (no memory); for shape checks and planning."""
  return nnx.eval_shape(lambda: Qwen3(cfg, rngs=nnx.Rngs(params=0)))
