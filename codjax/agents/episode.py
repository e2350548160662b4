"""Episodes and the episode runners (lock step; streaming, for continuous batching: ``run_streaming``).

An ``Episode`` is one conversation with one environment (a solve-task episode) or one single-turn
update-context episode. Many episodes advance in lock step: each turn, the runner gathers the active
episodes of every workflow, asks the ``Backend`` once for all their next assistant messages, and feeds each
reply back to its workflow (which steps its environment and appends the next user turn).

Backends produce the assistant text. ``PolicyBackend`` wraps a scripted ``TextPolicy`` (experts, random
baselines). Token backends (``codjax.agents.token_backend.EngineBackend``) drive a ``RolloutEngine`` and also
record, per episode, the token sequence as generated, the loss mask over assistant tokens and the rollout
logprobs ("token in, token out": generated tokens are never re-tokenized).
"""

from __future__ import annotations

import abc
import dataclasses
import random
import time
from typing import Any, Callable, Protocol, Sequence

from codjax.envs.base import StepResult, TaskEnv, Turn, derive_seed


@dataclasses.dataclass
class Episode:
  """One conversation. Token fields are filled by token backends (empty for text-only backends)."""

  kind: str  # "solve" | "update" | "orbit"
  position: int  # pack position (solve: task index; update: index of the task it summarizes)
  pack_id: int = 0
  repeat_id: int = 0
  env_name: str = ""
  messages: list[dict[str, str]] = dataclasses.field(default_factory=list)
  reward: float = 0.0  # final training reward of the episode (after penalties)
  raw_reward: float = 0.0  # raw outcome before length penalties
  format_error: bool = False
  done: bool = False
  num_turns: int = 0
  feedback: str = ""
  info: dict[str, Any] = dataclasses.field(default_factory=dict)
  # token-level record ("token in, token out")
  tokens: list[int] = dataclasses.field(default_factory=list)
  loss_mask: list[int] = dataclasses.field(default_factory=list)
  logprobs: list[float] = dataclasses.field(default_factory=list)
  response_token_counts: list[int] = dataclasses.field(default_factory=list)
  truncated: bool = False  # a response hit max_tokens or the prompt budget was exhausted
  truncation_reason: str = ""
  # set by a token backend when the conversation no longer fits the prompt budget: the workflow then ends
  # the episode (raw outcome 0) instead of generating
  budget_exhausted: bool = False
  # the policy version that sampled the episode (asynchronous training: the number of train steps that
  # produced those weights, codjax.train.async_rollouts); -1 when not recorded
  policy_version: int = -1
  # opaque per-episode state of a token backend (e.g. a KV-cache slot id)
  backend_state: Any = None

  @property
  def num_loss_tokens(self) -> int:
    return int(sum(self.loss_mask))

  def add_message(self, role: str, content: str) -> None:
    self.messages.append({"role": role, "content": content})


# fields a saved episode record leaves out: training-only token annotations and the backend's live state
UNRECORDED_FIELDS = ("loss_mask", "logprobs", "backend_state")


def episode_record(ep: Episode) -> dict[str, Any]:
  """``ep`` as a JSON-ready dict (an evaluation record): every field but ``UNRECORDED_FIELDS``; the token ids
  are kept. ``episode_from_record`` inverts it (tuples in ``info`` come back as lists)."""
  return {f.name: getattr(ep, f.name) for f in dataclasses.fields(Episode) if f.name not in UNRECORDED_FIELDS}


def episode_from_record(rec: dict[str, Any]) -> Episode:
  names = {f.name for f in dataclasses.fields(Episode)} - set(UNRECORDED_FIELDS)
  unknown = sorted(set(rec) - names)
  if unknown:
    raise ValueError(f"episode record has unknown fields {unknown}")
  return Episode(**rec)


def episode_seeds(seed: int, episodes: Sequence[Episode]) -> tuple[int, ...]:
  """``episode_turn_seed`` of every episode: the per-request seeds (``SamplingParams.seeds``) of one call."""
  return tuple(episode_turn_seed(seed, ep) for ep in episodes)


def episode_turn_seed(seed: int, ep: Episode) -> int:
  """The sampling seed of ``ep``'s next reply: a function of ``seed`` and the episode's identity (environment,
  pack, repeat, kind, position) and turn only, so a reply's draws do not depend on which other episodes share
  the backend call. Evaluation samples this way: an evaluation resumed with some packs already finished, or
  run at another concurrency, draws the same keys for every remaining reply. Below 2**31 (vLLM, HTTP)."""
  name = int.from_bytes(ep.env_name.encode()[:24].ljust(24, b"\0"), "big")
  kind = int.from_bytes(ep.kind.encode()[:8].ljust(8, b"\0"), "big")
  return derive_seed(int(seed), name, ep.pack_id, ep.repeat_id, kind, ep.position, ep.num_turns) % (2**31)


