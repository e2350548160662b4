"""Gated DeltaNet math (codjax.models.gated_deltanet) against a float64 numpy loop of the recurrence,
transformers' torch implementations (modeling_qwen3_5) and a float64 JAX reference for gradients."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from transformers.models.qwen3_5 import modeling_qwen3_5 as hf

from codjax.models import gated_deltanet as gd

B, H, DK, DV = 2, 3, 16, 24
SCALE = DK ** -0.5

chunk_fn = jax.jit(gd.chunk_gated_delta_rule, static_argnames=("scale", "chunk_size"))
recurrent_fn = jax.jit(gd.recurrent_gated_delta_rule, static_argnames=("scale",))
conv_fn = jax.jit(gd.causal_conv1d)


def _np_l2norm(x):
  return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + 1e-6)


def _inputs(seed, t, b=B, h=H, dk=DK, dv=DV, normalise=True):
  """Random (q, k, v, g, beta, s0) in float32; per-head decay scales from near-1 (long memory) to strong."""
  rng = np.random.default_rng(seed)
  q = rng.standard_normal((b, t, h, dk))
  k = rng.standard_normal((b, t, h, dk))
  if normalise:
    q, k = _np_l2norm(q), _np_l2norm(k)
  v = rng.standard_normal((b, t, h, dv))
  head_scale = np.geomspace(0.02, 2.0, h)
  g = -np.log1p(np.exp(rng.standard_normal((b, t, h)))) * head_scale
  beta = 1.0 / (1.0 + np.exp(-rng.standard_normal((b, t, h))))
  s0 = rng.standard_normal((b, h, dk, dv))
  return tuple(x.astype(np.float32) for x in (q, k, v, g, beta, s0))


def _np_recurrence(q, k, v, g, beta, s0=None, scale=SCALE):
  """The recurrence of the module docstring, a plain float64 loop: (o [B, T, H, dv], S [B, H, dk, dv])."""
  q, k, v, g, beta = (np.asarray(x, np.float64) for x in (q, k, v, g, beta))
  b, t, h, dk = k.shape
  s = np.zeros((b, h, dk, v.shape[-1])) if s0 is None else np.array(s0, np.float64)
  o = np.zeros(v.shape)
  for i in range(t):
    s = s * np.exp(g[:, i])[..., None, None]
    delta = (v[:, i] - np.einsum("bhk,bhkv->bhv", k[:, i], s)) * beta[:, i][..., None]
    s = s + k[:, i][..., :, None] * delta[..., None, :]
    o[:, i] = np.einsum("bhk,bhkv->bhv", q[:, i] * scale, s)
  return o, s


def _close(got, want, tol=1e-5):
  """max |got - want| <= tol * max(1, max |want|)."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  assert got.shape == want.shape
  err = np.abs(got - want).max()
  assert err <= tol * max(1.0, np.abs(want).max()), err


@functools.lru_cache(maxsize=None)
def _case(seed, t, with_state, normalise=True):
  """Inputs and their float64 reference (cached: several tests share one case, and one compile)."""
  q, k, v, g, beta, s0 = _inputs(seed, t, normalise=normalise)
  s0 = s0 if with_state else None
  return (q, k, v, g, beta, s0), _np_recurrence(q, k, v, g, beta, s0) if normalise else None


@pytest.mark.parametrize("t,chunk,with_state", [
    (300, 64, True),  # several chunks, T not a multiple of the chunk
    (300, 60, True),  # T a multiple of the chunk (and a chunk that is no power of two)
    (65, 64, False), (63, 64, False),  # T = chunk +- 1, no initial state
])
def test_chunk_recurrent_and_float64_loop_agree(t, chunk, with_state):
  (q, k, v, g, beta, s0), (o_ref, s_ref) = _case(t, t, with_state)
  o_c, s_c = chunk_fn(q, k, v, g, beta, scale=SCALE, initial_state_bhkv=s0, chunk_size=chunk)
  o_r, s_r = recurrent_fn(q, k, v, g, beta, scale=SCALE, initial_state_bhkv=s0)
  assert o_c.dtype == jnp.float32 and s_c.dtype == jnp.float32 and s_c.shape == (B, H, DK, DV)
  _close(o_c, o_r)
  _close(s_c, s_r)
  for o, s in ((o_c, s_c), (o_r, s_r)):
    _close(o, o_ref)
    _close(s, s_ref)


