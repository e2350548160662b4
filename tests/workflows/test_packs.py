"""The training pack stream (``codjax.workflows.packs.PackSampler``): each environment walks its training rows in a
fresh permutation per epoch, seeded by (seed, environment, epoch), and a restored sampler continues the stream."""

import numpy as np

from codjax.envs.base import derive_seed
from codjax.envs.datasets import seed_splits
from codjax.train.config import env_entry
from codjax.workflows.packs import PackSampler, env_specs

# labels sort as the specs' order: env 0 is frozenlake, env 1 maze
ENVS = {"a": env_entry("frozenlake_obscure", "tiny", 1.0), "b": env_entry("maze", proportion=2.0)}
NAMES = ("frozenlake_obscure", "maze")


def _sampler(seed=3):
  return PackSampler(env_specs(ENVS), 4, "cod", seed, n_train=10, n_test=2, split_seed=5)


def test_packs_walk_each_environments_rows_in_a_permutation_per_epoch():
  """30 packs of 4 tasks from 10 training rows: every environment wraps around its rows several times."""
  packs = _sampler().next_packs(30)
  train, _ = seed_splits(10, 2, 5)
  taken = {0: [], 1: []}
  for p in packs:
    taken[NAMES.index(p.env_name)].extend(p.task_seeds)
  assert len(taken[0]) > 10 and len(taken[1]) > 20  # both past their first epoch
  for env_idx, seeds in taken.items():
    want = []
    for epoch in range(-(-len(seeds) // 10)):
      perm = np.random.default_rng(derive_seed(3, env_idx, epoch)).permutation(10)
      want += [train[j] for j in perm]
    assert seeds == want[:len(seeds)], env_idx


def test_a_restored_sampler_continues_the_stream():
  full = _sampler()
  first = full.next_packs(7)
  rest = full.next_packs(20)
  other = _sampler()
  other.next_packs(2)  # a sampler that has already cached other epochs' orders
  other.restore({"k": 7, "cursors": [sum(len(p.task_seeds) for p in first if p.env_name == e) for e in NAMES]})
  again = other.next_packs(20)
  assert [(p.env_name, p.task_seeds, p.pack_id) for p in again] == [(p.env_name, p.task_seeds, p.pack_id)
                                                                        for p in rest]
