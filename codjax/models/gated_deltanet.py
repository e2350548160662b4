"""Gated DeltaNet math for the Qwen3.5/3.6 linear-attention layers (pure JAX functions).

Per head the layer keeps a state S in R^{dk x dv} (float32). Token t brings l2-normalised q_t, k_t in R^dk,
v_t in R^dv, a log-decay g_t <= 0 and a write strength beta_t in (0, 1):

  S <- exp(g_t) S;   S <- S + k_t ((v_t - S^T k_t) beta_t)^T;   o_t = S^T (q_t * scale)      (scale = dk^-0.5)

``recurrent_gated_delta_rule`` runs this token by token (``lax.scan`` over T; T = 1 is a decode step).
``chunk_gated_delta_rule`` computes the same in chunks of C tokens. Inside a chunk with S_0 the state it
starts from and G_i = g_0 + ... + g_i (cumulative log-decay from the chunk start), the state after token i is
S_i = e^{G_i} S_0 + sum_{j<=i} e^{G_i-G_j} k_j u_j^T, where the written values u_i = beta_i (v_i - e^{G_i}
S_0^T k_i - sum_{j<i} e^{G_i-G_j} (k_i.k_j) u_j) solve the unit lower-triangular system (the WY/UT transform)

  (I + A) U = diag(beta) V - diag(beta e^G) K S_0,      A_ij = beta_i e^{G_i-G_j} k_i.k_j   (j < i),

so U = U_v - W S_0 with [U_v, W] = (I + A)^-1 [diag(beta) V, diag(beta e^G) K] (``unit_lower_inverse``, no
dependence on S_0). Then
  o_i = scale * (e^{G_i} q_i^T S_0 + sum_{j<=i} e^{G_i-G_j} (q_i.k_j) u_j),
  S_C = e^{G_{C-1}} S_0 + sum_j e^{G_{C-1}-G_j} k_j u_j^T,
everything batched over [B, H, n_chunks, C, C] except one ``lax.scan`` over chunks that carries S.

Packed sequences (``segment_ids``): a segment is a maximal run of equal ids. Pairs (i, j) of different
segments are masked out of A and of the intra-chunk attention; the carried state S_0 is read (and decayed
into S_C) only by tokens of the segment that was running at the end of the previous chunk (for the first
chunk: the segment of token 0, to which ``initial_state`` belongs); the final state is that of the last
token's segment. A token with g = 0 and beta = 0 leaves S unchanged (S <- 1 * S + k (0)^T): callers mark
pads inside a sampler chunk this way, and T is padded to a multiple of C the same way.

The layer around it (HF ``Qwen3_5GatedDeltaNet.forward``) also uses ``causal_conv1d`` (depthwise causal
convolution + silu over the mixed q/k/v channels, with a carried state of the last W-1 inputs), ``l2norm``
(q, k) and ``gated_rms_norm`` (the output norm gated by silu(z)).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# State arithmetic runs in true float32 (no TF32 / bf16 passes on accelerators): the recurrence compounds
# rounding errors over the whole sequence.
MATMUL_PRECISION = jax.lax.Precision.HIGHEST


def _mm(spec: str, *operands):
  return jnp.einsum(spec, *operands, precision=MATMUL_PRECISION)


def l2norm(x, eps: float = 1e-6):
  """x * rsqrt(sum(x^2, -1) + eps) in float32 (HF / FLA formula; returns float32)."""
  x32 = x.astype(jnp.float32)
  return x32 * jax.lax.rsqrt(jnp.sum(x32 * x32, axis=-1, keepdims=True) + eps)


def gated_rms_norm(x, z, w, eps: float):
  """HF ``Qwen3_5RMSNormGated``: (w * rmsnorm(x).astype(x.dtype)) * silu(z in float32), in x's dtype."""
  x32 = x.astype(jnp.float32)
  y = (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)).astype(x.dtype)
  y = w.astype(x.dtype) * y
  return (y.astype(jnp.float32) * jax.nn.silu(z.astype(jnp.float32))).astype(x.dtype)


def _run_ids(segment_ids_bt):
  """Index of the maximal run of equal segment ids each token belongs to ([B, T] int32, 0 at token 0)."""
  change = (segment_ids_bt[:, 1:] != segment_ids_bt[:, :-1]).astype(jnp.int32)
  return jnp.concatenate([jnp.zeros_like(change[:, :1]), jnp.cumsum(change, axis=1)], axis=1)


