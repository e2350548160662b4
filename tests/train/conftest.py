"""A tiny, fast training configuration shared by the trainer tests."""

import pytest

from codjax.train.config import base_config, env_entry, override


def tiny_train_config(run_dir, model_dir, **over):
  c = base_config()
  c.run_dir = str(run_dir)
  c.seed = 3
  c.model.path = str(model_dir)
  c.model.make_tiny = True
  c.model.tiny.update(dict(vocab_size=320, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=32, intermediate_size=128, corpus_packs=8))
  c.data.envs = {"fl": env_entry("frozenlake_obscure", "tiny")}
  c.data.pack_size = 2
  c.data.repeats = 2
  c.data.packs_per_step = 1
  c.cod.protocol = "compact"
  c.rollout.max_response_tokens = 12
  c.rollout.max_prompt_tokens = 384
  c.rollout.max_slots = 8
  c.train.seq_len = 384
  c.train.pack = False
  c.optim.learning_rate = 1e-3
  # entropy bonus: nonzero gradients even when a random policy earns only zero rewards, so resume tests
  # compare real parameter updates
  c.algorithm.entropy_coef = 0.01
  c.total_steps = 2
  c.eval.num_packs = 0
  c.eval.at_end = False
  c.checkpoint.every = 1
  c.log.progress = False
  c.log.tensorboard = True
  return override(c, over)


@pytest.fixture(scope="session")
def train_config():
  """``train_config(run_dir, model_dir, **{"a.b": value})`` -> a validated-size tiny training config."""
  return tiny_train_config


@pytest.fixture(scope="session")
def tiny_train_model(tmp_path_factory):
  """A tiny checkpoint + transcript-trained tokenizer, made once through the trainer's own path."""
  from codjax.train.loop import ensure_model_dir

  d = tmp_path_factory.mktemp("train_model") / "m"
  ensure_model_dir(tiny_train_config(d.parent / "unused", d))
  return d
