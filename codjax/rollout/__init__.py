"""Rollout engines behind one seam: the JAX KV-cache sampler (default; several side by side: ``JaxWorkers``), vLLM,
and an OpenAI HTTP client.

Engines import lazily (``codjax.rollout.JaxEngine`` etc.), so importing the package never pulls in vLLM.
"""

from codjax.rollout.base import Completion, RolloutEngine, SamplingParams

_LAZY = {"JaxEngine": "codjax.rollout.jax_engine", "JaxWorkers": "codjax.rollout.jax_workers",
         "VllmEngine": "codjax.rollout.vllm_engine",
         "OpenAIEngine": "codjax.rollout.openai_engine"}


def __getattr__(name):
  if name in _LAZY:
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
  raise AttributeError(f"module 'codjax.rollout' has no attribute {name!r}")


__all__ = ["Completion", "RolloutEngine", "SamplingParams", *_LAZY]
