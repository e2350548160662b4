"""The CoD pack rollout: solve x0 | update z1 | solve x1 | ... | solve x_{S-1} (paper Sec. 3.1, Fig. 2).

One *trajectory* solves the S tasks of a pack in order. Before task i the current context z_i is injected
into the task's system prompt (``cod_protocol.augment_system_prompt``); z_0 = ``"Hints: null"``. After every
task but the last, an update-context episode sees the previous hint, the rendered trajectory, the
(length-penalized) reward and the environment feedback, and writes z_{i+1} between the hint markers. A parse
failure resets the context to ``"Hints: no hint available."`` and earns the format reward -c
(``hint_penalty``); a successful parse earns 0 (paper Sec. 3.1 "Reward design"; the reset rule is Trinity-RFT's,
agentscope-ai/Trinity-RFT ``trinity/common/workflows/connect_the_dots/update_context_workflow.py``; see
docs/methods/cod.md).

G repeats of one pack share the hidden environment (same ``pack_seed``) but each repeat calls
``family.sample_pack`` itself, so no mutable pack state is ever shared between repeats.

Packing strategies (Trinity-RFT ``connect_the_dots/cod_workflow.py``, ``pack_tasks``; the Ralph loop is the
paper's Sec. 3.3): ``cod`` (S distinct tasks), ``ralph_sample`` (the pack's first task S times), ``ralph_full``
(every task becomes a pack of S copies of itself).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from codjax.agents.episode import (Backend, EnvEpisodeDriver, Episode, PolicyBackend, Workflow, episode_from_record,
                                   episode_record, run_repeats)
from codjax.envs import cod_protocol
from codjax.envs.base import EnvFamily

PACKING_STRATEGIES = ("cod", "ralph_sample", "ralph_full")


@dataclasses.dataclass(frozen=True)
class Pack:
  """S tasks of one environment instance. ``task_seeds`` may repeat (Ralph modes)."""

  env_name: str
  family: EnvFamily
  pack_seed: int
  task_seeds: tuple[int, ...]
  pack_id: int = 0

  @property
  def size(self) -> int:
    return len(self.task_seeds)


@dataclasses.dataclass(frozen=True)
class CodSettings:
  """Workflow settings (validated). Mirrors the ``cod`` block of an experiment config."""

  use_hints: bool = True  # False: no update episodes, no hint section (the "without hints" baseline)
  hint_penalty: float = 0.1  # c: update-episode reward is -c on parse failure (paper Table 1)
  response_limit: int | None = None  # soft "limit your response to N tokens" instruction (Table 1)
  # optional response-wise solve length penalty (Trinity-RFT base_workflow.py); None = off (as in every
  # published config)
  len_zero_penalty: int | None = None
  len_full_penalty: int | None = None
  length_penalty_coef: float = 0.0
  protocol: str = "full"  # "compact": short hint section and update system prompt (tiny CPU demos)

  def __post_init__(self):
    if self.protocol not in cod_protocol.PROTOCOL_STYLES:
      raise ValueError(f"protocol must be one of {cod_protocol.PROTOCOL_STYLES}, got {self.protocol!r}")
    if self.hint_penalty < 0:
      raise ValueError(f"hint_penalty must be >= 0, got {self.hint_penalty}")
    if self.response_limit is not None and self.response_limit <= 0:
      raise ValueError(f"response_limit must be positive or None, got {self.response_limit}")
    if (self.len_zero_penalty is None) != (self.len_full_penalty is None):
      raise ValueError("len_zero_penalty and len_full_penalty must be set together")
    if self.len_zero_penalty is not None and self.len_full_penalty <= self.len_zero_penalty:
      raise ValueError("len_full_penalty must exceed len_zero_penalty")
    if self.length_penalty_coef < 0:
      raise ValueError("length_penalty_coef must be >= 0")


@dataclasses.dataclass
class CodTrajectory:
  """The result of one CoD trajectory (one repeat of one pack)."""

  pack: Pack
  repeat_id: int
  solve_episodes: list[Episode]
  update_episodes: list[Episode]
  hints: list[str]  # z_0 .. z_{S-1}: the context each solve episode saw

  @property
  def task_rewards(self) -> np.ndarray:
    return np.array([e.reward for e in self.solve_episodes], np.float64)

  @property
  def hint_rewards(self) -> np.ndarray:
    return np.array([e.reward for e in self.update_episodes], np.float64)

  @property
  def hint_parse_ok(self) -> list[bool]:
    return [not e.format_error for e in self.update_episodes]

  def to_record(self) -> dict:
    """JSON-ready record of the trajectory (the pack is identified by the caller; ``from_record`` inverts)."""
    return {"repeat_id": self.repeat_id, "hints": list(self.hints),
            "solve_episodes": [episode_record(e) for e in self.solve_episodes],
            "update_episodes": [episode_record(e) for e in self.update_episodes]}

  @classmethod
  def from_record(cls, rec: dict, pack: Pack) -> "CodTrajectory":
    return cls(pack, int(rec["repeat_id"]), [episode_from_record(e) for e in rec["solve_episodes"]],
               [episode_from_record(e) for e in rec["update_episodes"]], list(rec["hints"]))

  def episodes(self) -> list[Episode]:
    """All episodes in rollout order: solve, update, solve, ..., solve."""
    out = []
    for i, s in enumerate(self.solve_episodes):
      out.append(s)
      if i < len(self.update_episodes):
        out.append(self.update_episodes[i])
    return out


def make_packs(env_name: str, family: EnvFamily, task_seeds: Sequence[int], pack_size: int,
               strategy: str = "cod", pack_seed_base: int = 0, pad: bool = True,
               first_pack_id: int = 0) -> list[Pack]:
  """Groups dataset rows into packs and derives each pack's seed from its rows (docs/methods/cod.md).

  The pack seed is a stable hash of the pack's task seeds and ``pack_seed_base`` (the ``stable_pack_seed``
  behaviour), so the hidden environment of a pack is the same across processes and checkpoints.
  """
  if strategy not in PACKING_STRATEGIES:
    raise ValueError(f"packing strategy must be one of {PACKING_STRATEGIES}, got {strategy!r}")
  if pack_size < 1:
    raise ValueError(f"pack_size must be >= 1, got {pack_size}")
  from codjax.envs.base import derive_seed

  seeds = [int(s) for s in task_seeds]
  groups: list[tuple[int, ...]] = []
  if strategy == "ralph_full":
    groups = [(s,) * pack_size for s in seeds]
  else:
    if len(seeds) < pack_size:
      return []
    if pad and len(seeds) % pack_size:
      seeds = seeds + seeds[: pack_size - len(seeds) % pack_size]
    for i in range(0, len(seeds) - pack_size + 1, pack_size):
      chunk = tuple(seeds[i:i + pack_size])
      groups.append((chunk[0],) * pack_size if strategy == "ralph_sample" else chunk)
  return [Pack(env_name, family, derive_seed(pack_seed_base, *g), g, first_pack_id + k)
          for k, g in enumerate(groups)]


class CodWorkflow(Workflow):
  """State machine of one CoD trajectory (one repeat of one pack)."""

  def __init__(self, pack: Pack, repeat_id: int, settings: CodSettings):
    self.pack = pack
    self.repeat_id = repeat_id
    self.settings = settings
    self.envs = pack.family.sample_pack(pack.pack_seed, pack.size, task_seeds=list(pack.task_seeds))
    if len(self.envs) != pack.size:
      raise RuntimeError(f"{pack.env_name}.sample_pack returned {len(self.envs)} tasks, expected {pack.size}")
    self.solve_episodes: list[Episode] = []
    self.update_episodes: list[Episode] = []
    self.hints: list[str] = []
    self._hint = cod_protocol.INITIAL_HINT if settings.use_hints else ""
    self._driver: EnvEpisodeDriver | None = None
    self._update_ep: Episode | None = None
    self._pos = 0
    self._start_solve(0)

  # -- episode construction -------------------------------------------------------------------------------
  def _start_solve(self, i: int) -> None:
    env = self.envs[i]
    system_prompt, obs = env.reset()
    ep = Episode(kind="solve", position=i, pack_id=self.pack.pack_id, repeat_id=self.repeat_id,
                 env_name=self.pack.env_name)
    driver = EnvEpisodeDriver(env, ep, system_prompt, obs)
    driver.start(cod_protocol.augment_system_prompt(system_prompt, self._hint or None,
                                                    self.settings.response_limit, self.settings.protocol))
    self.hints.append(self._hint)
    self.solve_episodes.append(ep)
    self._driver = driver
    self._pos = i

  def _start_update(self, i: int) -> None:
    driver = self._driver
    solve_ep = driver.episode
    env = self.envs[i]
    # the compact protocol leaves the task's system prompt out of the rendered trajectory (fewer tokens)
    sys_text = "" if self.settings.protocol == "compact" else driver.env_system_prompt
    trajectory = env.render_trajectory(sys_text, driver.turns)
    feedback = env.final_feedback() or solve_ep.feedback or f"Reward: {solve_ep.reward} (max: 1.0)"
    reward = solve_ep.reward if env.show_reward_in_update else None
    ep = Episode(kind="update", position=i, pack_id=self.pack.pack_id, repeat_id=self.repeat_id,
                 env_name=self.pack.env_name)
    ep.add_message("system", cod_protocol.update_system_prompt(self.settings.response_limit,
                                                               self.settings.protocol))
    ep.add_message("user", cod_protocol.update_user_prompt(
        self._hint or cod_protocol.INITIAL_HINT, trajectory, reward, feedback,
        reminder=self.pack.family.update_protocol_reminder(), style=self.settings.protocol))
    ep.info["trajectory_text"] = trajectory
    self.update_episodes.append(ep)
    self._update_ep = ep
    self._driver = None

  # -- Workflow ---------------------------------------------------------------------------------------------
  def active_episode(self) -> Episode | None:
    if self._driver is not None:
      return self._driver.episode
    return self._update_ep

  def progress(self) -> float:
    """Tasks solved over the pack's size (a task counts once its solve episode ended); 1 when finished."""
    if self.active_episode() is None:
      return 1.0
    solved = self._pos + (1 if self._driver is None else 0)
    return min(solved / self.pack.size, 0.999)

  def on_response(self, text: str) -> None:
    if self._driver is not None:
      ep = self._driver.episode
      if ep.budget_exhausted:
        ep.messages.pop()  # the placeholder reply of a backend that could not generate
        ep.num_turns -= 1
        self._driver.force_end("prompt token budget exhausted")
        done = True
      else:
        done = self._driver.step(text)
      if done:
        self._finish_solve()
      return
    ep = self._update_ep
    assert ep is not None
    self._finish_update(ep, text)

  def _finish_solve(self) -> None:
    ep = self._driver.episode
    s = self.settings
    if s.len_zero_penalty is not None and s.length_penalty_coef > 0 and ep.raw_reward > 0:
      # Trinity-RFT base_workflow.py: r = max(0, raw - coef * (response_wise + episode_wise))
      p = [min(1.0, max(0.0, (n - s.len_zero_penalty) / (s.len_full_penalty - s.len_zero_penalty)))
           for n in ep.response_token_counts] or [0.0]
      episode_wise = ep.num_turns / max(1, self._driver.env.max_turns)
      ep.reward = max(0.0, ep.raw_reward - s.length_penalty_coef * (float(np.mean(p)) + episode_wise))
    i = self._pos
    if i + 1 < self.pack.size and self.settings.use_hints:
      self._start_update(i)
    elif i + 1 < self.pack.size:
      self._start_solve(i + 1)
    else:
      self._driver = None

  def _finish_update(self, ep: Episode, text: str) -> None:
    if ep.budget_exhausted:
      ep.messages.pop()  # the placeholder reply of a backend that could not generate
      ep.num_turns -= 1
      ep.truncated = True
      ep.truncation_reason = "prompt token budget exhausted"
      parsed = None
    else:
      parsed = cod_protocol.parse_hint(text)
    ep.done = True
    ep.format_error = parsed is None
    ep.reward = -self.settings.hint_penalty if parsed is None else 0.0
    ep.raw_reward = ep.reward
    self._hint = parsed if parsed is not None else cod_protocol.FAILED_HINT
    ep.info["new_hint"] = self._hint
    self._update_ep = None
    self._start_solve(self._pos + 1)

  def result(self) -> CodTrajectory:
    return CodTrajectory(self.pack, self.repeat_id, self.solve_episodes, self.update_episodes, self.hints)


