"""The household environment ``alfworld_synth``: ALFWorld's six task families, offline (tier 2 of
docs/methods/evoharness.md).

A pack is one house (a room layout with its objects, from ``pack_seed``); each task of the pack is another goal
in that house (from its task seed), so a pack is a stream of related tasks in one environment. Each task starts
from the house's initial state: the agent at the start, every openable receptacle closed.

Two ways to play a task:

* ReAct text (``env_only``): ``reset() -> (system_prompt, observation)``, ``step(reply)``. The observation is
  ALFWorld's text (the intro first, then each command's feedback), the admissible commands one per line and
  the turn counter. A reply is well-formed when it holds exactly one ``<action>...</action>`` with non-empty
  content (``<think>...</think>`` before it is the intended place for reasoning); the action is lower-cased
  and its whitespace collapsed. A malformed reply is a format error (``info["format_error"]``; the world is
  not stepped); a command that is not admissible is an invalid turn ("Nothing happens.", ``info["invalid"]``;
  the world is not changed). Every reply costs one of ``max_turns`` turns; the task ends when it is won
  (reward and ``raw_reward`` 1.0) or the turns are spent (0.0).
* The harness interface (codjax/agents/evoharness.py): ``objective`` (the task sentence), ``task_family``,
  ``initial_observation`` (the intro), ``admissible_commands()``, ``step_command(command) -> CommandResult``
  (feedback, won, valid, the next admissible commands; no turn accounting), ``problem`` and ``plan()`` (the
  planner's certified teacher plan).

``info`` of ``step`` carries feedback, format_error, invalid, won, success, raw_reward, state_key (a short
digest of the hidden state, for exploration metrics), admissible, command and turn.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from typing import Any, Sequence

from codjax.envs.base import EnvFamily, StepResult, TaskEnv
from codjax.envs.helpers import config_from_preset, pack_args
from codjax.envs.household.generator import HouseholdConfig, sample_house, sample_problem
from codjax.envs.household.planner import plan as make_plan
from codjax.envs.household.presets import PRESETS
from codjax.envs.household.problem import Problem
from codjax.envs.household.vocab import vocabulary
from codjax.envs.household.world import NOTHING, State, initial_state, intro
from codjax.envs.registry import register

FORMAT_FEEDBACK = ("Invalid format: reply with <think>your reasoning</think><action>one admissible command"
                   "</action>, with exactly one action tag.")
ADMISSIBLE_HEADER = "Admissible commands:"
WON_SUFFIX = "Task complete."
LOST_SUFFIX = "Out of turns: the task is not complete."

_SYSTEM = """\
You are a household robot in a text world (ALFWorld). Each turn you read what you observe and the list of \
admissible commands, then reply with exactly one of those commands, copied word for word.

## Commands
- go to <receptacle>, open <receptacle>, close <receptacle>, examine <receptacle>
- take <object> from <receptacle>, move <object> to <receptacle> (this is how you put an object in or on \
something; you hold one object at a time)
- heat <object> with <microwave>, cool <object> with <fridge>, clean <object> with <sinkbasin>
- use <lamp>, slice <object> with <knife>, examine <object you hold>, look, inventory, help

## Rules
- Objects are inside or on receptacles; a closed receptacle must be opened to see or take what it holds.
- A command that is not in the admissible list does nothing ("Nothing happens.") but still costs a turn.
- You have at most {max_turns} turns. The task ends as soon as it is done.

## Reply format
<think>brief reasoning</think><action>one admissible command</action>"""


def parse_action(text: Any) -> str | None:
  """The lower-cased, whitespace-collapsed content of the reply's only ``<action>`` tag; None when malformed."""
  if not isinstance(text, str) or text.count("<action>") != 1 or text.count("</action>") != 1:
    return None
  start, end = text.index("<action>") + len("<action>"), text.index("</action>")
  if end < start:
    return None
  cmd = " ".join(text[start:end].lower().split())
  return cmd or None


def normalise(command: Any) -> str:
  return " ".join(command.lower().split()) if isinstance(command, str) else ""