class Backend(Protocol):
  """Produces the next assistant message for each episode (each ends with a user message)."""

  def respond(self, episodes: Sequence[Episode]) -> list[str]:
    ...

  def release(self, episode: Episode) -> None:
    """Called once when an episode ends (frees per-episode resources such as cache slots)."""
    ...


class PolicyBackend:
  """A backend over a scripted text policy (``codjax.envs.experts.TextPolicy``)."""

  def __init__(self, policy, seed: int = 0):
    self.policy = policy
    self._seed = seed
    self._calls = 0

  def respond(self, episodes: Sequence[Episode]) -> list[str]:
    out = []
    for ep in episodes:
      # one stream per (episode identity, turn) so results do not depend on batch composition
      rng = random.Random(f"{self._seed}/{ep.pack_id}/{ep.repeat_id}/{ep.kind}/{ep.position}/{ep.num_turns}")
      out.append(self.policy.respond(ep.messages, rng))
    self._calls += 1
    return out

  def release(self, episode: Episode) -> None:
    del episode


class Workflow(abc.ABC):
  """A state machine that owns a sequence of episodes and exposes at most one active episode at a time."""

  @abc.abstractmethod
  def active_episode(self) -> Episode | None:
    """The episode waiting for an assistant message, or None when the workflow is finished."""

  @abc.abstractmethod
  def on_response(self, text: str) -> None:
    """Consumes the assistant message for the active episode."""

  def progress(self) -> float:
    """How much of the workflow is done, in [0, 1]: 1 exactly when it is finished, below 1 before (progress
    bars; workflows that know their plan report finer steps)."""
    return 0.0 if self.active_episode() is not None else 1.0


PROGRESS_INTERVAL_S = 0.25  # the runners' progress reports: at most one per this many seconds (and the last)


class ProgressReporter:
  """Calls ``on_progress(sum of the workflows' progress())`` at most every ``PROGRESS_INTERVAL_S`` seconds,
  and always on ``final``: the runners' hook for a bar that moves while long episodes run (ORBIT's whole
  trajectory is one conversation, so finished trajectories alone arrive all at once at the end)."""

  def __init__(self, workflows: Sequence[Workflow], on_progress: Callable[[float], None] | None):
    self.workflows, self.on_progress, self.interval = workflows, on_progress, PROGRESS_INTERVAL_S
    self._last = float("-inf")

  def __call__(self, final: bool = False) -> None:
    if self.on_progress is None:
      return
    now = time.monotonic()
    if final or now - self._last >= self.interval:
      self._last = now
      self.on_progress(float(sum(w.progress() for w in self.workflows)))


def run_lockstep(backend: Backend, workflows: Sequence[Workflow], max_ticks: int = 1_000_000,
                 on_done: Callable[[int], None] | None = None,
                 on_progress: Callable[[float], None] | None = None) -> int:
  """Advances all workflows until every one is finished; returns the number of backend calls.

  ``on_done(i)`` is called once for workflow ``workflows[i]`` right after the tick in which it finished (an
  evaluation saves that result before the next backend call, so an interrupted run keeps it), or before the
  first tick for a workflow that starts finished. ``on_progress(x)`` receives the summed ``progress()`` of
  the workflows (in workflows) after ticks, throttled (``ProgressReporter``), and once at the end.

  A backend with a ``max_concurrent`` attribute (an engine with a fixed number of cache slots) is served at
  most that many episodes per call: the first ``max_concurrent`` unfinished workflows run, and a waiting one
  joins when another finishes. A started workflow stays in that set until it finishes, so at most
  ``max_concurrent`` episodes ever hold per-episode backend state."""
  limit = getattr(backend, "max_concurrent", None)
  ticks = 0
  report = ProgressReporter(workflows, on_progress)
  if on_done is not None:  # (a workflow may start finished)
    for i in [i for i, w in enumerate(workflows) if w.active_episode() is None]:
      on_done(i)
  while True:
    active = []
    for i, w in enumerate(workflows):
      ep = w.active_episode()
      if ep is not None:
        active.append((i, w, ep))
        if limit is not None and len(active) == limit:
          break
    if not active:
      report(final=True)
      return ticks
    if ticks >= max_ticks:
      raise RuntimeError(f"lock-step runner exceeded {max_ticks} ticks; a workflow does not terminate")
    texts = backend.respond([ep for _, _, ep in active])
    if len(texts) != len(active):
      raise RuntimeError(f"backend returned {len(texts)} responses for {len(active)} episodes")
    finished = []
    for (i, w, ep), text in zip(active, texts):
      ep.add_message("assistant", text)
      ep.num_turns += 1
      w.on_response(text)
      if w.active_episode() is not ep:
        backend.release(ep)
        if w.active_episode() is None:
          finished.append(i)
    ticks += 1
    if on_done is not None:
      for i in finished:
        on_done(i)
    report()


