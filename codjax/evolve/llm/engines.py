"""The ``generate(prompts) -> replies`` callable the LLM evolver talks through, from any rollout engine.

* ``model_path``: an HF checkpoint directory served in-process by codjax's JAX sampler (one user turn per
  prompt through the chat template, ``codjax.agents.token_backend.EngineBackend``; the trainer's own
  ``Trainer.generate`` is the same callable over the policy being trained);
* ``server_url``: an OpenAI-compatible server (vLLM's ``vllm serve``, or any other), chat completions.

Each call seeds its requests from ``seed`` and the call index, so an evolution run is reproducible.
"""

from __future__ import annotations

from codjax.evolve.llm.evolver import Generate
from codjax.rollout.base import SamplingParams


def jax_generate(model_path: str, max_tokens: int = 1024, temperature: float = 1.0, seed: int = 0,
                 max_seq_len: int = 8192, max_slots: int = 8) -> Generate:
  """``generate`` over the JAX sampler serving ``model_path``."""
  from codjax.agents.episode import Episode
  from codjax.agents.token_backend import EngineBackend
  from codjax.models import from_pretrained
  from codjax.models.tokenizer import load_tokenizer
  from codjax.rollout.jax_engine import JaxEngine

  engine = JaxEngine(from_pretrained(model_path), max_slots=max_slots, max_seq_len=max_seq_len, seed=seed)
  backend = EngineBackend(engine, load_tokenizer(model_path), SamplingParams(temperature=temperature,
                                                                             max_tokens=max_tokens),
                          max_prompt_tokens=max_seq_len - max_tokens - 1, seed=seed)

  def generate(prompts: list[str]) -> list[str]:
    eps = [Episode(kind="generate", position=i, env_name="generate", messages=[{"role": "user", "content": p}])
           for i, p in enumerate(prompts)]
    try:
      return list(backend.respond(eps))
    finally:
      for e in eps:
        backend.release(e)

  return generate


def server_generate(server_url: str, model: str, max_tokens: int = 1024, temperature: float = 1.0,
                    seed: int = 0) -> Generate:
  """``generate`` over an OpenAI-compatible server's chat completions."""
  from codjax.rollout.openai_engine import OpenAIEngine

  engine = OpenAIEngine(server_url, model)
  calls = [0]

  def generate(prompts: list[str]) -> list[str]:
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed + calls[0])
    calls[0] += 1
    return [c.text for c in engine.chat([[{"role": "user", "content": p}] for p in prompts], params)]

  return generate


def make_generate(model_path: str = "", server_url: str = "", server_model: str = "", max_tokens: int = 1024,
                  temperature: float = 1.0, seed: int = 0) -> Generate:
  """Exactly one of ``model_path`` or ``server_url`` (ValueError otherwise)."""
  if bool(model_path) == bool(server_url):
    raise ValueError("the LLM evolver needs exactly one engine: --model=<HF dir> or --server_url=<http://.../v1>")
  if server_url:
    if not server_model:
      raise ValueError("--server_url needs --server_model (the model name the server serves)")
    return server_generate(server_url, server_model, max_tokens, temperature, seed)
  return jax_generate(model_path, max_tokens, temperature, seed)
