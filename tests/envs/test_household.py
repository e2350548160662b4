"""The household environment alfworld_synth: exact ALFWorld text on hand-built problems, won for every family,
generator determinism, certified plans, split disjointness, the ReAct protocol, packs, the scripted policies."""

import collections
import json
import os
import random
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codjax.envs import make
from codjax.envs.experts import make_policy
from codjax.envs.household import generator as gen
from codjax.envs.household import vocab
from codjax.envs.household import world as W
from codjax.envs.household.env import FORMAT_FEEDBACK, HouseholdTask, build_config, parse_action
from codjax.envs.household.planner import plan as make_plan
from codjax.envs.household.planner import replay
from codjax.envs.household.problem import Problem

FOOD = dict(pickupable=True, heatable=True, coolable=True, cleanable=True, toggleable=False, sliceable=True)
MUG = dict(pickupable=True, heatable=True, coolable=True, cleanable=True, toggleable=False, sliceable=False)
KNIFE = dict(pickupable=True, heatable=False, coolable=False, cleanable=True, toggleable=False, sliceable=False)
PLAIN = dict(pickupable=True, heatable=False, coolable=False, cleanable=False, toggleable=False, sliceable=False)
LAMP = dict(pickupable=False, heatable=False, coolable=False, cleanable=False, toggleable=True, sliceable=False)


def _rec(name, type_, openable):
  return {"name": name, "type": type_, "openable": openable}


def _obj(name, type_, where, flags):
  return {"name": name, "type": type_, "location": where, **flags}


def _spec(room, recs, objs, family, obj, recep, lamp, text):
  return {"room": room, "receptacles": recs, "objects": objs,
          "goal": {"family": family, "object_type": obj, "receptacle_type": recep, "lamp_type": lamp},
          "task_text": text}


KITCHEN = _spec(
    "Kitchen",
    [_rec("cabinet 1", "Cabinet", True), _rec("cabinet 2", "Cabinet", True), _rec("countertop 1", "CounterTop", False),
     _rec("fridge 1", "Fridge", True), _rec("microwave 1", "Microwave", True), _rec("sinkbasin 1", "SinkBasin", False)],
    [_obj("apple 1", "Apple", "countertop 1", FOOD), _obj("apple 2", "Apple", "fridge 1", FOOD),
     _obj("knife 1", "Knife", "countertop 1", KNIFE), _obj("desklamp 1", "DeskLamp", "countertop 1", LAMP),
     _obj("mug 1", "Mug", "cabinet 1", MUG)],
    "pick_heat_then_place_in_recep", "Apple", "Fridge", None, "put a hot apple in fridge.")

BEDROOM = _spec(
    "Bedroom",
    [_rec("bed 1", "Bed", False), _rec("desk 1", "Desk", False), _rec("drawer 1", "Drawer", True),
     _rec("drawer 2", "Drawer", True)],
    [_obj("desklamp 1", "DeskLamp", "desk 1", LAMP), _obj("book 1", "Book", "drawer 2", PLAIN),
     _obj("book 2", "Book", "bed 1", PLAIN)],
    "look_at_obj_in_light", "Book", None, "DeskLamp", "look at book under the desklamp.")

GO_KITCHEN = ["go to cabinet 1", "go to cabinet 2", "go to countertop 1", "go to fridge 1", "go to microwave 1",
              "go to sinkbasin 1"]
BASIC = ["help", "inventory", "look"]


def _gos(exclude):
  return [g for g in GO_KITCHEN if g != f"go to {exclude}"]


HELP = ("Available commands:\n"
        "  look:                             look around your current location\n"
        "  inventory:                        check your current inventory\n"
        "  go to (receptacle):               move to a receptacle\n"
        "  open (receptacle):                open a receptacle\n"
        "  close (receptacle):               close a receptacle\n"
        "  take (object) from (receptacle):  take an object from a receptacle\n"
        "  move (object) to (receptacle):  place an object in or on a receptacle\n"
        "  examine (something):              examine a receptacle or an object\n"
        "  use (object):                     use an object\n"
        "  heat (object) with (receptacle):  heat an object using a receptacle\n"
        "  clean (object) with (receptacle): clean an object using a receptacle\n"
        "  cool (object) with (receptacle):  cool an object using a receptacle\n"
        "  slice (object) with (object):     slice an object using a sharp object\n")