def causal_conv1d(x_btc, w_cw, *, segment_ids_bt=None, state_bcw=None, valid_len_b=None):
  """Depthwise causal convolution over time followed by silu (HF ``causal_conv1d_fn``, no bias).

  With xin = [state (W-1 inputs preceding x); x] along time, y[t, c] = silu(sum_j w[c, j] xin[t + j, c])
  (xin index t + W - 1 is token t). ``state_bcw`` [B, C, W-1] (None: zeros, a sequence start).
  ``segment_ids_bt``: an input of another segment than token t contributes zero to y[t]; the state inputs
  belong to the segment of token 0. ``valid_len_b``: row b's valid tokens are [0, valid_len_b) and the new
  state is xin[valid_len_b : valid_len_b + W - 1] (the last W-1 inputs up to token valid_len_b - 1, old
  state included when valid_len_b < W - 1), so end pads never enter it; None: the last W-1 inputs.
  x and w rounded to x's dtype; products, sums and silu in float32. Returns (y [B, T, C] in x's dtype,
  state [B, C, W-1]).
  """
  b, t, c = x_btc.shape
  width = w_cw.shape[-1]
  dtype = x_btc.dtype
  if state_bcw is None:
    state_btc = jnp.zeros((b, width - 1, c), dtype)
  else:
    state_btc = jnp.swapaxes(state_bcw, 1, 2).astype(dtype)
  xin_btc = jnp.concatenate([state_btc, x_btc], axis=1)
  w32_cw = w_cw.astype(dtype).astype(jnp.float32)
  if segment_ids_bt is not None:
    run_bt = _run_ids(segment_ids_bt)
    run_in_bt = jnp.concatenate([jnp.broadcast_to(run_bt[:, :1], (b, width - 1)), run_bt], axis=1)
  acc_btc = jnp.zeros((b, t, c), jnp.float32)
  for j in range(width):
    term = xin_btc[:, j:j + t].astype(jnp.float32) * w32_cw[:, j]
    if segment_ids_bt is not None:
      term = jnp.where((run_in_bt[:, j:j + t] == run_bt)[..., None], term, 0.0)
    acc_btc = acc_btc + term
  y_btc = jax.nn.silu(acc_btc).astype(dtype)
  if valid_len_b is None:
    new_btc = xin_btc[:, t:]
  else:
    idx_bw = valid_len_b.astype(jnp.int32)[:, None] + jnp.arange(width - 1, dtype=jnp.int32)
    new_btc = jnp.take_along_axis(xin_btc, idx_bw[..., None], axis=1)
  return y_btc, jnp.swapaxes(new_btc, 1, 2)


def _subdiagonal_blocks(x_nn, m: int):
  """The m x m blocks (2p+1, 2p) of [..., N, N] as [..., N/2m, m, m] (a strided slice of the flattened block
  grid, no gather)."""
  n = x_nn.shape[-1] // m
  batch = x_nn.shape[:-2]
  grid = jnp.moveaxis(x_nn.reshape(batch + (n, m, n, m)), (-4, -2), (-2, -1)).reshape(batch + (m, m, n * n))
  return jnp.moveaxis(grid[..., n::2 * (n + 1)], -1, -3)  # flat block index (2p+1) n + 2p


