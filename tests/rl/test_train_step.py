"""The jitted train step on the tiny model: learning, exact microbatching, sharding, the NaN guard, and the
vocabulary-chunked logprobs."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from codjax.models import init_model, preset
from codjax.parallel import make_mesh
from codjax.rl.logprobs import shifted_token_logprobs, token_logprobs_and_entropy
from codjax.rl.losses import LossConfig
from codjax.rl.train_step import (OptimizerConfig, StepConfig, init_train_state, make_optimizer,
                                  make_train_step)

pytestmark = pytest.mark.slow  # jitted train steps, sharded on 8 fake devices (~110 s)

CFG = preset("tiny", vocab_size=256, hidden_size=64, intermediate_size=128, num_attention_heads=2,
             num_key_value_heads=1, head_dim=32, tie_word_embeddings=False)


def _batch(b=8, t=24, seed=0, adv_sign=1.0):
  rng = np.random.default_rng(seed)
  tokens = rng.integers(0, CFG.vocab_size, (b, t)).astype(np.int32)
  lengths = rng.integers(t // 2, t + 1, b)
  seg = (np.arange(t)[None] < lengths[:, None]).astype(np.int32)
  mask = seg.copy().astype(np.float32)
  mask[:, :4] = 0  # prompt tokens
  return {
      "tokens": tokens,
      "positions": np.broadcast_to(np.arange(t, dtype=np.int32), (b, t)).copy(),
      "segment_ids": seg,
      "loss_mask": mask,
      "advantages": adv_sign * np.abs(rng.normal(size=(b, 1))).astype(np.float32) * np.ones((1, t), np.float32),
      "old_logprobs": np.full((b, t), -np.log(CFG.vocab_size), np.float32),
  }


def _setup(lr=3e-3, loss="rec_oneside_nois", k=1, chunks=1, seed=0, aggregation="token-mean", sgd=False):
  model = init_model(CFG, seed)
  # plain SGD makes "same params" mean "same gradients" (Adam's first step is ~lr*sign(g), which turns
  # float noise in near-zero gradients into visible differences)
  opt = optax.sgd(1.0) if sgd else make_optimizer(OptimizerConfig(learning_rate=lr))
  graphdef, state = init_train_state(model, opt)
  cfg = StepConfig(loss=loss, loss_cfg=LossConfig(eps_low=0.2, eps_high=1e9,
                                                  aggregation=aggregation),
                   num_microbatches=k, vocab_chunks=chunks)
  return graphdef, opt, cfg, state


def test_chunked_logprobs_equal_full_softmax():
  rng = np.random.default_rng(0)
  h = jnp.asarray(rng.normal(size=(2, 5, 16)), jnp.float32)
  w = jnp.asarray(rng.normal(size=(16, 96)), jnp.float32)
  y = jnp.asarray(rng.integers(0, 96, (2, 5)))
  for temp in (1.0, 0.7):
    z = (h @ w) / temp
    ref_lp = jnp.take_along_axis(jax.nn.log_softmax(z), y[..., None], -1)[..., 0]
    p = jax.nn.softmax(z)
    ref_ent = -(p * jax.nn.log_softmax(z)).sum(-1)
    for c in (1, 3, 8):
      lp, ent = token_logprobs_and_entropy(h, w, y, temperature=temp, num_chunks=c)
      np.testing.assert_allclose(lp, ref_lp, atol=1e-5)
      np.testing.assert_allclose(ent, ref_ent, atol=1e-5)
  # gradients agree too
  f_full = lambda w: jnp.take_along_axis(jax.nn.log_softmax(h @ w), y[..., None], -1).sum()  # noqa: E731
  f_chunk = lambda w: token_logprobs_and_entropy(h, w, y, num_chunks=4)[0].sum()  # noqa: E731
  np.testing.assert_allclose(jax.grad(f_chunk)(w), jax.grad(f_full)(w), atol=1e-5)


def test_shifted_logprobs_match_model_logits():
  model = init_model(CFG, 1)
  b = _batch(2, 10)
  lp, _ = shifted_token_logprobs(model, jnp.asarray(b["tokens"]), num_chunks=4)
  logits = model(jnp.asarray(b["tokens"]))
  ref = jnp.take_along_axis(jax.nn.log_softmax(logits[:, :-1]), jnp.asarray(b["tokens"])[:, 1:, None], -1)[..., 0]
  np.testing.assert_allclose(lp[:, 1:], ref, atol=1e-5)
  assert np.all(np.asarray(lp[:, 0]) == 0)


def test_loss_decreases_fitting_fixed_batch_with_positive_advantages():
  graphdef, opt, cfg, state = _setup()
  step = make_train_step(graphdef, opt, cfg, state)
  batch = {k: jnp.asarray(v) for k, v in _batch().items()}
  nll = []
  for _ in range(25):
    state, m = step(state, batch)
    nll.append(float(m["pg_loss"]))
    assert int(m["skipped"]) == 0
  # -A logp falls as the policy puts mass on the batch's tokens
  assert nll[-1] < 0.6 * nll[0]
  assert int(state.step) == 25


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean-token-mean"])
def test_microbatch_accumulation_equals_one_big_batch(aggregation):
  batch = {k: jnp.asarray(v) for k, v in _batch(seed=3).items()}
  outs = []
  for k in (1, 4):
    graphdef, opt, cfg, state = _setup(k=k, chunks=2, aggregation=aggregation, sgd=True)
    step = make_train_step(graphdef, opt, cfg, state)
    state, m = step(state, batch)
    outs.append((jax.tree.map(np.asarray, state.params), {n: float(v) for n, v in m.items()}))
  (p1, m1), (p4, m4) = outs
  for n in ("loss", "grad_norm", "pg_loss"):
    assert m1[n] == pytest.approx(m4[n], rel=1e-5, abs=1e-7)
  for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p4)):
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_sharded_step_equals_single_device_step():
  batch_np = _batch(b=8, seed=5)
  graphdef, opt, cfg, state = _setup(chunks=2, sgd=True)
  step = make_train_step(graphdef, opt, cfg, state)
  s1, m1 = step(state, {k: jnp.asarray(v) for k, v in batch_np.items()})
  ref = jax.tree.map(np.asarray, s1.params)

  mesh = make_mesh(data=2, fsdp=2, tensor=2)
  graphdef, opt, cfg, state = _setup(chunks=2, sgd=True)
  from codjax.models.qwen3 import PARAM_LOGICAL_AXES
  from codjax.parallel import state_shardings
  state = jax.device_put(state, state_shardings(state, mesh, PARAM_LOGICAL_AXES))
  step = make_train_step(graphdef, opt, cfg, state, mesh=mesh)
  s8, m8 = step(state, {k: jnp.asarray(v) for k, v in batch_np.items()})
  assert s8.params["q_ldnh"].value.sharding.spec == jax.sharding.PartitionSpec(None, "fsdp", "tensor", None)
  assert float(m8["loss"]) == pytest.approx(float(m1["loss"]), rel=1e-5)
  for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(jax.tree.map(np.asarray, s8.params))):
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_nan_in_batch_triggers_guard_not_corruption():
  graphdef, opt, cfg, state = _setup()
  step = make_train_step(graphdef, opt, cfg, state)
  before = jax.tree.map(np.array, (state.params, state.opt_state))
  bad = _batch()
  bad["advantages"][2, 6] = np.nan
  state, m = step(state, {k: jnp.asarray(v) for k, v in bad.items()})
  assert int(m["skipped"]) == 1 and int(state.step) == 0
  after = jax.tree.map(np.asarray, (state.params, state.opt_state))
  for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)):
    np.testing.assert_array_equal(a, b)
  state, m = step(state, {k: jnp.asarray(v) for k, v in _batch().items()})
  assert int(m["skipped"]) == 0 and int(state.step) == 1
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.params))


def test_sft_and_opd_losses_run_in_the_step():
  batch = {k: jnp.asarray(v) for k, v in _batch().items()}
  graphdef, opt, cfg, state = _setup(loss="sft")
  state, m = make_train_step(graphdef, opt, cfg, state)(state, batch)
  assert np.isfinite(float(m["loss"]))
  graphdef, opt, cfg, state = _setup(loss="opd")
  batch = dict(batch, teacher_logprobs=batch["old_logprobs"] + 0.1)
  step = make_train_step(graphdef, opt, cfg, state, batch_fields=tuple(batch))
  state, m = step(state, batch)
  assert np.isfinite(float(m["loss"]))
