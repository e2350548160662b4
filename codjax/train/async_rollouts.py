"""Asynchronous rollouts with bounded staleness: a producer thread rolls out the next batches while the trainer
trains on finished ones (``rollout.mode = "async"``, ``codjax.train.loop.Trainer``).

Policy versions: the parameters after ``s`` train steps are version ``s`` (version 0: the initial ones). After
each step the trainer ``publish``-es (version, a copy of the parameters); the producer applies the newest
published version to the engine at its next batch boundary. Every engine call (``generate`` and
``update_weights``) happens on the producer thread, so an engine need not be thread-safe; the trainer only uses
the engine while the producer is ``paused`` (evaluation) or stopped.

Batch ``i`` holds the packs of the i-th draw from the task source; every episode of it carries
``policy_version = v``, the version applied when the batch started. The trainer ``take``-s batches in order
and trains the one it takes at step ``s`` (``s`` steps done) only if ``s - v <= k`` (``k`` =
``max_staleness``) for every episode:

* ``wait``: before starting batch ``i`` the producer waits until a version ``>= i - k`` is published, so the
  batch trained at step ``s = i`` is at most ``k`` versions old. ``k = 0`` is the synchronous loop exactly
  (batch ``i`` sampled with version ``i``). A batch past the bound would be a bug: ``take`` raises.
* ``drop``: the producer never waits for versions; it starts a batch whenever fewer than ``k + 1`` batches are
  queued (the batch in flight is not counted). The trainer drops (and counts) a batch whose staleness exceeds
  ``k`` and takes the next one. Every trained batch is at most ``k`` versions old, every started one at most
  ``k + 1``, so drops happen when the producer outruns the trainer (a full queue).

The producer's exception is re-raised by the ``take`` after the batches it finished first (the same exception
object, its producer-thread traceback kept and a note added); ``close`` stops the producer at its next engine call or
batch boundary (a batch in flight is abandoned, its engine sessions ended) and joins the thread.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import threading
import time
from typing import Any, Callable, Sequence

STALE_POLICIES = ("wait", "drop")


class ProducerStopped(Exception):
  """Raised inside the producer's rollout when it was asked to stop mid-batch (never leaves this module)."""


class InterruptibleEngine:
  """A rollout engine whose ``generate`` raises ``ProducerStopped`` once ``stop_event`` is set, after ending the
  sessions opened through it that are still live (so a later producer finds the engine's slots free). Every
  other attribute is the wrapped engine's."""

  def __init__(self, engine):
    self.engine = engine
    self.stop_event = threading.Event()
    self._live: set[int] = set()

  def generate(self, prompts, params, session_ids=None):
    if self.stop_event.is_set():
      self.end_live_sessions()
      raise ProducerStopped()
    if session_ids is not None:
      self._live.update(int(s) for s in session_ids)
    return self.engine.generate(prompts, params, session_ids=session_ids)

  def end_session(self, session_id: int) -> None:
    self._live.discard(int(session_id))
    if hasattr(self.engine, "end_session"):
      self.engine.end_session(session_id)

  def end_live_sessions(self) -> None:
    """Ends every session opened through this wrapper and not yet ended (an abandoned batch's)."""
    live, self._live = sorted(self._live), set()
    if hasattr(self.engine, "end_session"):
      for s in live:
        self.engine.end_session(s)

  def __getattr__(self, name):
    return getattr(self.engine, name)


@dataclasses.dataclass
class Batch:
  """One finished batch of rollouts."""

  index: int  # i: the i-th draw from the task source (its sampling seed derives from i)
  version: int  # the policy version every episode was sampled with
  packs: list
  trajs: list
  sampler_state: dict  # the task source's state right after these packs were drawn
  rollout_s: float  # seconds of the rollout (drawing the packs included)
  sync_s: float  # seconds applying new weights to the engine before this batch (0 if it kept the last ones)


@dataclasses.dataclass
class Taken:
  """What ``take`` returns: the batch to train, the seconds the trainer waited, the batches dropped meanwhile."""

  batch: Batch
  idle_s: float
  dropped_batches: int
  dropped_episodes: int
  staleness: list[int]  # per episode: step - policy_version
  queue_depth: int  # batches left queued after this one