@jax.custom_vjp
def unit_lower_inverse(a_cc):
  """X = (I + A)^-1 for strictly lower-triangular A [..., C, C] (entries on and above the diagonal are
  ignored), exact: recursive block inversion [[L11, 0], [L21, L22]]^-1 = [[X11, 0], [-X22 L21 X11, X22]],
  doubling the block size from 1 (log2 C levels of batched matmuls; C is padded to a power of two with
  identity). Only matmuls (no triangular-solve custom call); the recursive TRTRI scheme is as stable as
  substitution (unlike a Neumann series, no powers of A appear). Gradient: dA = -tril(X^T dX X^T, -1)."""
  c = a_cc.shape[-1]
  size = 1 << max(c - 1, 0).bit_length()
  if size != c:
    a_cc = jnp.pad(a_cc, [(0, 0)] * (a_cc.ndim - 2) + [(0, size - c), (0, size - c)])
  batch = a_cc.shape[:-2]
  inv = jnp.ones(batch + (size, 1, 1), a_cc.dtype)  # inverses of the 1 x 1 diagonal blocks
  m = 1
  while m < size:
    l21 = _subdiagonal_blocks(a_cc, m)  # [..., size/2m, m, m]
    pairs = inv.reshape(batch + (size // (2 * m), 2, m, m))
    x11, x22 = pairs[..., 0, :, :], pairs[..., 1, :, :]
    x21 = -_mm("...ij,...jk->...ik", x22, _mm("...ij,...jk->...ik", l21, x11))
    top = jnp.concatenate([x11, jnp.zeros_like(x11)], axis=-1)
    inv = jnp.concatenate([top, jnp.concatenate([x21, x22], axis=-1)], axis=-2)
    m *= 2
  return inv[..., 0, :c, :c]


def _unit_lower_inverse_fwd(a_cc):
  x_cc = unit_lower_inverse(a_cc)
  return x_cc, x_cc


def _unit_lower_inverse_bwd(x_cc, dx_cc):
  da_cc = -_mm("...ji,...jk,...lk->...il", x_cc, dx_cc, x_cc)  # -X^T dX X^T
  return (jnp.tril(da_cc, -1).astype(x_cc.dtype),)


unit_lower_inverse.defvjp(_unit_lower_inverse_fwd, _unit_lower_inverse_bwd)


def recurrent_gated_delta_rule(q_bthk, k_bthk, v_bthv, g_bth, beta_bth, *, scale, initial_state_bhkv=None):
  """The token-by-token recurrence of the module docstring (``lax.scan`` over T), float32 inside.

  q, k: [B, T, H, dk] (already l2-normalised, repeated to H heads), v: [B, T, H, dv], g, beta: [B, T, H].
  Returns (o [B, T, H, dv] in v's dtype, final state [B, H, dk, dv] float32).
  """
  b, _, h, dk = k_bthk.shape
  dv = v_bthv.shape[-1]
  f32 = jnp.float32
  if initial_state_bhkv is None:
    s0 = jnp.zeros((b, h, dk, dv), f32)
  else:
    s0 = initial_state_bhkv.astype(f32)
  xs = (jnp.moveaxis(q_bthk.astype(f32) * scale, 1, 0), jnp.moveaxis(k_bthk.astype(f32), 1, 0),
        jnp.moveaxis(v_bthv.astype(f32), 1, 0), jnp.moveaxis(g_bth.astype(f32), 1, 0),
        jnp.moveaxis(beta_bth.astype(f32), 1, 0))

  def step(s_bhkv, x):
    q, k, v, g, beta = x
    s_bhkv = s_bhkv * jnp.exp(g)[..., None, None]
    delta_bhv = (v - _mm("bhk,bhkv->bhv", k, s_bhkv)) * beta[..., None]
    s_bhkv = s_bhkv + k[..., :, None] * delta_bhv[..., None, :]
    return s_bhkv, _mm("bhk,bhkv->bhv", q, s_bhkv)

  s_final, o_tbhv = jax.lax.scan(step, s0, xs)
  return jnp.moveaxis(o_tbhv, 0, 1).astype(v_bthv.dtype), s_final


def chunk_gated_delta_rule(q_bthk, k_bthk, v_bthv, g_bth, beta_bth, *, scale, segment_ids_bt=None,
                           initial_state_bhkv=None, chunk_size: int = 64):
  """The chunked form of the module docstring (training / prefill); same semantics as the recurrence.

  q, k: [B, T, H, dk] (already l2-normalised, repeated to H heads), v: [B, T, H, dv], g, beta: [B, T, H],
  ``segment_ids_bt`` [B, T] (packed segments, see the module docstring), ``initial_state_bhkv`` [B, H, dk, dv]
  (belongs to the segment of token 0). T is padded to a multiple of the chunk with g = beta = 0 (state
  unchanged); a sequence shorter than ``chunk_size`` is one chunk of its own length. float32 inside.
  Returns (o [B, T, H, dv] in v's dtype, final state [B, H, dk, dv] float32).
  """
  f32 = jnp.float32
  b, t, h, dk = k_bthk.shape
  dv = v_bthv.shape[-1]
  c = min(chunk_size, t)
  pad = (-t) % c
  n = (t + pad) // c

  def to_chunks(x_bth_):  # [B, T, H, ...] -> [B, H, N, C, ...] (float32, zero-padded)
    x = jnp.moveaxis(x_bth_.astype(f32), 2, 1)
    if pad:
      x = jnp.pad(x, [(0, 0), (0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 3))
    return x.reshape((b, h, n, c) + x.shape[3:])

  q = to_chunks(q_bthk) * scale
  k = to_chunks(k_bthk)
  v = to_chunks(v_bthv)
  g_bhnc = to_chunks(g_bth)
  beta_bhnc = to_chunks(beta_bth)
  if segment_ids_bt is None:
    run_bt = jnp.zeros((b, t + pad), jnp.int32)
  else:
    run_bt = _run_ids(segment_ids_bt)
    if pad:
      run_bt = jnp.pad(run_bt, [(0, 0), (0, pad)], mode="edge")  # pads continue the last segment
  run_bnc = run_bt.reshape(b, n, c)
  prev_run_bn = jnp.concatenate([run_bt[:, :1], run_bnc[:, :-1, -1]], axis=1)  # segment owning S_0
  carried_bnc = run_bnc == prev_run_bn[..., None]  # token reads the carried state
  last_bnc = run_bnc == run_bnc[..., -1:]  # token writes into the chunk's final state

  cum_bhnc = jnp.cumsum(g_bhnc, axis=-1)  # G_i
  causal_cc = jnp.tril(jnp.ones((c, c), bool))
  pair_b1ncc = ((run_bnc[..., :, None] == run_bnc[..., None, :]) & causal_cc)[:, None]
  diff = cum_bhnc[..., :, None] - cum_bhnc[..., None, :]
  decay_bhncc = jnp.where(pair_b1ncc, jnp.exp(jnp.where(pair_b1ncc, diff, 0.0)), 0.0)  # e^{G_i-G_j}, j<=i

  k_beta = k * beta_bhnc[..., None]
  strict_cc = jnp.tril(jnp.ones((c, c), bool), -1)
  a_bhncc = jnp.where(strict_cc, _mm("bhnik,bhnjk->bhnij", k_beta, k) * decay_bhncc, 0.0)
  read_b1nc = carried_bnc[:, None].astype(f32)
  rhs = jnp.concatenate([v * beta_bhnc[..., None],
                         k_beta * (jnp.exp(cum_bhnc) * read_b1nc)[..., None]], axis=-1)
  sol = _mm("bhnij,bhnjd->bhnid", unit_lower_inverse(a_bhncc), rhs)
  u_bhncv, w_bhnck = sol[..., :dv], sol[..., dv:]  # U = u_v - W S_0

  attn_bhncc = _mm("bhnik,bhnjk->bhnij", q, k) * decay_bhncc
  q_read = q * (jnp.exp(cum_bhnc) * read_b1nc)[..., None]
  last_b1nc = last_bnc[:, None]
  to_end = jnp.where(last_b1nc, cum_bhnc[..., -1:] - cum_bhnc, 0.0)
  k_write = k * jnp.where(last_b1nc, jnp.exp(to_end), 0.0)[..., None]
  keep_bhn = jnp.exp(cum_bhnc[..., -1]) * carried_bnc[:, None, :, -1].astype(f32)

  if initial_state_bhkv is None:
    s0 = jnp.zeros((b, h, dk, dv), f32)
  else:
    s0 = initial_state_bhkv.astype(f32)

  def step(s_bhkv, x):
    u, w, attn, qr, kw, keep = x
    v_new = u - _mm("bhck,bhkv->bhcv", w, s_bhkv)
    o = _mm("bhck,bhkv->bhcv", qr, s_bhkv) + _mm("bhij,bhjv->bhiv", attn, v_new)
    s_bhkv = s_bhkv * keep[..., None, None] + _mm("bhck,bhcv->bhkv", kw, v_new)
    return s_bhkv, o

  xs = tuple(jnp.moveaxis(x, 2, 0) for x in (u_bhncv, w_bhnck, attn_bhncc, q_read, k_write, keep_bhn))
  s_final, o_nbhcv = jax.lax.scan(step, s0, xs)
  o_bhtv = jnp.moveaxis(o_nbhcv, 0, 2).reshape(b, h, n * c, dv)[:, :, :t]
  return jnp.swapaxes(o_bhtv, 1, 2).astype(v_bthv.dtype), s_final