def _play(problem, steps):
  """steps: (command, expected feedback, expected sorted admissible or None, expected won or None)."""
  state = W.initial_state(problem)
  for cmd, feedback, adm, won in steps:
    state, fb = W.apply(state, cmd)
    assert fb == feedback, cmd
    if adm is not None:
      assert W.admissible(state) == adm, cmd
    if won is not None:
      assert W.won(problem, state) is won, cmd
  return state


# --------------------------------------------------------------------------------------------- exact text


def test_kitchen_text_and_admissible_lists_by_hand():
  p = Problem.from_scene_spec(KITCHEN)
  s0 = W.initial_state(p)
  assert W.intro(s0) == ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly "
                         "around you, you see a cabinet 2, a cabinet 1, a countertop 1, a fridge 1, a microwave 1, "
                         "and a sinkbasin 1.\n\nYour task is to: put a hot apple in fridge.")
  assert W.admissible(s0) == GO_KITCHEN + BASIC
  nothing = "Nothing happens."
  at_counter = ["examine countertop 1"] + _gos("countertop 1") + BASIC + [
      "take apple 1 from countertop 1", "take knife 1 from countertop 1", "use desklamp 1"]
  knife_counter = ["examine countertop 1", "examine knife 1"] + _gos("countertop 1") + BASIC + [
      "move knife 1 to countertop 1", "slice apple 1 with knife 1", "use desklamp 1"]
  _play(p, [
      ("look", "You are in the middle of a room. Looking quickly around you, you see nothing.", GO_KITCHEN + BASIC,
       False),
      ("inventory", "You are not carrying anything.", None, None),
      ("help", HELP, None, None),
      ("take apple 1 from countertop 1", nothing, GO_KITCHEN + BASIC, False),
      ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1, a desklamp 1, and "
       "a knife 1.", at_counter, False),
      ("go to countertop 1", nothing, at_counter, None),
      ("examine apple 1", nothing, None, None),
      ("look", "You are facing the countertop 1. Next to it, you see nothing.", None, None),
      ("examine countertop 1", "On the countertop 1, you see a apple 1, a desklamp 1, and a knife 1.", None, None),
      ("use desklamp 1", "You turn on the desklamp 1.", at_counter, None),
      ("use desklamp 1", "You turn on the desklamp 1.", None, None),
      ("take knife 1 from countertop 1", "You pick up the knife 1 from the countertop 1.", knife_counter, None),
      ("inventory", "You are carrying: a knife 1.", None, None),
      ("examine knife 1", "There's nothing special about knife 1.", None, None),
      ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed.",
       ["examine fridge 1", "examine knife 1"] + _gos("fridge 1") + BASIC + ["open fridge 1",
                                                                             "slice apple 2 with knife 1"], None),
      ("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.",
       ["clean knife 1 with sinkbasin 1", "examine knife 1", "examine sinkbasin 1"] + _gos("sinkbasin 1") + BASIC
       + ["move knife 1 to sinkbasin 1"], None),
      ("clean knife 1 with sinkbasin 1", "You clean the knife 1 using the sinkbasin 1.", None, None),
      ("examine knife 1", "This is a clean knife 1.", None, None),
      ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1, and a desklamp 1.",
       None, None),
      ("slice apple 1 with knife 1", "You sliced the apple 1 with the knife 1.", None, None),
      ("move knife 1 to countertop 1", "You move the knife 1 to the countertop 1.", at_counter, None),
      ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1.",
       ["examine apple 1", "examine countertop 1"] + _gos("countertop 1") + BASIC + [
           "move apple 1 to countertop 1", "use desklamp 1"], None),
      ("examine apple 1", "This is a sliced apple 1.", None, None),
      ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed.",
       ["cool apple 1 with fridge 1", "examine apple 1", "examine fridge 1"] + _gos("fridge 1") + BASIC
       + ["open fridge 1"], None),
      ("cool apple 1 with fridge 1", "You cool the apple 1 using the fridge 1.", None, None),
      ("examine apple 1", "This is a cool sliced apple 1.", None, None),
      ("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed.",
       ["examine apple 1", "examine microwave 1"] + _gos("microwave 1") + [
           "heat apple 1 with microwave 1", "help", "inventory", "look", "open microwave 1"], None),
      ("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1.", None, None),
      ("examine apple 1", "This is a hot sliced apple 1.", None, None),
      ("open microwave 1", "You open the microwave 1. The microwave 1 is open. In it, you see nothing.",
       ["close microwave 1", "examine apple 1", "examine microwave 1"] + _gos("microwave 1") + [
           "heat apple 1 with microwave 1", "help", "inventory", "look", "move apple 1 to microwave 1"], None),
      ("close microwave 1", "You close the microwave 1.", None, None),
      ("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.", None, None),
      ("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1.", None, None),
      ("examine apple 1", "This is a hot and clean sliced apple 1.", None, None),
      ("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is closed.", None, None),
      ("open cabinet 1", "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 1.",
       ["close cabinet 1", "examine apple 1", "examine cabinet 1"] + _gos("cabinet 1") + BASIC, None),
      ("move apple 1 to cabinet 1", nothing, None, False),  # a cabinet may not hold an apple
      ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed.", None, None),
      ("move apple 1 to fridge 1", nothing, None, False),  # closed
      ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a apple 2.",
       ["close fridge 1", "cool apple 1 with fridge 1", "examine apple 1", "examine fridge 1"] + _gos("fridge 1")
       + BASIC + ["move apple 1 to fridge 1"], False),
      ("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1.",
       ["close fridge 1", "examine fridge 1"] + _gos("fridge 1") + BASIC + [
           "take apple 1 from fridge 1", "take apple 2 from fridge 1"], True),
  ])


