"""The frozen KL reference policy: its logprobs equal an independent forward (transformers) of the reference
checkpoint, the trainer attaches them to every batch, and the reported KL grows as the policy moves away."""

import functools
import os

import jax
import numpy as np
import pytest

from codjax.common.metrics import read_jsonl
from codjax.models import from_pretrained, save_pretrained
from codjax.models.tokenizer import load_tokenizer
from codjax.parallel import make_mesh
from codjax.rl.batch import TrainSequence, assemble_batch
from codjax.train.config import ConfigError, validate
from codjax.train.loop import Trainer
from codjax.train.reference import FrozenPolicy, build_reference

TEMPERATURE = 0.7


@functools.lru_cache(maxsize=4)
def _hf_model(path: str):
  import torch
  from transformers import AutoModelForCausalLM

  return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def _hf_logprobs(path: str, tokens: list[int], temperature: float) -> np.ndarray:
  """log softmax(logits / T)[next token] by transformers (torch), aligned as the trainer's: entry t scores
  tokens[t] given tokens[:t]; entry 0 is 0."""
  import torch

  model = _hf_model(path)
  with torch.no_grad():
    logits = model(torch.tensor([tokens])).logits[0].double() / temperature
  logp = torch.log_softmax(logits, dim=-1)
  picked = logp[:-1].gather(1, torch.tensor(tokens[1:])[:, None])[:, 0].numpy()
  return np.concatenate([[0.0], picked])


def _perturbed_copy(src, out):
  """Another checkpoint with the same tokenizer and different weights."""
  m = from_pretrained(str(src))
  m.embed_vd[...] = jax.random.normal(jax.random.key(7), m.embed_vd[...].shape) * 0.5
  save_pretrained(m, str(out), tokenizer=load_tokenizer(str(src)))
  return str(out)


def _sequences(n_seqs=5, vocab=300, seed=0):
  rng = np.random.default_rng(seed)
  lens = rng.integers(8, 40, n_seqs)
  return [TrainSequence(rng.integers(0, vocab, n).tolist(), [0] * 4 + [1] * (n - 4), [0.0] * n, 1.0) for n in lens]


@pytest.mark.parametrize("sharded", [False, True])
def test_reference_logprobs_equal_an_independent_forward(tiny_train_model, sharded):
  """Packed rows (several sequences per row, segment ids), row chunks, and an 8-device mesh: every loss token
  gets the reference's log-probability of the sequence alone; other tokens get 0."""
  mesh = make_mesh(data=2, fsdp=4, tensor=1) if sharded else None
  shards = 8 if sharded else 1
  seqs = _sequences()
  batch, stats = assemble_batch(seqs, 64, pack=True, row_multiple=2 * shards)
  ref = FrozenPolicy(from_pretrained(str(tiny_train_model), mesh=mesh), mesh=mesh, temperature=TEMPERATURE,
                     vocab_chunks=2)
  got = np.asarray(ref.logprobs(batch, num_chunks=2))
  assert got.shape == batch["tokens"].shape
  for s, (r, c, n) in zip(seqs, stats["layout"]):
    want = _hf_logprobs(str(tiny_train_model), list(s.tokens), TEMPERATURE) * np.asarray(s.loss_mask)
    np.testing.assert_allclose(got[r, c:c + n], want, rtol=1e-4, atol=1e-4)
  covered = np.zeros(got.shape, bool)
  for r, c, n in stats["layout"]:
    covered[r, c:c + n] = True
  assert np.all(got[~covered] == 0)
  with pytest.raises(ValueError, match="cannot be split"):
    ref.logprobs(batch, num_chunks=3)


