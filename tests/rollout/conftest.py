"""Fixtures for the real-engine tests: a tiny checkpoint with peaked, varied next-token distributions.

The random tiny model (tied embeddings, std 0.02) is nearly uniform over its vocabulary and its argmax is
mostly the input token itself, which makes greedy comparisons and logprob checks weak. This checkpoint
has the tiny architecture and tokenizer but an untied output head scaled by 20: median next-token
entropy ~2 nats with many distinct argmax tokens, so a wrong temperature, a dropped renormalization or
stale weights show up as large logprob errors. Untied also exercises the ``lm_head.weight`` sync path.
"""

import dataclasses

import pytest

HEAD_SCALE = 20.0


@pytest.fixture(scope="session")
def peaked_ckpt(tiny_ckpt, tmp_path_factory):
  from codjax.models import from_pretrained, init_model, save_pretrained
  from codjax.models.tokenizer import load_tokenizer

  cfg = dataclasses.replace(from_pretrained(tiny_ckpt, dtype="float32").cfg, tie_word_embeddings=False)
  model = init_model(cfg, seed=1)
  model.lm_head_dv[...] = model.lm_head_dv[...] * HEAD_SCALE
  out = str(tmp_path_factory.mktemp("rollout_ckpt") / "peaked")
  save_pretrained(model, out, tokenizer=load_tokenizer(tiny_ckpt))
  return out


@pytest.fixture(scope="session")
def compilations():
  """``compilations(fn)``: the XLA backend compilations (seconds each) that running ``fn()`` triggers
  (``jax.monitoring``)."""
  import jax

  def run(fn) -> list[float]:
    compiles = []

    def count(event, secs, **kw):
      if event == "/jax/core/compile/backend_compile_duration":
        compiles.append(secs)

    jax.monitoring.register_event_duration_secs_listener(count)
    try:
      fn()
    finally:
      jax.monitoring.unregister_event_duration_listener(count)
    return compiles
  return run