def test_bedroom_look_and_pick_two_text_by_hand():
  p = Problem.from_scene_spec(BEDROOM)
  s0 = W.initial_state(p)
  assert W.intro(s0) == ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly "
                         "around you, you see a bed 1, a desk 1, a drawer 2, and a drawer 1.\n\nYour task is to: "
                         "look at book under the desklamp.")
  go = ["go to bed 1", "go to desk 1", "go to drawer 1", "go to drawer 2"]
  _play(p, [
      ("go to desk 1", "You arrive at desk 1. On the desk 1, you see a desklamp 1.",
       ["examine desk 1", "go to bed 1", "go to drawer 1", "go to drawer 2"] + BASIC + ["use desklamp 1"], False),
      ("use desklamp 1", "You turn on the desklamp 1.", None, False),  # lamp on, empty hands
      ("go to bed 1", "You arrive at bed 1. On the bed 1, you see a book 2.",
       ["examine bed 1"] + go[1:] + BASIC + ["take book 2 from bed 1"], False),
      ("take book 2 from bed 1", "You pick up the book 2 from the bed 1.",
       ["examine bed 1", "examine book 2"] + go[1:] + BASIC + ["move book 2 to bed 1"], False),
      ("go to desk 1", "You arrive at desk 1. On the desk 1, you see a desklamp 1.",
       ["examine book 2", "examine desk 1", "go to bed 1", "go to drawer 1", "go to drawer 2"] + BASIC + [
           "move book 2 to desk 1", "use desklamp 1"], True),
      ("go to drawer 1", "You arrive at drawer 1. The drawer 1 is closed.", None, False),  # away from the lamp
  ])
  two = Problem.from_scene_spec({**BEDROOM, "goal": {"family": "pick_two_obj_and_place", "object_type": "Book",
                                                    "receptacle_type": "Bed", "lamp_type": None},
                                 "task_text": "put two book in bed."})
  _play(two, [
      ("go to drawer 2", "You arrive at drawer 2. The drawer 2 is closed.",
       ["examine drawer 2"] + go[:3] + BASIC + ["open drawer 2"], False),
      ("open drawer 2", "You open the drawer 2. The drawer 2 is open. In it, you see a book 1.",
       ["close drawer 2", "examine drawer 2"] + go[:3] + BASIC + ["take book 1 from drawer 2"], False),
      ("take book 1 from drawer 2", "You pick up the book 1 from the drawer 2.", None, False),
      ("go to bed 1", "You arrive at bed 1. On the bed 1, you see a book 2.", None, False),
      ("move book 1 to bed 1", "You move the book 1 to the bed 1.",
       ["examine bed 1"] + go[1:] + BASIC + ["take book 1 from bed 1", "take book 2 from bed 1"], True),
      ("take book 2 from bed 1", "You pick up the book 2 from the bed 1.", None, False),
  ])