def test_near_identical_keys_and_full_writes_stay_accurate():
  """Keys almost parallel, beta ~ 1, no decay: (I + A) has all sub-diagonal entries ~ 1 (its powers grow
  binomially; the inverse stays small), the hard case for the intra-chunk solve."""
  q, k, v, g, beta, s0 = _inputs(21, 300)
  rng = np.random.default_rng(22)
  base = rng.standard_normal((B, 1, H, DK))
  k = _np_l2norm(base + 0.01 * rng.standard_normal(k.shape)).astype(np.float32)
  beta = np.full(beta.shape, 0.995, np.float32)
  g = np.full(g.shape, -1e-4, np.float32)
  o_ref, s_ref = _np_recurrence(q, k, v, g, beta, s0)
  o_c, s_c = chunk_fn(q, k, v, g, beta, scale=SCALE, initial_state_bhkv=s0, chunk_size=64)
  _close(o_c, o_ref)
  _close(s_c, s_ref)


def test_unit_lower_inverse():
  """(I + A)^-1 for C = 37 (padded to 64 inside): random A and A with all sub-diagonal entries ~ 1."""
  c = 37
  rng = np.random.default_rng(c)
  a = np.tril(rng.standard_normal((2, 3, c, c)), -1) * 0.5
  a[1] = np.tril(np.full((c, c), 0.999), -1)
  got = np.asarray(jax.jit(gd.unit_lower_inverse)(jnp.asarray(a, jnp.float32)))
  want = np.linalg.inv(np.eye(c) + a)
  _close(got, want, tol=1e-5)


def test_matches_transformers_chunk_and_recurrent():
  """Raw q, k: HF normalises inside (use_qk_l2norm_in_kernel=True), codjax through gd.l2norm first."""
  (q, k, v, g, beta, s0), _ = _case(7, 300, True, normalise=False)
  t = lambda x: torch.from_numpy(np.array(x))
  with torch.no_grad():
    hf_c = hf.torch_chunk_gated_delta_rule(t(q), t(k), t(v), t(g), t(beta), chunk_size=64, initial_state=t(s0),
                                           output_final_state=True, use_qk_l2norm_in_kernel=True)
    hf_r = hf.torch_recurrent_gated_delta_rule(t(q), t(k), t(v), t(g), t(beta), initial_state=t(s0),
                                               output_final_state=True, use_qk_l2norm_in_kernel=True)
    np.testing.assert_allclose(np.asarray(gd.l2norm(q)), hf.l2norm(t(q)).numpy(), rtol=1e-6, atol=1e-7)
  qn, kn = gd.l2norm(q), gd.l2norm(k)
  o_c, s_c = chunk_fn(qn, kn, v, g, beta, scale=SCALE, initial_state_bhkv=s0, chunk_size=64)
  o_r, s_r = recurrent_fn(qn, kn, v, g, beta, scale=SCALE, initial_state_bhkv=s0)
  for o, s in ((o_c, s_c), (o_r, s_r)):
    for o_hf, s_hf in (hf_c, hf_r):
      _close(o, o_hf.numpy())
      _close(s, s_hf.numpy())


# Per row: (a, b, p) = tokens of segment 1, of segment 2, of segment 0 (pads); T = 48, chunks of 16.
PACKED = {
    "at_chunk_boundaries": [(16, 16, 16), (32, 16, 0)],
    "next_to_boundaries": [(15, 17, 16), (17, 15, 16)],
    "within_one_chunk": [(5, 3, 40), (1, 46, 1)],
    "no_pads": [(33, 15, 0), (47, 1, 0)],
}


def _segment_ids(layout):
  return np.stack([np.array([1] * a + [2] * b_ + [0] * p, np.int32) for a, b_, p in layout])


