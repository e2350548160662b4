"""Several JAX samplers side by side on one host: a call's requests split over W engines run in W threads.

On the CPU backend a decode step of a few rows is a chain of small products that XLA runs mostly on the calling
thread (a 13M-parameter model's 8-row step gains ~25 % from a second core, its 1-row step nothing), so one
engine leaves most of a second core idle. ``JaxWorkers`` holds W ``JaxEngine`` workers that share one copy of
the weights and one set of compiled kernels (``JaxEngine(share_with=...)``), each with its own KV cache
(``ceil(max_slots / W)`` slots), sessions and prefix sharing; a ``generate`` call's requests go to the workers by
session (a session stays on the worker that holds its cache) and every worker runs its share of the call, its
prefill and decode phases, in its own thread, concurrently with the others (XLA releases the GIL while it
runs). Rollout rounds of ``benchmarks/rollout.py`` (mid config, 8 episodes in lock step, 2 vCPUs of an AVX-512
EPYC): one engine 4.12 s, two workers of 4 episodes 3.37 s, three 4.00 s (interleaved medians; in the benchmark's
own run 4.27 against 3.86 s: benchmarks/README.md, 2026-12-07). One worker per core.

Draws. Request r of a call gets the row key a single ``JaxEngine`` of the same ``seed`` would give it
(``JaxEngine.call_keys``: per-request seeds, ``fold_in(key(seed), r)``, or a split of the engines' key when
unseeded), and token t of its reply is drawn with ``fold_in(row_key, t)`` in whichever worker and batch it
runs: the replies are those of one engine, up to the float rounding of other batch shapes (the same greedy
tokens; logprobs within ~1e-5; tested).

New sessions of a call are spread so that the workers' session counts even out, in contiguous runs of the call's
order, so requests that share a prompt prefix (a pack's G repeats, listed together) land on the same worker and
keep their within-call prefix sharing. Continuous batching (``submit`` / ``poll``) runs on one ``JaxEngine``;
``JaxWorkers`` has neither, and ``EngineBackend(continuous=True)`` says so.
"""

from __future__ import annotations

import concurrent.futures
import math
from typing import Sequence

import numpy as np

from codjax.rollout.base import Completion, SamplingParams
from codjax.rollout.jax_engine import JaxEngine, check_requests


class JaxWorkers:
  """W ``JaxEngine`` workers on one host (module docstring). ``max_slots``: the cache slots of all workers
  together, split evenly (rounded up to a multiple of W); the other keyword arguments are ``JaxEngine``'s (one
  ``seed`` keys every unseeded call, as one engine's would)."""

  def __init__(self, model, *, workers: int = 2, max_slots: int = 64, mesh=None, **engine_kwargs):
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
      raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    if mesh is not None:
      raise ValueError("JaxWorkers runs its workers on the host's default device; an engine on a mesh is one "
                       "JaxEngine (rollout.jax_workers=1)")
    if max_slots < workers:
      raise ValueError(f"max_slots={max_slots} gives some of the {workers} workers no cache slot")
    self.workers = workers
    per = math.ceil(max_slots / self.workers)
    first = JaxEngine(model, max_slots=per, **engine_kwargs)
    self._engines = [first] + [JaxEngine(model, max_slots=per, share_with=first, **engine_kwargs)
                               for _ in range(self.workers - 1)]
    self.max_slots = per * self.workers
    self.kernels = first.kernels
    self._home: dict[int, int] = {}  # session id -> the worker holding its cache
    self._closed = False
    self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.workers,
                                                       thread_name_prefix="codjax-jax-worker")

  @property
  def engines(self) -> list[JaxEngine]:
    return list(self._engines)

  @property
  def stats(self) -> dict[str, int]:
    """The workers' ``JaxEngine.stats`` summed."""
    out: dict[str, int] = {}
    for e in self._engines:
      for k, v in e.stats.items():
        out[k] = out.get(k, 0) + v
    return out

  def num_sessions(self) -> int:
    return sum(e.num_sessions() for e in self._engines)

  def _assign(self, n: int, session_ids: Sequence[int] | None) -> list[int]:
    """The worker of each of a call's ``n`` requests: a known session's own; the new ones in contiguous runs
    of the call's order, as many to each worker as evens out the workers' session counts (water filling)."""
    where = [-1] * n
    load = [e.num_sessions() for e in self._engines]
    for i in range(n):
      sid = None if session_ids is None else session_ids[i]
      if sid is not None and sid in self._home:
        where[i] = self._home[sid]
    new = [i for i in range(n) if where[i] < 0]
    quota = [0] * self.workers
    for _ in new:  # each new request to the least loaded worker (lowest index on ties)
      w = min(range(self.workers), key=lambda k: (load[k] + quota[k], k))
      quota[w] += 1
    it = iter(new)
    for w in range(self.workers):  # ... but in contiguous runs of the call's order
      for _ in range(quota[w]):
        where[next(it)] = w
    return where

  def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               session_ids: Sequence[int] | None = None) -> list[Completion]:
    """One completion per prompt, in input order; ``JaxEngine.generate``'s contract (sessions, draws)."""
    if self._closed:
      raise RuntimeError("JaxWorkers is closed")
    n = len(prompts)
    if n == 0:
      return []
    check_requests(prompts, session_ids)
    keys = self._engines[0].call_keys(params, n)
    where = self._assign(n, session_ids)
    groups = {w: [i for i in range(n) if where[i] == w] for w in range(self.workers)}
    groups = {w: idx for w, idx in groups.items() if idx}
    if session_ids is not None:
      for i, w in enumerate(where):
        self._home[session_ids[i]] = w

    def run(w: int) -> list[Completion]:
      idx = groups[w]
      return self._engines[w].generate_keyed([prompts[i] for i in idx], params,
                                             None if session_ids is None else [session_ids[i] for i in idx],
                                             keys[idx])

    if len(groups) == 1:
      results = {w: run(w) for w in groups}
    else:
      futures = {w: self._pool.submit(run, w) for w in groups}
      results = {w: f.result() for w, f in futures.items()}  # raises the first worker's error, if any
    out: list[Completion | None] = [None] * n
    for w, idx in groups.items():
      for i, c in zip(idx, results[w]):
        out[i] = c
    return out

  def end_session(self, session_id: int) -> None:
    w = self._home.pop(session_id, None)
    if w is not None:
      self._engines[w].end_session(session_id)

  def update_weights(self, model) -> None:
    """The first worker copies the weights (``JaxEngine.update_weights``), the others use its copy; every
    cached session is invalidated."""
    self._engines[0].update_weights(model)
    for e in self._engines[1:]:
      e.use_weights_of(self._engines[0])

  def close(self) -> None:
    self._closed = True
    self._pool.shutdown(wait=True)
    for e in self._engines:
      e.close()
    self._home.clear()