def test_list_joining_and_name_order():
  assert W.see_list([]) == "nothing"
  assert W.see_list(["apple 1"]) == "a apple 1"
  assert W.see_list(["apple 1", "bread 1"]) == "a apple 1, and a bread 1"
  assert W.see_list(["a 1", "b 1", "c 1"]) == "a a 1, a b 1, and a c 1"
  # TextWorld orders by the mangled id: class prefix ('sink' for the basin), then decreasing number
  names = [("SinkBasin", "sinkbasin 1"), ("SideTable", "sidetable 1"), ("Cabinet", "cabinet 10"),
           ("Cabinet", "cabinet 9"), ("Pencil", "pencil 1"), ("Pen", "pen 1")]
  order = sorted(names, key=lambda tn: vocab.list_key(*tn))
  assert [n for _, n in order] == ["cabinet 10", "cabinet 9", "pen 1", "pencil 1", "sidetable 1", "sinkbasin 1"]


# --------------------------------------------------------------------------------------------- won


LAB = _spec(
    "Kitchen",
    [_rec("countertop 1", "CounterTop", False), _rec("countertop 2", "CounterTop", False),
     _rec("fridge 1", "Fridge", True), _rec("microwave 1", "Microwave", True), _rec("sinkbasin 1", "SinkBasin", False)],
    [_obj("apple 1", "Apple", "fridge 1", FOOD), _obj("apple 2", "Apple", "fridge 1", FOOD),
     _obj("mug 1", "Mug", "countertop 2", MUG), _obj("desklamp 1", "DeskLamp", "countertop 2", LAMP)],
    "pick_and_place_simple", "Apple", "CounterTop", None, "put some apple on countertop.")
FETCH = ["go to fridge 1", "open fridge 1", "take apple 1 from fridge 1"]
FETCH2 = ["go to fridge 1", "take apple 2 from fridge 1"]
TO_C1 = ["go to countertop 1", "move apple 1 to countertop 1"]
HEAT = ["go to microwave 1", "heat apple 1 with microwave 1"]
COOL = ["go to fridge 1", "cool apple 1 with fridge 1"]
COOL_HERE = COOL[1:]  # right after FETCH the agent stands at the fridge
CLEAN = ["go to sinkbasin 1", "clean apple 1 with sinkbasin 1"]
LOOK = ["go to countertop 2", "use desklamp 1"]
MUG_HOT = ["go to countertop 2", "take mug 1 from countertop 2", "go to microwave 1", "heat mug 1 with microwave 1",
           "go to countertop 1", "move mug 1 to countertop 1"]

WON_CASES = [
    ("pick_and_place_simple", "CounterTop", None, FETCH + TO_C1, True),
    ("pick_and_place_simple", "CounterTop", None, FETCH + ["go to microwave 1", "open microwave 1",
                                                           "move apple 1 to microwave 1"], False),
    ("pick_clean_then_place_in_recep", "CounterTop", None, FETCH + CLEAN + TO_C1, True),
    ("pick_clean_then_place_in_recep", "CounterTop", None, FETCH + TO_C1, False),
    ("pick_clean_then_place_in_recep", "CounterTop", None, FETCH + HEAT + TO_C1, False),
    ("pick_heat_then_place_in_recep", "CounterTop", None, FETCH + HEAT + TO_C1, True),
    ("pick_heat_then_place_in_recep", "CounterTop", None, FETCH + COOL_HERE + TO_C1, False),  # cold is not hot
    ("pick_heat_then_place_in_recep", "CounterTop", None, FETCH + HEAT + COOL + TO_C1, False),  # cooling clears hot
    ("pick_heat_then_place_in_recep", "CounterTop", None, MUG_HOT + FETCH + TO_C1, False),  # the hot thing is a mug
    ("pick_cool_then_place_in_recep", "CounterTop", None, FETCH + COOL_HERE + TO_C1, True),
    ("pick_cool_then_place_in_recep", "CounterTop", None, FETCH + COOL_HERE + HEAT + TO_C1, False),
    ("pick_cool_then_place_in_recep", "CounterTop", None, FETCH + HEAT + TO_C1, False),
    ("pick_two_obj_and_place", "CounterTop", None, FETCH + TO_C1 + FETCH2 + ["go to countertop 1",
                                                                             "move apple 2 to countertop 1"], True),
    ("pick_two_obj_and_place", "CounterTop", None, FETCH + TO_C1, False),
    ("pick_two_obj_and_place", "CounterTop", None,  # one apple moved twice is still one apple
     FETCH + TO_C1 + ["take apple 1 from countertop 1", "move apple 1 to countertop 1"], False),
    ("pick_two_obj_and_place", "CounterTop", None,  # two countertops, one apple each
     FETCH + TO_C1 + FETCH2 + ["go to countertop 2", "move apple 2 to countertop 2"], False),
    ("look_at_obj_in_light", None, "DeskLamp", FETCH + LOOK, True),
    ("look_at_obj_in_light", None, "DeskLamp", FETCH + LOOK[:1], False),  # lamp off
    ("look_at_obj_in_light", None, "DeskLamp", LOOK + FETCH + ["go to countertop 1"], False),  # away from the lamp
    ("look_at_obj_in_light", None, "DeskLamp", LOOK + FETCH + ["go to countertop 2"], True),  # turned on before
    ("look_at_obj_in_light", None, "DeskLamp", LOOK + ["take mug 1 from countertop 2"], False),  # not an apple
]