@pytest.mark.parametrize("case", sorted(PACKED))
def test_packed_segments_equal_separate_runs(case):
  layout = PACKED[case]
  q, k, v, g, beta, s0 = _inputs(11, 48)
  seg = _segment_ids(layout)
  o, s = chunk_fn(q, k, v, g, beta, scale=SCALE, segment_ids_bt=seg, initial_state_bhkv=s0, chunk_size=16)
  o = np.asarray(o)
  for row, (a, b_, p) in enumerate(layout):
    start = 0
    for length in (a, b_, p):
      if length == 0:
        continue
      sl = slice(start, start + length)
      init = s0[row:row + 1] if start == 0 else None  # the initial state belongs to token 0's segment
      o_ref, s_ref = _np_recurrence(q[row:row + 1, sl], k[row:row + 1, sl], v[row:row + 1, sl],
                                    g[row:row + 1, sl], beta[row:row + 1, sl], init)
      _close(o[row:row + 1, sl], o_ref)
      start += length
    _close(s[row:row + 1], s_ref)  # final state = the last segment's


def test_zero_gate_tokens_leave_the_state_unchanged():
  """Tokens with g = 0 and beta = 0 (sampler pads), in the middle, around chunk boundaries and at the end,
  change neither the state nor the outputs at the real tokens, in both forms."""
  (q, k, v, g, beta, s0), _ = _case(3, 300, True)
  g, beta = g.copy(), beta.copy()
  real = np.ones(300, bool)
  real[[0, 63, 64, 65, 127, 128, 200]] = False
  real[280:] = False
  g[:, ~real] = 0.0
  beta[:, ~real] = 0.0
  o_ref, s_ref = _np_recurrence(q[:, real], k[:, real], v[:, real], g[:, real], beta[:, real], s0)
  o_c, s_c = chunk_fn(q, k, v, g, beta, scale=SCALE, initial_state_bhkv=s0, chunk_size=64)
  o_r, s_r = recurrent_fn(q, k, v, g, beta, scale=SCALE, initial_state_bhkv=s0)
  for o, s in ((o_c, s_c), (o_r, s_r)):
    _close(np.asarray(o)[:, real], o_ref)
    _close(s, s_ref)


def test_prefill_then_decode_steps_equal_one_pass():
  (q, k, v, g, beta, _), (o_ref, s_ref) = _case(65, 65, False)
  o_pre, s = chunk_fn(q[:, :63], k[:, :63], v[:, :63], g[:, :63], beta[:, :63], scale=SCALE,
                      initial_state_bhkv=None, chunk_size=64)
  outs = [np.asarray(o_pre)]
  for i in (63, 64):
    o_i, s = recurrent_fn(q[:, i:i + 1], k[:, i:i + 1], v[:, i:i + 1], g[:, i:i + 1], beta[:, i:i + 1],
                          scale=SCALE, initial_state_bhkv=s)
    outs.append(np.asarray(o_i))
  _close(np.concatenate(outs, axis=1), o_ref)
  _close(s, s_ref)


# ---------------------------------------------------------------- gradients against float64 JAX


def _jax_recurrence(q, k, v, g, beta, s0, reset, scale):
  """The recurrence in whatever dtype the inputs have (float64 under enable_x64); S <- 0 before each token
  whose ``reset`` [B, T] is set (the first token of a packed segment)."""
  def step(s, x):
    qt, kt, vt, gt, bt, rt = x
    s = jnp.where(rt[:, None, None, None], 0.0, s) * jnp.exp(gt)[..., None, None]
    delta = (vt - jnp.einsum("bhk,bhkv->bhv", kt, s)) * bt[..., None]
    s = s + kt[..., :, None] * delta[..., None, :]
    return s, jnp.einsum("bhk,bhkv->bhv", qt * scale, s)
  s, o = jax.lax.scan(step, s0, tuple(jnp.moveaxis(x, 1, 0) for x in (q, k, v, g, beta, reset)))
  return jnp.moveaxis(o, 0, 1), s


