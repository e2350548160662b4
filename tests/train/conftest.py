"""Fixtures of the trainer tests (the tiny training config itself is ``train_config`` in tests/conftest.py)."""

import pytest


@pytest.fixture(scope="session")
def tiny_train_model(tmp_path_factory, train_config):
  """A tiny checkpoint + transcript-trained tokenizer, made once through the trainer's own path."""
  from codjax.train.loop import ensure_model_dir

  d = tmp_path_factory.mktemp("train_model") / "m"
  ensure_model_dir(train_config(d.parent / "unused", d))
  return d
