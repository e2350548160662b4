"""The evolvable parameterisations of FrozenLake-Obscure, Alchemy-Random and alfworld_synth
(docs/methods/environment_evolution.md):
exact constructor kwargs of hand-built pair sequences, seed environments passing the three verifiers, longer or
rarer sequences scoring higher and building harder environments, hostile points failing quality cleanly."""

from __future__ import annotations

import math

import pytest

from codjax.envs.frozenlake.env import shortest_path_length
from codjax.evolve import registry
from codjax.evolve.base import EnvPoint, Pair
from codjax.evolve.verifiers import quality_problems, verify

FL, AL, HH = "frozenlake_obscure", "alchemy_random", "alfworld_synth"
SEEDS = range(20)


def _point(name: str, pairs, seed: int = 0) -> EnvPoint:
  return EnvPoint(name, tuple(Pair(*p) for p in pairs), seed)


def _verdicts(name: str, pairs, seeds=range(10)):
  param = registry.get(name)
  return param, [(s, verify(param, _point(name, pairs, s))) for s in seeds]


def _mean_turns(verdicts) -> float:
  acc = [v.oracle_turns for _, v in verdicts if v.accepted]
  assert len(acc) >= len(verdicts) // 2, [v.reason for _, v in verdicts]
  return sum(acc) / len(acc)


# ------------------------------------------------------------------------------------------- the mapping


def test_registry_names_the_three_environments():
  for name in (FL, AL, HH):
    param = registry.get(name)
    assert param.name == name and param.env_name == name


def test_frozenlake_pairs_map_to_exact_kwargs():
  # L=4, one detour, one thin_ice, one wide, one compact: path 4+2=6, side 3+ceil(6/3)+1=6, p 0.55..0.65
  pairs = [("wide", "detour"), ("square", "thin_ice"), ("compact", "walk"), ("square", "walk")]
  assert registry.get(FL).env_params(_point(FL, pairs)) == dict(
      preset="train", min_size=6, max_size=6, min_p=0.55, max_p=0.65, env_max_steps=36, budget_slack=4,
      min_path=6, min_detour=2, text_style="compact")


def test_alchemy_pairs_map_to_exact_kwargs():
  # 3 tiers of chain (4 tiers in all), one wide, one noisy, one cross-tier, one consume
  pairs = [("wide", "chain"), ("noisy", "cross_tier"), ("plain", "consume")]
  assert registry.get(AL).env_params(_point(AL, pairs)) == dict(
      preset="easy", min_num_tiers=4, max_num_tiers=4, min_target_tier=3, min_base_elements=4,
      max_base_elements=5, tier_shrink_min=0.5, tier_shrink_max=0.7, min_noise_node_ratio=0.25,
      max_noise_node_ratio=0.25, min_cross_tier_prob=0.3, max_cross_tier_prob=0.3, max_tier_gap=2,
      material_mode="limited", max_rounds=4 + 9 + 5 + 2 + 3 + 6)


def test_household_pairs_map_to_exact_kwargs():
  pairs = [("Kitchen", "pick_heat_then_place_in_recep"), ("Bathroom", "pick_clean_then_place_in_recep"),
           ("Kitchen", "pick_and_place_simple")]
  assert registry.get(HH).env_params(_point(HH, pairs)) == dict(
      preset="train", rooms=("Kitchen", "Bathroom"),
      families=("pick_and_place_simple", "pick_clean_then_place_in_recep", "pick_heat_then_place_in_recep"),
      min_receptacles=10, max_receptacles=12, min_distractors=1, max_distractors=3, max_turns=70)


