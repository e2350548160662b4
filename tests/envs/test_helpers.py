"""The environments' shared helpers, and the one package shape every environment has."""

import dataclasses
import importlib
import pathlib

import numpy as np
import pytest

import codjax.envs
from codjax.envs import make, registry
from codjax.envs.base import derive_seed
from codjax.envs.experts import _POLICIES
from codjax.envs.helpers import (check_bool, check_int, check_prob, check_seed, config_from_preset, first_positions,
                                 pack_args, split_trajectory)


def test_checks_accept_and_reject():
  check_int("n", 3, 1)
  check_int("n", 3, 1, 3)
  for bad in (0, 4, True, 2.0, "3"):
    with pytest.raises(ValueError, match="n must be an integer in \\[1, 3\\]"):
      check_int("n", bad, 1, 3)
  check_bool("b", False)
  with pytest.raises(ValueError, match="b must be a bool"):
    check_bool("b", 1)
  check_prob("p", 0.0)
  check_prob("p", 1)
  for bad, low_open in ((0.0, True), (1.5, False), (-0.1, False), (True, False)):
    with pytest.raises(ValueError, match="p must be a number in"):
      check_prob("p", bad, low_open)
  assert check_seed(np.int64(7), "s") == 7 and type(check_seed(np.int64(7), "s")) is int
  for bad in (-1, 1.0, True, None):
    with pytest.raises(ValueError, match="s must be a non-negative integer"):
      check_seed(bad, "s")


def test_pack_args():
  assert pack_args(5, 3, None) == (5, [derive_seed(5, 0), derive_seed(5, 1), derive_seed(5, 2)])
  assert pack_args(5, 2, None, salt=(7,)) == (5, [derive_seed(5, 7, 0), derive_seed(5, 7, 1)])
  seed, seeds = pack_args(np.int64(5), 2, [np.int64(9), 9])
  assert (seed, seeds) == (5, [9, 9]) and all(type(s) is int for s in [seed, *seeds])
  with pytest.raises(ValueError, match="got 1 task_seeds for num_tasks=2"):
    pack_args(5, 2, [1])
  with pytest.raises(ValueError, match="num_tasks"):
    pack_args(5, 0, None)
  with pytest.raises(ValueError, match="pack_seed"):
    pack_args(-5, 1, None)
  with pytest.raises(ValueError, match="task seeds"):
    pack_args(5, 1, [-1])


def test_first_positions():
  assert first_positions([4, 5, 6]) == [0, 1, 2]  # cod: distinct tasks
  assert first_positions([4, 4, 4]) == [0, 0, 0]  # Ralph: one task repeated
  assert first_positions([4, 5, 4, 5]) == [0, 1, 0, 1]


@dataclasses.dataclass(frozen=True)
class _Cfg:
  a: int = 1
  b: int = 2


def test_config_from_preset():
  presets = {"small": dict(a=3), "big": dict(a=9, b=9)}
  assert config_from_preset(_Cfg, presets, "small", {}) == _Cfg(3, 2)
  assert config_from_preset(_Cfg, presets, "big", {"b": 0}) == _Cfg(9, 0)  # overrides win over the preset
  with pytest.raises(ValueError, match=r"unknown preset 'huge' for toy; known: \['big', 'small'\]"):
    config_from_preset(_Cfg, presets, "huge", {}, env="toy")
  with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['c'\] for toy; known: \['a', 'b'\]"):
    config_from_preset(_Cfg, presets, "small", {"c": 1}, env="toy")


def test_every_environment_reports_unknown_presets_and_parameters_alike():
  for name in registry.names():
    with pytest.raises(ValueError, match=f"unknown preset 'nope' for {name}"):
      make(name, preset="nope")
    with pytest.raises(ValueError, match=f"unknown parameter\\(s\\) \\['nope'\\] for {name}"):
      make(name, nope=1)


def test_split_trajectory():
  text = "System:\nrules\n\nStep 1:\nObservation: a\nb\nAction: x\n\nStep 2:\nObservation: c\nAction: y\nz"
  assert split_trajectory(text) == (["a\nb", "c"], ["x", "y\nz"])
  assert split_trajectory("System:\nonly rules") == ([], [])


def test_every_environment_is_a_package_of_one_shape():
  """Each registry name (games aside) is served by a package holding env.py, presets.py and expert.py, whose
  expert module is the one ``make_policy`` loads and whose presets are the ones ``make`` accepts."""
  root = pathlib.Path(codjax.envs.__file__).parent
  games = set(importlib.import_module("codjax.envs.games").GAMES)
  packages = set()
  for name in sorted(set(registry._LAZY) - games):
    package = registry._LAZY[name]
    packages.add(package.rsplit(".", 1)[1])
    for part in ("env", "presets", "expert"):
      assert (root / package.rsplit(".", 1)[1] / f"{part}.py").is_file(), (name, part)
    assert _POLICIES[name][0] == f"{package}.expert"
    presets = importlib.import_module(f"{package}.presets").PRESETS
    for preset in presets:
      assert make(name, preset=preset).name == name
  assert packages == {"frozenlake", "alchemy", "terminal", "pde", "optimal_control", "grid_navigation", "household"}
  # beside the packages only the shared modules live at the top of envs/
  flat = {p.stem for p in root.glob("*.py")}
  assert flat == {"__init__", "base", "registry", "experts", "cod_protocol", "safe_expr", "datasets", "helpers"}
