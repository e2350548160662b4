"""Registry of environment families: ``codjax.envs.make(name, **params)``."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from codjax.envs.base import EnvFamily

_FACTORIES: dict[str, Callable[..., EnvFamily]] = {}
# name -> module that registers it on import (keeps `import codjax.envs` cheap)
_LAZY: dict[str, str] = {
    "frozenlake_obscure": "codjax.envs.frozenlake",
    "alchemy_random": "codjax.envs.alchemy",
    "terminal_simulator": "codjax.envs.terminal",
    "pde_discovery": "codjax.envs.pde",
    "optimal_control": "codjax.envs.optimal_control",
    "grid_navigation": "codjax.envs.grid_navigation",
    "rps": "codjax.envs.games",
    "minesweeper": "codjax.envs.games",
    "hangman": "codjax.envs.games",
    "wordle": "codjax.envs.games",
    "blackjack": "codjax.envs.games",
    "maze": "codjax.envs.games",
    "mastermind": "codjax.envs.games",
    "alfworld_synth": "codjax.envs.household",
}


def register(name: str) -> Callable[[Callable[..., EnvFamily]], Callable[..., EnvFamily]]:
  """Decorator: ``@register("frozenlake_obscure")`` on a factory ``(**params) -> EnvFamily``."""

  def deco(factory):
    _FACTORIES[name] = factory
    return factory

  return deco


def make(name: str, **params: Any) -> EnvFamily:
  """Builds the named environment family; unknown names and bad parameters raise ``ValueError``."""
  if name not in _FACTORIES and name in _LAZY:
    importlib.import_module(_LAZY[name])
  if name not in _FACTORIES:
    raise ValueError(f"unknown environment {name!r}; known: {sorted(set(_FACTORIES) | set(_LAZY))}")
  return _FACTORIES[name](**params)


def names() -> list[str]:
  return sorted(set(_FACTORIES) | set(_LAZY))
