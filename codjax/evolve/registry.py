"""Evolvable environments by name: ``codjax.evolve.registry.get(name) -> Parameterisation``.

Each parameterisation module registers its classes on import; the table below names the module of each, so
looking one up imports only what it needs.
"""

from __future__ import annotations

import importlib

from codjax.evolve.base import Parameterisation

_PARAMS: dict[str, type[Parameterisation]] = {}
_INSTANCES: dict[str, Parameterisation] = {}  # one shared instance per name (see ``get``)
_LAZY: dict[str, str] = {
    **{game: "codjax.evolve.params.games" for game in
       ("rps", "minesweeper", "hangman", "wordle", "blackjack", "maze", "maze_compact", "mastermind")},
    "frozenlake_obscure": "codjax.evolve.params.frozenlake",
    "alchemy_random": "codjax.evolve.params.alchemy",
    "alfworld_synth": "codjax.evolve.params.household",
    "terminal_simulator": "codjax.evolve.params.terminal",
}


def register(cls: type[Parameterisation]) -> type[Parameterisation]:
  """Class decorator: adds a parameterisation under its ``name``."""
  if not cls.name:
    raise ValueError(f"{cls.__name__} has no name")
  _PARAMS[cls.name] = cls
  return cls


def get(name: str) -> Parameterisation:
  """The parameterisation ``name`` (ValueError naming the known ones otherwise). One instance per name is
  shared by every caller, so what an instance remembers about the tasks it built (TerminalSimulator's oracle
  scripts by prompt) is seen by the verifiers, the trainer's task source and the difficulty measurement alike."""
  if name not in _PARAMS and name in _LAZY:
    importlib.import_module(_LAZY[name])
  if name not in _PARAMS:
    raise ValueError(f"unknown evolvable environment {name!r}; known: {names()}")
  if not isinstance(_INSTANCES.get(name), _PARAMS[name]):
    _INSTANCES[name] = _PARAMS[name]()
  return _INSTANCES[name]


def names() -> list[str]:
  return sorted(set(_PARAMS) | set(_LAZY))
