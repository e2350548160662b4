"""Growing a lineage: direction scheduling, repair, acceptance (Environment Evolution paper, arXiv 2609.04128,
Sec. 4.1; docs/methods/environment_evolution.md).

From the head E of the last generation, generation g (1 <= g <= ``generations`` <= 15) is built so:

1. The allowed directions are put in a random order (``derive_seed(seed, lineage, g)``; a single allowed
   direction is the per-direction study of the paper's Sec. 5.3, Table 1).
2. Each direction gets ``repair_budget`` attempts. An attempt asks the *evolver* for a candidate (the
   procedural evolver: ``directions.edit`` at the effort; the first attempt keeps E's instance seed, a repair
   re-draws the edit and the instance), runs the three verifiers (``verifiers.verify``, with E's oracle
   actions for the replay check) and scores it. It is **accepted** only when every verifier passes and its
   difficulty is at least E's (d_child >= d_E: difficulty never decreases along a lineage; this gate is
   codjax's choice, the paper accepts on the verifiers). A direction whose edit is impossible fails at once.
3. Up to ``width`` children are accepted per generation (the paper's N_{i,g} environments of a generation,
   Eq. 2; how many is codjax's choice); the first accepted one is the head of the next generation. If no
   direction yields a child, the lineage **terminates** ("all three directions failed").

Every rejected candidate is recorded (direction, effort, reason) in the next accepted node. The random streams
are pure functions of (seed, lineage id, generation), so a lineage resumed from its file (``grow``) continues
exactly as the uninterrupted run would: an unfinished file's last generation (possibly cut short by the crash)
is dropped and built again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from typing import Callable, Protocol

from codjax.envs.base import derive_seed
from codjax.evolve import directions as dirs
from codjax.evolve import verifiers
from codjax.evolve.base import DIRECTIONS, EFFORTS, MAX_GENERATIONS, EnvPoint, Parameterisation
from codjax.evolve.lineage import Lineage, Node, append_record, lineage_path, load_lineage, truncate_torn_line


@dataclasses.dataclass(frozen=True)
class EvolveSettings:
  generations: int = MAX_GENERATIONS
  width: int = 1  # environments accepted per generation
  effort: str = "high"  # the paper's default
  directions: tuple[str, ...] = DIRECTIONS  # allowed directions (one: a fixed-direction lineage)
  repair_budget: int = 3
  seed: int = 0

  def __post_init__(self):
    if isinstance(self.generations, bool) or not isinstance(self.generations, int) or not (
        1 <= self.generations <= MAX_GENERATIONS):
      raise ValueError(f"generations must be an integer in [1, {MAX_GENERATIONS}], got {self.generations!r}")
    if isinstance(self.width, bool) or not isinstance(self.width, int) or not 1 <= self.width <= 16:
      raise ValueError(f"width must be an integer in [1, 16], got {self.width!r}")
    if self.effort not in EFFORTS:
      raise ValueError(f"effort must be one of {EFFORTS}, got {self.effort!r}")
    ds = tuple(self.directions)
    if not ds or len(set(ds)) != len(ds) or any(d not in DIRECTIONS for d in ds):
      raise ValueError(f"directions must be distinct values of {DIRECTIONS}, got {self.directions!r}")
    object.__setattr__(self, "directions", ds)
    if isinstance(self.repair_budget, bool) or not isinstance(self.repair_budget, int) or not (
        1 <= self.repair_budget <= 100):
      raise ValueError(f"repair_budget must be an integer in [1, 100], got {self.repair_budget!r}")


@dataclasses.dataclass
class Proposal:
  point: EnvPoint | None
  reason: str = ""  # why there is no candidate (point None)


class Evolver(Protocol):
  """Proposes a candidate child of ``parent`` along ``direction`` (attempt 0, then repairs)."""

  def propose(self, param: Parameterisation, parent: Node, direction: str, effort: str, rng: random.Random,
              attempt: int) -> Proposal: ...


class ProceduralEvolver:
  """Direction edits on the pair sequence (``codjax.evolve.directions``)."""

  def propose(self, param, parent, direction, effort, rng, attempt) -> Proposal:
    seed = None if attempt == 0 else derive_seed(parent.point.seed, parent.generation + 1, attempt)
    point = dirs.edit(param, parent.point, direction, effort, rng, seed=seed)
    return Proposal(point, "" if point is not None else f"no {direction} edit is possible")


def lineage_id_seed(lineage_id: str) -> int:
  return derive_seed(*(ord(c) for c in lineage_id))


def seed_node(param: Parameterisation, lineage_id: str, point: EnvPoint, verify_seed: int = 0) -> Node | None:
  """The verified seed environment (generation 0), or None when the seed itself fails a verifier."""
  v = verifiers.verify(param, point, None, seed=verify_seed)
  if not v.accepted:
    return None
  return Node(lineage_id, 0, 0, point, verifiers=v.outcomes, oracle_turns=v.oracle_turns,
              difficulty=param.score(point, v.oracle_turns), oracle_actions=v.oracle_actions)


def next_generation(param: Parameterisation, lin: Lineage, settings: EvolveSettings,
                    evolver: Evolver | None = None) -> tuple[list[Node], list[dict]]:
  """The accepted children of the next generation (empty: every direction failed) and all rejections."""
  evolver = evolver or ProceduralEvolver()
  head = lin.head
  g = head.generation + 1
  base = derive_seed(settings.seed, lineage_id_seed(lin.id), g)
  order = list(settings.directions)
  random.Random(base).shuffle(order)
  children: list[Node] = []
  rejected: list[dict] = []
  seen: set = set()
  for slot in range(settings.width):
    got = None
    for d_i, direction in enumerate(order):
      for attempt in range(settings.repair_budget):
        rng = random.Random(derive_seed(base, slot, d_i, attempt))
        prop = evolver.propose(param, head, direction, settings.effort, rng, attempt)
        if prop.point is None:
          rejected.append({"direction": direction, "effort": settings.effort, "reason": prop.reason})
          break  # the direction cannot edit this head: fall back to the next one
        key = (prop.point.pairs, prop.point.seed, repr(prop.point.data))
        if key in seen:
          rejected.append({"direction": direction, "effort": settings.effort,
                           "reason": "duplicate of an environment already accepted in this generation"})
          continue
        v = verifiers.verify(param, prop.point, head.oracle_actions, seed=derive_seed(base, 17, slot, attempt))
        if not v.accepted:
          rejected.append({"direction": direction, "effort": settings.effort, "reason": v.reason})
          continue
        d = param.score(prop.point, v.oracle_turns)
        if d < head.difficulty - 1e-9:
          rejected.append({"direction": direction, "effort": settings.effort,
                           "reason": f"difficulty {d:.3f} below the parent's {head.difficulty:.3f}"})
          continue
        got = Node(lin.id, g, len(children), prop.point, parent=head.id, direction=direction,
                   effort=settings.effort, verifiers=v.outcomes, oracle_turns=v.oracle_turns, difficulty=d,
                   oracle_actions=v.oracle_actions)
        seen.add(key)
        break
      if got is not None:
        break
    if got is None:
      break
    got.rejected = rejected
    rejected = []
    children.append(got)
  return children, rejected


def grow(param: Parameterisation, directory: str, lineage_id: str, root: EnvPoint, settings: EvolveSettings,
         evolver: Evolver | None = None, on_generation: Callable[[Lineage], None] | None = None) -> Lineage | None:
  """Grows (or resumes) the lineage ``lineage_id`` in ``directory`` from ``root`` to its end; None when the
  root fails a verifier (nothing is written then). Appends each accepted node as it is accepted."""
  os.makedirs(directory, exist_ok=True)
  path = lineage_path(directory, lineage_id)
  truncate_torn_line(path)
  if os.path.isfile(path) and os.path.getsize(path) > 0:
    lin = load_lineage(path)
    if lin.generations[0][0].point != root:
      raise ValueError(f"{path} grows from a different seed environment than the one asked for")
    if lin.end is None and len(lin.generations) > 1:
      # the last generation may be cut short: drop it and build it again (the same nodes: pure streams)
      lin.generations.pop()
      with open(path, "w") as f:
        f.writelines(json.dumps(n.to_json(), sort_keys=True) + "\n" for n in lin.nodes)
  else:
    node = seed_node(param, lineage_id, root, verify_seed=lineage_id_seed(lineage_id))
    if node is None:
      return None
    lin = Lineage(lineage_id)
    lin.add(node)
    append_record(path, node.to_json())
  while lin.end is None:
    rejected: list[dict] = []
    if lin.head.generation >= settings.generations:
      lin.end = f"generation cap ({settings.generations}) reached"
    else:
      children, rejected = next_generation(param, lin, settings, evolver)
      for c in children:
        lin.add(c)
        append_record(path, c.to_json())
      if not children:
        lin.end = f"all directions failed at generation {lin.head.generation + 1}"
    if lin.end is not None:
      append_record(path, {"kind": "end", "lineage": lin.id, "reason": lin.end,
                           "generations": lin.head.generation, "rejected": rejected})
    if on_generation is not None:
      on_generation(lin)
  return lin