def test_ref_model_path_loads_that_checkpoint(tmp_path, tiny_train_model, train_config):
  other = _perturbed_copy(tiny_train_model, tmp_path / "other")
  cfg = train_config(tmp_path / "run", tiny_train_model, **{"algorithm.kl_type": "k3", "algorithm.kl_coef": 0.1,
                                                            "algorithm.ref_model_path": other,
                                                            "rollout.temperature": TEMPERATURE})
  policy = from_pretrained(str(tiny_train_model))
  ref = build_reference(validate(cfg), policy, None)
  seqs = _sequences(2)
  batch, stats = assemble_batch(seqs, 64, pack=False)
  got = np.asarray(ref.logprobs(batch))
  for s, (r, c, n) in zip(seqs, stats["layout"]):
    want = _hf_logprobs(other, list(s.tokens), TEMPERATURE) * np.asarray(s.loss_mask)
    np.testing.assert_allclose(got[r, c:c + n], want, rtol=1e-4, atol=1e-4)
    away = _hf_logprobs(str(tiny_train_model), list(s.tokens), TEMPERATURE) * np.asarray(s.loss_mask)
    assert np.max(np.abs(got[r, c:c + n] - away)) > 0.1  # not the policy's own logprobs
  # no KL coefficient: nothing is built (and nothing scored)
  assert build_reference(validate(train_config(tmp_path / "r2", tiny_train_model)), policy, None) is None


def test_ref_model_path_must_be_an_hf_dir(tmp_path, tiny_train_model, train_config):
  cfg = train_config(tmp_path / "run", tiny_train_model, **{"algorithm.kl_type": "k3", "algorithm.kl_coef": 0.1,
                                                            "algorithm.ref_model_path": str(tmp_path)})
  with pytest.raises(ConfigError, match="algorithm.ref_model_path=.*not an HF checkpoint directory"):
    validate(cfg)


@pytest.mark.slow  # a 3-step training run
@pytest.mark.parametrize("logits", ["all", "loss_tokens"])
def test_kl_to_the_reference_grows_as_the_policy_moves(tmp_path, tiny_train_model, train_config, logits):
  """kl_coef > 0 with a large learning rate: at step 1 the policy is the reference (KL ~ 0); the reported KL
  then grows step after step, while the KL to the rollout policy (approx_kl, one update per rollout) stays ~0.
  Every batch carries the reference's logprobs, which stay those of the starting checkpoint; with
  ``train.logits="loss_tokens"`` the policy and the reference score the loss tokens only (``loss_index``)."""
  steps = 3  # measured: k3 KL 7e-15, 0.07, 0.37 (and 0.54 at step 4); approx_kl ~1e-14 throughout
  cfg = train_config(tmp_path / "run", tiny_train_model, **{
      "algorithm.kl_type": "k3", "algorithm.kl_coef": 0.01, "optim.learning_rate": 3e-2, "total_steps": steps,
      "checkpoint.every": 0, "rollout.temperature": TEMPERATURE, "train.logits": logits})
  t = Trainer(cfg)
  batches = []
  step_fn = t._step_fn

  def spy(batch):
    batches.append({k: np.asarray(v) for k, v in batch.items()})
    return step_fn(batch)

  t._step_fn = spy
  try:
    t.run()
  finally:
    t.close()
  rows = [r for r in read_jsonl(os.path.join(cfg.run_dir, "metrics.jsonl")) if "train/loss" in r]
  kl = [r["train/kl"] for r in rows]
  assert len(kl) == steps and all(r["train/skipped"] == 0 for r in rows)
  assert abs(kl[0]) < 1e-6, kl
  assert all(b > a for a, b in zip(kl, kl[1:])), kl
  assert kl[-1] > 1e-2, kl
  assert all(abs(r["train/approx_kl"]) < 1e-3 for r in rows)
  # the batches' reference logprobs: the starting checkpoint's, by an independent forward, at steps 1 and last
  for b in (batches[0], batches[-1]):
    assert "ref_logprobs" in b
    assert ("loss_index" in b) == (logits == "loss_tokens")
    checked = 0
    for r in range(b["tokens"].shape[0]):
      for seg in set(b["segment_ids"][r].tolist()) - {0}:
        cols = np.flatnonzero(b["segment_ids"][r] == seg)
        want = _hf_logprobs(str(tiny_train_model), b["tokens"][r, cols].tolist(), TEMPERATURE)
        mask = b["loss_mask"][r, cols]
        np.testing.assert_allclose(b["ref_logprobs"][r, cols], want * mask, rtol=1e-4, atol=1e-4)
        checked += int(mask.sum())
    assert checked > 0
