"""ORBIT's multi-episode in-context protocol (ORBIT paper (arXiv 2602.04089), Sec. 2, Algorithm 1 and Sec. 3.1;
the authors' code, XiaofengLin7/ORBIT ``envs/multi_episode_env.py``; docs/methods/orbit.md).

One *trajectory* plays episodes of ONE task instance in ONE growing conversation. The pack of a trajectory
holds T task environments that share the hidden instance (``family.sample_pack(pack_seed, T)``), so every
reset restores the same hidden task (maze map, secret code, deck order, ...) while the transcript of all
earlier episodes stays in context. The conversation is a single ``Episode`` (kind ``"orbit"``): one token
sequence whose loss mask covers every assistant turn of every game episode.

Layout (as in XiaofengLin7/ORBIT ``envs/multi_episode_env.py``):

* system: the multi-episode preamble, then the environment's own system prompt (its rules and action format);
* user: ``"[Episode 1] New episode begins."``, a newline, the first observation of episode 1;
* assistant / user: the model's full replies and the environment's observations;
* when a game episode ends and budget remains, ONE user message carries the terminal observation of the
  finished episode, a blank line, ``"[Episode k+1] New episode begins."``, a newline and the new episode's
  full first observation (the game instructions are repeated at every reset; the header plus the game's own
  terminal line signal the reset). The observation that ends the trajectory is never shown.

Budget (XiaofengLin7/ORBIT ``envs/multi_episode_env.py``). With ``extra_episodes`` (ORBIT's code) the trajectory
has a total step cap ``sum_k H_k = T * H`` over its T pack tasks; a game episode ends when its environment says
done (win, loss or its own horizon H) and the next one starts at once, so fast wins buy extra episodes beyond T,
and the episode running when the cap is hit counts as attempted and failed. Extra episode k (k >= T, 0-based)
replays pack task k mod T. The first T episodes always fit under the cap (episode k <= T starts with at least
(T - k + 1) H steps left), so Ep1..EpT are the same as under Algorithm 1; only extra episodes differ. Without
``extra_episodes`` exactly T episodes are played (Algorithm 1; ORBIT's single-episode baseline with T = 1, which
is then a plain episode: no preamble and no header).

Success and reward (paper Sec. 3.1; XiaofengLin7/ORBIT ``envs/multi_episode_env.py``). A game episode succeeds
when its environment reports ``info["success"]``; environments without that field (FrozenLake-Obscure, ...)
succeed when the episode ended with ``raw_reward > 0`` and was not truncated (ORBIT's rule: terminated, not
truncated, last reward > 0). Any shaped or length-penalised task reward is ignored. The trajectory reward is the
success count R(M; tau) = sum_e 1[success_e] over all episodes played. A trajectory whose conversation outgrows
the prompt token budget stops there (the running episode fails); with ``zero_reward_on_overflow`` (paper Sec. 4.2:
truncated trajectories are assigned zero reward) its reward is 0, otherwise (rLLM) the successes
before the cut count.

Per game episode the trajectory records success, turns, format errors and the visited states
(``initial_state_key`` of the environment plus ``info["state_key"]`` of each step) for the exploration
metric of the paper's Table 4 (``codjax.workflows.orbit_metrics``).

G repeats of one pack share the hidden instance (same ``pack_seed``) but each repeat calls
``family.sample_pack`` itself, so repeats never share mutable environment state.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Hashable, Sequence

import numpy as np

from codjax.agents.cod import Pack
from codjax.agents.episode import Backend, Episode, Workflow, episode_from_record, episode_record, run_repeats
from codjax.envs.base import StepResult, TaskEnv

EPISODE_HEADER = "[Episode {k}] New episode begins."

_PREAMBLE = (
    "You will work on one task over several episodes{budget}. Every episode restarts the environment from its "
    "start, but the hidden task stays exactly the same, and a line \"[Episode k] New episode begins.\" marks each "
    "restart. Everything from earlier episodes stays in this conversation: use what you learned there to succeed "
    "sooner and more often. Keep your reasoning brief: the whole conversation must fit a limited context.")


def episode_header(k: int) -> str:
  """The reset signal of 1-based episode ``k``."""
  return EPISODE_HEADER.format(k=k)


def orbit_system_prompt(env_system_prompt: str, shared_budget: bool) -> str:
  """The multi-episode preamble (paper-era ORBIT prompt, codjax wording) above the environment's prompt."""
  budget = " that share one budget of turns" if shared_budget else ""
  return _PREAMBLE.format(budget=budget) + "\n\n" + env_system_prompt


def episode_success(result: StepResult) -> bool:
  """ORBIT's success of a finished episode (module docstring)."""
  info = result.info
  if "success" in info:
    return bool(info["success"])
  return bool(result.done and float(info.get("raw_reward", result.reward)) > 0
              and not info.get("truncated", False))


