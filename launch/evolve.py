"""Grows verified difficulty lineages from seed environments (Environment Evolution paper, arXiv 2609.04128,
Sec. 4.1; docs/methods/environment_evolution.md).

  python launch/evolve.py --env=maze --lineages=10 --out=lineages/maze                  # high effort, 3 directions
  python launch/evolve.py --env=maze --lineages=10 --directions=length --effort=low --out=lineages/maze_len_low
  python launch/evolve.py --env=alfworld_synth --lineages=4 --generations=6 --width=2 --out=lineages/alf
  python launch/evolve.py --env=terminal_simulator --evolver=llm --model=runs/x/hf --lineages=2 --out=lineages/term

Lineage i is ``<env>-<i:03d>``; its seed environment is the parameterisation's seed ``i`` with instance seed
``derive_seed(seed, i, attempt)``, the first attempt whose seed environment passes the three verifiers
(``--seed_tries`` at most; a lineage whose seed never passes is reported and skipped). Each lineage is one JSON
Lines file in ``--out`` (``codjax.evolve.lineage``), appended as nodes are accepted, so an interrupted run
resumes where it stopped when started again with the same flags (finished lineages are read, not redone).
The evolver is ``procedural`` (direction edits on the pair sequence) or ``llm`` (TerminalSimulator tasks
written by a language model through the JAX sampler from ``--model``, an HF checkpoint directory; or an
OpenAI-compatible server at ``--server_url``). A progress bar counts generations over all lineages. Prints one
line per lineage (generations, difficulty of the seed and the last head, why it stopped) and writes
``summary.json``.
"""

from __future__ import annotations

import json
import os
import time

from absl import app
from absl import flags

from codjax.common import cli
from codjax.common.metrics import Progress
from codjax.envs.base import derive_seed
from codjax.evolve import registry
from codjax.evolve.base import DIRECTIONS, EFFORTS, MAX_GENERATIONS
from codjax.evolve.evolution import EvolveSettings, grow, lineage_id_seed, seed_node
from codjax.evolve.lineage import lineage_path, load_lineage

_ENV = flags.DEFINE_string("env", "maze", "Evolvable environment (codjax.evolve.registry).")
_LINEAGES = flags.DEFINE_integer("lineages", 10, "How many lineages (seed environments).")
_FIRST = flags.DEFINE_integer("first", 0, "Index of the first seed environment.")
_OUT = flags.DEFINE_string("out", None, "Directory of the lineage files.", required=True)
_EFFORT = flags.DEFINE_enum("effort", "high", list(EFFORTS), "Evolution effort (paper default, Sec. 5.2: high).")
_DIRECTIONS = flags.DEFINE_list("directions", list(DIRECTIONS), "Allowed directions (one: a fixed-direction run).")
_GENERATIONS = flags.DEFINE_integer("generations", MAX_GENERATIONS, "Generation cap (at most 15).")
_WIDTH = flags.DEFINE_integer("width", 1, "Environments accepted per generation.")
_REPAIR = flags.DEFINE_integer("repair_budget", 3, "Attempts per direction before falling back to the next.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the instance seeds and of every random choice.")
_SEED_TRIES = flags.DEFINE_integer("seed_tries", 8, "Instance seeds tried per seed environment.")
_EVOLVER = flags.DEFINE_enum("evolver", "procedural", ["procedural", "llm"], "Who proposes candidates.")
_MODEL = flags.DEFINE_string("model", "", "llm evolver: HF checkpoint directory served by the JAX sampler.")
_SERVER = flags.DEFINE_string("server_url", "", "llm evolver: an OpenAI-compatible server instead of --model.")
_SERVER_MODEL = flags.DEFINE_string("server_model", "", "llm evolver: the model name the server expects.")
_MAX_TOKENS = flags.DEFINE_integer("max_tokens", 1024, "llm evolver: tokens per reply.")
_RUBRICS = flags.DEFINE_string("rubrics", "", "llm evolver: rubric bank file (default: <out>/rubrics.json).")


