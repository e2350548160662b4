"""Deterministic train/test task-seed lists (the CoD paper's 50,000 / 4,000 split, Appendix B Table 2 caption).

``np.random.RandomState(seed).choice(10_000_000, n_train + n_test, replace=False)``: the first ``n_train``
unique seeds are the train split, the rest the test split (50,000 / 4,000 by default, seed 42). A dataset
row is a task seed; environments derive every per-task parameter from it. The published data generators
(Trinity-RFT ``examples/research_cod/get_*_data.py``) also draw seeds with numpy seed 42 but store
some per-task parameters in the rows; codjax draws those from the task seed instead (docs/methods/cod.md).
"""

from __future__ import annotations

import functools

import numpy as np

SEED_RANGE = 10_000_000


@functools.lru_cache(maxsize=8)
def _splits(n_train: int, n_test: int, seed: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
  seeds = np.random.RandomState(seed).choice(SEED_RANGE, n_train + n_test, replace=False)
  return tuple(seeds[:n_train].tolist()), tuple(seeds[n_train:].tolist())


def seed_splits(n_train: int = 50_000, n_test: int = 4_000, seed: int = 42) -> tuple[list[int], list[int]]:
  """Disjoint train/test task seeds (module docstring)."""
  if n_train < 0 or n_test < 0 or n_train + n_test > SEED_RANGE:
    raise ValueError(f"need 0 <= n_train + n_test <= {SEED_RANGE}, got {n_train} + {n_test}")
  train, test = _splits(int(n_train), int(n_test), int(seed))
  return list(train), list(test)