@dataclasses.dataclass(frozen=True)
class OrbitSettings:
  """Protocol switches (module docstring). Mirrors the ``orbit`` block of an experiment config."""

  extra_episodes: bool = True  # total step cap T*H, fast wins buy extra episodes (ORBIT code); False: exactly T
  zero_reward_on_overflow: bool = True  # paper Sec. 4.2; False: rLLM keeps successes before the cut
  # every episode replays the pack's first task: for environments whose task seed picks the instance (the
  # map of FrozenLake-Obscure) rather than per-episode randomness (the draws of the ORBIT games' RPS)
  same_task: bool = False

  def __post_init__(self):
    for name in ("extra_episodes", "zero_reward_on_overflow", "same_task"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"orbit.{name} must be a bool, got {getattr(self, name)!r}")


def _hashable(x):
  """A state key read back from JSON: lists become tuples again (recursively)."""
  return tuple(_hashable(v) for v in x) if isinstance(x, list) else x


@dataclasses.dataclass
class GameEpisode:
  """One game episode inside a trajectory."""

  index: int  # 1-based
  success: bool = False
  ended: bool = False  # its environment said done (else it was cut by the step cap or the context budget)
  turns: int = 0
  format_errors: int = 0
  states: list[Hashable] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class OrbitTrajectory:
  """The result of one ORBIT trajectory (one repeat of one pack)."""

  pack: Pack
  repeat_id: int
  episode: Episode  # the whole multi-episode conversation (tokens, loss mask, logprobs for token backends)
  games: list[GameEpisode]
  step_cap: int | None
  steps: int
  overflow: bool  # the conversation outgrew the prompt token budget
  settings: OrbitSettings

  def to_record(self) -> dict:
    """JSON-ready record of the trajectory (the pack and settings are the caller's; ``from_record`` inverts)."""
    return {"repeat_id": self.repeat_id, "episode": episode_record(self.episode),
            "games": [dataclasses.asdict(g) for g in self.games], "step_cap": self.step_cap,
            "steps": self.steps, "overflow": self.overflow}

  @classmethod
  def from_record(cls, rec: dict, pack: Pack, settings: OrbitSettings) -> "OrbitTrajectory":
    games = [GameEpisode(**{**g, "states": [_hashable(s) for s in g["states"]]}) for g in rec["games"]]
    return cls(pack, int(rec["repeat_id"]), episode_from_record(rec["episode"]), games, rec["step_cap"],
               int(rec["steps"]), bool(rec["overflow"]), settings)

  def episodes(self) -> list[Episode]:
    """The trajectory's training sequences (one: the whole multi-episode conversation)."""
    return [self.episode]

  @property
  def num_episodes(self) -> int:
    """T, the episodes every trajectory of this pack is scored on."""
    return self.pack.size

  @property
  def successes(self) -> list[bool]:
    """Success of every game episode played (may be more than T with extra episodes)."""
    return [g.success for g in self.games]

  @property
  def success_count(self) -> int:
    return int(sum(self.successes))

  @property
  def reward(self) -> float:
    return float(self.episode.reward)

  def success_row(self) -> np.ndarray:
    """[T] 0/1 success of episodes 1..T (episodes never reached count as failures)."""
    row = np.zeros(self.num_episodes)
    for g in self.games[:self.num_episodes]:
      row[g.index - 1] = float(g.success)
    return row

  def states(self) -> list[list[Hashable]]:
    """Visited states per game episode (for the exploration metric)."""
    return [list(g.states) for g in self.games]


