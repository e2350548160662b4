"""Scripted-policy CoD evaluation: mean solve reward per pack position, with standard errors.

Runs the CoD pack loop (``codjax.agents.cod.run_text_packs``: solve x0 with ``Hints: null``, update, solve x1,
...) with an environment's scripted expert or random baseline and prints the per-position table. Works for
every environment that ``codjax.envs.make`` knows and that has registered policies (``codjax.envs.experts``).

  python launch/expert_eval.py --env=frozenlake_obscure --preset=train --policy=expert --packs=500 --pack_size=4
  python launch/expert_eval.py --env=alchemy_random --preset=hard --no_hints --out=/tmp/alchemy_hard.json
  python launch/expert_eval.py --env=maze --params.max_turns=12   # environment parameters

``--no_hints`` disables the context: no update episodes and no hint section in any system prompt, so every
task is solved from scratch. ``--seeds_file`` (a ``launch/make_datasets.py`` output) takes the task seeds of
each pack from a dataset split instead of deriving them from the pack seed. Environment parameters are
ml_collections config overrides, ``--params.<name>=<value>`` (a Python literal, else a string), the mechanism
of the other launchers' ``--config.a.b=value``; the environment rejects names it does not know. Standard
errors are ``codjax.workflows.stats.mean_se`` over packs.
"""

from __future__ import annotations

import json
import time

from absl import flags
import ml_collections
from ml_collections import config_flags
import numpy as np

from codjax.common import cli
from codjax.agents.cod import run_text_packs
from codjax.common.metrics import Progress
from codjax.envs import derive_seed, make
from codjax.envs.experts import make_policy
from codjax.workflows.stats import mean_se

_ENV = flags.DEFINE_string("env", None, "Registered environment name.", required=True)
_PRESET = flags.DEFINE_string("preset", None, "Environment preset (omit to use the environment's default).")
_PARAMS = config_flags.DEFINE_config_dict("params", ml_collections.ConfigDict(),
                                          "Environment parameters: --params.<name>=<Python literal>.",
                                          lock_config=False, accept_new_attributes=True)
_POLICY = flags.DEFINE_enum("policy", "expert", ["expert", "random"], "Scripted policy.")
_PACKS = flags.DEFINE_integer("packs", 500, "Number of packs.")
_PACK_SIZE = flags.DEFINE_integer("pack_size", 4, "Tasks per pack (S).")
_NO_HINTS = flags.DEFINE_boolean("no_hints", False, "Solve every task without any hint section.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the pack seeds and of the policy's random choices.")
_SEEDS_FILE = flags.DEFINE_string("seeds_file", None, "Dataset JSON from make_datasets.py (task seeds).")
_SPLIT = flags.DEFINE_enum("split", "test", ["train", "test"], "Split of --seeds_file.")
_OUT = flags.DEFINE_string("out", None, "Write the results as JSON here.")


def pack_plan(num_packs: int, pack_size: int, seed: int, seeds_file: str | None, split: str
              ) -> tuple[list[int], list[list[int]] | None]:
  """Pack seeds and (when a dataset is given) the task seeds of each pack."""
  if seeds_file is None:
    return [derive_seed(seed, k) for k in range(num_packs)], None
  with open(seeds_file) as f:
    rows = json.load(f)[split]
  need = num_packs * pack_size
  if len(rows) < need:
    raise ValueError(f"{seeds_file}:{split} has {len(rows)} seeds, {need} needed")
  task_seeds = [rows[k * pack_size:(k + 1) * pack_size] for k in range(num_packs)]
  return [derive_seed(seed, *ts) for ts in task_seeds], task_seeds


def summarize(rewards: np.ndarray) -> dict:
  """Per-position mean, standard error and the last-minus-first gap (paired over packs)."""
  mean, se = mean_se(rewards)
  gap, gap_se = mean_se(rewards[:, -1] - rewards[:, 0])
  return {"mean": mean.tolist(), "se": se.tolist(), "n": int(rewards.shape[0]), "gap": gap, "gap_se": gap_se}


def main(argv):
  del argv
  params = _PARAMS.value.to_dict()
  if _PRESET.value is not None:
    params["preset"] = _PRESET.value
  family = make(_ENV.value, **params)
  policy = make_policy(_ENV.value, _POLICY.value)
  pack_seeds, task_seeds = pack_plan(_PACKS.value, _PACK_SIZE.value, _SEED.value, _SEEDS_FILE.value, _SPLIT.value)
  t0 = time.perf_counter()
  bar = Progress(len(pack_seeds), desc=f"{_ENV.value} {_POLICY.value}", unit="pack")
  try:
    trajs = run_text_packs(policy, family, pack_seeds, _PACK_SIZE.value, env_name=_ENV.value,
                           use_hints=not _NO_HINTS.value, seed=_SEED.value, task_seeds=task_seeds,
                           on_done=lambda j, t: bar.update({}))
  finally:
    bar.close()
  wall = time.perf_counter() - t0
  rewards = np.stack([t.task_rewards for t in trajs])
  fmt_err = np.array([[e.format_error for e in t.solve_episodes] for t in trajs], np.float64).mean(axis=0)
  res = summarize(rewards)
  parse_ok = [ok for t in trajs for ok in t.hint_parse_ok]
  res.update(env=_ENV.value, params=params, policy=_POLICY.value, pack_size=_PACK_SIZE.value,
             hints=not _NO_HINTS.value, seed=_SEED.value, format_error=fmt_err.tolist(), wall_s=wall,
             hint_parse_rate=float(np.mean(parse_ok)) if parse_ok else None,
             rewards=rewards.tolist())  # per pack and position, for paired comparisons between runs
  print(f"{_ENV.value} {params} policy={_POLICY.value} hints={'on' if res['hints'] else 'off'} "
        f"packs={res['n']} S={_PACK_SIZE.value} ({wall:.1f}s)")
  print("pos   mean    s.e.   fmt_err")
  for i, (m, s, fe) in enumerate(zip(res["mean"], res["se"], res["format_error"])):
    print(f"{i:<5} {m:.3f}  {s:.3f}  {fe:.3f}")
  print(f"pos{_PACK_SIZE.value - 1} - pos0: {res['gap']:+.3f} ± {res['gap_se']:.3f}")
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump(res, f, indent=1)


if __name__ == "__main__":
  cli.run(main)
