"""``train.logits="loss_tokens"``: the LM head only at the loss tokens (``codjax.rl.batch.loss_index``,
``shifted_token_logprobs(index_bm=...)``) gives the values, losses, gradients and reference logprobs of the
full computation."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from codjax.models import init_model, preset
from codjax.rl.batch import TrainSequence, assemble_batch, loss_index, loss_index_width
from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rl.losses import LossConfig
from codjax.rl.train_step import StepConfig, init_train_state, make_train_step
from codjax.train.reference import FrozenPolicy

CFG = preset("tiny", vocab_size=320, hidden_size=64, intermediate_size=128, num_attention_heads=2,
             num_key_value_heads=1, head_dim=32, tie_word_embeddings=True)


def _seqs(n=9, seed=0):
  """Episodes of 20-60 tokens whose replies (two spans each) are in the loss, with advantages and old logprobs."""
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(n):
    t = int(rng.integers(20, 61))
    mask = np.zeros(t, np.float32)
    a = int(rng.integers(5, t // 2))
    mask[a:a + int(rng.integers(2, 8))] = 1
    mask[t - int(rng.integers(1, 6)):] = 1
    out.append(TrainSequence(tokens=rng.integers(0, CFG.vocab_size, t).tolist(), loss_mask=mask,
                             old_logprobs=(-6.0 + rng.normal(size=t) * 0.1).astype(np.float32) * mask,
                             advantage=float(rng.normal())))
  return out


def test_loss_index_lists_each_rows_loss_columns_then_zeros():
  rng = np.random.default_rng(1)
  mask = (rng.random((5, 100)) < 0.2).astype(np.float32)
  mask[3] = 0  # a row without loss tokens
  mask[0, 0] = 1  # column 0 has no context: left out (its logprob is 0 on both paths)
  idx = loss_index(mask)
  counts = [int((mask[r, 1:] != 0).sum()) for r in range(5)]
  assert idx.dtype == np.int32
  assert idx.shape == (5, 16 * -(-max(counts) // 16))  # T = 100: multiples of max(16, 100 // 8 = 12) = 16
  for r in range(5):
    want = [c for c in range(1, 100) if mask[r, c] != 0]
    assert idx[r, :len(want)].tolist() == want
    assert not idx[r, len(want):].any()


def test_loss_index_width_buckets():
  assert loss_index_width(0, 512) == 64  # at least one bucket
  assert loss_index_width(64, 512) == 64 and loss_index_width(65, 512) == 128
  assert loss_index_width(500, 512) == 512  # never past the row
  assert loss_index_width(17, 64) == 32  # short rows: multiples of 16


def test_assemble_batch_adds_the_index_of_its_loss_mask():
  batch, _ = assemble_batch(_seqs(), 128, pack=True, row_multiple=2, with_loss_index=True)
  np.testing.assert_array_equal(batch["loss_index"], loss_index(batch["loss_mask"]))
  plain, _ = assemble_batch(_seqs(), 128, pack=True, row_multiple=2)
  assert "loss_index" not in plain and set(plain) == set(batch) - {"loss_index"}


def test_indexed_logprobs_equal_the_full_softmax_at_the_loss_tokens():
  model = init_model(CFG, 0)
  batch, _ = assemble_batch(_seqs(), 128, pack=True, with_loss_index=True)
  args = [jnp.asarray(batch[k]) for k in ("tokens", "positions", "segment_ids")]
  logp, ent = shifted_token_logprobs(model, *args, index_bm=jnp.asarray(batch["loss_index"]))
  # independently: every position's log-softmax from the hidden states, read at the loss tokens
  z = np.asarray(model.hidden_states(*args) @ model.lm_head_weight(), np.float64)
  z = z - z.max(-1, keepdims=True)
  logsm = z - np.log(np.exp(z).sum(-1, keepdims=True))
  tok = batch["tokens"]
  want = np.zeros(tok.shape)
  want[:, 1:] = np.take_along_axis(logsm[:, :-1], tok[:, 1:, None], -1)[..., 0]
  p = np.exp(logsm)
  want_ent = np.zeros(tok.shape)
  want_ent[:, 1:] = -(p * logsm).sum(-1)[:, :-1]
  m = batch["loss_mask"] != 0
  np.testing.assert_allclose(np.asarray(logp)[m], want[m], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(ent)[m], want_ent[m], rtol=1e-5, atol=1e-5)
  assert not np.asarray(logp)[~m].any() and not np.asarray(ent)[~m].any()  # nothing scored off the loss


@pytest.mark.slow
@pytest.mark.parametrize("loss,k", [("sft", 1), ("rec_oneside_nois", 2)])
def test_train_step_with_the_index_matches_the_full_step(loss, k):
  """Same loss, gradient norm and updated parameters (plain SGD: same parameters = same gradients), with a k3
  KL term to a reference whose logprobs come from the indexed scorer."""
  batch, _ = assemble_batch(_seqs(12), 128, pack=True, row_multiple=k, with_loss_index=True)
  ref = FrozenPolicy(init_model(CFG, 1), temperature=1.0)
  ref_idx = np.asarray(ref.logprobs(batch, num_chunks=k))
  ref_full = np.asarray(ref.logprobs({x: v for x, v in batch.items() if x != "loss_index"}, num_chunks=k))
  np.testing.assert_allclose(ref_idx, ref_full, rtol=1e-5, atol=1e-5)
  assert not ref_idx[batch["loss_mask"] == 0].any()
  batch["ref_logprobs"] = ref_full
  results = {}
  for name, b in (("index", batch), ("full", {x: v for x, v in batch.items() if x != "loss_index"})):
    graphdef, state = init_train_state(init_model(CFG, 0), optax.sgd(1.0))
    cfg = StepConfig(loss=loss, loss_cfg=LossConfig(kl_type="k3", kl_coef=0.1) if loss != "sft" else LossConfig(),
                     num_microbatches=k)
    step = make_train_step(graphdef, optax.sgd(1.0), cfg, state, batch_fields=tuple(sorted(b)))
    new, out = step(state, {x: jnp.asarray(v) for x, v in b.items()})
    results[name] = (out, jax.tree.leaves(new.params))
  (oi, pi), (of, pf) = results["index"], results["full"]
  assert float(oi["loss"]) == pytest.approx(float(of["loss"]), rel=1e-5, abs=1e-6)
  assert float(oi["grad_norm"]) == pytest.approx(float(of["grad_norm"]), rel=1e-4)
  assert float(of["grad_norm"]) > 0
  for a, b in zip(pi, pf):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)



@pytest.mark.slow
def test_sharded_indexed_step_equals_the_single_device_full_step():
  """On a data x fsdp x tensor mesh of 8 devices (rows sharded, the index with them) the indexed step updates the
  parameters as the single-device full step does."""
  from codjax.models.qwen3 import PARAM_LOGICAL_AXES
  from codjax.parallel import make_mesh, state_shardings

  batch, _ = assemble_batch(_seqs(12, seed=4), 128, pack=True, row_multiple=8, with_loss_index=True)
  cfg = StepConfig(loss="rec_oneside_nois", loss_cfg=LossConfig(), num_microbatches=2)
  full = {x: jnp.asarray(v) for x, v in batch.items() if x != "loss_index"}
  graphdef, state = init_train_state(init_model(CFG, 0), optax.sgd(1.0))
  s1, m1 = make_train_step(graphdef, optax.sgd(1.0), cfg, state, batch_fields=tuple(sorted(full)))(state, full)
  want = [np.asarray(x) for x in jax.tree.leaves(s1.params)]
  mesh = make_mesh(data=2, fsdp=2, tensor=2)
  graphdef, state = init_train_state(init_model(CFG, 0), optax.sgd(1.0))
  state = jax.device_put(state, state_shardings(state, mesh, PARAM_LOGICAL_AXES))
  step = make_train_step(graphdef, optax.sgd(1.0), cfg, state, mesh=mesh, batch_fields=tuple(sorted(batch)))
  s8, m8 = step(state, {x: jnp.asarray(v) for x, v in batch.items()})
  assert float(m8["loss"]) == pytest.approx(float(m1["loss"]), rel=1e-5, abs=1e-7)
  for a, b in zip(want, jax.tree.leaves(s8.params)):
    np.testing.assert_allclose(np.asarray(b), a, rtol=1e-4, atol=1e-6)