def run_cod(backend: Backend, packs: Sequence[Pack], repeats: int = 1,
            settings: CodSettings | None = None, on_done=None, on_progress=None) -> list[CodTrajectory]:
  """Rolls out ``repeats`` CoD trajectories of every pack in lock step; returns them pack-major.

  Trajectory ``k * repeats + g`` is repeat g of ``packs[k]``; ``on_done(j, trajectory)`` receives each one as
  it finishes and ``on_progress(packs done)`` the progress (``run_repeats``).
  """
  settings = settings or CodSettings()
  return run_repeats(backend, packs, repeats, lambda p, g: CodWorkflow(p, g, settings), on_done, on_progress)


def run_text_packs(policy, family: EnvFamily, pack_seeds: Sequence[int], pack_size: int, *,
                   env_name: str = "", repeats: int = 1, use_hints: bool = True, seed: int = 0,
                   hint_penalty: float = 0.1, task_seeds: Sequence[Sequence[int]] | None = None,
                   on_done=None) -> list[CodTrajectory]:
  """CoD rollouts with a scripted ``TextPolicy`` (experts, random baselines).

  Pack k uses hidden seed ``pack_seeds[k]`` and task seeds ``task_seeds[k]`` (default: derived from the
  pack seed). Returns ``len(pack_seeds) * repeats`` trajectories, pack-major.
  """
  packs = text_packs(family, pack_seeds, pack_size, env_name=env_name, task_seeds=task_seeds)
  return run_cod(PolicyBackend(policy, seed), packs, repeats,
                 CodSettings(use_hints=use_hints, hint_penalty=hint_penalty), on_done)


def text_packs(family: EnvFamily, pack_seeds: Sequence[int], pack_size: int, *, env_name: str = "",
               task_seeds: Sequence[Sequence[int]] | None = None) -> list[Pack]:
  """Pack k (id k) with hidden seed ``pack_seeds[k]`` and task seeds ``task_seeds[k]`` (default: derived from
  the pack seed): the packs of ``run_text_packs`` and of the tiny tokenizer's corpus."""
  from codjax.envs.base import derive_seed

  packs = []
  for k, ps in enumerate(pack_seeds):
    ts = tuple(task_seeds[k]) if task_seeds is not None else tuple(
        derive_seed(ps, 1, j) for j in range(pack_size))
    if len(ts) != pack_size:
      raise ValueError(f"pack {k} has {len(ts)} task seeds, expected {pack_size}")
    packs.append(Pack(env_name or family.name, family, int(ps), ts, k))
  return packs