def test_household_rooms_and_conditional_skill_probabilities():
  from codjax.envs.household.vocab import FAMILIES, vocabulary

  from codjax.evolve.params.household import FAMILY_ROOMS

  voc = vocabulary()
  assert {f: set(FAMILY_ROOMS[f]) for f in FAMILIES} == {f: set(voc.rooms_for(f)) for f in FAMILIES}
  param = registry.get(HH)
  # Kitchen hosts every family but look: 790 + 650 + 459 + 533 + 813 = 3245 games -> heat = 459 / 3245
  assert param.skill_prob("pick_heat_then_place_in_recep", "Kitchen") == pytest.approx(459 / 3245)
  # room shares: Kitchen 790/4 + 650/2 + 459 + 533 + 813/4 = 1717.75 of 3553 games
  assert param.novelty("Kitchen") == pytest.approx(-math.log(1717.75 / 3553))
  assert param.skill_prob("look_at_obj_in_light", "Kitchen") == 0.0
  assert not param.compatible([Pair("Kitchen", "look_at_obj_in_light")])
  assert param.novelty("Bedroom") > param.novelty("Kitchen")
  assert param.seed_pairs(5) == param.seed_pairs(5)
  assert all(param.compatible(param.seed_pairs(i)) for i in range(12))


# ------------------------------------------------------------------------------------------- seeds pass


@pytest.mark.parametrize("name,min_rate", [(FL, 0.8), (AL, 0.8), (HH, 0.9)])
def test_seed_environments_pass_the_three_verifiers(name, min_rate):
  param = registry.get(name)
  verdicts = [verify(param, param.seed_point(i, i)) for i in SEEDS]
  rate = sum(v.accepted for v in verdicts) / len(verdicts)
  assert rate >= min_rate, [v.reason for v in verdicts if not v.accepted]
  for v in verdicts:
    assert v.outcomes["quality"]["ok"], v.outcomes["quality"]
  # the next generation's replay check: the parent's oracle actions, replayed on other instances, lose
  parent = next(v for v in verdicts if v.accepted)
  replays = [verify(param, param.seed_point(0, s), parent.oracle_actions).outcomes for s in range(1000, 1006)]
  replays = [o["invalid"]["replay_parent"] for o in replays if "invalid" in o]
  assert len(replays) >= 3 and sum(r["ok"] for r in replays) >= len(replays) - 1, replays


def test_answers_are_read_from_the_built_tasks_and_do_not_leak():
  for name in (FL, AL, HH):
    param = registry.get(name)
    point = param.seed_point(0, 0)
    tasks = param.tasks(point, 1)
    answers = param.answer_strings(point, tasks)
    assert answers, name
    system, obs = tasks[0].reset()
    assert not any(a.lower() in f"{system}\n{obs}".lower() for a in answers), name
  fl = registry.get(FL)
  tasks = fl.tasks(fl.seed_point(0, 7), 1)
  assert "Direction 1 is " + tasks[0].inst.mapping[1] in fl.answer_strings(fl.seed_point(0, 7), tasks)


# ------------------------------------------------------------------------------------------- harder


def test_frozenlake_longer_rarer_sequence_is_harder():
  seed_pairs = [("square", "walk")] * 4
  hard_pairs = [("square", "walk")] * 4 + [("square", "detour")] * 2
  param, easy = _verdicts(FL, seed_pairs)
  _, hard = _verdicts(FL, hard_pairs)
  assert _mean_turns(hard) > _mean_turns(easy)
  assert param.score(_point(FL, hard_pairs), 10) > param.score(_point(FL, seed_pairs), 10)
  # the generator output really changed: every hard map needs >= 6 + 2*2 = 10 moves with a bend of >= 4
  for s in range(5):
    for task in param.tasks(_point(FL, hard_pairs, s), 3):
      inst = task.inst
      sp = shortest_path_length(inst.rows, inst.start, inst.goal)
      manhattan = abs(inst.start[0] - inst.goal[0]) + abs(inst.start[1] - inst.goal[1])
      assert sp >= 10 and sp - manhattan >= 4 and len(inst.rows) == 3 + math.ceil(10 / 3)