@pytest.mark.parametrize("family,recep,lamp,commands,expected", WON_CASES)
def test_won_per_family(family, recep, lamp, commands, expected):
  spec = {**LAB, "goal": {"family": family, "object_type": "Apple", "receptacle_type": recep, "lamp_type": lamp}}
  p = Problem.from_scene_spec(spec)
  state = W.initial_state(p)
  assert not W.won(p, state)
  for cmd in commands:
    assert cmd in W.admissible(state), cmd
    state, _ = W.apply(state, cmd)
  assert W.won(p, state) is expected
  best = make_plan(p)  # the planner solves every one of them
  assert best is not None and replay(p, best)[0]


# --------------------------------------------------------------------------------------------- scene spec


def test_scene_spec_schema_and_round_trip():
  p = gen.generate(gen.HouseholdConfig(), 3, 4)
  spec = p.to_scene_spec()
  assert set(spec) == {"room", "receptacles", "objects", "goal", "task_text"}
  assert set(spec["receptacles"][0]) == {"name", "type", "openable"}
  assert set(spec["objects"][0]) == {"name", "type", "location", "pickupable", "heatable", "coolable", "cleanable",
                                     "toggleable", "sliceable"}
  assert set(spec["goal"]) == {"family", "object_type", "receptacle_type", "lamp_type"}
  again = Problem.from_scene_spec(json.loads(json.dumps(spec)))
  assert again.to_scene_spec() == spec
  assert Problem.from_scene_spec(KITCHEN).to_scene_spec() == KITCHEN


@pytest.mark.parametrize("mutate", [
    lambda s: "not a dict",
    lambda s: {**s, "receptacles": "x"},
    lambda s: {**s, "receptacles": []},
    lambda s: {**s, "objects": [{**s["objects"][0], "name": "Apple 1"}] + s["objects"][1:]},
    lambda s: {**s, "objects": [{**s["objects"][0], "name": "apple 3"}] + s["objects"][1:]},  # gap in numbering
    lambda s: {**s, "objects": [{**s["objects"][0], "location": "moon 1"}] + s["objects"][1:]},
    lambda s: {**s, "objects": [{**s["objects"][0], "heatable": "yes"}] + s["objects"][1:]},
    lambda s: {**s, "goal": {**s["goal"], "family": "make_coffee"}},
    lambda s: {**s, "goal": {**s["goal"], "lamp_type": "DeskLamp"}},
    lambda s: {**s, "goal": None},
    lambda s: {**s, "task_text": "Put a hot apple in fridge"},
    lambda s: {**s, "receptacles": s["receptacles"] + [_rec("cabinet 1", "Cabinet", True)]},
])
def test_malformed_scene_specs_are_value_errors(mutate):
  with pytest.raises(ValueError):
    Problem.from_scene_spec(mutate(KITCHEN))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(junk=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                         lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids,
                                                                                    max_size=5), max_leaves=20),
       key=st.sampled_from(["room", "receptacles", "objects", "goal", "task_text"]))
