"""Mixture-of-experts math of the Qwen3.5/3.6 MoE decoder layer (pure JAX functions, no modules).

For N token rows x [N, D], E routed experts of width F, k experts per token, a shared expert of width S:

  r = x W_r                      router logits [N, E] (in x's dtype, as HF's F.linear), returned in float32
  p = softmax(r)                 float32
  top-k experts e_1..e_k by p    (ties: lowest expert index first, as jax.lax.top_k; torch.topk leaves the
                                 order among exactly equal probabilities unspecified)
  w_j = p_{e_j} / sum_j p_{e_j}  routing weights renormalised over the k chosen (cast to x's dtype)
  y = sum_j w_j * down_{e_j}(silu(gate_{e_j} x) * up_{e_j} x)
      + sigmoid(x w_sg) * down_s(silu(gate_s x) * up_s x)       (shared SwiGLU expert, scalar gate per token)

Every routed (token, expert) pair is computed (dropless: no capacity factor, no dropped tokens). Three exact
implementations of the routed sum (``experts_forward(impl=...)``):

  "ragged"   the A = N*k assignments sorted by expert, each expert's contiguous rows multiplied by its own
             weights with ``jax.lax.ragged_dot`` (group sizes = assignment counts), then un-sorted and
             weighted. GPU/TPU lower ragged_dot to a native grouped matmul (FLOPs of the k routed experts
             only); XLA CPU lowers it to a masked dense dot over all E groups for each of the A rows (k times
             the FLOPs of "dense").
  "blocked"  the sorted assignments laid out in blocks of R rows, each expert's group padded with zero rows
             to a multiple of R, so every block belongs to one expert; the blocks are multiplied by their
             experts' gathered weights in one batched matmul and un-sorted. Blocks needed: sum_e ceil(c_e / R)
             <= floor(A / R) + E (c_e = assignments of expert e), a static bound; padding rows cost at most
             E (R - 1) rows. R = ``block_rows(A, E)``: about A / (4 E), a power of two in [1, 128], so decode
             (A = k rows per token) multiplies each assignment by its own expert's weights (R = 1) and a
             train batch wastes at most ~1/4 extra rows.
  "dense"    every expert on every token, outputs weighted by the combine matrix
             c[n, e] = sum_j w_j [e_j = e] (zero for experts a token is not routed to): E/k times the routed
             FLOPs, but plain batched matmuls.

The default, ``impl="auto"``, is "blocked" on the CPU backend and "ragged" elsewhere. Measured on XLA CPU (1
thread, jax 0.10.2, float32, the hybrid benchmark's 8-layer model with 8 experts top-2, D = F = 256,
B = 4 x T = 512; ``benchmarks/hybrid_step.py --moe``): see benchmarks/README.md, "Qwen3.5/3.6 hybrid".
Earlier (2 shared cores; N=2048, E=16, k=4, D=128, F=64; jit of value_and_grad of route + experts_forward):
dense ~150-170 ms, ragged ~420-430 ms. Not measured on GPU; there ragged computes only the routed rows,
where dense would cost E/k times the FLOPs and an [N, E, F] activation (32x for the default Qwen3.5-MoE
config's E=256, k=8), and blocked would gather up to (A / R + E) copies of expert weights.

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

from codjax.models.matmul import matmul

IMPLS = ("ragged", "blocked", "dense")

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
  return route_from_logits(matmul(x_nd, router_de.astype(x_nd.dtype)), top_k, x_nd.dtype)


def route_from_logits(logits_ne, top_k: int, dtype):
  """``route`` from router logits already computed (in x's dtype): (float32 logits, weights, expert ids)."""
  logits_ne = logits_ne.astype(jnp.float32)
  p_ne = jax.nn.softmax(logits_ne, axis=-1)
  top_nk, experts_nk = jax.lax.top_k(p_ne, top_k)
  weights_nk = (top_nk / jnp.sum(top_nk, axis=-1, keepdims=True)).astype(dtype)
  return logits_ne, weights_nk, experts_nk.astype(jnp.int32)


def _resolve_impl(impl: str) -> str:
  if impl == "auto":
    return "blocked" if jax.default_backend() == "cpu" else "ragged"
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


def block_rows(num_assignments: int, num_experts: int) -> int:
  """Rows per block of the "blocked" implementation: the power of two nearest below A / (4 E), in [1, 128]."""
  target = num_assignments // (4 * num_experts)
  r = 1
  while r * 2 <= min(target, 128):
    r *= 2
  return r


def _experts_blocked(x_nd, weights_nk, experts_nk, gate_edf, up_edf, down_efd):
  n, k = experts_nk.shape
  e = gate_edf.shape[0]
  a = n * k
  r = block_rows(a, e)
  nb = a if r == 1 else a // r + e  # static bound on the blocks sum_e ceil(c_e / r)
  flat_a = experts_nk.reshape(-1)  # assignment a = n * k + j
  order_s = jnp.argsort(flat_a, stable=True)  # sorted position s -> assignment
  sizes_e = jnp.bincount(flat_a, length=e).astype(jnp.int32)
  start_e = jnp.cumsum(sizes_e) - sizes_e  # first sorted position of expert e
  padded_e = -(-sizes_e // r) * r
  pstart_e = jnp.cumsum(padded_e) - padded_e  # first padded row of expert e
  sorted_e = flat_a[order_s]
  dest_s = pstart_e[sorted_e] + jnp.arange(a, dtype=jnp.int32) - start_e[sorted_e]  # padded row of s
  rows = nb * r
  # padded row -> token row (N: the zero row appended below); assignment -> padded row
  token_p = jnp.full((rows,), n, jnp.int32).at[dest_s].set((order_s // k).astype(jnp.int32))
  row_a = jnp.zeros((a,), jnp.int32).at[order_s].set(dest_s)
  # block b belongs to the expert whose padded range holds row b r (trailing empty blocks: clipped, zero rows)
  block_e = jnp.clip(jnp.searchsorted(jnp.cumsum(padded_e), jnp.arange(nb) * r, side="right"), 0, e - 1)
  x_ext = jnp.concatenate([x_nd, jnp.zeros((1, x_nd.shape[1]), x_nd.dtype)], axis=0)
  xb_brd = jnp.take(x_ext, token_p, axis=0).reshape(nb, r, -1)
  g = jnp.einsum("brd,bdf->brf", xb_brd, jnp.take(gate_edf, block_e, axis=0))
  u = jnp.einsum("brd,bdf->brf", xb_brd, jnp.take(up_edf, block_e, axis=0))
  o_brd = jnp.einsum("brf,bfd->brd", jax.nn.silu(g) * u, jnp.take(down_efd, block_e, axis=0))
  o_nkd = jnp.take(o_brd.reshape(rows, -1), row_a, axis=0).reshape(n, k, -1)
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

  ``impl``: "ragged" (sorted assignments, ``jax.lax.ragged_dot``), "blocked" (sorted assignments in
  one-expert blocks, batched matmul), "dense" (all experts, combine-weighted) or "auto" (module docstring).
  Weights are cast to x's dtype.
  """
  dt = x_nd.dtype
  fn = {"ragged": _experts_ragged, "blocked": _experts_blocked, "dense": _experts_dense}[_resolve_impl(impl)]
  return fn(x_nd, weights_nk.astype(dt), experts_nk, gate_edf.astype(dt), up_edf.astype(dt), down_efd.astype(dt))


def moe_block(x_btd, p: Mapping[str, Any], *, top_k: int, impl: str = "auto"):
  """The sparse MoE block (routed experts + gated shared expert): (y [B, T, D], router logits [B*T, E] float32).

  ``p`` holds router_de, egate_edf, eup_edf, edown_efd, sgate_df, sup_df, sdown_fd, shared_gate_d (layouts in
  the module docstring). Router logits are returned for ``load_balancing_loss`` (rows in x's B*T order).
  """
  b, t, d = x_btd.shape
  x_nd = x_btd.reshape(b * t, d)
  dt = x_nd.dtype
  inputs = [matmul(x_nd, p[n].astype(dt)) for n in ("router_de", "sgate_df", "sup_df")]
  inputs.append(matmul(x_nd, p["shared_gate_d"].astype(dt)[:, None]))
  y_nd, logits_ne = moe_from_inputs(x_nd, *inputs, p, top_k=top_k, impl=impl)
  return y_nd.reshape(b, t, d), logits_ne


def moe_from_inputs(x_nd, router_ne, sgate_ns, sup_ns, shared_gate_n1, p: Mapping[str, Any], *, top_k: int,
                    impl: str = "auto"):
  """``moe_block`` on token rows x [N, D] whose four input products are already taken (x W_r, x W_sgate,
  x W_sup, x w_sg: a caller may compute them as one fused matmul): (y [N, D], router logits [N, E] float32).
  ``p`` needs egate_edf, eup_edf, edown_efd and sdown_fd."""
  dt = x_nd.dtype
  logits_ne, weights_nk, experts_nk = route_from_logits(router_ne, top_k, dt)
  y_nd = experts_forward(x_nd, weights_nk, experts_nk, p["egate_edf"], p["eup_edf"], p["edown_efd"], impl=impl)
  shared_nd = matmul(jax.nn.silu(sgate_ns) * sup_ns, p["sdown_fd"].astype(dt))
  return y_nd + jax.nn.sigmoid(shared_gate_n1) * shared_nd, logits_ne


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
