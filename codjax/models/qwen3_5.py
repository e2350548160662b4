"""Flax NNX port of the Qwen3.5/3.6 text decoder: Gated DeltaNet / gated-attention hybrid, dense or MoE.

Per layer i (pre-norm, ``layer_types[i]``), with D = hidden:

  h = RMSNorm1p(x)                                         (RMSNorm with weight (1 + w): zero-centred weights)
  linear_attention (Gated DeltaNet, codjax.models.gated_deltanet):
    q, k, v = silu(causal_conv_W(h W_q, h W_k, h W_v))     (depthwise causal conv of width W per channel)
    q, k = l2norm(q), l2norm(k), repeated from Hk key heads to Hv value heads
    beta = sigmoid(h W_b);  g = -exp(A_log) softplus(h W_a + dt_bias)
    o = GatedDeltaRule(q, k, v, g, beta);  a = (RMSNorm(o) w_n * silu(h W_z)) W_out
  full_attention (gated softmax attention):
    q | gate = h W_q  (per head: the first H dims are the query, the next H the output gate)
    q, k = RMSNorm1p_H(q), RMSNorm1p_H(k);  RoPE on their first rotary_dim = H * partial_rotary_factor dims
    a = (softmax(q k^T / sqrt(H) + mask) v * sigmoid(gate)) W_o      (grouped-query attention)
  x = x + a
  x = x + MLP(RMSNorm1p(x))  (dense SwiGLU, or the top-k MoE with a gated shared expert: codjax.models.moe)

Logits = RMSNorm1p(x_L) W_lm in float32. Text positions are equal on Qwen3.5's three multimodal rotary axes, so
its mrope is plain partial RoPE here.

Parameters are stacked per layer kind: ``*_l*`` over all L layers (norms, MLP / MoE), ``*_a*`` over the A full
attention layers, ``*_r*`` over the R linear layers. Suffix letters: d hidden, v vocab, n query heads, k kv heads,
h head_dim, f MLP width, e experts, j linear key heads, c linear key head dim, u linear value heads, s linear
value head dim, w conv width, x conv channels. When ``layer_types`` repeats with period p (3 linear + 1 full
for every released model), the layers run as a ``jax.lax.scan`` over L / p blocks with a Python loop over the
p layers of a block, so compile time does not grow with depth; ``cfg.remat`` wraps each layer (the backward
recomputes one layer at a time).

Entry points match ``codjax.models.qwen3.Qwen3``: ``hidden_states`` / ``__call__`` (full sequence; packed
segments never leak through either the attention or the DeltaNet state or its convolution), and the sampler's
``init_cache`` / ``forward_cached`` / ``split_layers`` / ``forward_cached_unrolled`` with a per-row cache: KV
for full layers, (convolution inputs, float32 recurrent state) for linear layers. A cached chunk that starts at
position 0 starts from a zero state; tokens past a row's ``valid_len`` never touch its state.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from codjax.models import gated_deltanet as gdn
from codjax.models import moe as moe_lib
from codjax.models.config import Qwen35Config
from codjax.models.matmul import matmul
from codjax.models.qwen3 import (AttnSpec, TokenEmbeddings, _normal, _proj, _remat, apply_rope, attention_core,
                                 flat_kv, rope_sin_cos)

COMMON_AXES: dict[str, tuple[str | None, ...]] = {
    "embed_vd": ("vocab", "embed"),
    "final_norm_d": (None,),
    "lm_head_dv": ("embed", "vocab"),
    "attn_norm_ld": ("layers", None),
    "mlp_norm_ld": ("layers", None),
}
FULL_AXES = {
    "q_adnh": ("layers", "embed", "q_heads", None),
    "qgate_adnh": ("layers", "embed", "q_heads", None),
    "k_adkh": ("layers", "embed", "kv_heads", None),
    "v_adkh": ("layers", "embed", "kv_heads", None),
    "o_anhd": ("layers", "q_heads", None, "embed"),
    "q_norm_ah": ("layers", None),
    "k_norm_ah": ("layers", None),
}
# linear key heads shard like kv heads, value heads like query heads (both over ``tensor``): value head u reads
# key head u // (Hv / Hk), and contiguous shards of both keep that pairing on one device
LINEAR_AXES = {
    "lq_rdjc": ("layers", "embed", "kv_heads", None),
    "lk_rdjc": ("layers", "embed", "kv_heads", None),
    "lv_rdus": ("layers", "embed", "q_heads", None),
    "lz_rdus": ("layers", "embed", "q_heads", None),
    "lb_rdu": ("layers", "embed", "q_heads"),
    "la_rdu": ("layers", "embed", "q_heads"),
    "conv_q_rjcw": ("layers", "kv_heads", None, None),
    "conv_k_rjcw": ("layers", "kv_heads", None, None),
    "conv_v_rusw": ("layers", "q_heads", None, None),
    "dt_bias_ru": ("layers", "q_heads"),
    "a_log_ru": ("layers", "q_heads"),
    "lnorm_rs": ("layers", None),
    "lo_rusd": ("layers", "q_heads", None, "embed"),
}
DENSE_MLP_AXES = {
    "gate_ldf": ("layers", "embed", "mlp"),
    "up_ldf": ("layers", "embed", "mlp"),
    "down_lfd": ("layers", "mlp", "embed"),
}
MOE_AXES = {
    "router_lde": ("layers", "embed", None),
    "egate_ledf": ("layers", "experts", "embed", "mlp"),
    "eup_ledf": ("layers", "experts", "embed", "mlp"),
    "edown_lefd": ("layers", "experts", "mlp", "embed"),
    "sgate_ldf": ("layers", "embed", "mlp"),
    "sup_ldf": ("layers", "embed", "mlp"),
    "sdown_lfd": ("layers", "mlp", "embed"),
    "shared_gate_ld": ("layers", "embed"),
}
#: logical axes of every parameter either family may have (the model's half of the sharding seam)
PARAM_LOGICAL_AXES = {**COMMON_AXES, **FULL_AXES, **LINEAR_AXES, **DENSE_MLP_AXES, **MOE_AXES}

# logical axes of the sampler cache (JaxEngine): batch = cache slots
CACHE_LOGICAL_AXES = {
    "k": ("layers", "batch", "act_heads", None, "seq"),
    "v": ("layers", "batch", "act_heads", "seq", None),
    "conv_q": ("layers", "batch", None, None),
    "conv_k": ("layers", "batch", None, None),
    "conv_v": ("layers", "batch", None, None),
    "state": ("layers", "batch", "act_heads", None, None),
}


def rms_norm_1p(x, w, eps: float):
  """(1 + w) * x / sqrt(mean(x^2) + eps), in float32 and cast back after scaling (HF Qwen3_5RMSNorm)."""
  x32 = x.astype(jnp.float32)
  y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
  return (y * (1.0 + w.astype(jnp.float32))).astype(x.dtype)


def apply_partial_rope(x_btnh, sin_btr, cos_btr):
  """Rotate-half RoPE on the first 2r dims of each head (sin/cos [B, T, r]); the rest pass through."""
  rd = 2 * sin_btr.shape[-1]
  if rd == x_btnh.shape[-1]:
    return apply_rope(x_btnh, sin_btr, cos_btr)
  return jnp.concatenate([apply_rope(x_btnh[..., :rd], sin_btr, cos_btr), x_btnh[..., rd:]], axis=-1)


# -- layers ----------------------------------------------------------------------------------------------
#: decode-time fused input projections (``split_layers(fuse_inputs=True)``): name -> the weights it concatenates
FUSED_INPUTS = {
    "full_attention": ("attn_in_dx", ("q_adnh", "qgate_adnh", "k_adkh", "v_adkh")),
    "linear_attention": ("lin_in_dx", ("lq_rdjc", "lk_rdjc", "lv_rdus", "lz_rdus", "lb_rdu", "la_rdu")),
    "dense_mlp": ("mlp_in_dx", ("gate_ldf", "up_ldf")),
    "moe": ("moe_in_dx", ("router_lde", "sgate_ldf", "sup_ldf", "shared_gate_ld")),
}


def _in_projs(p, kind: str, h_btd, dt) -> list:
  """The input projections h W_n of one layer part (``FUSED_INPUTS[kind]``), each shaped [B, T, *W_n.shape[1:]]:
  one matmul by the fused [D, sum] weight when ``split_layers`` prepared it (decode), else one per weight."""
  fused, names = FUSED_INPUTS[kind]
  if fused not in p:
    return [_proj(h_btd, p[n].astype(dt)) for n in names]
  b, t, d = h_btd.shape
  y = matmul(h_btd.reshape(b * t, d), p[fused])
  outs, off = [], 0
  for n in names:
    shape = p[n].shape[1:]
    size = int(np.prod(shape))
    outs.append(y[:, off:off + size].reshape((b, t) + shape))
    off += size
  return outs


def _full_attention(cfg: Qwen35Config, p, h_btd, sin, cos, mask, spec: AttnSpec, cache_kv=None, start_b=None):
  dt = cfg.jnp_dtype
  q, gate, k, v = _in_projs(p, "full_attention", h_btd, dt)
  q = apply_partial_rope(rms_norm_1p(q, p["q_norm_ah"], cfg.rms_norm_eps), sin, cos)
  k = apply_partial_rope(rms_norm_1p(k, p["k_norm_ah"], cfg.rms_norm_eps), sin, cos)
  o, new_cache = attention_core(q, k, v, mask, spec, dt, cache_kv, start_b)
  o = o * jax.nn.sigmoid(gate.astype(jnp.float32)).astype(o.dtype)
  b, t, n, hd = o.shape
  w_o = p["o_anhd"].astype(dt)
  out = matmul(o.reshape(b * t, n * hd), w_o.reshape(n * hd, -1)).reshape(b, t, -1)
  return out, new_cache


def _linear_attention(cfg: Qwen35Config, p, h_btd, segment_ids_bt=None, cache=None, start_b=None,
                      valid_len_b=None):
  """Gated DeltaNet token mixer. ``cache`` (sampler): dict with conv_q/conv_k/conv_v [B, X, W-1] and state
  [B, Hv, dk, dv]; rows with ``start_b == 0`` start from zeros; tokens at or past ``valid_len_b`` (per row)
  leave the state and convolution inputs untouched."""
  dt = cfg.jnp_dtype
  b, t, _ = h_btd.shape
  hk, hv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
  dk, dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
  xq, xk, xv, z, xb, xa = _in_projs(p, "linear_attention", h_btd, dt)  # z: [B, T, Hv, dv]
  xq, xk, xv = xq.reshape(b, t, hk * dk), xk.reshape(b, t, hk * dk), xv.reshape(b, t, hv * dv)
  beta = jax.nn.sigmoid(xb.astype(jnp.float32))
  a = xa.astype(jnp.float32)
  g = -jnp.exp(p["a_log_ru"].astype(jnp.float32)) * jax.nn.softplus(a + p["dt_bias_ru"].astype(jnp.float32))
  width = cfg.linear_conv_kernel_dim
  if cache is not None:
    fresh = (start_b == 0)
    keep = lambda s: jnp.where(fresh.reshape((-1,) + (1,) * (s.ndim - 1)), jnp.zeros_like(s), s)
    st_q, st_k, st_v, state0 = (keep(cache["conv_q"]), keep(cache["conv_k"]), keep(cache["conv_v"]),
                                keep(cache["state"]))
    if valid_len_b is None:
      valid_len_b = jnp.full((b,), t, jnp.int32)
    valid_bt = jnp.arange(t, dtype=jnp.int32)[None, :] < valid_len_b[:, None]
    g = jnp.where(valid_bt[..., None], g, 0.0)
    beta = jnp.where(valid_bt[..., None], beta, 0.0)
  else:
    st_q = st_k = st_v = state0 = None
  conv = lambda x, w, st: gdn.causal_conv1d(x, w.reshape(-1, width).astype(dt), segment_ids_bt=segment_ids_bt,
                                            state_bcw=st, valid_len_b=valid_len_b)
  q, nq = conv(xq, p["conv_q_rjcw"], st_q)
  k, nk = conv(xk, p["conv_k_rjcw"], st_k)
  v, nv = conv(xv, p["conv_v_rusw"], st_v)
  q = gdn.l2norm(q.reshape(b, t, hk, dk).astype(jnp.float32))
  k = gdn.l2norm(k.reshape(b, t, hk, dk).astype(jnp.float32))
  v = v.reshape(b, t, hv, dv)
  if hv != hk:
    q = jnp.repeat(q, hv // hk, axis=2)
    k = jnp.repeat(k, hv // hk, axis=2)
  scale = dk ** -0.5
  if cache is not None and t == 1:
    o, state = gdn.recurrent_gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state_bhkv=state0)
  else:
    o, state = gdn.chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, segment_ids_bt=segment_ids_bt,
                                          initial_state_bhkv=state0, chunk_size=cfg.delta_chunk_size)
  o = gdn.gated_rms_norm(o.astype(dt), z, p["lnorm_rs"], cfg.rms_norm_eps)
  w_o = p["lo_rusd"].astype(dt)
  out = matmul(o.reshape(b * t, hv * dv), w_o.reshape(hv * dv, -1)).reshape(b, t, -1)
  new_cache = None
  if cache is not None:
    new_cache = {"conv_q": nq.astype(cache["conv_q"].dtype), "conv_k": nk.astype(cache["conv_k"].dtype),
                 "conv_v": nv.astype(cache["conv_v"].dtype), "state": state.astype(cache["state"].dtype)}
  return out, new_cache


def _mlp(cfg: Qwen35Config, p, h_btd):
  """(output, router logits [B*T, E] or None)."""
  dt = cfg.jnp_dtype
  if not cfg.is_moe:
    g, u = _in_projs(p, "dense_mlp", h_btd, dt)
    return _proj(jax.nn.silu(g) * u, p["down_lfd"].astype(dt)), None
  b, t, d = h_btd.shape
  router, sgate, sup, shared_gate = (y.reshape(b * t, -1) for y in _in_projs(p, "moe", h_btd, dt))
  mp = {"egate_edf": p["egate_ledf"].astype(dt), "eup_edf": p["eup_ledf"].astype(dt),
        "edown_efd": p["edown_lefd"].astype(dt), "sdown_fd": p["sdown_lfd"].astype(dt)}
  y, logits = moe_lib.moe_from_inputs(h_btd.reshape(b * t, d), router, sgate, sup, shared_gate, mp,
                                      top_k=cfg.num_experts_per_tok, impl=cfg.moe_impl)
  return y.reshape(b, t, d), logits


def _layer(cfg: Qwen35Config, kind: str, p, x_btd, ctx, cache=None):
  """One decoder layer; ``ctx`` holds sin/cos/mask/spec/segment_ids/start_b/valid_len_b. Returns
  (x, new cache, router logits or None)."""
  h = rms_norm_1p(x_btd, p["attn_norm_ld"], cfg.rms_norm_eps)
  if kind == "full_attention":
    a, new = _full_attention(cfg, p, h, ctx["sin"], ctx["cos"], ctx["mask"], ctx["spec"], cache, ctx["start_b"])
  else:
    a, new = _linear_attention(cfg, p, h, ctx["segment_ids"], cache, ctx["start_b"], ctx["valid_len_b"])
  x_btd = x_btd + a
  m, logits = _mlp(cfg, p, rms_norm_1p(x_btd, p["mlp_norm_ld"], cfg.rms_norm_eps))
  return x_btd + m, new, logits


class Qwen35(TokenEmbeddings, nnx.Module):
  """Qwen3.5/3.6 causal LM (see module docstring). Dense when ``cfg.num_experts == 0``, else MoE."""

  def __init__(self, cfg: Qwen35Config, *, rngs: nnx.Rngs, init_std: float = 0.02):
    self.cfg = cfg
    d, v, l = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    a, r = len(cfg.full_layers), len(cfg.linear_layers)
    n, k, h = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    hk, hv, dk, dv, w = (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                         cfg.linear_value_head_dim, cfg.linear_conv_kernel_dim)
    pd = cfg.jnp_param_dtype
    nrm = lambda shape: nnx.Param(_normal(rngs, shape, init_std, pd))
    zeros = lambda shape: nnx.Param(jnp.zeros(shape, pd))
    self.embed_vd = nrm((v, d))
    self.attn_norm_ld = zeros((l, d))
    self.mlp_norm_ld = zeros((l, d))
    self.final_norm_d = zeros((d,))
    if not cfg.tie_word_embeddings:
      self.lm_head_dv = nrm((d, v))
    if a:
      self.q_adnh, self.qgate_adnh = nrm((a, d, n, h)), nrm((a, d, n, h))
      self.k_adkh, self.v_adkh = nrm((a, d, k, h)), nrm((a, d, k, h))
      self.o_anhd = nrm((a, n, h, d))
      self.q_norm_ah, self.k_norm_ah = zeros((a, h)), zeros((a, h))
    if r:
      self.lq_rdjc, self.lk_rdjc = nrm((r, d, hk, dk)), nrm((r, d, hk, dk))
      self.lv_rdus, self.lz_rdus = nrm((r, d, hv, dv)), nrm((r, d, hv, dv))
      self.lb_rdu, self.la_rdu = nrm((r, d, hv)), nrm((r, d, hv))
      conv_std = w ** -0.5
      self.conv_q_rjcw = nnx.Param(_normal(rngs, (r, hk, dk, w), conv_std, pd))
      self.conv_k_rjcw = nnx.Param(_normal(rngs, (r, hk, dk, w), conv_std, pd))
      self.conv_v_rusw = nnx.Param(_normal(rngs, (r, hv, dv, w), conv_std, pd))
      self.dt_bias_ru = nnx.Param(jnp.ones((r, hv), pd))
      # A ~ U(0.01, 16) as HF initialises it
      a_init = jax.random.uniform(rngs.params(), (r, hv), jnp.float32, 0.01, 16.0)
      self.a_log_ru = nnx.Param(jnp.log(a_init).astype(pd))
      self.lnorm_rs = nnx.Param(jnp.ones((r, dv), pd))
      self.lo_rusd = nrm((r, hv, dv, d))
    if cfg.is_moe:
      e, f, fs = cfg.num_experts, cfg.moe_intermediate_size, cfg.shared_expert_intermediate_size
      self.router_lde = nrm((l, d, e))
      self.egate_ledf, self.eup_ledf, self.edown_lefd = nrm((l, e, d, f)), nrm((l, e, d, f)), nrm((l, e, f, d))
      self.sgate_ldf, self.sup_ldf, self.sdown_lfd = nrm((l, d, fs)), nrm((l, d, fs)), nrm((l, fs, d))
      self.shared_gate_ld = nrm((l, d))
    else:
      f = cfg.intermediate_size
      self.gate_ldf, self.up_ldf, self.down_lfd = nrm((l, d, f)), nrm((l, d, f)), nrm((l, f, d))

  # -- parameter groups ------------------------------------------------------------------------------------
  def param_names(self) -> dict[str, tuple[str, ...]]:
    """Names of the stacked parameters by the layer set they stack over: ``all`` (L), ``full`` (A), ``linear`` (R)."""
    cfg = self.cfg
    common = ("attn_norm_ld", "mlp_norm_ld") + tuple(MOE_AXES if cfg.is_moe else DENSE_MLP_AXES)
    return {"all": common, "full": tuple(FULL_AXES) if cfg.full_layers else (),
            "linear": tuple(LINEAR_AXES) if cfg.linear_layers else ()}

  def _stacked(self) -> dict[str, dict[str, jax.Array]]:
    return {group: {n: getattr(self, n)[...] for n in names} for group, names in self.param_names().items()}

  def split_layers(self, fuse_inputs: bool | None = None) -> list[dict[str, jax.Array]]:
    """Per-layer parameter dicts (slices of the stacked weights) in layer order, for ``forward_cached_unrolled``.

    ``fuse_inputs`` (default: on the CPU backend) adds each layer's input projections concatenated into one
    [D, sum] weight in the compute dtype (``FUSED_INPUTS``: the six Gated DeltaNet inputs, the four of gated
    attention, the MLP's gate and up, or the MoE router with the shared expert's inputs), so a decode step
    runs one matmul where it ran up to six. XLA CPU runs a few-row matmul far below its memory bandwidth and
    pays per product (a linear layer's six inputs at B = 4: 0.90 -> 0.50 ms per token; benchmarks/README.md);
    the copy is made once per decode call, outside the token loop. Off the CPU the copy would cost memory for
    little gain, so the default leaves it out."""
    cfg = self.cfg
    dt = cfg.jnp_dtype
    if fuse_inputs is None:
      fuse_inputs = jax.default_backend() == "cpu"
    st = self._stacked()
    out, ia, ir = [], 0, 0
    for i, kind in enumerate(cfg.layer_types):
      p = {n: v[i] for n, v in st["all"].items()}
      if kind == "full_attention":
        p.update({n: v[ia] for n, v in st["full"].items()})
        ia += 1
      else:
        p.update({n: v[ir] for n, v in st["linear"].items()})
        ir += 1
      if fuse_inputs:
        for part in (kind, "moe" if cfg.is_moe else "dense_mlp"):
          fused, names = FUSED_INPUTS[part]
          w = jnp.concatenate([p[n].reshape(p[n].shape[0], -1).astype(dt) for n in names], axis=1)
          p[fused] = jax.lax.optimization_barrier(w)
      out.append(p)
    return out

  def _blocks(self, tree: dict[str, dict[str, jax.Array]]):
    """Reshapes every stacked group [N, ...] to [L / p, N / (L / p), ...] (one row per block of p layers)."""
    nb = self.cfg.num_hidden_layers // self.cfg.layer_period
    return jax.tree.map(lambda v: v.reshape((nb, v.shape[0] // nb) + v.shape[1:]), tree)

  def _run_blocks(self, x, ctx, cache=None, with_logits=False):
    """Runs every layer: a scan over blocks of ``layer_period`` layers (or a Python loop with
    ``cfg.scan_layers=False``). ``cache`` groups: {"full": (k, v) stacked over A, "linear": dict stacked over R}.
    Returns (x, new cache or None, router logits [L, N, E] or None)."""
    cfg = self.cfg
    period = cfg.layer_period
    kinds = cfg.layer_types[:period]
    params = self._blocks(self._stacked())
    caches = None if cache is None else self._blocks(cache)

    # remat wraps each layer, not the block: the backward then recomputes one layer at a time (a working set of
    # one layer instead of p) for the price of saving every layer's input (MaxText's per-layer remat)
    layer_fns = {kind: _remat(cfg, lambda p, x, c, kind=kind: _layer(cfg, kind, p, x, ctx, c))
                 for kind in set(kinds)}

    def block(x, xs):
      bp, bc = xs
      ia = ir = 0
      new_full, new_lin, logits = [], [], []
      for j, kind in enumerate(kinds):
        p = {n: v[j] for n, v in bp["all"].items()}
        c = None
        if kind == "full_attention":
          p.update({n: v[ia] for n, v in bp["full"].items()})
          if bc is not None:
            c = (bc["full"][0][ia], bc["full"][1][ia])
          ia += 1
        else:
          p.update({n: v[ir] for n, v in bp["linear"].items()})
          if bc is not None:
            c = {n: v[ir] for n, v in bc["linear"].items()}
          ir += 1
        x, nc, lg = layer_fns[kind](p, x, c)
        if bc is not None:
          (new_full if kind == "full_attention" else new_lin).append(nc)
        if with_logits:
          logits.append(lg)
      out_c = None
      if bc is not None:
        out_c = {"full": (jnp.stack([k for k, _ in new_full]), jnp.stack([v for _, v in new_full]))
                 if new_full else (), "linear": jax.tree.map(lambda *a: jnp.stack(a), *new_lin) if new_lin else {}}
      return x, (out_c, jnp.stack(logits) if with_logits else None)

    fn = block
    if cfg.scan_layers:
      x, (new_c, logits) = jax.lax.scan(fn, x, (params, caches))
    else:
      nb = cfg.num_hidden_layers // period
      cs, ls = [], []
      for i in range(nb):
        x, (c, lg) = fn(x, jax.tree.map(lambda v: v[i], (params, caches)))
        cs.append(c)
        ls.append(lg)
      new_c = None if cache is None else jax.tree.map(lambda *a: jnp.stack(a), *cs)
      logits = jnp.stack(ls) if with_logits else None
    if cache is not None:
      new_c = jax.tree.map(lambda v: v.reshape((-1,) + v.shape[2:]), new_c)
    if with_logits:
      logits = logits.reshape((-1,) + logits.shape[2:])
    return x, new_c, logits

  def _final(self, x):
    return rms_norm_1p(x, self.final_norm_d[...], self.cfg.rms_norm_eps)

  # -- full-sequence forward ---------------------------------------------------------------------------------
  def _context(self, tokens_bt, positions_bt, segment_ids_bt):
    cfg = self.cfg
    b, t = tokens_bt.shape
    if positions_bt is None:
      positions_bt = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
    sin, cos = rope_sin_cos(positions_bt, cfg.rotary_dim, cfg.rope_theta)
    if segment_ids_bt is None:
      mask, spec = None, AttnSpec(True, cfg.attention_impl)
    else:
      seg = segment_ids_bt
      causal = jnp.tril(jnp.ones((t, t), bool))
      mask = ((seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] != 0) & causal[None])[:, None]
      spec = AttnSpec(False, cfg.attention_impl)
    return dict(sin=sin, cos=cos, mask=mask, spec=spec, segment_ids=segment_ids_bt, start_b=None,
                valid_len_b=None)

  def hidden_states_and_aux(self, tokens_bt, positions_bt=None, segment_ids_bt=None):
    """(final normed hidden states [B, T, D], MoE load-balancing loss (0.0 for dense models)). Padding
    (segment id 0) is excluded from the loss."""
    cfg = self.cfg
    ctx = self._context(tokens_bt, positions_bt, segment_ids_bt)
    x, _, logits = self._run_blocks(self.embed(tokens_bt), ctx, with_logits=cfg.is_moe)
    aux = jnp.float32(0.0)
    if cfg.is_moe:
      mask = None if segment_ids_bt is None else (segment_ids_bt.reshape(-1) != 0)
      aux = moe_lib.load_balancing_loss(logits, cfg.num_experts_per_tok, mask)
    return self._final(x), aux

  def hidden_states(self, tokens_bt, positions_bt=None, segment_ids_bt=None) -> jax.Array:
    """Final normed hidden states [B, T, D] (segment ids / positions as in ``Qwen3.hidden_states``)."""
    ctx = self._context(tokens_bt, positions_bt, segment_ids_bt)
    x, _, _ = self._run_blocks(self.embed(tokens_bt), ctx)
    return self._final(x)

  def __call__(self, tokens_bt, positions_bt=None, segment_ids_bt=None) -> jax.Array:
    """float32 logits [B, T, V]."""
    return self.logits(self.hidden_states(tokens_bt, positions_bt, segment_ids_bt))

  # -- sampler cache -----------------------------------------------------------------------------------------
  def init_cache(self, batch: int, max_len: int, dtype=None) -> dict[str, Any]:
    """Zeroed per-row caches: full layers' k^T [A, B, K, H, S] and v [A, B, K, S, H]; linear layers'
    convolution inputs [R, B, X, W-1] (q, k, v channels) and float32 recurrent state [R, B, Hv, dk, dv]."""
    cfg = self.cfg
    dt = dtype or cfg.jnp_dtype
    a, r = len(cfg.full_layers), len(cfg.linear_layers)
    k, h = cfg.num_key_value_heads, cfg.head_dim
    hk, hv, dk, dv, w = (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                         cfg.linear_value_head_dim, cfg.linear_conv_kernel_dim)
    return {"k": jnp.zeros((a, batch, k, h, max_len), dt), "v": jnp.zeros((a, batch, k, max_len, h), dt),
            "conv_q": jnp.zeros((r, batch, hk * dk, w - 1), dt), "conv_k": jnp.zeros((r, batch, hk * dk, w - 1), dt),
            "conv_v": jnp.zeros((r, batch, hv * dv, w - 1), dt),
            "state": jnp.zeros((r, batch, hv, dk, dv), jnp.float32)}

  @staticmethod
  def cache_take(cache, slots_b, length: int):
    """The rows ``slots_b`` of the cache, KV positions [0, length) (the sampler's working window)."""
    return {n: (v[:, slots_b, :, :, :length] if n == "k" else v[:, slots_b, :, :length] if n == "v"
                else v[:, slots_b]) for n, v in cache.items()}

  @staticmethod
  def cache_put(cache, sub, slots_b, length: int):
    """Writes a window from ``cache_take`` back."""
    out = {}
    for n, v in cache.items():
      if n == "k":
        out[n] = v.at[:, slots_b, :, :, :length].set(sub[n])
      elif n == "v":
        out[n] = v.at[:, slots_b, :, :length].set(sub[n])
      else:
        out[n] = v.at[:, slots_b].set(sub[n])
    return out

  def cache_layers(self, sub) -> list:
    """Per-layer caches in layer order: (k^T, v) rows flattened for full layers (``qwen3.flat_kv``), a dict
    for linear layers."""
    ia = ir = 0
    out = []
    for kind in self.cfg.layer_types:
      if kind == "full_attention":
        out.append(flat_kv(sub["k"][ia], sub["v"][ia]))
        ia += 1
      else:
        out.append({n: sub[n][ir] for n in ("conv_q", "conv_k", "conv_v", "state")})
        ir += 1
    return out

  def cache_stack(self, layers: list, like) -> dict[str, Any]:
    """Inverse of ``cache_layers`` (``like``: a cache of the same structure, for empty groups)."""
    full = [c for c, kind in zip(layers, self.cfg.layer_types) if kind == "full_attention"]
    lin = [c for c, kind in zip(layers, self.cfg.layer_types) if kind != "full_attention"]
    out = dict(like)
    if full:
      out["k"] = jnp.stack([k for k, _ in full]).reshape(like["k"].shape)
      out["v"] = jnp.stack([v for _, v in full]).reshape(like["v"].shape)
    for n in ("conv_q", "conv_k", "conv_v", "state"):
      if lin:
        out[n] = jnp.stack([c[n] for c in lin])
    return out

  def _chunk_context(self, c: int, start_b, s: int, valid_len_b):
    cfg = self.cfg
    pos_bc = start_b[:, None] + jnp.arange(c, dtype=jnp.int32)[None]
    sin, cos = rope_sin_cos(pos_bc, cfg.rotary_dim, cfg.rope_theta)
    mask = (jnp.arange(s, dtype=jnp.int32)[None, None, :] <= pos_bc[:, :, None])[:, None]
    return dict(sin=sin, cos=cos, mask=mask, spec=AttnSpec(False, cfg.attention_impl), segment_ids=None,
                start_b=start_b, valid_len_b=valid_len_b)

  def forward_cached(self, tokens_bc, start_b, cache, valid_len_b=None):
    """Runs a chunk of C tokens per row from position ``start_b``; returns (hidden [B, C, D], cache).

    Full layers write keys/values at slots ``start_b + [0, C)`` (as ``Qwen3.forward_cached``); linear layers
    continue each row's state (from zeros where ``start_b == 0``) over its first ``valid_len_b`` tokens
    (default: all C), so pad tokens at the end of a chunk change neither the state nor later outputs."""
    s = cache["k"].shape[-1] if cache["k"].shape[0] else 1
    ctx = self._chunk_context(tokens_bc.shape[1], start_b, s, valid_len_b)
    groups = {"full": (cache["k"], cache["v"]),
              "linear": {n: cache[n] for n in ("conv_q", "conv_k", "conv_v", "state")}}
    if not self.cfg.full_layers:
      groups["full"] = ()
    if not self.cfg.linear_layers:
      groups["linear"] = {}
    x, new, _ = self._run_blocks(self.embed(tokens_bc), ctx, groups)
    out = dict(cache)
    if self.cfg.full_layers:
      out["k"], out["v"] = new["full"]
    out.update(new["linear"])
    return self._final(x), out

  def forward_cached_unrolled(self, tokens_bc, start_b, layers, caches, valid_len_b=None):
    """``forward_cached`` with per-layer parameters (``split_layers``) and per-layer caches
    (``cache_layers``), unrolled over layers (the decode loop's form)."""
    cfg = self.cfg
    s = next((c[0].shape[-1] for c in caches if isinstance(c, tuple)), 1)
    ctx = self._chunk_context(tokens_bc.shape[1], start_b, s, valid_len_b)
    x = self.embed(tokens_bc)
    new = []
    for kind, p, c in zip(cfg.layer_types, layers, caches):
      x, c, _ = _layer(cfg, kind, p, x, ctx, c)
      new.append(c)
    return self._final(x), new


def init_model(cfg: Qwen35Config, seed: int = 0) -> Qwen35:
  return Qwen35(cfg, rngs=nnx.Rngs(params=seed))


def abstract_model(cfg: Qwen35Config) -> Qwen35:
  """A model whose parameters are ``jax.ShapeDtypeStruct`` (no memory); for shape checks and planning."""
  return nnx.eval_shape(lambda: Qwen35(cfg, rngs=nnx.Rngs(params=0)))