def test_hostile_specs_never_crash(junk, key):
  for spec in (junk, {**KITCHEN, key: junk}):
    try:
      Problem.from_scene_spec(spec)
    except ValueError:
      pass


# --------------------------------------------------------------------------------------------- generator


def _problems(split, n, preset="train"):
  fam = make("alfworld_synth", preset=preset, split=split)
  out = []
  for pack in range(n // 3):
    out += [t.problem for t in fam.sample_pack(50_000 + pack, 3)]
  return fam, out


def test_generation_is_a_pure_function_of_the_seeds():
  cfg = gen.HouseholdConfig()
  a = [gen.generate(cfg, s, s + 1).to_scene_spec() for s in range(5)]
  gen.sample_house.cache_clear()
  assert [gen.generate(cfg, s, s + 1).to_scene_spec() for s in range(5)] == a
  assert len({json.dumps(x, sort_keys=True) for x in a}) == 5
  code = ("import json; from codjax.envs.household import generator as g; "
          "print(json.dumps([g.generate(g.HouseholdConfig(), s, s + 1).to_scene_spec() for s in range(5)]))")
  env = {**os.environ, "PYTHONHASHSEED": "123"}
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
  assert json.loads(out.stdout) == a  # no dependence on hash order or process state


@pytest.mark.parametrize("split", gen.SPLITS)
def test_every_problem_certified_and_its_plan_wins(split):
  fam, problems = _problems(split, 300)
  assert len(problems) == 300
  lengths, families = [], collections.Counter()
  for p in problems:
    assert p.plan and len(p.plan) <= fam.cfg.max_turns
    state = W.initial_state(p)
    assert not W.won(p, state)
    for cmd in p.plan:
      assert cmd in W.admissible(state)
      state, _ = W.apply(state, cmd)
    assert W.won(p, state)
    lengths.append(len(p.plan))
    families[p.family] += 1
    rtypes = {r.type for r in p.receptacles}
    assert fam.cfg.min_receptacles <= len(p.receptacles) <= fam.cfg.max_receptacles
    if p.family in vocab.APPLIANCE:
      assert vocab.APPLIANCE[p.family][0] in rtypes
    goal_objects = [o for o in p.objects if o.type == p.goal.object_type]
    assert len(goal_objects) >= (2 if p.family == "pick_two_obj_and_place" else 1)
    assert p.task_text.endswith(".") and vocab.display_name(p.goal.object_type) in p.task_text
  assert set(families) == set(vocab.FAMILIES)  # every family occurs
  assert min(families.values()) >= 20


def test_splits_hold_out_scenes_and_goal_pairs():
  seen_scenes, unseen_scenes = set(gen.split_scenes("train")), set(gen.split_scenes("valid_unseen"))
  assert seen_scenes.isdisjoint(unseen_scenes) and len(unseen_scenes) == 20 and len(seen_scenes) == 100
  assert set(gen.split_scenes("valid_seen")) == seen_scenes
  got = {}
  for split in gen.SPLITS:
    _, problems = _problems(split, 300)
    got[split] = ({p.scene for p in problems}, {p.goal.combo for p in problems},
                  {json.dumps(p.to_scene_spec(), sort_keys=True) for p in problems})
  assert got["valid_unseen"][0] <= unseen_scenes and got["train"][0] <= seen_scenes
  assert got["valid_seen"][0] <= seen_scenes
  assert got["valid_unseen"][1].isdisjoint(got["train"][1] | got["valid_seen"][1])
  assert all(gen.combo_is_unseen(*c) for c in got["valid_unseen"][1])
  assert not any(gen.combo_is_unseen(*c) for c in got["train"][1] | got["valid_seen"][1])
  assert got["valid_seen"][0] & got["train"][0]  # the same rooms ...
  assert got["valid_seen"][2].isdisjoint(got["train"][2])  # ... with fresh instances


def test_generation_takes_milliseconds():
  cfg = gen.HouseholdConfig(split="valid_seen")
  t0 = time.perf_counter()
  for s in range(60):
    gen.generate(cfg, 90_000 + s, s)
  per_problem = (time.perf_counter() - t0) / 60
  print(f"generate + certify: {1000 * per_problem:.2f} ms per problem (fresh house each)")
  assert per_problem < 0.05


def test_tiny_preset_small_rooms_and_budget():
  fam, problems = _problems("train", 60, preset="tiny")
  assert fam.cfg.max_turns == 20
  for p in problems:
    assert 4 <= len(p.receptacles) <= 6 and len(p.plan) <= 20


# --------------------------------------------------------------------------------------------- protocol


def _task(spec=KITCHEN, **cfg):
  return HouseholdTask(build_config("train", **cfg), Problem.from_scene_spec(spec))


def test_parse_action():
  assert parse_action("<think>x</think><action>  Go To\n Fridge 1 </action>") == "go to fridge 1"
  assert parse_action("<action>look</action>") == "look"
  for bad in ("look", "<action></action>", "<action>  </action>", "<action>a</action><action>b</action>",
              "</action>look<action>", "<action>look", None, 3):
    assert parse_action(bad) is None


def test_format_error_and_invalid_turns_do_not_step_the_world():
  task = _task(max_turns=4)
  system, obs = task.reset()
  assert "<action>" in system and "70" not in system and "4 turns" in system
  assert obs.startswith(task.initial_observation) and "\n- go to fridge 1\n" in obs and obs.endswith("Turn 1/4")
  key = task.state_key
  r = task.step("I will go to the fridge")
  assert r.info["format_error"] and not r.info["invalid"] and not r.done and r.reward == 0.0
  assert r.info["feedback"] == FORMAT_FEEDBACK and task.state_key == key and r.observation.endswith("Turn 2/4")
  r = task.step("<think>hm</think><action>take apple 1 from countertop 1</action>")
  assert r.info["invalid"] and not r.info["format_error"] and r.info["feedback"] == "Nothing happens."
  assert task.state_key == key
  r = task.step("<think>go</think><action>GO TO   countertop 1</action>")
  assert not r.info["invalid"] and r.info["feedback"].startswith("You arrive at countertop 1.")
  assert task.state_key != key and r.info["command"] == "go to countertop 1"
  r = task.step("<action>look</action>")
  assert r.done and r.reward == 0.0 and r.info["raw_reward"] == 0.0 and not r.info["won"]
  assert task.step("<action>look</action>").done  # stays done


def test_plan_through_step_wins_with_reward_one():
  task = _task()
  task.reset()
  steps = task.plan()
  assert steps == ["go to countertop 1", "take apple 1 from countertop 1", "go to microwave 1",
                   "heat apple 1 with microwave 1", "go to fridge 1", "open fridge 1", "move apple 1 to fridge 1"]
  for i, cmd in enumerate(steps):
    r = task.step(f"<think>step {i}</think><action>{cmd}</action>")
    assert r.done == (i == len(steps) - 1)
  assert r.reward == 1.0 and r.info["won"] and r.info["success"] and r.info["raw_reward"] == 1.0


def test_step_command_interface():
  task = _task()
  task.reset()
  assert task.objective == "put a hot apple in fridge." and task.task_family == "pick_heat_then_place_in_recep"
  assert task.admissible_commands() == GO_KITCHEN + BASIC
  res = task.step_command("go to microwave 1")
  assert res.valid and not res.won and res.feedback == "You arrive at microwave 1. The microwave 1 is closed."
  assert list(res.admissible) == task.admissible_commands() and "open microwave 1" in res.admissible
  res = task.step_command("fly away")
  assert not res.valid and res.feedback == "Nothing happens."
  task.reset()
  assert task.admissible_commands() == GO_KITCHEN + BASIC  # reset restores the initial state


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.one_of(st.text(max_size=60), st.sampled_from(
    ["<action>", "</action>", "<think>", "go to fridge 1", "take apple 1 from countertop 1", "\x00", "😀"])),
    min_size=1, max_size=6).map(lambda xs: ["".join(xs[:k + 1]) for k in range(len(xs))]))
