"""Writes the train/test task-seed lists of the CoD environments (``codjax.envs.datasets.seed_splits``).

50,000 / 4,000 unique seeds by default (seed 42, as the reference's Alchemy and Terminal generators). A row is
just the task seed: FrozenLake draws its side and frozen-tile probability from it (``codjax.envs.frozenlake``),
Alchemy and Terminal build everything from it. One JSON file per environment:
``{"env", "seed", "train": [...], "test": [...]}`` (``launch/expert_eval.py --seeds_file`` reads it).

  python launch/make_datasets.py --out_dir=data/cod
"""

from __future__ import annotations

import json
import os

from absl import flags

from codjax.common import cli
from codjax.envs.datasets import seed_splits

_OUT_DIR = flags.DEFINE_string("out_dir", "data/cod", "Output directory.")
_ENVS = flags.DEFINE_list("envs", ["frozenlake_obscure", "alchemy_random", "terminal_simulator"],
                          "Environments to write.")
_N_TRAIN = flags.DEFINE_integer("n_train", 50_000, "Train seeds per environment.")
_N_TEST = flags.DEFINE_integer("n_test", 4_000, "Test seeds per environment.")
_SEED = flags.DEFINE_integer("seed", 42, "NumPy seed of the draw.")


def main(argv):
  del argv
  train, test = seed_splits(_N_TRAIN.value, _N_TEST.value, _SEED.value)
  os.makedirs(_OUT_DIR.value, exist_ok=True)
  for env in _ENVS.value:
    path = os.path.join(_OUT_DIR.value, f"{env}.json")
    with open(path, "w") as f:
      json.dump({"env": env, "seed": _SEED.value, "train": train, "test": test}, f)
    print(f"{path}: {len(train)} train / {len(test)} test seeds")


if __name__ == "__main__":
  cli.run(main)
