"""Continuous batching in the JAX engine (``submit`` / ``poll``, driven by
``codjax.agents.episode.run_streaming``): requests enter and leave the decode batch one by one. A mixin of
``JaxEngine``."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import numpy as np

from codjax.rollout.base import Completion, SamplingParams
from codjax.rollout.jax_engine.cache import _Session
from codjax.rollout.sampling import seed_keys


@dataclasses.dataclass
class _StreamRow:
  """A request in flight under continuous batching: its reply so far and the token it feeds next."""
  rid: int
  sid: int
  session: _Session
  prompt: list[int]
  key_data: np.ndarray  # uint32 key data of the request's row key
  budget: int  # tokens it may generate in all
  fresh: bool = True  # its prompt suffix is not prefilled yet
  gen: list[int] = dataclasses.field(default_factory=list)
  lps: list[float] = dataclasses.field(default_factory=list)


class ContinuousBatching:
  """``submit`` / ``poll`` (``JaxEngine`` mixes this in)."""

  def submit(self, prompt: Sequence[int], params: SamplingParams, session_id: int | None = None,
             seed: int | None = None) -> int:
    """Queues one request and returns its id; ``poll`` advances every request in flight and returns those
    that finished. Requests enter and leave the decode batch independently (continuous batching): a caller
    that submits an episode's next turn as soon as its reply comes back never waits for the other episodes'
    replies. The reply's draws use ``jax.random.key(seed)`` (the row key ``generate`` gives a request with
    ``SamplingParams.seeds``; token t drawn with ``fold_in(row_key, t)``), or a split of the engine's key when
    ``seed`` is None, so a seeded request gets the same reply as through ``generate``. All requests in flight
    share temperature, top-p, top-k and stop tokens (per-request ``seed``/``max_tokens`` may differ)."""
    prompt = [int(t) for t in prompt]
    if params.seeds is not None or params.seed is not None:
      raise ValueError("submit takes its request's seed as the seed argument; pass params without seed/seeds")
    if not prompt:
      raise ValueError("empty prompt")
    if len(prompt) >= self.max_seq_len:
      raise ValueError(f"prompt of {len(prompt)} tokens does not fit max_seq_len={self.max_seq_len}")
    sig = (float(params.temperature), float(params.top_p), int(params.top_k), tuple(params.stop_token_ids))
    if self._stream and sig != self._stream_sig:
      raise ValueError(f"requests in flight sample with (temperature, top_p, top_k, stop ids) = "
                       f"{self._stream_sig}; this one asks for {sig}: poll them to completion first")
    if len(self._stream) >= self.max_slots:
      raise RuntimeError(f"JaxEngine: {len(self._stream)} requests in flight fill all max_slots={self.max_slots}")
    busy = {r.sid for r in self._stream}
    if session_id is not None and session_id in busy:
      raise ValueError(f"session {session_id} already has a request in flight")
    if seed is not None:
      key = seed_keys([seed])[0]
    else:
      self._key, key = jax.random.split(self._key)
    sid, sess = self._session(session_id, prompt, busy)
    self.stats["reused_tokens"] += sess.cached_len
    self.stats["prefill_tokens"] += len(prompt) - sess.cached_len
    rid = self._next_rid
    self._next_rid += 1
    budget = min(self.max_seq_len - len(prompt), params.max_tokens)
    self._stream.append(_StreamRow(rid, sid, sess, prompt,
                                   np.asarray(jax.random.key_data(key), np.uint32), budget))
    self._stream_sig = sig
    self._stream_params = params
    return rid

  def in_flight(self) -> int:
    return len(self._stream)

  def poll(self, min_finished: int = 1) -> list[tuple[int, Completion]]:
    """Advances the requests in flight until at least ``min_finished`` of them (or all, if fewer) finished;
    returns ``(request id, Completion)`` of every finished one (``[]`` when none is in flight).

    One poll: the new requests' prompt suffixes, all but their last token, are prefilled into their sessions'
    cache slots (``_prefill_rows``); then one decode kernel runs every request in flight, each feeding its
    pending token (the prompt's last token, or the last token it sampled) at its next position and sampling
    the next one, until ``min_finished`` rows have stopped (stop token or budget). Rows still going keep their
    pending token for the next poll, where newly submitted requests join them."""
    if not self._stream:
      return []
    want = max(1, min(int(min_finished), len(self._stream)))
    out: list[tuple[int, Completion]] = []
    while len(out) < want and self._stream:
      self._stream_prefill()
      out += self._stream_decode(want - len(out))
    return out

  def _stream_prefill(self) -> None:
    fresh = [r for r in self._stream if r.fresh]
    if fresh:
      # arrivals come one or two at a time under continuous batching: their prefill runs at its own power-of-two
      # batch (1, 2, 4 rows; each kernel compiles once), not padded to ``min_batch`` rows of real compute
      self._prefill_prompts([r.session.slot for r in fresh],
                            [min(r.session.cached_len, len(r.prompt) - 1) for r in fresh], [r.prompt for r in fresh],
                            min_rows=1, resident=True)
    for r in fresh:
      r.fresh = False
      r.session.tokens = list(r.prompt)
      r.session.cached_len = len(r.prompt) - 1  # the last prompt token is fed by the decode kernel

  def _stream_decode(self, want: int) -> list[tuple[int, Completion]]:
    """One decode kernel over every row in flight, exiting once ``want`` of them stopped."""
    params = self._stream_params
    rows = self._stream
    toks, lps, counts = self._run_decode(
        slots=[r.session.slot for r in rows], tok=[(r.gen[-1] if r.gen else r.prompt[-1]) for r in rows],
        pos=[r.session.cached_len for r in rows], left=[r.budget - len(r.gen) for r in rows],
        key_data=np.stack([r.key_data for r in rows]), offset=[len(r.gen) for r in rows], params=params,
        min_active=len(rows) - want)
    self.stats["stream_decodes"] += 1
    stops = set(params.stop_token_ids)
    finished, going = [], []
    for i, r in enumerate(rows):
      c = int(counts[i])
      r.gen += toks[i, :c].tolist()
      r.lps += lps[i, :c].tolist()
      r.session.cached_len += c  # fed tokens: the pending one and all sampled but the last
      if r.gen and (r.gen[-1] in stops or len(r.gen) >= r.budget):
        finish = "stop" if r.gen[-1] in stops else "length"
        finished.append((r.rid, Completion(token_ids=list(r.gen), logprobs=list(r.lps), finish_reason=finish)))
        self.stats["generated_tokens"] += len(r.gen)
        r.session.tokens = r.prompt + r.gen
        r.session.cached_len = len(r.session.tokens) - 1
      else:
        going.append(r)
    self._stream = going
    for r in rows:
      if r not in going and r.sid < 0:  # an anonymous request's session ends with it
        self.end_session(r.sid)
    return finished
