"""codjax.models.moe against transformers' Qwen3.5-MoE block and load-balancing loss (torch, float32), and
float64 numpy references of the routed sum."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (Qwen3_5MoeSparseMoeBlock,
                                                                 load_balancing_loss_func)

from codjax.models import moe

D, E, F, S = 64, 8, 32, 48
IMPLS = ("ragged", "blocked", "dense")


def hf_block(top_k: int, seed: int = 0):
  cfg = Qwen3_5MoeTextConfig(hidden_size=D, num_experts=E, num_experts_per_tok=top_k, moe_intermediate_size=F,
                             shared_expert_intermediate_size=S)
  torch.manual_seed(seed)
  block = Qwen3_5MoeSparseMoeBlock(cfg).float()
  with torch.no_grad():
    for name, w in block.named_parameters():
      std = 0.5 if name == "gate.weight" else 0.1  # a router with spread-out probabilities
      w.copy_(torch.randn_like(w) * std)
  return block


def params_from_hf(block) -> dict:
  """HF tensors -> codjax layouts (module docstring of codjax.models.moe)."""
  t = {k: v.detach().numpy() for k, v in block.state_dict().items()}
  gate_up = t["experts.gate_up_proj"]  # [E, 2F, D]
  return {
      "router_de": jnp.asarray(t["gate.weight"].T),
      "egate_edf": jnp.asarray(gate_up[:, :F].transpose(0, 2, 1)),
      "eup_edf": jnp.asarray(gate_up[:, F:].transpose(0, 2, 1)),
      "edown_efd": jnp.asarray(t["experts.down_proj"].transpose(0, 2, 1)),
      "sgate_df": jnp.asarray(t["shared_expert.gate_proj.weight"].T),
      "sup_df": jnp.asarray(t["shared_expert.up_proj.weight"].T),
      "sdown_fd": jnp.asarray(t["shared_expert.down_proj.weight"].T),
      "shared_gate_d": jnp.asarray(t["shared_expert_gate.weight"][0]),
  }


def hf_grads_as_codjax(block) -> dict:
  g = {k: p.grad.numpy() for k, p in block.named_parameters()}
  gate_up = g["experts.gate_up_proj"]
  return {
      "router_de": g["gate.weight"].T,
      "egate_edf": gate_up[:, :F].transpose(0, 2, 1),
      "eup_edf": gate_up[:, F:].transpose(0, 2, 1),
      "edown_efd": g["experts.down_proj"].transpose(0, 2, 1),
      "sgate_df": g["shared_expert.gate_proj.weight"].T,
      "sup_df": g["shared_expert.up_proj.weight"].T,
      "sdown_fd": g["shared_expert.down_proj.weight"].T,
      "shared_gate_d": g["shared_expert_gate.weight"][0],
  }


def routed_reference(x, weights, experts, p) -> np.ndarray:
  """sum_j w_j down_{e_j}(silu(gate_{e_j} x) up_{e_j} x) per token, float64 loops."""
  x = np.asarray(x, np.float64)
  g, u, dn = (np.asarray(p[k], np.float64) for k in ("egate_edf", "eup_edf", "edown_efd"))
  w, ex = np.asarray(weights, np.float64), np.asarray(experts)
  out = np.zeros_like(x)
  for n in range(x.shape[0]):
    for j in range(ex.shape[1]):
      e = ex[n, j]
      a, b = x[n] @ g[e], x[n] @ u[e]
      out[n] += w[n, j] * ((a / (1 + np.exp(-a)) * b) @ dn[e])
  return out


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("top_k", [2, 3])
def test_moe_block_matches_hf(top_k, impl):
  block = hf_block(top_k, seed=top_k)
  p = params_from_hf(block)
  x = np.random.default_rng(top_k).normal(size=(3, 11, D)).astype(np.float32)
  with torch.no_grad():
    want = block(torch.from_numpy(x)).numpy()
    want_logits = block.gate(torch.from_numpy(x.reshape(-1, D)))[0].numpy()
  y, logits = jax.jit(lambda x, p: moe.moe_block(x, p, top_k=top_k, impl=impl))(jnp.asarray(x), p)
  assert y.shape == x.shape and y.dtype == jnp.float32
  assert logits.shape == (33, E) and logits.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(logits), want_logits, atol=1e-5, rtol=0)
  assert np.max(np.abs(np.asarray(y) - want)) <= 1e-5


@pytest.mark.slow  # two jitted backward passes (~6 s)
def test_gradients_match_hf_and_impls_agree(top_k=3):
  """d/d(x, every weight) of sum(y * c): ragged == dense == torch autograd through HF's block. The router's
  gradient comes only through the renormalised top-k weights (no aux loss here) and is nonzero."""
  block = hf_block(top_k, seed=10 + top_k)
  p = params_from_hf(block)
  rng = np.random.default_rng(top_k)
  x = rng.normal(size=(2, 9, D)).astype(np.float32)
  c = rng.normal(size=(2, 9, D)).astype(np.float32)

  xt = torch.from_numpy(x).requires_grad_(True)
  (block(xt) * torch.from_numpy(c)).sum().backward()
  want_p, want_x = hf_grads_as_codjax(block), xt.grad.numpy()

  def loss(x, p, impl):
    return jnp.sum(moe.moe_block(x, p, top_k=top_k, impl=impl)[0] * c)

  got = {impl: jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)(jnp.asarray(x), p, impl) for impl in IMPLS}
  for k in p:
    np.testing.assert_allclose(np.asarray(got["ragged"][1][k]), np.asarray(got["dense"][1][k]), atol=1e-5, rtol=0,
                               err_msg=k)
    np.testing.assert_allclose(np.asarray(got["dense"][1][k]), want_p[k], atol=1e-4, rtol=1e-4, err_msg=k)
  np.testing.assert_allclose(np.asarray(got["ragged"][0]), np.asarray(got["dense"][0]), atol=1e-5, rtol=0)
  np.testing.assert_allclose(np.asarray(got["dense"][0]), want_x, atol=1e-4, rtol=1e-4)
  router_grad = np.asarray(got["ragged"][1]["router_de"])
  assert np.abs(router_grad).max() > 1e-3


@pytest.mark.slow  # float64 finite differences + two jitted gradients (~3-6 s on 2 loaded cores)
def test_router_weights_carry_the_router_gradient():
  """Only the routed sum, shared expert left out: the router's gradient is exactly the chain rule through
  w = renormalised top-k softmax (checked against a float64 finite difference of the routed output)."""
  rng = np.random.default_rng(5)
  n, k = 16, 3
  x = jnp.asarray(rng.normal(size=(n, D)), jnp.float32)
  p = {"router_de": jnp.asarray(rng.normal(size=(D, E)) * 0.3, jnp.float32),
       "egate_edf": jnp.asarray(rng.normal(size=(E, D, F)) * 0.1, jnp.float32),
       "eup_edf": jnp.asarray(rng.normal(size=(E, D, F)) * 0.1, jnp.float32),
       "edown_efd": jnp.asarray(rng.normal(size=(E, F, D)) * 0.1, jnp.float32)}

  def routed(router, impl):
    _, w, ex = moe.route(x, router, k)
    return jnp.sum(moe.experts_forward(x, w, ex, p["egate_edf"], p["eup_edf"], p["edown_efd"], impl=impl))

  _, _, ex0 = moe.route(x, p["router_de"], k)

  def reference(router64):  # float64, with the expert choice held at ex0 (a small step keeps it)
    logits = np.asarray(x, np.float64) @ router64
    pr = np.exp(logits - logits.max(-1, keepdims=True))
    pr /= pr.sum(-1, keepdims=True)
    top = np.take_along_axis(pr, np.asarray(ex0), axis=-1)
    return routed_reference(x, top / top.sum(-1, keepdims=True), ex0, p).sum()

  r64, h = np.asarray(p["router_de"], np.float64), 1e-4
  fd = {}
  for (i, j) in [(0, 0), (3, 5), (17, 2), (40, 7)]:
    dr = np.zeros_like(r64)
    dr[i, j] = h
    fd[i, j] = (reference(r64 + dr) - reference(r64 - dr)) / (2 * h)
  for impl in IMPLS:
    g = np.asarray(jax.jit(jax.grad(routed), static_argnums=1)(p["router_de"], impl))
    assert np.abs(g).max() > 1e-2
    for (i, j), want in fd.items():
      np.testing.assert_allclose(g[i, j], want, atol=2e-4, rtol=1e-3)


@pytest.mark.parametrize("impl", IMPLS)
def test_every_token_gets_exactly_k_experts_even_when_unbalanced(impl):
  """Ties (all logits equal) go to the lowest expert ids; a router that sends every token to the same experts
  leaves most groups empty, and still every token's output is its k experts' weighted sum."""
  rng = np.random.default_rng(7)
  n, k = 40, 3
  route = jax.jit(moe.route, static_argnums=2)
  forward = jax.jit(lambda *a: moe.experts_forward(*a, impl=impl))
  x = jnp.asarray(rng.normal(size=(n, D)), jnp.float32)
  p = {"egate_edf": jnp.asarray(rng.normal(size=(E, D, F)) * 0.1, jnp.float32),
       "eup_edf": jnp.asarray(rng.normal(size=(E, D, F)) * 0.1, jnp.float32),
       "edown_efd": jnp.asarray(rng.normal(size=(E, F, D)) * 0.1, jnp.float32)}

  logits, w, ex = route(x, jnp.zeros((D, E), jnp.float32), k)  # every probability 1/E: all ties
  np.testing.assert_array_equal(np.asarray(ex), np.tile(np.arange(k), (n, 1)))
  np.testing.assert_allclose(np.asarray(w), 1.0 / k, rtol=1e-6)
  assert np.all(np.asarray(logits) == 0.0)

  router = np.zeros((D, E), np.float32)
  router[:, [6, 2, 4]] = rng.normal(size=(D, 3)) * 0.01
  xb = x.at[:, 0].set(10.0)  # feature 0 dominates every row
  router[0, [6, 2, 4]] = [0.3, 0.2, 0.1]  # logits ~3, 2, 1 against ~0: weights ~0.67, 0.24, 0.09
  _, w, ex = route(xb, jnp.asarray(router), k)
  ex = np.asarray(ex)
  assert ex.dtype == np.int32 and ex.shape == (n, k)
  np.testing.assert_array_equal(ex, np.tile([6, 2, 4], (n, 1)))  # 5 of 8 groups are empty
  np.testing.assert_allclose(np.asarray(w).sum(-1), 1.0, rtol=1e-6)
  got = forward(xb, w, ex, p["egate_edf"], p["eup_edf"], p["edown_efd"])
  np.testing.assert_allclose(np.asarray(got), routed_reference(xb, w, ex, p), atol=1e-5, rtol=1e-5)

  _, w, ex = route(x, jnp.asarray(rng.normal(size=(D, E)), jnp.float32), k)  # balanced-ish, random
  ex = np.asarray(ex)
  assert all(len(set(row)) == k for row in ex.tolist()) and ex.min() >= 0 and ex.max() < E
  got = forward(x, w, ex, p["egate_edf"], p["eup_edf"], p["edown_efd"])
  np.testing.assert_allclose(np.asarray(got), routed_reference(x, w, ex, p), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("top_k", [2, 3])
@pytest.mark.parametrize("masked", [False, True])
def test_load_balancing_loss_matches_hf(top_k, masked):
  rng = np.random.default_rng(top_k + 10 * masked)
  num_layers, b, t = 3, 2, 9
  logits = rng.normal(size=(num_layers, b * t, E)).astype(np.float32) * 2
  mask = None
  if masked:
    mask = np.ones((b, t), np.int64)
    mask[0, :3] = 0  # left padding
    mask[1, 6:] = 0  # right padding
  want = load_balancing_loss_func(tuple(torch.from_numpy(l) for l in logits), E, top_k,
                                  None if mask is None else torch.from_numpy(mask)).item()
  got = moe.load_balancing_loss(jnp.asarray(logits), top_k, None if mask is None else jnp.asarray(mask.reshape(-1)))
  assert got.shape == () and got.dtype == jnp.float32
  np.testing.assert_allclose(float(got), want, rtol=1e-6)
  if masked:  # a bool mask is the same, and padding rows really are excluded
    got_bool = moe.load_balancing_loss(jnp.asarray(logits), top_k, jnp.asarray(mask.reshape(-1) > 0))
    np.testing.assert_allclose(float(got_bool), want, rtol=1e-6)
    unmasked = moe.load_balancing_loss(jnp.asarray(logits), top_k)
    assert abs(float(unmasked) - want) > 1e-4


def test_load_balancing_loss_is_k_when_probabilities_are_uniform_and_learns_the_router():
  """Uniform router probabilities give E * sum_e f_e / E = sum_e f_e = k (whatever the assignments); the loss
  is differentiable in the logits (through P)."""
  k = 2
  logits = jnp.zeros((1, E, E), jnp.float32)  # with ties broken to the lowest ids, counts are [E, E, 0, ...]
  assert float(moe.load_balancing_loss(logits, k)) == pytest.approx(k, rel=1e-6)
  rng = np.random.default_rng(0)
  g = jax.jit(jax.grad(lambda l: moe.load_balancing_loss(l, k)))(jnp.asarray(rng.normal(size=(2, 12, E)), jnp.float32))
  assert np.abs(np.asarray(g)).max() > 1e-4


def test_block_rows_targets_a_quarter_of_padding():
  assert [moe.block_rows(a, 8) for a in (8, 31, 32, 64, 100, 512, 4096, 10 ** 6)] == [1, 1, 1, 2, 2, 16, 128, 128]


@pytest.mark.parametrize("n,k", [(3, 2), (97, 3), (256, 2)])  # rows per block 1, 2, 16
def test_blocked_equals_reference_with_empty_and_full_groups(n, k):
  """The blocked layout is exact whatever the group sizes: experts with no tokens, groups that fill whole
  blocks, groups one row past a block, and trailing unused blocks; its gradients equal the dense form's."""
  rng = np.random.default_rng(n)
  x = jnp.asarray(rng.normal(size=(n, D)), jnp.float32)
  p = {"egate_edf": jnp.asarray(rng.normal(size=(E, D, F)) * 0.1, jnp.float32),
       "eup_edf": jnp.asarray(rng.normal(size=(E, D, F)) * 0.1, jnp.float32),
       "edown_efd": jnp.asarray(rng.normal(size=(E, F, D)) * 0.1, jnp.float32)}
  r = moe.block_rows(n * k, E)
  # experts 1, 5, 7 never chosen; expert 0 fills exactly two blocks
  ex = np.array([([0] if i < 2 * r else []) + list(rng.permutation([2, 3, 4, 6]))[:k - (i < 2 * r)]
                 for i in range(n)], np.int32)
  assert all(len(set(row)) == k for row in ex.tolist())
  w = jnp.asarray(rng.dirichlet(np.ones(k), size=n), jnp.float32)
  got = jax.jit(lambda *a: moe.experts_forward(*a, impl="blocked"))(x, w, jnp.asarray(ex), p["egate_edf"],
                                                                      p["eup_edf"], p["edown_efd"])
  np.testing.assert_allclose(np.asarray(got), routed_reference(x, w, ex, p), atol=1e-5, rtol=1e-5)

  c = jnp.asarray(rng.normal(size=(n, D)), jnp.float32)

  def loss(impl, x, w, *weights):
    return jnp.sum(moe.experts_forward(x, w, jnp.asarray(ex), *weights, impl=impl) * c)

  grads = {impl: jax.jit(jax.grad(functools.partial(loss, impl), argnums=(0, 1, 2, 3, 4)))(
      x, w, p["egate_edf"], p["eup_edf"], p["edown_efd"]) for impl in ("blocked", "dense")}
  for a, b in zip(grads["blocked"], grads["dense"]):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=1e-4)
  assert float(jnp.abs(grads["blocked"][2][1]).max()) == 0.0  # an unchosen expert gets no gradient


def test_impl_argument_is_checked():
  x = jnp.zeros((4, D), jnp.float32)
  w, ex = jnp.full((4, 2), 0.5), jnp.zeros((4, 2), jnp.int32).at[:, 1].set(1)
  weights = jnp.zeros((E, D, F)), jnp.zeros((E, D, F)), jnp.zeros((E, F, D))
  with pytest.raises(ValueError, match="impl"):
    moe.experts_forward(x, w, ex, *weights, impl="sparse")
