"""Scripted experts and random baselines, behind one text-policy interface.

A ``TextPolicy`` answers a chat conversation with the assistant's next message, exactly like a language
model would: ``respond(messages, rng) -> str``. ``messages`` is ``[{"role": "system"|"user"|"assistant",
"content": str}, ...]``. Solve episodes are ``[system, user, assistant, user, ...]`` (the hint, if any, is
inside the system prompt, see ``cod_protocol.augment_system_prompt``); update-context episodes are
``[system, user]`` whose user turn starts with ``cod_protocol.PREV_HINTS_HEADER``
(``cod_protocol.is_update_prompt``). Experts act only through this text (they parse observations, never the
environment's hidden state) and are stateless across calls: everything they know comes from the messages.

``make_policy(env_name, kind)`` returns the environment's ``"expert"`` or ``"random"`` policy.
"""

from __future__ import annotations

import abc
import importlib
import inspect
import random
from typing import Any

# env name -> (module, expert class, random class); each module (an environment package's expert.py, or a
# game's oracle) defines both classes.
_POLICIES: dict[str, tuple[str, str, str]] = {
    "frozenlake_obscure": ("codjax.envs.frozenlake.expert", "FrozenLakeExpert", "FrozenLakeRandom"),
    "alchemy_random": ("codjax.envs.alchemy.expert", "AlchemyExpert", "AlchemyRandom"),
    "terminal_simulator": ("codjax.envs.terminal.expert", "TerminalExpert", "TerminalRandom"),
    "pde_discovery": ("codjax.envs.pde.expert", "PdeExpert", "PdeRandom"),
    "optimal_control": ("codjax.envs.optimal_control.expert", "ControlExpert", "ControlRandom"),
    "grid_navigation": ("codjax.envs.grid_navigation.expert", "GridExpert", "GridRandom"),
    "alfworld_synth": ("codjax.envs.household.expert", "HouseholdExpert", "HouseholdRandom"),
    **{game: (f"codjax.envs.games.oracles.{game}", "Expert", "Random")
       for game in ("rps", "minesweeper", "hangman", "wordle", "blackjack", "maze", "mastermind")},
}


class TextPolicy(abc.ABC):
  """A policy over chat messages (see module docstring)."""

  @abc.abstractmethod
  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    """The next assistant message for this conversation."""


def register_policies(env_name: str, module: str, expert_cls: str, random_cls: str) -> None:
  """Registers an environment's expert and random policy classes (used by companion packages)."""
  _POLICIES[env_name] = (module, expert_cls, random_cls)


def make_policy(env_name: str, kind: str = "expert", **params: Any) -> TextPolicy:
  """``kind`` is ``"expert"`` or ``"random"``; ``params`` go to the policy constructor."""
  if env_name not in _POLICIES:
    raise ValueError(f"no scripted policies for environment {env_name!r}; known: {sorted(_POLICIES)}")
  if kind not in ("expert", "random"):
    raise ValueError(f"policy kind must be 'expert' or 'random', got {kind!r}")
  module, expert_cls, random_cls = _POLICIES[env_name]
  mod = importlib.import_module(module)
  return getattr(mod, expert_cls if kind == "expert" else random_cls)(**params)


class MixedPolicy(TextPolicy):
  """Answers solve turns with ``other`` with probability ``frac`` (else ``base``); update-context
  episodes always with ``base``. Used to build SFT transcripts with headroom for RL (an expert whose
  actions are partly random)."""

  def __init__(self, base: TextPolicy, other: TextPolicy, frac: float):
    if not 0.0 <= frac <= 1.0:
      raise ValueError(f"frac must be in [0, 1], got {frac}")
    self.base, self.other, self.frac = base, other, frac

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    from codjax.envs.cod_protocol import is_update_prompt

    if not is_update_prompt(messages) and rng.random() < self.frac:
      return self.other.respond(messages, rng)
    return self.base.respond(messages, rng)


def make_teacher(env_name: str, random_frac: float = 0.0, **params: Any) -> TextPolicy:
  """The environment's expert (constructed with ``params``, e.g. ``sft.teacher_params``; those the random
  player's constructor also takes go to it as well), with ``random_frac`` of its solve turns answered by the
  random policy (the SFT teacher of ``sft.expert_random_frac``; 0 = the
  plain expert)."""
  expert = make_policy(env_name, "expert", **params)
  if random_frac <= 0:
    return expert
  # parameters the random player takes too (a reply format both share, e.g. the Maze players' note_position)
  module, _, random_cls = _POLICIES[env_name]
  accepts = inspect.signature(getattr(importlib.import_module(module), random_cls)).parameters
  shared = {k: v for k, v in params.items() if k in accepts}
  return MixedPolicy(expert, make_policy(env_name, "random", **shared), float(random_frac))