def find_root(param, lineage_id: str, index: int, seed: int, tries: int):
  """The first instance seed of seed environment ``index`` that passes the verifiers (None if none)."""
  for attempt in range(tries):
    point = param.seed_point(index, derive_seed(seed, index, attempt))
    if seed_node(param, lineage_id, point, verify_seed=lineage_id_seed(lineage_id)) is not None:
      return point
  return None


def make_evolver(kind: str, param, out: str):
  """The evolver of ``--evolver`` (the LLM one with its engine and rubric bank)."""
  if kind == "procedural":
    return None  # evolution.ProceduralEvolver
  from codjax.evolve.llm.engines import make_generate
  from codjax.evolve.llm.evolver import LineageEvolver, LLMEvolver
  from codjax.evolve.llm.rubrics import RubricBank

  generate = make_generate(model_path=_MODEL.value, server_url=_SERVER.value, server_model=_SERVER_MODEL.value,
                           max_tokens=_MAX_TOKENS.value, seed=_SEED.value)
  bank = RubricBank(_RUBRICS.value or os.path.join(out, "rubrics.json"))
  return LineageEvolver(LLMEvolver(generate, bank, repair_budget=_REPAIR.value, seed=_SEED.value, param=param))


def main(argv):
  del argv
  param = registry.get(_ENV.value)
  settings = EvolveSettings(generations=_GENERATIONS.value, width=_WIDTH.value, effort=_EFFORT.value,
                            directions=tuple(_DIRECTIONS.value), repair_budget=_REPAIR.value, seed=_SEED.value)
  out = _OUT.value
  os.makedirs(out, exist_ok=True)
  if _EVOLVER.value == "llm" and param.name != "terminal_simulator":
    raise app.UsageError("--evolver=llm writes TerminalSimulator tasks: use it with --env=terminal_simulator")
  evolver = make_evolver(_EVOLVER.value, param, out)
  ids = [f"{param.name}-{i:03d}" for i in range(_FIRST.value, _FIRST.value + _LINEAGES.value)]
  bar = Progress(len(ids) * settings.generations, desc=f"evolve {param.name}", unit="gen")
  summary, start = {}, time.time()
  try:
    for i, lid in zip(range(_FIRST.value, _FIRST.value + _LINEAGES.value), ids):
      path = lineage_path(out, lid)
      root = load_lineage(path).generations[0][0].point if os.path.isfile(path) and os.path.getsize(path) else \
          find_root(param, lid, i, _SEED.value, _SEED_TRIES.value)
      if root is None:
        print(f"{lid}: no seed environment passed the verifiers in {_SEED_TRIES.value} instance seeds; skipped",
              flush=True)
        summary[lid] = {"skipped": True}
        bar.update({}, n=settings.generations)
        continue
      done = [0]

      def tick(lin, done=done):
        g = lin.head.generation
        bar.update({"gen": g}, keys=("gen",), n=max(0, (settings.generations if lin.end else g) - done[0]))
        done[0] = settings.generations if lin.end else g

      lin = grow(param, out, lid, root, settings, evolver=evolver, on_generation=tick)
      heads = [gen[0] for gen in lin.generations]
      summary[lid] = {"generations": len(lin.generations) - 1, "environments": len(lin.nodes),
                      "difficulty": [h.difficulty for h in heads], "oracle_turns": [h.oracle_turns for h in heads],
                      "directions": [h.direction for h in heads[1:]], "end": lin.end}
      print(f"{lid}: {len(lin.generations) - 1} generations, {len(lin.nodes)} environments, difficulty "
            f"{heads[0].difficulty:.2f} -> {heads[-1].difficulty:.2f}, oracle turns {heads[0].oracle_turns} -> "
            f"{heads[-1].oracle_turns}; {lin.end}", flush=True)
  finally:
    bar.close()
  with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump({"env": param.name, "settings": {"effort": settings.effort, "directions": settings.directions,
                                                "generations": settings.generations, "width": settings.width,
                                                "repair_budget": settings.repair_budget, "seed": settings.seed,
                                                "evolver": _EVOLVER.value},
               "lineages": summary, "seconds": time.time() - start}, f, indent=1)


if __name__ == "__main__":
  cli.run(main)