def run_streaming(backend, workflows: Sequence[Workflow], max_polls: int = 10_000_000,
                  on_done: Callable[[int], None] | None = None,
                  on_progress: Callable[[float], None] | None = None) -> int:
  """``run_lockstep`` without the lock step, over a streaming backend (``submit(episode)`` queues an episode's
  next reply, ``poll()`` returns ``(episode, text)`` of replies that finished): a workflow's next episode turn
  is submitted as soon as its reply came back and its environment stepped, while the other episodes keep
  decoding (continuous batching). At most ``backend.max_concurrent`` workflows are live at once (a waiting
  one starts when another finishes); ``on_done(i)`` and ``on_progress(x)`` as in ``run_lockstep``. Returns
  the number of polls."""
  limit = getattr(backend, "max_concurrent", None) or max(1, len(workflows))
  report = ProgressReporter(workflows, on_progress)
  if on_done is not None:
    for i in [i for i, w in enumerate(workflows) if w.active_episode() is None]:
      on_done(i)
  waiting = [i for i, w in enumerate(workflows) if w.active_episode() is not None][::-1]
  owner: dict[int, tuple[int, Workflow]] = {}

  def start(i: int) -> None:
    ep = workflows[i].active_episode()
    owner[id(ep)] = (i, workflows[i])
    backend.submit(ep)

  while waiting and len(owner) < limit:
    start(waiting.pop())
  polls = 0
  while owner:
    if polls >= max_polls:
      raise RuntimeError(f"streaming runner exceeded {max_polls} polls; a workflow does not terminate")
    results = backend.poll()
    polls += 1
    if not results:
      raise RuntimeError(f"streaming backend returned nothing with {len(owner)} episodes in flight")
    for ep, text in results:
      i, w = owner.pop(id(ep))
      ep.add_message("assistant", text)
      ep.num_turns += 1
      w.on_response(text)
      nxt = w.active_episode()
      if nxt is not ep:
        backend.release(ep)
      if nxt is None:
        if on_done is not None:
          on_done(i)
        if waiting:
          start(waiting.pop())
      else:
        start(i)
    report()
  report(final=True)
  return polls


def run_repeats(backend: Backend, packs: Sequence, repeats: int, make_workflow,
                on_done: Callable[[int, Any], None] | None = None,
                on_progress: Callable[[float], None] | None = None) -> list:
  """``make_workflow(pack, g)`` for ``repeats`` repeats of every pack, run in lock step (``run_lockstep``), or
  with continuous batching (``run_streaming``) over a backend whose ``streaming`` is true; returns the
  workflows' results pack-major (trajectory ``k * repeats + g`` is repeat g of ``packs[k]``).
  ``on_done(j, result)`` receives trajectory j as soon as it is finished; ``on_progress(x)`` the work done so far
  in packs (the workflows' summed ``progress()`` / repeats)."""
  if repeats < 1:
    raise ValueError(f"repeats must be >= 1, got {repeats}")
  flows = [make_workflow(p, g) for p in packs for g in range(repeats)]
  run = run_streaming if getattr(backend, "streaming", False) else run_lockstep
  run(backend, flows, on_done=None if on_done is None else lambda j: on_done(j, flows[j].result()),
      on_progress=None if on_progress is None else lambda x: on_progress(x / repeats))
  return [f.result() for f in flows]


class EnvEpisodeDriver:
  """Runs one solve episode against a ``TaskEnv``: system + first observation, then step per reply."""

  def __init__(self, env: TaskEnv, episode: Episode, system_prompt: str, first_observation: str):
    self.env = env
    self.episode = episode
    self.env_system_prompt = system_prompt  # without hint sections (for trajectory rendering)
    self.turns: list[Turn] = []
    self._last_obs = first_observation
    self.last_result: StepResult | None = None

  def start(self, system_prompt_with_hint: str) -> None:
    self.episode.add_message("system", system_prompt_with_hint)
    self.episode.add_message("user", self._last_obs)

  def step(self, text: str) -> bool:
    """Feeds the reply to the env; appends the next observation. Returns True when the episode ended."""
    res = self.env.step(text)
    self.turns.append(Turn(observation=self._last_obs, action=text))
    self.last_result = res
    ep = self.episode
    ep.reward = float(res.reward)
    ep.raw_reward = float(res.info.get("raw_reward", res.reward))
    ep.format_error = ep.format_error or bool(res.info.get("format_error", False))
    ep.feedback = str(res.info.get("feedback", ""))
    for k, v in res.info.items():
      if k not in ("feedback", "format_error", "raw_reward"):
        ep.info[k] = v
    if res.done:
      ep.done = True
      return True
    self._last_obs = res.observation
    ep.add_message("user", res.observation)
    return False

  def force_end(self, reason: str) -> None:
    """Ends the episode early (token budget exhausted): raw outcome 0, reported, never silent."""
    ep = self.episode
    ep.done = True
    ep.truncated = True
    ep.truncation_reason = reason
    ep.reward = 0.0
    ep.raw_reward = 0.0
    ep.feedback = f"Episode ended: {reason}."
