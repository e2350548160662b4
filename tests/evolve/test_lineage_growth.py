"""Lineages grow through the verifiers only, difficulty never decreases along them, and their files round-trip."""

import json
import os
import random

import pytest

from codjax.evolve import verifiers
from codjax.evolve.base import EnvPoint, Pair
from codjax.evolve.directions import chosen_indices, edit_pairs
from codjax.evolve.evolution import EvolveSettings, ProceduralEvolver, Proposal, grow
from codjax.evolve.lineage import Lineage, Node, load_lineage, load_lineages


def test_effort_spans_and_edits_follow_the_rules(maze_param):
  rng = random.Random(0)
  assert all(len(chosen_indices(10, "low", rng)) == 1 for _ in range(20))
  for _ in range(50):
    idx = chosen_indices(10, "high", rng)
    assert 4 <= len(idx) <= 7 and idx == list(range(idx[0], idx[0] + len(idx)))
  p = maze_param
  pairs = (Pair("square", "walk"),) * 5
  assert edit_pairs(p, pairs, "skill", "high", rng) is None  # no rarer skill exists
  sc = edit_pairs(p, pairs, "scenario", "low", rng)
  assert sum(x.scenario == "wide" for x in sc) == 1 and len(sc) == 5
  ln = edit_pairs(p, pairs, "length", "low", rng)
  assert len(ln) == 6
  assert edit_pairs(p, (Pair("square", "walk"),) * 9, "length", "low", rng) is None  # max_pairs reached


class _Injected:
  """Proposes, in order, the given candidates (then a valid procedural edit)."""

  def __init__(self, points):
    self.points = list(points)

  def propose(self, param, parent, direction, effort, rng, attempt):
    if self.points:
      return Proposal(self.points.pop(0))
    return ProceduralEvolver().propose(param, parent, direction, effort, rng, attempt)


def test_injected_failing_candidates_are_never_accepted(tmp_path, maze_param):
  p = maze_param
  root = p.seed_point(0, 11)
  bad = [
      EnvPoint("test_maze", (Pair("square", "walk"),) * 2, 11),  # quality: below min_pairs
      EnvPoint("test_maze", (Pair("swamp", "walk"),) * 5, 11),  # quality: unknown scenario
      EnvPoint("other", (Pair("square", "walk"),) * 5, 11),  # quality: another family
  ]
  lin = grow(p, str(tmp_path), "L0", root, EvolveSettings(generations=1, repair_budget=3, seed=1),
             evolver=_Injected(bad))
  assert lin is not None
  child = lin.generations[1][0]
  reasons = [r["reason"] for r in child.rejected]
  assert len(reasons) >= 3 and all(r.startswith("quality") for r in reasons[:3])
  assert child.point not in bad
  again = verifiers.verify(p, child.point, lin.generations[0][0].oracle_actions, seed=child.verifiers["seed"])
  assert again.accepted and again.outcomes == child.verifiers


def test_a_candidate_an_oracle_cannot_solve_or_a_trivial_policy_solves_is_rejected(maze_param):
  p = maze_param

  class Blind(type(maze_param)):
    def oracle(self):
      return verifiers.ConstantPolicy("\\boxed{jump}")

  v = verifiers.verify(Blind(), p.seed_point(0, 5))
  assert not v.accepted and v.reason.startswith("oracle")

  class Cheat(type(maze_param)):  # the "random" trivial policy is the oracle itself: the test is vacuous
    def random_policy(self):
      return maze_param.oracle()

  v = verifiers.verify(Cheat(), p.seed_point(0, 5))
  assert not v.accepted and "random" in v.reason
  v = verifiers.verify(p, p.seed_point(0, 5))
  assert v.accepted and v.outcomes["invalid"]["constant"]["ok"] and v.oracle_turns >= 5


def test_grown_lineages_are_verified_monotone_and_round_trip(tmp_path, maze_param):
  p = maze_param
  settings = EvolveSettings(generations=4, width=2, repair_budget=2, seed=3)
  lin = grow(p, str(tmp_path), "L1", p.seed_point(1, 21), settings)
  assert lin is not None and lin.end
  for g in range(1, len(lin.generations)):
    parent = lin.generations[g - 1][0]
    for node in lin.generations[g]:
      assert node.parent == parent.id and node.difficulty >= parent.difficulty
      assert node.verifiers["quality"]["ok"] and node.verifiers["oracle"]["ok"]
      assert all(v["ok"] for v in node.verifiers["invalid"].values())
      assert "replay_parent" in node.verifiers["invalid"]
  back = load_lineage(os.path.join(tmp_path, "L1.jsonl"))
  assert [n.to_json() for n in back.nodes] == [n.to_json() for n in lin.nodes] and back.end == lin.end
  # resuming a finished lineage changes nothing; resuming a cut one continues exactly
  lines = open(tmp_path / "L1.jsonl").read().splitlines()
  cut = tmp_path / "cut"
  cut.mkdir()
  (cut / "L1.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:17])  # a torn third line
  again = grow(p, str(cut), "L1", p.seed_point(1, 21), settings)
  assert [n.to_json() for n in again.nodes] == [n.to_json() for n in lin.nodes]


def test_corrupt_lineage_files_are_clear_errors(tmp_path):
  node = Node("L", 0, 0, EnvPoint("test_maze", (Pair("square", "walk"),), 1))
  (tmp_path / "L.jsonl").write_text(json.dumps(node.to_json()) + "\n{not json}\n" + json.dumps(node.to_json()) + "\n")
  with pytest.raises(ValueError, match="line 2: not JSON"):
    load_lineage(str(tmp_path / "L.jsonl"))
  bad = dict(node.to_json(), generation=3)
  (tmp_path / "L.jsonl").write_text(json.dumps(bad) + "\n")
  with pytest.raises(ValueError, match="line 1"):
    load_lineage(str(tmp_path / "L.jsonl"))
  with pytest.raises(ValueError, match="no lineage files"):
    load_lineages(str(tmp_path / "empty"))
  lin = Lineage("L")
  lin.add(node)
  with pytest.raises(ValueError, match="parent"):
    lin.add(Node("L", 1, 0, node.point, parent="L/g0/k7"))
