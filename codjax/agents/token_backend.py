"""Drives a token-level ``RolloutEngine`` from chat episodes, keeping tokens exactly as generated.

For each episode the backend keeps the full token sequence: the chat-template rendering of the initial
messages, then per turn the assistant tokens as sampled (including the end-of-turn token) and the next user
turn rendered by the tokenizer's chat template (``ChatDeltaRenderer``). The loss mask is 1 exactly on
generated tokens and ``logprobs`` holds the sampler's logprob for each of them (0 elsewhere), so the trainer
scores the very tokens the sampler drew. Each episode is one engine session, so engines with prefix reuse
(``JaxEngine``) prefill only the new user turn.

Budgets: ``max_prompt_tokens`` bounds the conversation fed to the engine (an episode that would exceed it is
ended by its workflow with ``budget_exhausted``); ``max_response_tokens`` bounds each reply. A reply cut by
the token budget gets an end-of-turn token appended with loss mask 0, and the episode is flagged
``truncated`` with the reason; nothing is dropped silently.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Sequence

from codjax.agents.episode import Episode, episode_seeds
from codjax.models.tokenizer import ChatDeltaRenderer, render_chat
from codjax.rollout.base import SamplingParams

_ids = itertools.count(1)


@dataclasses.dataclass
class _TokState:
  session: int
  n_messages: int  # messages already rendered into tokens


class _TokenRecorder:
  """Shared token bookkeeping: renders new chat turns into ``ep.tokens`` and records replies."""

  def __init__(self, tokenizer, max_prompt_tokens: int, template_kwargs: dict | None):
    if max_prompt_tokens < 1:
      raise ValueError("max_prompt_tokens must be positive")
    self.tok = tokenizer
    self.eos_id = int(tokenizer.eos_token_id)
    self.max_prompt_tokens = max_prompt_tokens
    self.kw = template_kwargs or {}
    self.renderer = ChatDeltaRenderer(tokenizer, **self.kw)

  def _pending_text(self, ep: Episode) -> str:
    """The text of ``ep``'s not-yet-rendered messages: the whole templated conversation on its first turn,
    else the delta after its last reply (``ChatDeltaRenderer``)."""
    st: _TokState | None = ep.backend_state
    if st is None:
      return render_chat(self.tok, ep.messages, True, **self.kw)
    new_msgs = ep.messages[st.n_messages:]
    if any(m["role"] == "assistant" for m in new_msgs):
      raise RuntimeError("assistant messages must come from this backend (token in, token out)")
    return self.renderer.delta_text(new_msgs, after_assistant=True)

  def _append(self, ep: Episode, ids: Sequence[int]) -> None:
    """Appends the rendered pending messages' tokens ``ids`` to ``ep`` (prompt tokens: mask 0)."""
    st: _TokState | None = ep.backend_state
    if st is None:
      ep.backend_state = _TokState(session=next(_ids), n_messages=len(ep.messages))
      ep.tokens, ep.loss_mask, ep.logprobs = list(ids), [0] * len(ids), [0.0] * len(ids)
      return
    ep.tokens += ids
    ep.loss_mask += [0] * len(ids)
    ep.logprobs += [0.0] * len(ids)
    st.n_messages = len(ep.messages)

  def _encode_many(self, texts: Sequence[str]) -> list[list[int]]:
    """``tok.encode(t, add_special_tokens=False)`` of each text, as one batch (the Rust tokenizer encodes a
    batch on all cores; the same ids as one call per text)."""
    if not texts:
      return []
    return [list(x) for x in self.tok(list(texts), add_special_tokens=False)["input_ids"]]

  def _prepare(self, episodes: Sequence[Episode]) -> list[int]:
    """Renders pending turns (tokenized as one batch); returns the indices of episodes that still fit the
    prompt budget."""
    texts = [self._pending_text(ep) for ep in episodes]
    for ep, ids in zip(episodes, self._encode_many(texts)):
      self._append(ep, ids)
    run = []
    for i, ep in enumerate(episodes):
      if len(ep.tokens) >= self.max_prompt_tokens:
        ep.budget_exhausted = True
        continue
      run.append(i)
    return run

  def _record(self, ep: Episode, ids: list[int], lps: list[float], limit: int) -> str:
    """Appends a reply's tokens (mask 1); closes a budget-cut reply with EOS (mask 0); returns its text."""
    if len(ids) > limit:
      ids, lps = ids[:limit], lps[:limit]
    hit_eos = bool(ids) and ids[-1] == self.eos_id
    ep.tokens += ids
    ep.loss_mask += [1] * len(ids)
    ep.logprobs += lps
    ep.response_token_counts.append(len(ids))
    if not hit_eos:
      ep.truncated = True
      ep.truncation_reason = f"response reached the token budget ({len(ids)} tokens)"
      ep.tokens.append(self.eos_id)
      ep.loss_mask.append(0)
      ep.logprobs.append(0.0)
    ep.backend_state.n_messages = len(ep.messages) + 1  # the assistant message the workflow appends
    return self.tok.decode(ids[:-1] if hit_eos else ids, skip_special_tokens=False)