def state_digest(state: State) -> str:
  """A short stable digest of the hidden state (``info["state_key"]``)."""
  return hashlib.sha1(repr(state.key).encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class CommandResult:
  """What ``step_command`` returns."""

  feedback: str
  won: bool
  valid: bool  # the command was admissible
  admissible: tuple[str, ...]  # the admissible commands after it


class HouseholdTask(TaskEnv):
  """One household task (module docstring)."""

  def __init__(self, cfg: HouseholdConfig, problem: Problem):
    self.cfg = cfg
    self.problem = problem
    self.max_turns = cfg.max_turns
    self.objective = problem.task_text
    self.task_family = problem.goal.family
    self._begin()
    self.initial_observation = intro(self._state)

  def _begin(self) -> None:
    self._state = initial_state(self.problem)
    self._actions = self._state.world.actions(self._state)
    self._won = self._state.world.won(self._state)
    self._turns = 0
    self._done = False
    self._last_feedback = ""

  # -- harness interface --------------------------------------------------------------------------------
  def admissible_commands(self) -> list[str]:
    return sorted(self._actions)

  def step_command(self, command: str) -> CommandResult:
    """Applies one command (lower-cased, whitespace collapsed); "Nothing happens." when it is not admissible."""
    cmd = normalise(command)
    valid = cmd in self._actions
    if valid:
      world = self._state.world
      self._state, feedback = world.apply(self._state, cmd)
      self._actions = world.actions(self._state)
      self._won = world.won(self._state)
    else:
      feedback = NOTHING
    self._last_feedback = feedback
    return CommandResult(feedback=feedback, won=self._won, valid=valid, admissible=tuple(sorted(self._actions)))

  def plan(self) -> list[str]:
    """The planner's certified plan for this task (computed when the problem carries none)."""
    if self.problem.plan:
      return list(self.problem.plan)
    return list(make_plan(self.problem, self.max_turns) or [])

  @property
  def state_key(self) -> str:
    return state_digest(self._state)

  @property
  def initial_state_key(self) -> str:
    return state_digest(initial_state(self.problem))

  @property
  def won(self) -> bool:
    return self._won

  # -- text protocol --------------------------------------------------------------------------------------
  def system_prompt(self) -> str:
    return _SYSTEM.format(max_turns=self.max_turns)

  def _observation(self, text: str) -> str:
    commands = "\n".join(f"- {c}" for c in self.admissible_commands())
    return f"{text}\n\n{ADMISSIBLE_HEADER}\n{commands}\n\nTurn {self._turns + 1}/{self.max_turns}"

  def reset(self) -> tuple[str, str]:
    self._begin()
    return self.system_prompt(), self._observation(self.initial_observation)

  def step(self, action_text: str) -> StepResult:
    if self._done:
      return StepResult("", 0.0, True, self._info(self._last_feedback, False, False, None))
    self._turns += 1
    cmd = parse_action(action_text)
    if cmd is None:
      feedback, format_error, invalid = FORMAT_FEEDBACK, True, False
      self._last_feedback = feedback
    else:
      res = self.step_command(cmd)
      feedback, format_error, invalid = res.feedback, False, not res.valid
    self._done = self._won or self._turns >= self.max_turns
    raw = 1.0 if self._won else 0.0
    if self._done:
      obs = f"{feedback}\n\n{WON_SUFFIX if self._won else LOST_SUFFIX}"
    else:
      obs = self._observation(feedback)
    return StepResult(obs, raw, self._done, self._info(feedback, format_error, invalid, cmd))

  def _info(self, feedback: str, format_error: bool, invalid: bool, cmd: str | None) -> dict[str, Any]:
    raw = 1.0 if self._won else 0.0
    return {"feedback": feedback, "format_error": format_error, "invalid": invalid, "won": self._won,
            "success": self._won, "raw_reward": raw, "state_key": self.state_key,
            "admissible": self.admissible_commands(), "command": cmd, "turn": self._turns,
            "family": self.task_family}


@functools.lru_cache(maxsize=2048)
def _problem(cfg: HouseholdConfig, pack_seed: int, task_seed: int) -> Problem:
  return sample_problem(cfg, sample_house(cfg, pack_seed), task_seed)


class HouseholdFamily(EnvFamily):
  """``alfworld_synth`` with fixed parameters: a pack is one house, each task a goal in it."""

  name = "alfworld_synth"

  def __init__(self, cfg: HouseholdConfig):
    self.cfg = cfg

  def problem(self, pack_seed: int, task_seed: int) -> Problem:
    """The certified problem of one task (a pure function of the seeds)."""
    return _problem(self.cfg, int(pack_seed), int(task_seed))

  def sample_pack(self, pack_seed: int, num_tasks: int, task_seeds: Sequence[int] | None = None) -> list[TaskEnv]:
    pack_seed, seeds = pack_args(pack_seed, num_tasks, task_seeds)
    return [HouseholdTask(self.cfg, self.problem(pack_seed, s)) for s in seeds]


def build_config(preset: str = "train", **overrides: Any) -> HouseholdConfig:
  """The named preset (presets.py) with field overrides, validated (ValueError on bad parameters)."""
  return config_from_preset(HouseholdConfig, PRESETS, preset, overrides, env="alfworld_synth")


@register("alfworld_synth")
def make_household(preset: str = "train", **overrides: Any) -> HouseholdFamily:
  """The family; ImportError (with the install hint) when ``alfworld`` is missing."""
  vocabulary()
  return HouseholdFamily(build_config(preset, **overrides))
