"""The rollout-engine seam: token ids in, token ids + logprobs out.

``RolloutEngine.generate(prompts, params)`` takes prompts as lists of token ids and returns one
``Completion`` per prompt: the generated token ids (a stop token, when hit, is included), the log-probability
of each generated token under the *sampling* distribution (softmax(logits / temperature) restricted by
top-k/top-p, renormalized), and a finish reason ("stop" or "length"). ``update_weights(model)`` pushes new
policy parameters; ``close()`` frees resources.

Engines may additionally keep per-sequence state across calls (prefix reuse): ``generate`` accepts optional
``session_ids``; an engine that supports sessions treats ``prompts[i]`` as the *full* token history of
session ``session_ids[i]`` and only processes the tokens it has not seen (the history must extend what the
engine generated or was given before). ``end_session`` releases it.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class SamplingParams:
  temperature: float = 1.0
  top_p: float = 1.0
  top_k: int = 0  # 0 = no top-k restriction
  max_tokens: int = 256
  stop_token_ids: tuple[int, ...] = ()
  seed: int | None = None
  # per-request seeds: request i of a ``generate``/``chat`` call samples from ``seeds[i]`` alone (its draws do
  # not depend on the other requests of the call, on their order or on the batch size); overrides ``seed``
  seeds: tuple[int, ...] | None = None

  def __post_init__(self):
    if self.temperature < 0:
      raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
    if not 0 < self.top_p <= 1:
      raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
    if self.top_k < 0:
      raise ValueError(f"top_k must be >= 0, got {self.top_k}")
    if self.max_tokens < 1:
      raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
    object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
    if self.seeds is not None:
      object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))

  def request_seeds(self, n: int) -> tuple[int, ...] | None:
    """``seeds`` checked against a call of ``n`` requests (None when the call has no per-request seeds)."""
    if self.seeds is None:
      return None
    if len(self.seeds) != n:
      raise ValueError(f"SamplingParams.seeds has {len(self.seeds)} entries for {n} requests")
    return self.seeds

  def stream_seeds(self, n: int) -> list[int | None]:
    """One seed per request of a call of ``n``, for engines that seed every request separately (vLLM, HTTP):
    ``seeds[i]`` when given, else ``request_seed(seed, i)``, else None (unseeded)."""
    seeds = self.request_seeds(n)
    if seeds is not None:
      return list(seeds)
    return [None if self.seed is None else request_seed(self.seed, i) for i in range(n)]

  @property
  def greedy(self) -> bool:
    return self.temperature == 0


def request_seed(seed: int, index: int) -> int:
  """Seed of request ``index`` in a call seeded with ``seed`` (independent streams per request)."""
  return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


@dataclasses.dataclass
class Completion:
  token_ids: list[int]
  logprobs: list[float]
  finish_reason: str  # "stop" | "length"
  text: str | None = None  # filled by engines that decode (OpenAI); token engines leave None


class RolloutEngine(Protocol):

  def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               session_ids: Sequence[int] | None = None) -> list[Completion]:
    ...

  def update_weights(self, model) -> None:
    ...

  def end_session(self, session_id: int) -> None:
    ...

  def close(self) -> None:
    ...
