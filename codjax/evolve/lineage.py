"""Lineages as data: one JSON Lines file per lineage (Environment Evolution paper, arXiv 2609.04128, Sec. 4.1-4.2;
docs/methods/environment_evolution.md).

A lineage is the seed environment (generation 0) and, for g = 1, 2, ..., the environments accepted at
generation g (``N_g >= 1`` of them, index k = 0 .. N_g - 1), each evolved from the *head* of generation g - 1
(its first environment). Every line of ``<lineage_id>.jsonl`` is one JSON object:

* ``{"kind": "node", "lineage", "id", "generation", "index", "parent", "direction", "effort", "point",
  "verifiers", "oracle_turns", "difficulty", "oracle_actions", "rejected"}``: an accepted environment with its
  parent's id (None for the seed), the edit that made it, the ``EnvPoint``, every verifier outcome, the
  off-policy difficulty, the oracle's actions (the next generation's replay check) and the candidates
  rejected before it (direction and reason each);
* ``{"kind": "end", "lineage", "reason", "generations"}``: the lineage stopped (all three directions failed, or
  the generation cap was reached).

Files are appended line by line (a crash loses at most the line being written; a torn last line is ignored
on load with a warning, so ``launch/evolve.py`` resumes after it). ``load_lineage`` validates what it reads
and raises ``ValueError`` naming the file and line for anything else.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import warnings
from typing import Any

from codjax.evolve.base import DIRECTIONS, EFFORTS, EnvPoint


@dataclasses.dataclass
class Node:
  lineage: str
  generation: int
  index: int
  point: EnvPoint
  parent: str | None = None
  direction: str | None = None
  effort: str | None = None
  verifiers: dict = dataclasses.field(default_factory=dict)
  oracle_turns: int = 0
  difficulty: float = 0.0
  oracle_actions: list[str] = dataclasses.field(default_factory=list)
  rejected: list[dict] = dataclasses.field(default_factory=list)

  @property
  def id(self) -> str:
    return f"{self.lineage}/g{self.generation}/k{self.index}"

  def to_json(self) -> dict:
    return {"kind": "node", "lineage": self.lineage, "id": self.id, "generation": self.generation,
            "index": self.index, "parent": self.parent, "direction": self.direction, "effort": self.effort,
            "point": self.point.to_json(), "verifiers": self.verifiers, "oracle_turns": self.oracle_turns,
            "difficulty": self.difficulty, "oracle_actions": self.oracle_actions, "rejected": self.rejected}

  @classmethod
  def from_json(cls, obj: Any) -> "Node":
    if not isinstance(obj, dict) or obj.get("kind") != "node":
      raise ValueError("not a node record")
    for key, typ in (("lineage", str), ("generation", int), ("index", int), ("oracle_turns", int)):
      if not isinstance(obj.get(key), typ) or isinstance(obj.get(key), bool):
        raise ValueError(f"node field {key!r} must be {typ.__name__}, got {obj.get(key)!r}")
    if obj["generation"] < 0 or obj["index"] < 0:
      raise ValueError("node generation and index must be >= 0")
    if not isinstance(obj.get("difficulty"), (int, float)) or isinstance(obj.get("difficulty"), bool):
      raise ValueError(f"node difficulty must be a number, got {obj.get('difficulty')!r}")
    if obj.get("direction") not in (None, *DIRECTIONS) or obj.get("effort") not in (None, *EFFORTS):
      raise ValueError(f"bad direction/effort {obj.get('direction')!r}/{obj.get('effort')!r}")
    actions = obj.get("oracle_actions", [])
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
      raise ValueError("oracle_actions must be a list of strings")
    node = cls(obj["lineage"], obj["generation"], obj["index"], EnvPoint.from_json(obj.get("point")),
               obj.get("parent"), obj.get("direction"), obj.get("effort"), dict(obj.get("verifiers") or {}),
               obj["oracle_turns"], float(obj["difficulty"]), list(actions), list(obj.get("rejected") or []))
    if obj.get("id") not in (None, node.id):
      raise ValueError(f"node id {obj.get('id')!r} does not match its fields ({node.id!r})")
    return node


@dataclasses.dataclass
class Lineage:
  id: str
  generations: list[list[Node]] = dataclasses.field(default_factory=list)  # generations[g][k]
  end: str | None = None  # why it stopped; None while it may still grow

  @property
  def nodes(self) -> list[Node]:
    return [n for gen in self.generations for n in gen]

  @property
  def head(self) -> Node:
    return self.generations[-1][0]

  def add(self, node: Node) -> None:
    g = node.generation
    if g == len(self.generations):
      self.generations.append([])
    elif g != len(self.generations) - 1:
      raise ValueError(f"{self.id}: node of generation {g} after generation {len(self.generations) - 1}")
    if node.index != len(self.generations[g]):
      raise ValueError(f"{self.id}: node index {node.index} where {len(self.generations[g])} was expected")
    if g > 0 and node.parent != self.generations[g - 1][0].id:
      raise ValueError(f"{self.id}: {node.id}'s parent {node.parent!r} is not the head of generation {g - 1}")
    self.generations[g].append(node)


def lineage_path(directory: str, lineage_id: str) -> str:
  return os.path.join(directory, f"{lineage_id}.jsonl")


def append_record(path: str, record: dict) -> None:
  """Appends one JSON line and flushes it to disk."""
  with open(path, "a") as f:
    f.write(json.dumps(record, sort_keys=True) + "\n")
    f.flush()
    os.fsync(f.fileno())


def load_lineage(path: str) -> Lineage:
  """Reads one lineage file (module docstring)."""
  if not os.path.isfile(path):
    raise ValueError(f"no lineage file at {path}")
  lineage_id = os.path.basename(path)[: -len(".jsonl")]
  lin = Lineage(lineage_id)
  with open(path) as f:
    lines = f.read().split("\n")
  torn = bool(lines) and lines[-1] != ""  # the last line lacks its newline: a write was interrupted
  for i, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    try:
      obj = json.loads(line)
    except json.JSONDecodeError as e:
      if torn and i == len(lines):
        warnings.warn(f"{path}: ignoring a torn last line ({e})")
        break
      raise ValueError(f"{path} line {i}: not JSON ({e})") from None
    try:
      if isinstance(obj, dict) and obj.get("kind") == "end":
        if not isinstance(obj.get("reason"), str):
          raise ValueError("an end record needs a string reason")
        lin.end = obj["reason"]
        continue
      node = Node.from_json(obj)
      if node.lineage != lineage_id:
        raise ValueError(f"node of lineage {node.lineage!r} in the file of {lineage_id!r}")
      lin.add(node)
    except ValueError as e:
      raise ValueError(f"{path} line {i}: {e}") from None
  if not lin.generations:
    raise ValueError(f"{path}: holds no environment")
  return lin


def load_lineages(directory: str) -> list[Lineage]:
  """Every ``*.jsonl`` lineage of a directory, sorted by id."""
  paths = sorted(glob.glob(os.path.join(directory, "*.jsonl")))
  if not paths:
    raise ValueError(f"no lineage files (*.jsonl) in {directory!r}")
  return [load_lineage(p) for p in paths]


def truncate_torn_line(path: str) -> None:
  """Drops an interrupted last line so appends continue on a clean line boundary (resume)."""
  if not os.path.isfile(path):
    return
  with open(path, "rb") as f:
    data = f.read()
  if data and not data.endswith(b"\n"):
    keep = data[: data.rfind(b"\n") + 1]
    with open(path, "wb") as f:
      f.write(keep)