def _grads(fn, args, co_o, co_s):
  """Gradients of sum(o * co_o) + sum(S * co_s) w.r.t. (q, k, v, g, beta, s0)."""
  def loss(*a):
    o, s = fn(*a)
    return jnp.sum(o * co_o) + jnp.sum(s * co_s)
  return jax.grad(loss, argnums=tuple(range(6)))(*args)


def _float64_grads(fn, args, co_o, co_s):
  """``_grads`` in float64; x64 is enabled only inside this context (no leak into other tests)."""
  with jax.enable_x64(True):
    a64 = [jnp.asarray(x, jnp.float64) for x in args]
    out = jax.jit(lambda *a: _grads(fn, a, jnp.asarray(co_o), jnp.asarray(co_s)))(*a64)
    assert out[0].dtype == jnp.float64
    return [np.asarray(x) for x in out]


GRAD_NAMES = ("q", "k", "v", "g", "beta", "initial_state")


def _check_grads(got, want):
  for name, a, b_ in zip(GRAD_NAMES, got, want):
    a = np.asarray(a)
    assert np.isfinite(a).all(), name
    err = np.abs(a - b_).max()
    assert err <= 1e-4 * np.abs(b_).max(), (name, err, np.abs(b_).max())


@pytest.mark.slow  # two gradient compiles (~5-10 s on 2 busy cores)
def test_chunk_gradients_match_float64_recurrence():
  """Gradients w.r.t. q, k, v, g, beta and the initial state (chunks of 16, T = 50 padded to 64) against a
  float64 recurrence: row 0 is one sequence, row 1 packs segments [1]*20 + [2]*25 + [3]*5, which must equal
  separate runs (the reference zeroes S at each segment start: no gradient leaks across segments)."""
  q, k, v, g, beta, s0 = args = _inputs(13, 50, b=2, h=2, dk=8, dv=12)
  seg = np.array([[4] * 50, [1] * 20 + [2] * 25 + [3] * 5], np.int32)
  reset = np.zeros(seg.shape, bool)
  reset[1, [20, 45]] = True
  rng = np.random.default_rng(1)
  co_o, co_s = rng.standard_normal(v.shape), rng.standard_normal(s0.shape)
  scale = 8 ** -0.5
  want = _float64_grads(lambda *a: _jax_recurrence(*a, reset, scale), args, co_o, co_s)
  chunk = lambda *a: gd.chunk_gated_delta_rule(*a[:5], scale=scale, segment_ids_bt=seg, initial_state_bhkv=a[5],
                                               chunk_size=16)
  got = jax.jit(lambda *a: _grads(chunk, a, co_o.astype(np.float32), co_s.astype(np.float32)))(*args)
  _check_grads(got, want)


# ---------------------------------------------------------------- causal conv1d

C, W = 12, 4


def _conv_inputs(seed, t, b=B):
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((b, t, C)).astype(np.float32)
  w = rng.standard_normal((C, W)).astype(np.float32)
  state = rng.standard_normal((b, C, W - 1)).astype(np.float32)
  return x, w, state


def test_causal_conv1d_matches_transformers_fn():
  x, w, _ = _conv_inputs(0, 20)
  with torch.no_grad():
    want = hf.causal_conv1d_fn(torch.from_numpy(x).transpose(1, 2), torch.from_numpy(w), activation="silu")
  y, state = conv_fn(x, w)
  np.testing.assert_allclose(np.asarray(y), want.transpose(1, 2).numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(state), x[:, -(W - 1):].transpose(0, 2, 1))


@pytest.mark.parametrize("t", [1, 5])
def test_causal_conv1d_matches_transformers_update_with_state(t):
  x, w, state = _conv_inputs(1, t)
  # HF keeps W inputs; the oldest never reaches the outputs (they are the last t of T + 1 positions).
  hf_state = torch.from_numpy(np.concatenate([np.full((B, C, 1), 7.0, np.float32), state], axis=-1))
  with torch.no_grad():
    want = hf.causal_conv1d_update(torch.from_numpy(x).transpose(1, 2), hf_state, torch.from_numpy(w), None, "silu")
  y, new_state = conv_fn(x, w, state_bcw=state)
  np.testing.assert_allclose(np.asarray(y), want.transpose(1, 2).numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(new_state), hf_state[..., 1:].numpy())