def episodes_of(trajs) -> list:
  return [ep for t in trajs for ep in t.episodes()]


class AsyncRollouts:
  """The producer thread and its queue (module docstring).

  ``produce(i)`` draws batch ``i``'s packs and rolls them out with the engine's current weights, returning
  ``(packs, sampler_state, trajs)``; ``apply_weights(model)`` loads a published model into the engine. Both run
  on the producer thread only. ``version``/``model``: the policy the producer starts from; ``first_batch``: the
  index of the first batch it produces. ``interrupt`` (optional): an event set on ``close`` so that a rollout in
  flight stops at its next engine call (``InterruptibleEngine.stop_event``); ``on_abandon`` (optional): called on
  the producer thread when a rollout raises, before the error is handed to the trainer (e.g. to end the failed
  batch's engine sessions); ``join_timeout_s``: how long ``close`` waits for the thread."""

  def __init__(self, produce: Callable[[int], tuple[list, dict, list]], apply_weights: Callable[[Any], None], *,
               version: int, model, first_batch: int, max_staleness: int, stale_policy: str,
               interrupt: threading.Event | None = None, on_abandon: Callable[[], None] | None = None,
               join_timeout_s: float = 600.0):
    if stale_policy not in STALE_POLICIES:
      raise ValueError(f"stale_policy must be one of {STALE_POLICIES}, got {stale_policy!r}")
    if not isinstance(max_staleness, int) or max_staleness < 0:
      raise ValueError(f"max_staleness must be an int >= 0, got {max_staleness!r}")
    self._produce, self._apply = produce, apply_weights
    self.k, self.policy = int(max_staleness), stale_policy
    self.capacity = self.k + 1
    self._cv = threading.Condition()
    self._queue: collections.deque[Batch] = collections.deque()
    self._pending: tuple[int, Any] = (int(version), model)
    self._applied: int | None = None  # the version the engine holds (None: must apply before the next batch)
    self._next = int(first_batch)
    self._paused = self._in_engine = self._stop = False
    self._error: BaseException | None = None
    self._error_batch = -1
    self._noted = False
    self._busy: collections.deque[tuple[float, float]] = collections.deque()
    self._busy_since: float | None = None
    self._interrupt = interrupt
    self._on_abandon = on_abandon
    self._join_timeout_s = float(join_timeout_s)
    if interrupt is not None:
      interrupt.clear()
    self.started_at = time.perf_counter()
    self._thread = threading.Thread(target=self._loop, name="codjax-rollout-producer", daemon=True)
    self._thread.start()

  # -- producer thread ---------------------------------------------------------------------------------
  def _may_start(self, i: int) -> bool:
    if self._paused or len(self._queue) >= self.capacity:
      return False
    return self.policy == "drop" or self._pending[0] >= i - self.k

  def _loop(self) -> None:
    i = self._next
    try:
      while True:
        with self._cv:
          while not self._stop and not self._may_start(i):
            self._cv.wait()
          if self._stop:
            return
          version, model = self._pending
          self._in_engine = True
          t0 = self._busy_since = time.perf_counter()
        try:
          sync_s = 0.0
          if self._applied != version:
            self._apply(model)
            self._applied = version
            sync_s = time.perf_counter() - t0
          t1 = time.perf_counter()
          packs, state, trajs = self._produce(i)
          t2 = time.perf_counter()
        finally:
          with self._cv:
            self._in_engine = False
            end = time.perf_counter()
            self._busy.append((t0, end))
            self._busy_since = None
            self._cv.notify_all()
        for ep in episodes_of(trajs):
          ep.policy_version = version
        with self._cv:
          self._queue.append(Batch(i, version, list(packs), trajs, dict(state), t2 - t1, sync_s))
          self._cv.notify_all()
        i += 1
    except ProducerStopped:
      return
    except BaseException as e:  # surfaced by the trainer's next take
      if self._on_abandon is not None:
        with contextlib.suppress(Exception):
          self._on_abandon()
      with self._cv:
        self._error, self._error_batch = e, i
        self._cv.notify_all()

  # -- trainer side -------------------------------------------------------------------------------------
  def publish(self, version: int, model) -> None:
    """Makes ``model`` (which the caller must not modify or donate afterwards) policy ``version``; the producer
    applies the newest published version at its next batch boundary."""
    with self._cv:
      if version <= self._pending[0]:
        raise ValueError(f"published version {version} is not newer than version {self._pending[0]}")
      self._pending = (int(version), model)
      self._cv.notify_all()

  def _raise_error(self) -> None:
    e = self._error
    if not self._noted:
      e.add_note(f"(raised in the rollout producer thread while producing batch {self._error_batch}; "
                 "codjax.train.async_rollouts)")
      self._noted = True
    raise e

  def take(self, step: int) -> Taken:
    """The next batch to train at ``step`` (steps done so far), blocking until one is ready. Checks every
    episode's policy version against the bound: ``drop`` skips (and counts) stale batches, ``wait`` raises
    (a batch past the bound there is a bug). Re-raises a producer exception once the batches it finished before
    the failing one are taken (they are valid: the producer works in batch order), whatever the timing."""
    t0 = time.perf_counter()
    dropped = dropped_eps = 0
    while True:
      with self._cv:
        while not self._queue and self._error is None and not self._stop:
          self._cv.wait()
        if self._stop:
          raise RuntimeError("the rollout producer was stopped; no batch to take")
        if not self._queue:  # the batches finished before the failing one are trained first (deterministic)
          self._raise_error()
        batch = self._queue.popleft()
        depth = len(self._queue)
        self._cv.notify_all()
      eps = episodes_of(batch.trajs)
      versions = [int(ep.policy_version) for ep in eps]
      if any(v < 0 or v > step for v in versions):
        raise RuntimeError(f"batch {batch.index}: episode policy versions {sorted(set(versions))} are not in "
                           f"[0, {step}] at step {step}")
      stale = [step - v for v in versions]
      if stale and max(stale) > self.k:
        if self.policy == "wait":
          raise RuntimeError(f"batch {batch.index} is {max(stale)} versions old at step {step}, past "
                             f"rollout.max_staleness={self.k} under stale_policy='wait' (a producer bug)")
        dropped += 1
        dropped_eps += len(eps)
        logging.info("dropped batch %d (policy version %d) at step %d: staleness %d > %d", batch.index,
                     batch.version, step, max(stale), self.k)
        continue
      return Taken(batch, time.perf_counter() - t0, dropped, dropped_eps, stale, depth)

  @property
  def queue_depth(self) -> int:
    """Finished batches waiting for the trainer."""
    with self._cv:
      return len(self._queue)

  def busy_seconds(self, t0: float, t1: float) -> float:
    """Seconds within ``[t0, t1]`` (``time.perf_counter``) the producer spent applying weights and rolling out.
    Intervals ending before ``t0`` are forgotten: call with non-decreasing ``t0``."""
    with self._cv:
      while self._busy and self._busy[0][1] < t0:
        self._busy.popleft()
      spans = list(self._busy) + ([(self._busy_since, t1)] if self._busy_since is not None else [])
    return float(sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in spans))

  @contextlib.contextmanager
  def paused(self):
    """Holds the producer at a batch boundary (waiting for a batch in flight to finish) for the block, and
    makes it re-apply the newest published weights afterwards: the block may use the engine."""
    with self._cv:
      self._paused = True
      while self._in_engine:
        self._cv.wait()
    try:
      yield
    finally:
      with self._cv:
        self._paused = False
        self._applied = None
        self._cv.notify_all()

  def close(self) -> bool:
    """Stops the producer (a batch in flight is abandoned at its next engine call) and joins it; queued
    batches are discarded. Returns False if the thread did not end within the join timeout."""
    with self._cv:
      self._stop = True
      self._queue.clear()
      self._cv.notify_all()
    if self._interrupt is not None:
      self._interrupt.set()
    self._thread.join(self._join_timeout_s)
    if self._thread.is_alive():
      logging.error("the rollout producer thread did not stop within %.0f s", self._join_timeout_s)
      return False
    return True

  @property
  def alive(self) -> bool:
    return self._thread.is_alive()


def staleness_summary(stale: Sequence[int]) -> tuple[float, float]:
  """(mean, max) of per-episode staleness values (0, 0 for none)."""
  if not stale:
    return 0.0, 0.0
  return float(sum(stale)) / len(stale), float(max(stale))
