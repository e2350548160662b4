"""Environment Evolution paper (arXiv 2609.04128) Figure 3 / Table 1 for every evolvable environment: difficulty
per generation, per direction and effort (docs/methods/environment_evolution.md).

  python benchmarks/evolution_difficulty.py --lineages=10 --generations=8 --out=/tmp/evo_fig3
  python benchmarks/evolution_difficulty.py --envs=maze,wordle --settings=length:high,all:max --lineages=4

For each environment family and each setting ``directions:effort`` (``scenario:high``, ``skill:high`` and
``length:high`` are the per-direction study of Table 1; ``all:low|high|max`` the effort study of Figure 3,
with the three directions in random order and fallback), ``--lineages`` lineages are grown from the seed
environments (``codjax.evolve.evolution.grow``, files under ``--out``, resumable) and every generation's
head is played ``--rollouts`` = B times by the fixed reference agents (the scripted expert and the seeded
random policy; ``codjax.evolve.difficulty``). Prints one row per (environment, setting): lineages, mean
generations reached, the expert's and the random policy's pass rate at generation 0 and at the last
generation reached by at least half the lineages, the expert's turns there, the one-step and mean
per-generation change of the expert's pass rate and turns (Table 1), and the instruction / environment
mutation rates. ``--out/results.json`` holds every per-generation row.
"""

from __future__ import annotations

import json
import os
import time

from absl import app
from absl import flags

from codjax.agents.episode import PolicyBackend
from codjax.common.metrics import Progress
from codjax.envs.base import derive_seed
from codjax.envs.experts import make_policy
from codjax.evolve import registry
from codjax.evolve.base import DIRECTIONS
from codjax.evolve.difficulty import deltas, measure_lineages
from codjax.evolve.evolution import EvolveSettings, grow, lineage_id_seed, seed_node

ALL_ENVS = ("maze", "mastermind", "minesweeper", "hangman", "wordle", "blackjack", "rps", "frozenlake_obscure",
            "alchemy_random", "alfworld_synth", "terminal_simulator")
SETTINGS = ("scenario:high", "skill:high", "length:high", "all:low", "all:high", "all:max")

_ENVS = flags.DEFINE_list("envs", list(ALL_ENVS), "Evolvable environments.")
_SETTINGS = flags.DEFINE_list("settings", list(SETTINGS), "directions:effort (directions 'all' = the three).")
_LINEAGES = flags.DEFINE_integer("lineages", 10, "Lineages per environment and setting.")
_GENERATIONS = flags.DEFINE_integer("generations", 8, "Generation cap (paper Sec. 5.2: 15).")
_ROLLOUTS = flags.DEFINE_integer("rollouts", 8, "Rollouts per environment and agent (B).")
_SEED_TRIES = flags.DEFINE_integer("seed_tries", 8, "Instance seeds tried per seed environment.")
_OUT = flags.DEFINE_string("out", "/tmp/evolution_difficulty", "Lineage files and results.json.")


def roots(param, ids, tries):
  """The verified seed environment of each lineage id (None where no instance seed passes)."""
  out = []
  for i, lid in enumerate(ids):
    root = None
    for attempt in range(tries):
      point = param.seed_point(i, derive_seed(0, i, attempt))
      if seed_node(param, lid, point, verify_seed=lineage_id_seed(lid)) is not None:
        root = point
        break
    out.append(root)
  return out


def summarize(rows: list[dict], n_lineages: int) -> dict:
  last = max((r for r in rows if r["lineages"] >= max(1, n_lineages // 2)), key=lambda r: r["generation"])
  one_p, mean_p = deltas(rows, "expert/pass_rate")
  one_t, mean_t = deltas(rows, "expert/turns")
  muts = [r for r in rows if "mutation/instruction" in r]
  return {"g_last": last["generation"], "expert0": rows[0]["expert/pass_rate"],
          "random0": rows[0]["random/pass_rate"], "expert_last": last["expert/pass_rate"],
          "random_last": last["random/pass_rate"], "turns0": rows[0]["expert/turns"], "turns_last": last["expert/turns"],
          "d1_pass": one_p, "dmean_pass": mean_p, "d1_turns": one_t, "dmean_turns": mean_t,
          "mut_instr": sum(r["mutation/instruction"] for r in muts) / max(1, len(muts)),
          "mut_env": sum(r["mutation/environment"] for r in muts) / max(1, len(muts))}


def main(argv):
  del argv
  os.makedirs(_OUT.value, exist_ok=True)
  results = {}
  start = time.time()
  bar = Progress(len(_ENVS.value) * len(_SETTINGS.value), desc="evolution difficulty", unit="setting")
  print(f"{'env':20s} {'setting':14s} {'n':>3} {'gens':>5} {'g*':>3} {'expert g0->g*':>14} {'random g0->g*':>14} "
        f"{'turns g0->g*':>13} {'1-step dPass':>12} {'mean dPass':>10} {'1-step dTurn':>12} {'mean dTurn':>10} "
        f"{'instr%':>6} {'env%':>5}", flush=True)
  try:
    for env in _ENVS.value:
      param = registry.get(env)
      agents = {"expert": PolicyBackend(param.oracle(), 0),
                "random": PolicyBackend(make_policy(param.env_name, "random"), 0)}
      for setting in _SETTINGS.value:
        dirs, effort = setting.split(":")
        directions = DIRECTIONS if dirs == "all" else tuple(dirs.split("+"))
        settings = EvolveSettings(generations=_GENERATIONS.value, effort=effort, directions=directions, seed=0)
        out = os.path.join(_OUT.value, env, setting.replace(":", "_").replace("+", "-"))
        ids = [f"{env}-{i:03d}" for i in range(_LINEAGES.value)]
        lins = [grow(param, out, lid, root, settings) for lid, root in zip(ids, roots(param, ids, _SEED_TRIES.value))
                if root is not None]
        lins = [lin for lin in lins if lin is not None]
        rows = measure_lineages(lins, agents, _ROLLOUTS.value)
        s = summarize(rows, len(lins))
        gens = sum(len(lin.generations) - 1 for lin in lins) / max(1, len(lins))
        results.setdefault(env, {})[setting] = {"lineages": len(lins), "mean_generations": gens, "summary": s,
                                                "generations": rows}
        print(f"{env:20s} {setting:14s} {len(lins):>3} {gens:>5.1f} {s['g_last']:>3} "
              f"{s['expert0']:>6.2f}->{s['expert_last']:<6.2f} {s['random0']:>6.2f}->{s['random_last']:<6.2f} "
              f"{s['turns0']:>5.1f}->{s['turns_last']:<6.1f} {100 * s['d1_pass']:>+11.1f}p "
              f"{100 * s['dmean_pass']:>+9.1f}p {s['d1_turns']:>+12.1f} {s['dmean_turns']:>+10.2f} "
              f"{100 * s['mut_instr']:>6.0f} {100 * s['mut_env']:>5.0f}", flush=True)
        bar.update({})
  finally:
    bar.close()
    with open(os.path.join(_OUT.value, "results.json"), "w") as f:
      json.dump({"lineages": _LINEAGES.value, "generations": _GENERATIONS.value, "rollouts": _ROLLOUTS.value,
                 "results": results, "seconds": time.time() - start}, f, indent=1)
  print(f"({time.time() - start:.0f} s)")


if __name__ == "__main__":
  app.run(main)
