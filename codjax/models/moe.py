"""Mixture-of-experts math of the Qwen3.5/3.6 MoE decoder layer (pure JAX functions, no modules).

For N token rows x [N, D], E routed experts of width F, k experts per token, a shared expert of width S:

  r = x W_r                      router logits [N, E] (in x's dtype, as HF's F.linear), returned in float32
  p = softmax(r)                 float32
  top-k experts e_1..e_k by p    (ties: lowest expert index first, as jax.lax.top_k; torch.topk leaves the
                                 order among exactly equal probabilities unspecified)
  w_j = p_{e_j} / sum_j p_{e_j}  routing weights renormalised over the k chosen (cast to x's dtype)
  y = sum_j w_j * down_{e_j}(silu(gate_{e_j} x) * up_{e_j} x)
      + sigmoid(x w_sg) * down_s(silu(gate_s x) * up_s x)       (shared SwiGLU expert, scalar gate per token)

Every routed (token, expert) pair is computed (dropless: no capacity factor, no dropped tokens). Two exact
implementations of the routed sum (``experts_forward(impl=...)``):

  "ragged"  the N*k assignments sorted by expert, each expert's contiguous rows multiplied by its own
            weights with ``jax.lax.ragged_dot`` (group sizes = assignment counts), then un-sorted and
            weighted. GPU/TPU lower ragged_dot to a native grouped matmul (FLOPs of the k routed experts only);
            XLA CPU lowers it to a masked dense dot over all E groups for each of the N*k rows (k times the
            FLOPs of "dense").
  "dense"   every expert on every token, outputs weighted by the combine matrix
            c[n, e] = sum_j w_j [e_j = e] (zero for experts a token is not routed to): E/k times the routed
            FLOPs, but plain batched matmuls.

The default, ``impl="auto"``, is "dense" on the CPU backend and "ragged" elsewhere. Measured on XLA CPU (2
shared cores, jax 0.10.2; N=2048, E=16, k=4, D=128, F=64, float32; jit of value_and_grad of route +
experts_forward w.r.t. x and all weights; median of 20 calls): dense ~150-170 ms, ragged ~420-430 ms. Not
measured on GPU; there ragged computes only the routed rows, where dense would cost E/k times the FLOPs and
an [N, E, F] activation (32x for the default Qwen3.5-MoE config's E=256, k=8).

Load-balancing loss (Switch Transformer eqs. 4-6, in HF's ``load_balancing_loss_func`` form) over router
logits stacked across L layers [L, N, E] and an optional token mask m [N] (1 = real token, same for every
layer):

  f_e = sum_{l,n} m_n * #{j : e_j(l, n) = e} / (L * sum_n m_n)    (fraction of top-k assignments; sums to k)
  P_e = sum_{l,n} m_n * p_e(l, n)            / (L * sum_n m_n)    (mean router probability)
  loss = E * sum_e f_e * P_e

Weight layouts (codjax, einsum-ready) and the Hugging Face tensors they come from (the checkpoint key table
lives elsewhere; F = moe_intermediate_size, S = shared_expert_intermediate_size):

  router_de     [D, E]    mlp.gate.weight [E, D], transposed
  egate_edf     [E, D, F] mlp.experts.gate_up_proj [E, 2F, D] = concat(gate, up) on dim 1: [:, :F, :] transposed
                          to [E, D, F]
  eup_edf       [E, D, F] mlp.experts.gate_up_proj[:, F:, :], transposed to [E, D, F]
  edown_efd     [E, F, D] mlp.experts.down_proj [E, D, F], transposed
  sgate_df      [D, S]    mlp.shared_expert.gate_proj.weight [S, D], transposed
  sup_df        [D, S]    mlp.shared_expert.up_proj.weight [S, D], transposed
  sdown_fd      [S, D]    mlp.shared_expert.down_proj.weight [D, S], transposed
  shared_gate_d [D]       mlp.shared_expert_gate.weight [1, D], row 0
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp

IMPLS = ("ragged", "dense")

#: logical axes of ``moe_block``'s parameters (one layer; a model stacking layers prepends "layers"), for the
#: rules of codjax.parallel.sharding: expert weights split over ``expert`` on E, ``fsdp`` on D, ``tensor`` on F
PARAM_LOGICAL_AXES: dict[str, tuple[str | None, ...]] = {
    "router_de": ("embed", None),
    "egate_edf": ("experts", "embed", "mlp"),
    "eup_edf": ("experts", "embed", "mlp"),
    "edown_efd": ("experts", "mlp", "embed"),
    "sgate_df": ("embed", "mlp"),
    "sup_df": ("embed", "mlp"),
    "sdown_fd": ("mlp", "embed"),
    "shared_gate_d": ("embed",),
}


def route(x_nd, router_de, top_k: int):
  """Router: (logits [N, E] float32, weights [N, k] in x's dtype, expert ids [N, k] int32).

  Logits are x W_r in x's dtype (HF's F.linear), cast to float32; softmax in float32; the k largest
  probabilities (ties to the lowest expert index) renormalised to sum 1. The weights are differentiable
  functions of the logits, so the router learns through them.
  """
  logits_ne = jnp.einsum("nd,de->ne", x_nd, router_de.astype(x_nd.dtype)).astype(jnp.float32)
  p_ne = jax.nn.softmax(logits_ne, axis=-1)
  top_nk, experts_nk = jax.lax.top_k(p_ne, top_k)
  weights_nk = (top_nk / jnp.sum(top_nk, axis=-1, keepdims=True)).astype(x_nd.dtype)
  return logits_ne, weights_nk, experts_nk.astype(jnp.int32)


def _resolve_impl(impl: str) -> str:
  if impl == "auto":
    return "dense" if jax.default_backend() == "cpu" else "ragged"
  if impl not in IMPLS:
    raise ValueError(f"impl must be 'auto' or one of {IMPLS}, got {impl!r}")
  return impl


def _experts_ragged(x_nd, weights_nk, experts_nk, gate_edf, up_edf, down_efd):
  n, k = experts_nk.shape
  e = gate_edf.shape[0]
  flat_a = experts_nk.reshape(-1)  # assignment a = n * k + j
  order_a = jnp.argsort(flat_a, stable=True)  # assignments grouped by expert, ascending
  group_sizes_e = jnp.bincount(flat_a, length=e).astype(jnp.int32)
  xs_ad = jnp.take(x_nd, order_a // k, axis=0)
  g_af = jax.lax.ragged_dot(xs_ad, gate_edf, group_sizes_e)
  u_af = jax.lax.ragged_dot(xs_ad, up_edf, group_sizes_e)
  o_ad = jax.lax.ragged_dot(jax.nn.silu(g_af) * u_af, down_efd, group_sizes_e)
  inverse_a = jnp.zeros_like(order_a).at[order_a].set(jnp.arange(order_a.shape[0], dtype=order_a.dtype))
  o_nkd = jnp.take(o_ad, inverse_a, axis=0).reshape(n, k, -1)
  return jnp.einsum("nkd,nk->nd", o_nkd, weights_nk)


def _experts_dense(x_nd, weights_nk, experts_nk, gate_edf, up_edf, down_efd):
  e = gate_edf.shape[0]
  combine_ne = jnp.einsum("nk,nke->ne", weights_nk, jax.nn.one_hot(experts_nk, e, dtype=weights_nk.dtype))
  g_nef = jnp.einsum("nd,edf->nef", x_nd, gate_edf)
  u_nef = jnp.einsum("nd,edf->nef", x_nd, up_edf)
  h_nef = jax.nn.silu(g_nef) * u_nef * combine_ne[:, :, None]
  return jnp.einsum("nef,efd->nd", h_nef, down_efd)


def experts_forward(x_nd, weights_nk, experts_nk, gate_edf, up_edf, down_efd, *, impl: str = "auto"):
  """sum_j w_j * down_{e_j}(silu(gate_{e_j} x) * up_{e_j} x) for every token row [N, D] (dropless).

  ``impl``: "ragged" (sorted assignments, ``jax.lax.ragged_dot``), "dense" (all experts, combine-weighted) or
  "auto" (module docstring). Weights are cast to x's dtype.
  """
  dt = x_nd.dtype
  fn = _experts_ragged if _resolve_impl(impl) == "ragged" else _experts_dense
  return fn(x_nd, weights_nk.astype(dt), experts_nk, gate_edf.astype(dt), up_edf.astype(dt), down_efd.astype(dt))


def swiglu(x_nd, gate_df, up_df, down_fd):
  """down(silu(x W_gate) * (x W_up)), weights cast to x's dtype."""
  dt = x_nd.dtype
  h = jax.nn.silu(x_nd @ gate_df.astype(dt)) * (x_nd @ up_df.astype(dt))
  return h @ down_fd.astype(dt)


