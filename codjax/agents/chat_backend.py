"""``OpenAIBackend``: the agents' ``Backend`` over a chat endpoint (``codjax.rollout.openai_engine.OpenAIEngine``):
a served model answers episodes as text (the server applies its chat template), for evaluation."""

from __future__ import annotations

import dataclasses

from codjax.agents.episode import episode_seeds
from codjax.agents.token_backend import SEED_BY
from codjax.rollout.base import SamplingParams


class OpenAIBackend:
  """The agents' ``Backend`` over ``OpenAIEngine.chat``: each episode's ``messages`` -> assistant text.

  ``seed_by`` picks the requests' seeds: ``"call"`` seeds request i of each call from (``params.seed``, i),
  so a reply depends on its place in the batch; ``"episode"`` sends each episode
  ``episode_turn_seed(params.seed, ep)`` (its identity and turn only), so its reply does not depend on which
  other episodes share the call or their order (needs ``params.seed``)."""

  def __init__(self, engine, params: SamplingParams, *, seed_by: str = "call"):
    if seed_by not in SEED_BY:
      raise ValueError(f"seed_by must be one of {SEED_BY}, got {seed_by!r}")
    if seed_by == "episode" and params.seed is None:
      raise ValueError("seed_by='episode' needs SamplingParams.seed (the seed each episode's seeds derive from)")
    if params.seeds is not None:
      raise ValueError("OpenAIBackend sets the requests' seeds itself (seed_by); pass params without seeds")
    self.engine = engine
    self.params = params
    self.seed_by = seed_by

  def respond(self, episodes) -> list[str]:
    if not episodes:
      return []
    params = self.params
    if self.seed_by == "episode":
      params = dataclasses.replace(params, seeds=episode_seeds(params.seed, episodes))
    return [c.text for c in self.engine.chat([ep.messages for ep in episodes], params)]

  def release(self, episode) -> None:
    del episode  # no per-episode state