def test_frozenlake_scenario_edit_changes_the_board():
  param = registry.get(FL)
  square = param.tasks(_point(FL, [("square", "walk")] * 4, 3), 1)[0]
  wide = param.tasks(_point(FL, [("wide", "walk")] + [("square", "walk")] * 3, 3), 1)[0]
  assert len(wide.inst.rows) == len(square.inst.rows) + 1
  compact = param.tasks(_point(FL, [("compact", "walk")] + [("square", "walk")] * 3, 3), 1)[0]
  assert compact.reset()[0] != square.reset()[0]


def test_alchemy_deeper_recipe_chain_is_harder():
  seed_pairs, deep_pairs = [("plain", "chain")] * 3, [("plain", "chain")] * 5
  param, easy = _verdicts(AL, seed_pairs)
  _, deep = _verdicts(AL, deep_pairs)
  assert _mean_turns(deep) > _mean_turns(easy)
  assert param.score(_point(AL, deep_pairs), 9) > param.score(_point(AL, seed_pairs), 9)
  for s in range(5):
    task = param.tasks(_point(AL, deep_pairs, s), 1)[0]
    assert task.inst.graph.tier_of()[task.inst.target] == 5


def test_alchemy_rarer_reaction_changes_the_graph_and_scores_higher():
  param = registry.get(AL)
  plain, rare = [("plain", "chain")] * 3, [("plain", "chain")] * 2 + [("plain", "consume")]
  assert param.score(_point(AL, rare), 0) > param.score(_point(AL, plain), 0)
  task = param.tasks(_point(AL, rare, 4), 1)[0]
  assert "Materials are used up" in task.reset()[0]
  assert "Materials are used up" not in param.tasks(_point(AL, plain, 4), 1)[0].reset()[0]


def test_household_bigger_house_and_rarer_family_are_harder():
  small, big = [("Kitchen", "pick_and_place_simple")] * 4, [("Kitchen", "pick_and_place_simple")] * 10
  param, easy = _verdicts(HH, small)
  _, hard = _verdicts(HH, big)
  assert _mean_turns(hard) > _mean_turns(easy)
  assert param.score(_point(HH, big), 12) > param.score(_point(HH, small), 12)
  heat = [("Kitchen", "pick_heat_then_place_in_recep")] + small[1:]
  assert param.score(_point(HH, heat), 8) > param.score(_point(HH, small), 8)
  for s in range(3):
    assert len(param.tasks(_point(HH, big, s), 1)[0].problem.receptacles) >= 24
    assert param.tasks(_point(HH, [("Bedroom", "look_at_obj_in_light")], s), 1)[0].problem.room == "Bedroom"
  fams = {param.tasks(_point(HH, heat, s), 1)[0].problem.goal.family for s in range(8)}
  assert "pick_heat_then_place_in_recep" in fams


# ------------------------------------------------------------------------------------------- hostile


@pytest.mark.parametrize("name,pairs", [
    (FL, [("volcano", "walk")] * 4),
    (FL, [("square", "walk")] * 2),  # below min_pairs
    (FL, [("square", "walk")] * 13),  # above max_pairs
    (AL, [("plain", "consume")] * 8),  # builds no target: the expanded tree needs far more rounds
    (AL, [("plain", "teleport")] * 3),
    (HH, [("Kitchen", "look_at_obj_in_light")]),  # no lamp goals in kitchens
    (HH, [("Garage", "pick_and_place_simple")]),
])
def test_hostile_points_fail_quality_without_crashing(name, pairs):
  param = registry.get(name)
  point = _point(name, pairs, 3)
  v = verify(param, point)
  assert not v.accepted and v.reason.startswith("quality:")
  problems, tasks = quality_problems(param, point)
  assert problems and tasks is None


def test_point_of_another_family_and_bad_json_are_rejected():
  param = registry.get(AL)
  v = verify(param, _point(FL, [("square", "walk")] * 4))
  assert not v.accepted and "belongs to" in v.reason
  with pytest.raises(ValueError):
    param.env_params(_point(AL, [("plain", "chain")]))
  with pytest.raises(ValueError):
    EnvPoint.from_json({"family": AL, "pairs": [["plain"]], "seed": 0})