def test_arbitrary_text_never_raises(texts):
  task = _task(max_turns=5)
  task.reset()
  for t in texts:
    r = task.step(t)
    assert isinstance(r.observation, str) and r.reward in (0.0, 1.0)
    task.step_command(t)


# --------------------------------------------------------------------------------------------- family / packs


def test_pack_is_one_house_with_several_goals():
  fam = make("alfworld_synth", preset="train")
  tasks = fam.sample_pack(7, 6)
  houses = {(t.problem.receptacles, t.problem.objects) for t in tasks}
  assert len(houses) == 1  # one house per pack
  assert len({(t.problem.goal, t.objective) for t in tasks}) > 1  # different goals
  for t in tasks:
    assert t.reset()[1].startswith("-= Welcome to TextWorld, ALFRED! =-")
  other = fam.sample_pack(8, 2)
  assert other[0].problem.objects != tasks[0].problem.objects
  again = fam.sample_pack(7, 3, task_seeds=[5, 5, 9])
  assert again[0].problem == again[1].problem and again[0] is not again[1]
  assert again[0].problem.objects == tasks[0].problem.objects


@pytest.mark.parametrize("params", [
    dict(split="test"), dict(families=["pick_and_place_simple", "make_tea"]), dict(families=[]),
    dict(families="pick_and_place_simple"), dict(families=["look_at_obj_in_light"] * 2), dict(max_turns=0),
    dict(max_turns=True), dict(min_receptacles=3), dict(min_receptacles=10, max_receptacles=9),
    dict(min_distractors=-1), dict(min_distractors=5, max_distractors=4), dict(colour="red"), dict(preset="huge"),
])
def test_bad_parameters_are_value_errors(params):
  with pytest.raises(ValueError):
    make("alfworld_synth", **params)


