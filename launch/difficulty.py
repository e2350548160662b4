"""Difficulty along evolved lineages, measured with fixed reference agents (Environment Evolution paper,
arXiv 2609.04128, Sec. 5.2-5.3: Figure 3 and Table 1; docs/methods/environment_evolution.md).

  python launch/difficulty.py --runs=lineages/maze_scenario_high,lineages/maze_length_high --rollouts=8
  python launch/difficulty.py --runs=lineages/maze --agents=expert,random,model --model=runs/tiny/hf

Each ``--runs`` entry is a directory written by ``launch/evolve.py`` (its ``summary.json`` says which
directions and effort grew it). For every lineage and generation g the head environment (the environment the
next generation was evolved from) is played ``--rollouts`` = B times by each reference agent under ORBIT's
multi-episode protocol with as many episodes as the parameterisation's oracle may use (``oracle_episodes``;
one episode for single-task environments): ``codjax.agents.orbit.run_orbit``, the protocol of the trainer and
of ``launch/evaluate.py``. An environment is passed when any of its episodes is won. Reference agents are
fixed, never the policy being trained, so the measurement is off-policy:

* ``expert``: the environment's scripted expert (the oracle of the verifiers), ``random``: its seeded random
  policy, ``model``: a fixed checkpoint (``--model``, an HF directory) on the JAX sampler.

Prints, per run and generation: the number of lineages still alive at g, each agent's pass rate and mean
turns, and, like Table 1, the one-step change from generation 0 to 1 and the mean change per generation over
all generations, with the fraction of generations whose prompt text (instruction) and environment parameters
changed (mutation). ``--out`` writes every number as JSON. A progress bar counts environments played.
"""

from __future__ import annotations

import json
import time

from absl import app
from absl import flags
from codjax.common import cli
from codjax.agents.episode import PolicyBackend
from codjax.common.metrics import Progress
from codjax.envs.experts import make_policy
from codjax.evolve import registry
from codjax.evolve.difficulty import deltas, measure_run
from codjax.evolve.lineage import load_lineages
from codjax.rollout.jax_engine import KERNELS

_RUNS = flags.DEFINE_list("runs", None, "Lineage directories (launch/evolve.py --out).", required=True)
_AGENTS = flags.DEFINE_list("agents", ["expert", "random"], "Reference agents: expert, random, model.")
_ROLLOUTS = flags.DEFINE_integer("rollouts", 8, "Rollouts per environment (B).")
_MODEL = flags.DEFINE_string("model", "", "HF checkpoint directory of the fixed reference model.")
_MAX_TOKENS = flags.DEFINE_integer("max_tokens", 128, "Model agent: tokens per reply.")
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "Model agent: sampling temperature.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the agents' random choices.")
_OUT = flags.DEFINE_string("out", None, "Write the results as JSON here.")
_KERNELS = flags.DEFINE_enum("jax_kernels", "v1", list(KERNELS),
                             "Model agent: the JAX engine's kernels (codjax.rollout.jax_engine.KERNELS; v1, the "
                             "default, reproduces the figures recorded in benchmarks/README.md bit for bit).")


def model_backend(path: str, max_tokens: int, temperature: float, seed: int):
  """The JAX sampler serving a fixed checkpoint, as an episode backend."""
  from codjax.agents.token_backend import EngineBackend
  from codjax.models import from_pretrained
  from codjax.models.tokenizer import load_tokenizer
  from codjax.rollout.base import SamplingParams
  from codjax.rollout.jax_engine import JaxEngine

  model = from_pretrained(path, dtype="float32")
  engine = JaxEngine(model, max_slots=64, max_seq_len=4096, seed=seed, kernels=_KERNELS.value)
  params = SamplingParams(temperature=temperature, top_p=1.0, top_k=0, max_tokens=max_tokens)
  return EngineBackend(engine, load_tokenizer(path), params, max_prompt_tokens=4096 - max_tokens - 1,
                       seed=seed, seed_by="episode")


def main(argv):
  del argv
  agents = {}
  for name in _AGENTS.value:
    if name == "model":
      if not _MODEL.value:
        raise app.UsageError("--agents=model needs --model=<HF checkpoint dir>")
      agents[name] = model_backend(_MODEL.value, _MAX_TOKENS.value, _TEMPERATURE.value, _SEED.value)
    elif name in ("expert", "random"):
      agents[name] = None  # built per environment family below
    else:
      raise app.UsageError(f"unknown agent {name!r}: expert, random or model")
  results, start = {}, time.time()
  total = 0
  for run in _RUNS.value:
    lins = load_lineages(run)
    total += sum(len(lin.generations) for lin in lins) * len(agents)
  bar = Progress(total, desc="difficulty", unit="env")
  try:
    for run in _RUNS.value:
      fam = load_lineages(run)[0].generations[0][0].point.family
      param = registry.get(fam)
      run_agents = {name: (b if b is not None else PolicyBackend(make_policy(param.env_name, name), _SEED.value))
                    for name, b in agents.items()}
      results[run] = dict(measure_run(run, run_agents, _ROLLOUTS.value, bar), env=fam)
  finally:
    bar.close()
  for run, res in results.items():
    s = res["settings"]
    print(f"\n{run}  (env {res['env']}, directions={s.get('directions')} "
          f"effort={s.get('effort')})")
    head = f"{'gen':>3} {'n':>3} {'difficulty':>10} {'oracle':>6}"
    for name in agents:
      head += f" {name + ' pass':>12} {name + ' turns':>12}"
    print(head + f" {'instr%':>6} {'env%':>5}")
    for r in res["generations"]:
      line = f"{r['generation']:>3} {r['lineages']:>3} {r['difficulty']:>10.2f} {r['oracle_turns']:>6.1f}"
      for name in agents:
        line += f" {r[name + '/pass_rate']:>12.3f} {r[name + '/turns']:>12.1f}"
      if "mutation/instruction" in r:
        line += f" {100 * r['mutation/instruction']:>6.0f} {100 * r['mutation/environment']:>5.0f}"
      print(line)
    for name in agents:
      one_p, mean_p = deltas(res["generations"], f"{name}/pass_rate")
      one_t, mean_t = deltas(res["generations"], f"{name}/turns")
      print(f"  {name}: 1-step dPass {100 * one_p:+.1f}pp dTurns {one_t:+.1f}; mean per generation dPass "
            f"{100 * mean_p:+.1f}pp dTurns {mean_t:+.1f}")
  print(f"({time.time() - start:.0f}s)")
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump({"rollouts": _ROLLOUTS.value, "agents": list(agents), "results": results}, f, indent=1)


if __name__ == "__main__":
  cli.run(main)
