"""Rollout engines behind one seam: the JAX KV-cache sampler (default), vLLM, and an OpenAI HTTP client."""

from codjax.rollout.base import Completion, RolloutEngine, SamplingParams

__all__ = ["Completion", "RolloutEngine", "SamplingParams"]