def moe_block(x_btd, p: Mapping[str, Any], *, top_k: int, impl: str = "auto"):
  """The sparse MoE block (routed experts + gated shared expert): (y [B, T, D], router logits [B*T, E] float32).

  ``p`` holds router_de, egate_edf, eup_edf, edown_efd, sgate_df, sup_df, sdown_fd, shared_gate_d (layouts in
  the module docstring). Router logits are returned for ``load_balancing_loss`` (rows in x's B*T order).
  """
  b, t, d = x_btd.shape
  x_nd = x_btd.reshape(b * t, d)
  logits_ne, weights_nk, experts_nk = route(x_nd, p["router_de"], top_k)
  y_nd = experts_forward(x_nd, weights_nk, experts_nk, p["egate_edf"], p["eup_edf"], p["edown_efd"], impl=impl)
  shared_nd = swiglu(x_nd, p["sgate_df"], p["sup_df"], p["sdown_fd"])
  gate_n1 = jax.nn.sigmoid(x_nd @ p["shared_gate_d"].astype(x_nd.dtype)[:, None])
  return (y_nd + gate_n1 * shared_nd).reshape(b, t, d), logits_ne


def load_balancing_loss(router_logits_lne, top_k: int, mask_n=None):
  """Switch-Transformer auxiliary loss E * sum_e f_e P_e over stacked router logits [L, N, E] (float32 scalar).

  ``mask_n`` (bool or float, 1 = real token; None = all real) excludes padding rows from both f and P.
  """
  logits = jnp.asarray(router_logits_lne, jnp.float32)
  num_layers, n, e = logits.shape
  p_lne = jax.nn.softmax(logits, axis=-1)
  _, experts_lnk = jax.lax.top_k(p_lne, top_k)
  m_n = jnp.ones((n,), jnp.float32) if mask_n is None else jnp.asarray(mask_n).reshape(n).astype(jnp.float32)
  counts_e = jnp.einsum("lnke,n->e", jax.nn.one_hot(experts_lnk, e, dtype=jnp.float32), m_n)
  prob_sum_e = jnp.einsum("lne,n->e", p_lne, m_n)
  rows = num_layers * jnp.sum(m_n)
  return e * jnp.sum((counts_e / rows) * (prob_sum_e / rows))
