"""Difficulty of evolved environments measured with fixed reference agents (Environment Evolution paper,
arXiv 2609.04128, Sec. 5.1 "Monitoring Metrics", Figure 3 and Table 1; docs/methods/environment_evolution.md).

For every generation g of a set of lineages, the head environment of each lineage still alive at g is
played B times by each reference agent under ORBIT's multi-episode protocol with as many episodes as the
parameterisation's oracle may use (``codjax.agents.orbit.run_orbit``, extra episodes off): an environment is
passed when any episode is won, and its turns are those played up to the first win (all of them otherwise).
A row of the table is the mean over lineages of the pass rate and turns, with the mean difficulty and oracle
turns, and (g > 0) the fraction of heads whose prompt text (instruction mutation) and environment parameters
(environment mutation) differ from their parent's. ``deltas`` gives Table 1's one-step and mean change per
generation. The agents are fixed (scripted expert, seeded random, a fixed checkpoint), never the policy being
trained: the measurement is off-policy.
"""

from __future__ import annotations

import json
import os

import numpy as np

from codjax.agents.cod import Pack
from codjax.agents.orbit import OrbitSettings, run_orbit
from codjax.envs.base import derive_seed
from codjax.evolve import registry
from codjax.evolve.lineage import Lineage, load_lineages


def play_nodes(backend, nodes, rollouts: int) -> list[dict]:
  """Pass rate and mean turns of each node's environment under ``backend``."""
  packs = []
  for j, node in enumerate(nodes):
    param = registry.get(node.point.family)
    eps = max(1, int(param.oracle_episodes))
    packs.append(Pack(param.env_name, param.family(node.point), node.point.seed,
                      tuple(derive_seed(node.point.seed, e) for e in range(eps)), j))
  trajs = run_orbit(backend, packs, rollouts, OrbitSettings(extra_episodes=False))
  out = []
  for j in range(len(nodes)):
    ts = trajs[j * rollouts:(j + 1) * rollouts]
    wins = [any(t.successes) for t in ts]
    turns = []
    for t in ts:
      n = 0
      for g in t.games:
        n += g.turns
        if g.success:
          break
      turns.append(n)
    out.append({"pass_rate": float(np.mean(wins)), "turns": float(np.mean(turns))})
  return out


def first_observation(node) -> str:
  param = registry.get(node.point.family)
  system, obs = param.tasks(node.point, 1)[0].reset()
  return system + "\n" + obs


def measure_run(run_dir: str, agents: dict, rollouts: int, bar=None) -> dict:
  """``measure_lineages`` of a ``launch/evolve.py`` output directory, with the settings it was grown with."""
  settings = {}
  if os.path.isfile(os.path.join(run_dir, "summary.json")):
    with open(os.path.join(run_dir, "summary.json")) as f:
      settings = json.load(f).get("settings", {})
  return {"settings": settings, "generations": measure_lineages(load_lineages(run_dir), agents, rollouts, bar)}


def measure_lineages(lineages: list[Lineage], agents: dict, rollouts: int, bar=None) -> list[dict]:
  """One row per generation (module docstring); ``agents`` maps a name to an episode backend."""
  depth = max(len(lin.generations) for lin in lineages)
  shown: dict[str, str] = {}  # node id -> prompt text (a parent is the previous generation's head)

  def text(node) -> str:
    if node.id not in shown:
      shown[node.id] = first_observation(node)
    return shown[node.id]

  per_gen = []
  for g in range(depth):
    heads = [lin.generations[g][0] for lin in lineages if len(lin.generations) > g]
    row = {"generation": g, "lineages": len(heads),
           "difficulty": float(np.mean([h.difficulty for h in heads])),
           "oracle_turns": float(np.mean([h.oracle_turns for h in heads]))}
    for name, backend in agents.items():
      res = play_nodes(backend, heads, rollouts)
      row[f"{name}/pass_rate"] = float(np.mean([r["pass_rate"] for r in res]))
      row[f"{name}/turns"] = float(np.mean([r["turns"] for r in res]))
      if bar is not None:
        bar.update({}, n=len(heads))
    if g > 0:
      parents = [lin.generations[g - 1][0] for lin in lineages if len(lin.generations) > g]
      row["mutation/instruction"] = float(np.mean([text(h) != text(p)
                                                   for h, p in zip(heads, parents)]))
      row["mutation/environment"] = float(np.mean([registry.get(h.point.family).env_params(h.point)
                                                   != registry.get(p.point.family).env_params(p.point)
                                                   for h, p in zip(heads, parents)]))
    per_gen.append(row)
  return per_gen


def deltas(rows: list[dict], key: str) -> tuple[float, float]:
  """One-step change (g0 -> g1) and mean change per generation over the measured depth."""
  if len(rows) < 2:
    return float("nan"), float("nan")
  vals = [r[key] for r in rows]
  return vals[1] - vals[0], (vals[-1] - vals[0]) / (len(vals) - 1)