class OrbitWorkflow(Workflow):
  """State machine of one ORBIT trajectory: a single conversation over successive game episodes."""

  def __init__(self, pack: Pack, repeat_id: int, settings: OrbitSettings):
    self.pack = pack
    self.repeat_id = repeat_id
    self.settings = settings
    seeds = list(pack.task_seeds)
    self._seeds = [seeds[0]] * len(seeds) if settings.same_task else seeds
    self.envs: list[TaskEnv] = pack.family.sample_pack(pack.pack_seed, pack.size, task_seeds=self._seeds)
    if len(self.envs) != pack.size:
      raise RuntimeError(f"{pack.env_name}.sample_pack returned {len(self.envs)} tasks, expected {pack.size}")
    self.step_cap = sum(int(e.max_turns) for e in self.envs) if settings.extra_episodes else None
    self.multi = pack.size > 1 or settings.extra_episodes
    self.episode = Episode(kind="orbit", position=0, pack_id=pack.pack_id, repeat_id=repeat_id,
                           env_name=pack.env_name)
    self.games: list[GameEpisode] = []
    self.steps = 0
    self.overflow = False
    self._env: TaskEnv | None = None
    self._finished = False
    self._start_game(carry="")

  def _env_for(self, k: int) -> TaskEnv:
    """The environment of 0-based episode k (extra episodes replay pack task k mod T, freshly built)."""
    if k < len(self.envs):
      return self.envs[k]
    env = self.pack.family.sample_pack(self.pack.pack_seed, 1, task_seeds=[self._seeds[k % len(self._seeds)]])[0]
    self.envs.append(env)
    return env

  def _start_game(self, carry: str) -> None:
    k = len(self.games)
    env = self._env_for(k)
    system, obs = env.reset()
    ep = self.episode
    if k == 0:
      ep.add_message("system", orbit_system_prompt(system, self.step_cap is not None) if self.multi else system)
    head = f"{episode_header(k + 1)}\n{obs}" if self.multi else obs
    ep.add_message("user", f"{carry}\n\n{head}" if carry else head)
    init = getattr(env, "initial_state_key", None)
    self.games.append(GameEpisode(index=k + 1, states=[] if init is None else [init]))
    self._env = env

  def _room_for_another(self) -> bool:
    if self.step_cap is None:
      return len(self.games) < self.pack.size
    return self.steps < self.step_cap

  # -- Workflow ---------------------------------------------------------------------------------------------
  def active_episode(self) -> Episode | None:
    return None if self._finished else self.episode

  def progress(self) -> float:
    """Games played over the planned T, the running game counted by its share of the turn limit (the step
    cap's share of steps with extra episodes); 1 when finished."""
    if self._finished:
      return 1.0
    if self.step_cap:
      return min(self.steps / self.step_cap, 0.999)
    ended = sum(g.ended for g in self.games)
    running = self.games[-1] if self.games and not self.games[-1].ended else None
    part = min(running.turns / max(1, int(self._env.max_turns)), 1.0) if running is not None else 0.0
    return min((ended + part) / self.pack.size, 0.999)

  def on_response(self, text: str) -> None:
    ep = self.episode
    if ep.budget_exhausted:
      ep.messages.pop()  # the placeholder reply of a backend that could not generate
      ep.num_turns -= 1
      self.overflow = True
      ep.truncated = True
      ep.truncation_reason = "the conversation reached the prompt token budget"
      self._finish()
      return
    res = self._env.step(text)
    self.steps += 1
    game = self.games[-1]
    game.turns += 1
    game.format_errors += int(bool(res.info.get("format_error", False)))
    key = res.info.get("state_key")
    if key is not None:
      game.states.append(key)
    if res.done:
      game.ended = True
      game.success = episode_success(res)
      if self._room_for_another():
        self._start_game(carry=res.observation)
      else:
        self._finish()
      return
    if self.step_cap is not None and self.steps >= self.step_cap:
      self._finish()  # the running episode is cut by the cap: attempted and failed
      return
    ep.add_message("user", res.observation)

  def _finish(self) -> None:
    ep = self.episode
    count = sum(g.success for g in self.games)
    ep.done = True
    ep.raw_reward = float(count)
    ep.reward = 0.0 if self.overflow and self.settings.zero_reward_on_overflow else float(count)
    ep.format_error = any(g.format_errors for g in self.games)
    ep.info.update(successes=[g.success for g in self.games], episode_turns=[g.turns for g in self.games],
                   num_episodes=len(self.games), steps=self.steps, step_cap=self.step_cap, overflow=self.overflow)
    self._finished = True

  def result(self) -> OrbitTrajectory:
    return OrbitTrajectory(self.pack, self.repeat_id, self.episode, self.games, self.step_cap, self.steps,
                           self.overflow, self.settings)


def run_orbit(backend: Backend, packs: Sequence[Pack], repeats: int = 1,
              settings: OrbitSettings | None = None, on_done=None, on_progress=None) -> list[OrbitTrajectory]:
  """Rolls out ``repeats`` ORBIT trajectories of every pack in lock step; returns them pack-major.

  Trajectory ``k * repeats + g`` is repeat g of ``packs[k]``; T is each pack's size. ``on_done(j, trajectory)``
  receives each one as it finishes and ``on_progress(packs done)`` the progress (``run_repeats``).
  """
  settings = settings or OrbitSettings()
  return run_repeats(backend, packs, repeats, lambda p, g: OrbitWorkflow(p, g, settings), on_done, on_progress)


def settings_from_config(block: Any) -> OrbitSettings:
  """``OrbitSettings`` from a config block with the same field names (a dict or ConfigDict; missing = default)."""
  fields = {f.name for f in dataclasses.fields(OrbitSettings)}
  values = dict(block) if block is not None else {}
  unknown = sorted(set(values) - fields)
  if unknown:
    raise ValueError(f"unknown orbit setting(s) {unknown}; known: {sorted(fields)}")
  return OrbitSettings(**values)