SEED_BY = ("call", "episode")


class EngineBackend(_TokenRecorder):
  """``Backend`` over a token engine + tokenizer (see module docstring).

  Seeding (``seed`` given): with ``seed_by="call"`` each engine call is seeded with a function of (seed, call
  index), and the engine derives each request's key from that and the request's place in the call, so a
  rollout is reproducible when it is rerun as a whole (training). With ``seed_by="episode"`` each request
  carries its own seed ``episode_turn_seed(seed, episode)`` (``SamplingParams.seeds``): an episode's reply
  depends only on the seed and the episode's identity and turn, never on which other episodes share the call,
  so a resumed or differently batched evaluation gives every remaining episode the same replies. Without a
  seed the engine's own key stream is used (``seed_by="call"`` only)."""

  def __init__(self, engine, tokenizer, params: SamplingParams, *, max_prompt_tokens: int = 8192,
               template_kwargs: dict | None = None, seed: int | None = None, seed_by: str = "call",
               continuous: bool = False):
    if seed_by not in SEED_BY:
      raise ValueError(f"seed_by must be one of {SEED_BY}, got {seed_by!r}")
    if params.seeds is not None:
      raise ValueError("EngineBackend sets the per-request seeds itself; pass params without seeds")
    if continuous and not (hasattr(engine, "submit") and hasattr(engine, "poll")):
      raise ValueError(f"continuous batching needs an engine with submit/poll (JaxEngine), got {type(engine).__name__}")
    if continuous and seed_by != "episode":
      raise ValueError("continuous batching has no engine calls to seed: use seed_by='episode' (each reply "
                       "keyed by its episode and turn)")
    super().__init__(tokenizer, max_prompt_tokens, template_kwargs)
    self.seed_by = seed_by
    self.engine = engine
    # continuous batching: run_repeats drives this backend through submit/poll (run_streaming)
    self.streaming = bool(continuous)
    self._inflight: dict[int, Episode] = {}
    self._ready: list[tuple[Episode, str]] = []
    # one engine session per live episode: never more live episodes than the engine has cache slots
    self.max_concurrent = getattr(engine, "max_slots", None)
    stops = tuple(params.stop_token_ids) or (self.eos_id,)
    self.params = dataclasses.replace(params, stop_token_ids=stops)
    self.reseed(seed)

  def reseed(self, seed: int | None) -> None:
    """Sampling keys become a function of (seed, call index) or, with ``seed_by="episode"``, of (seed,
    episode, turn), so a rollout is reproducible (resume)."""
    if seed is None and self.seed_by == "episode":
      raise ValueError("EngineBackend(seed_by='episode') needs a seed: each reply's seed derives from it")
    self.seed = seed
    self._calls = 0

  def respond(self, episodes: Sequence[Episode]) -> list[str]:
    texts = [""] * len(episodes)
    run = self._prepare(episodes)
    if not run:
      return texts
    prompts = [episodes[i].tokens for i in run]
    budgets = [self.max_prompt_tokens - len(p) for p in prompts]
    params = dataclasses.replace(self.params, max_tokens=max(1, min(self.params.max_tokens, max(budgets))))
    if self.seed_by == "episode":
      params = dataclasses.replace(params, seed=None, seeds=episode_seeds(self.seed, [episodes[i] for i in run]))
    elif self.seed is not None:
      from codjax.envs.base import derive_seed

      params = dataclasses.replace(params, seed=derive_seed(self.seed, self._calls) % (2**31))
    self._calls += 1
    comps = self.engine.generate(prompts, params, session_ids=[episodes[i].backend_state.session for i in run])
    for i, comp in zip(run, comps):
      ep = episodes[i]
      limit = min(self.params.max_tokens, self.max_prompt_tokens - len(ep.tokens))
      texts[i] = self._record(ep, list(comp.token_ids), list(comp.logprobs), limit)
    return texts

  # -- continuous batching (codjax.agents.episode.run_streaming) ---------------------------------------------
  def submit(self, ep: Episode) -> None:
    """Queues ``ep``'s next reply on the engine, seeded with ``episode_turn_seed(seed, ep)`` (the seed
    ``respond`` gives it with ``seed_by="episode"``, so both paths draw the same keys)."""
    if not self._prepare([ep]):
      self._ready.append((ep, ""))  # the prompt budget is exhausted: the workflow ends the episode
      return
    params = dataclasses.replace(self.params, seed=None, seeds=None,
                                 max_tokens=max(1, min(self.params.max_tokens, self.max_prompt_tokens - len(ep.tokens))))
    seed = None if self.seed is None else episode_seeds(self.seed, [ep])[0]
    rid = self.engine.submit(ep.tokens, params, session_id=ep.backend_state.session, seed=seed)
    self._inflight[rid] = ep

  def poll(self) -> list[tuple[Episode, str]]:
    """The replies that finished since the last poll (``(episode, text)``), recorded as ``respond`` does."""
    out, self._ready = self._ready, []
    if out or not self._inflight:
      return out
    for rid, comp in self.engine.poll():
      ep = self._inflight.pop(rid)
      limit = min(self.params.max_tokens, self.max_prompt_tokens - len(ep.tokens))
      out.append((ep, self._record(ep, list(comp.token_ids), list(comp.logprobs), limit)))
    return out

  def release(self, episode: Episode) -> None:
    st = episode.backend_state
    if isinstance(st, _TokState) and hasattr(self.engine, "end_session"):
      self.engine.end_session(st.session)


class TokenizingBackend(_TokenRecorder):
  """Wraps a text backend (a scripted policy, an HTTP model) and records its replies as tokens in exactly
  the layout ``EngineBackend`` produces (reply tokens + EOS, loss mask 1, logprobs 0): SFT transcripts."""

  def __init__(self, inner, tokenizer, *, max_prompt_tokens: int = 8192, max_response_tokens: int = 1 << 30,
               template_kwargs: dict | None = None):
    super().__init__(tokenizer, max_prompt_tokens, template_kwargs)
    self.inner = inner
    self.max_response_tokens = max_response_tokens

  def respond(self, episodes: Sequence[Episode]) -> list[str]:
    texts = [""] * len(episodes)
    run = self._prepare(episodes)
    replies = self.inner.respond([episodes[i] for i in run]) if run else []
    for i, reply_ids in zip(run, self._encode_many(replies)):
      ep = episodes[i]
      ids = reply_ids + [self.eos_id]
      limit = min(self.max_response_tokens, self.max_prompt_tokens - len(ep.tokens))
      texts[i] = self._record(ep, ids, [0.0] * len(ids), limit)
    return texts

  def release(self, episode: Episode) -> None:
    self.inner.release(episode)