def _np_conv(x, w, state=None):
  """y[t] = silu(sum_j w[:, j] xin[t + j]), xin = [state; x] (float64 loop), for one row [T, C]."""
  xin = np.concatenate([np.zeros((W - 1, C)) if state is None else state.T, x]).astype(np.float64)
  acc = np.stack([sum(w[:, j] * xin[t + j] for j in range(W)) for t in range(len(x))])
  return acc / (1.0 + np.exp(-acc))


def test_causal_conv1d_segments_equal_separate_runs():
  layout = PACKED["next_to_boundaries"] + PACKED["within_one_chunk"]
  x, w, state = _conv_inputs(2, 48, b=len(layout))
  seg = _segment_ids(layout)
  y, _ = conv_fn(x, w, segment_ids_bt=seg, state_bcw=state)
  y = np.asarray(y)
  for row, lengths in enumerate(layout):
    start = 0
    for length in lengths:
      if length == 0:
        continue
      sl = slice(start, start + length)
      init = state[row] if start == 0 else None  # the state belongs to token 0's segment
      np.testing.assert_allclose(y[row, sl], _np_conv(x[row, sl], w, init), rtol=1e-5, atol=1e-5)
      start += length


def test_causal_conv1d_valid_len_two_pieces_equal_one():
  """Rows split after n1 = 0, 1, 2 (< W - 1: the state keeps old inputs) and 7 tokens; pieces padded with junk."""
  t, piece = 10, 12
  x, w, state = _conv_inputs(3, t, b=4)
  y_all, s_all = conv_fn(x, w, state_bcw=state)
  rng = np.random.default_rng(4)
  n1 = np.array([0, 1, 2, 7])
  p1 = rng.standard_normal((4, piece, C)).astype(np.float32) * 100
  p2 = rng.standard_normal((4, piece, C)).astype(np.float32) * 100
  for row, n in enumerate(n1):
    p1[row, :n] = x[row, :n]
    p2[row, :t - n] = x[row, n:]
  y1, s1 = conv_fn(p1, w, state_bcw=state, valid_len_b=jnp.asarray(n1))
  y2, s2 = conv_fn(p2, w, state_bcw=s1, valid_len_b=jnp.asarray(t - n1))
  np.testing.assert_array_equal(np.asarray(s2), np.asarray(s_all))
  for row, n in enumerate(n1):
    got = np.concatenate([np.asarray(y1)[row, :n], np.asarray(y2)[row, :t - n]])
    np.testing.assert_allclose(got, np.asarray(y_all)[row], rtol=1e-6, atol=1e-6)
  # valid_len = T reproduces the default state
  _, s_full = conv_fn(x, w, state_bcw=state, valid_len_b=jnp.full((4,), t))
  np.testing.assert_array_equal(np.asarray(s_full), np.asarray(s_all))


# ---------------------------------------------------------------- gated RMSNorm


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gated_rms_norm_matches_transformers(dtype):
  rng = np.random.default_rng(6)
  x = rng.standard_normal((5, 7, 32)).astype(np.float32) * 3
  z = rng.standard_normal((5, 7, 32)).astype(np.float32) * 2
  w = (1.0 + 0.3 * rng.standard_normal(32)).astype(np.float32)
  tdt = getattr(torch, dtype)
  norm = hf.Qwen3_5RMSNormGated(32, eps=1e-6)
  with torch.no_grad():
    norm.weight.copy_(torch.from_numpy(w))
    norm = norm.to(tdt)
    want = norm(torch.from_numpy(x).to(tdt), torch.from_numpy(z).to(tdt)).float().numpy()
  jdt = getattr(jnp, dtype)
  got = gd.gated_rms_norm(jnp.asarray(x, jdt), jnp.asarray(z, jdt), jnp.asarray(w, jdt), 1e-6)
  assert got.dtype == jdt
  tol = 1e-6 if dtype == "float32" else 1e-2
  np.testing.assert_allclose(np.asarray(got.astype(jnp.float32)), want, rtol=tol, atol=tol)
