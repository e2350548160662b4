"""Small helpers shared by every environment package: argument checks, ``sample_pack`` arguments, the
preset-plus-overrides config builder, and the parser of rendered trajectories used by scripted experts.

Nothing here knows a particular environment; an environment package imports these instead of writing its own.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Sequence

import numpy as np

from codjax.envs.base import derive_seed

_STEP_BLOCK_RE = re.compile(r"(?:^|\n\n)Step \d+:\n")


def check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> None:
  """Raises ValueError unless ``value`` is an int (not a bool) in ``[minimum, maximum]`` (no upper bound when
  ``maximum`` is None)."""
  if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
      maximum is not None and value > maximum):
    bound = f"in [{minimum}, {maximum}]" if maximum is not None else f">= {minimum}"
    raise ValueError(f"{name} must be an integer {bound}, got {value!r}")


def check_bool(name: str, value: Any) -> None:
  """Raises ValueError unless ``value`` is a bool."""
  if not isinstance(value, bool):
    raise ValueError(f"{name} must be a bool, got {value!r}")


def check_prob(name: str, value: Any, low_open: bool = False) -> None:
  """Raises ValueError unless ``value`` is a number in [0, 1] (in (0, 1] with ``low_open``)."""
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
      (0.0 < value if low_open else 0.0 <= value) and value <= 1.0):
    raise ValueError(f"{name} must be a number in {'(' if low_open else '['}0, 1], got {value!r}")


def check_seed(value: Any, what: str) -> int:
  """``value`` as a plain int; ValueError unless it is a non-negative integer (Python or NumPy, not a bool)."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
    raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
  return int(value)


def pack_args(pack_seed: Any, num_tasks: Any, task_seeds: Sequence[int] | None,
              salt: Sequence[int] = ()) -> tuple[int, list[int]]:
  """Validated ``EnvFamily.sample_pack`` arguments as plain ints: the pack seed and the ``num_tasks`` task seeds.

  Without ``task_seeds`` task i gets ``derive_seed(pack_seed, *salt, i)``; given ones must be ``num_tasks``
  non-negative integers (Ralph packs repeat one seed).
  """
  pack_seed = check_seed(pack_seed, "pack_seed")
  check_int("num_tasks", num_tasks, 1)
  if task_seeds is None:
    return pack_seed, [derive_seed(pack_seed, *salt, i) for i in range(num_tasks)]
  seeds = [check_seed(s, "task seeds") for s in task_seeds]
  if len(seeds) != num_tasks:
    raise ValueError(f"got {len(seeds)} task_seeds for num_tasks={num_tasks}")
  return pack_seed, seeds


def first_positions(task_seeds: Sequence[int]) -> list[int]:
  """For each position, the 0-based position where its task seed first occurs in the pack.

  A cod pack of distinct seeds gives ``[0, 1, ..., S-1]``; a Ralph pack (one seed S times) gives ``[0] * S``:
  the environment's task index, fixed across the repeats of one task (as in agentscope-ai/Trinity-RFT
  ``connect_the_dots/cod_workflow.py``, whose Ralph modes set ``task_idx = env_task_idx``).
  """
  first: dict[int, int] = {}
  return [first.setdefault(int(s), i) for i, s in enumerate(task_seeds)]


def config_from_preset(cls: type, presets: Mapping[str, Mapping[str, Any]], preset: str, overrides: Mapping[str, Any],
                       env: str = "this environment"):
  """``cls(**presets[preset], **overrides)``: a named preset with field overrides (validation is ``cls``'s own).

  An unknown preset or an override that is not a field of ``cls`` raises ValueError naming ``env`` and the
  known choices.
  """
  if preset not in presets:
    raise ValueError(f"unknown preset {preset!r} for {env}; known: {sorted(presets)}")
  fields = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(overrides) - fields)
  if unknown:
    raise ValueError(f"unknown parameter(s) {unknown} for {env}; known: {sorted(fields)}")
  return cls(**{**presets[preset], **overrides})


def split_trajectory(trajectory: str) -> tuple[list[str], list[str]]:
  """Observations and actions of a rendered trajectory (``Step k:\\nObservation: ...\\nAction: ...`` blocks,
  ``TaskEnv.render_trajectory``), for experts that read the update-context prompt."""
  obs, acts = [], []
  for block in _STEP_BLOCK_RE.split(trajectory)[1:]:
    o, _, a = block.partition("\nAction: ")
    obs.append(o[len("Observation: "):] if o.startswith("Observation: ") else o)
    acts.append(a)
  return obs, acts