def test_families_subset_and_presets():
  fam = make("alfworld_synth", preset="tiny", families=["pick_heat_then_place_in_recep"], split="valid_unseen")
  for t in fam.sample_pack(3, 4):
    assert t.task_family == "pick_heat_then_place_in_recep" and t.problem.room == "Kitchen"
  assert make("alfworld_synth", preset="valid_seen").cfg.split == "valid_seen"


def test_missing_alfworld_is_an_import_error_with_the_install_hint(monkeypatch):
  vocab.vocabulary.cache_clear()
  monkeypatch.setitem(sys.modules, "alfworld.gen", None)
  try:
    with pytest.raises(ImportError, match=r"pip install alfworld==0\.4\.2"):
      make("alfworld_synth")
  finally:
    monkeypatch.undo()
    vocab.vocabulary.cache_clear()
  assert vocab.vocabulary().scenes


# --------------------------------------------------------------------------------------------- policies


def _run(task, policy, rng):
  system, obs = task.reset()
  messages = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
  while True:
    reply = policy.respond(messages, rng)
    messages.append({"role": "assistant", "content": reply})
    r = task.step(reply)
    assert not r.info["format_error"]
    if r.done:
      return r.info["won"]
    messages.append({"role": "user", "content": r.observation})


@pytest.mark.parametrize("split", gen.SPLITS)
def test_expert_solves_at_least_95_percent_random_rarely(split):
  fam = make("alfworld_synth", preset="train", split=split)
  expert, rand = make_policy("alfworld_synth", "expert"), make_policy("alfworld_synth", "random")
  tasks = [fam.sample_pack(70_000 + i, 1)[0] for i in range(200)]
  by_family = collections.defaultdict(list)
  for i, task in enumerate(tasks):
    by_family[task.task_family].append(_run(task, expert, random.Random(i)))
  rate = sum(sum(v) for v in by_family.values()) / len(tasks)
  rand_rate = sum(_run(HouseholdTask(fam.cfg, t.problem), rand, random.Random(i))
                  for i, t in enumerate(tasks[:40])) / 40
  print(f"{split}: expert {rate:.3f} {({k: round(sum(v) / len(v), 3) for k, v in sorted(by_family.items())})}, "
        f"random {rand_rate:.3f} (40 tasks)")
  assert rate >= 0.95 and all(sum(v) / len(v) >= 0.8 for v in by_family.values())
  assert rand_rate < 0.3


def test_policies_reply_in_format_and_survive_foreign_text():
  task = _task()
  system, obs = task.reset()
  msgs = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
  reply = make_policy("alfworld_synth", "expert").respond(msgs, random.Random(0))
  assert reply.startswith("<think>") and parse_action(reply) == "go to countertop 1"
  assert parse_action(make_policy("alfworld_synth", "random").respond(msgs, random.Random(0))) in (GO_KITCHEN + BASIC)
  for junk in ([], [{"role": "user", "content": "hello"}], [{"role": "user", "content": None}], [{"x": 1}]):
    for kind in ("expert", "random"):
      assert parse_action(make_policy("alfworld_synth", kind).respond(junk, random.Random(0))) is not None
