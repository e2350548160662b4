"""Tier-1 ALFWorld engine (docs/methods/evoharness.md): hand-written scenes played through TextWorld's PddlEnv.

Every expected string below is written by hand from alfworld's ``alfred.twl2`` grammar and ``alfred.pddl``
domain: lists name receptacles and objects in ALFRED-id order (type name, then instance number from the top
down), items read "a <name>" joined by ", " and a final ", and ".
"""

from __future__ import annotations

import sys

import pytest

from codjax.envs.household import tier1

INTRO_HEAD = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see "
BASIC = ["help", "inventory", "look"]


def obj(name, type_, location, *flags):
  d = {"name": name, "type": type_, "location": location}
  for f in ("pickupable", "heatable", "coolable", "cleanable", "toggleable", "sliceable"):
    d[f] = f in flags
  return d


HEAT = {
  "room": "Kitchen",
  "receptacles": [
    {"name": "countertop 1", "type": "CounterTop", "openable": False},
    {"name": "cabinet 1", "type": "Cabinet", "openable": True},
    {"name": "fridge 1", "type": "Fridge", "openable": True},
    {"name": "microwave 1", "type": "Microwave", "openable": True},
    {"name": "sinkbasin 1", "type": "SinkBasin", "openable": False},
  ],
  "objects": [
    obj("apple 1", "Apple", "fridge 1", "pickupable", "heatable", "coolable", "cleanable", "sliceable"),
    obj("mug 1", "Mug", "cabinet 1", "pickupable", "heatable", "coolable", "cleanable"),
    obj("bread 1", "Bread", "countertop 1", "pickupable", "heatable", "coolable", "sliceable"),
  ],
  "goal": {"family": "pick_heat_then_place_in_recep", "object_type": "Apple", "receptacle_type": "Fridge",
           "lamp_type": None},
  "task_text": "put a hot apple in fridge.",
}

LOOK = {
  "room": "Bedroom",
  "receptacles": [
    {"name": "bed 1", "type": "Bed", "openable": False},
    {"name": "desk 1", "type": "Desk", "openable": False},
    {"name": "drawer 1", "type": "Drawer", "openable": True},
    {"name": "drawer 2", "type": "Drawer", "openable": True},
    {"name": "sidetable 1", "type": "SideTable", "openable": False},
  ],
  "objects": [
    obj("alarmclock 1", "AlarmClock", "drawer 2", "pickupable"),
    obj("book 1", "Book", "bed 1", "pickupable"),
    obj("desklamp 1", "DeskLamp", "sidetable 1", "toggleable"),
    obj("pen 1", "Pen", "desk 1", "pickupable"),
    obj("pen 2", "Pen", "desk 1", "pickupable"),
  ],
  "goal": {"family": "look_at_obj_in_light", "object_type": "AlarmClock", "receptacle_type": None,
           "lamp_type": "DeskLamp"},
  "task_text": "look at alarmclock under the desklamp.",
}

PICK_TWO = {
  "room": "LivingRoom",
  "receptacles": [
    {"name": "sofa 1", "type": "Sofa", "openable": False},
    {"name": "coffeetable 1", "type": "CoffeeTable", "openable": False},
    {"name": "armchair 1", "type": "ArmChair", "openable": False},
    {"name": "cabinet 1", "type": "Cabinet", "openable": True},
  ],
  "objects": [
    obj("keychain 1", "KeyChain", "coffeetable 1", "pickupable"),
    obj("keychain 2", "KeyChain", "armchair 1", "pickupable"),
    obj("remotecontrol 1", "RemoteControl", "coffeetable 1", "pickupable"),
    obj("vase 1", "Vase", "cabinet 1", "pickupable"),
  ],
  "goal": {"family": "pick_two_obj_and_place", "object_type": "KeyChain", "receptacle_type": "Sofa",
           "lamp_type": None},
  "task_text": "put two keychain in sofa.",
}


def run(game, commands):
  """Steps through commands; returns the list of (feedback, won, admissible)."""
  return [game.step(c) for c in commands]


@pytest.fixture(scope="module")
def engine():
  return tier1.Tier1Engine()


# ------------------------------------------------------------------------------------------------ heat


def test_heat_intro_and_admissible(engine):
  game = tier1.Tier1Game(HEAT, engine)
  obs, adm = game.reset()
  assert obs == (INTRO_HEAD + "a cabinet 1, a countertop 1, a fridge 1, a microwave 1, and a sinkbasin 1.\n\n"
                 "Your task is to: put a hot apple in fridge.")
  gotos = ["go to cabinet 1", "go to countertop 1", "go to fridge 1", "go to microwave 1", "go to sinkbasin 1"]
  assert adm == gotos + BASIC
  fb, won, adm = game.step("go to fridge 1")
  assert (fb, won) == ("You arrive at fridge 1. The fridge 1 is closed.", False)
  others = [g for g in gotos if g != "go to fridge 1"]
  assert adm == ["examine fridge 1"] + others + BASIC + ["open fridge 1"]
  fb, won, adm = game.step("open fridge 1")
  assert fb == "You open the fridge 1. The fridge 1 is open. In it, you see a apple 1."
  assert adm == ["close fridge 1", "examine fridge 1"] + others + BASIC + ["take apple 1 from fridge 1"]
  fb, won, adm = game.step("take apple 1 from fridge 1")
  assert fb == "You pick up the apple 1 from the fridge 1."
  # heating/cooling needs only to hold the object at the appliance; the fridge's door does not matter
  assert adm == (["close fridge 1", "cool apple 1 with fridge 1", "examine apple 1", "examine fridge 1"] + others
                 + BASIC + ["move apple 1 to fridge 1"])


def test_heat_winning_and_losing_sequences(engine):
  game = tier1.Tier1Game(HEAT, engine)
  game.reset()
  out = run(game, ["go to fridge 1", "open fridge 1", "take apple 1 from fridge 1", "go to microwave 1",
                   "heat apple 1 with microwave 1", "examine apple 1", "go to fridge 1", "move apple 1 to fridge 1"])
  assert [o[0] for o in out[3:]] == [
    "You arrive at microwave 1. The microwave 1 is closed.",
    "You heat the apple 1 using the microwave 1.",
    "This is a hot apple 1.",
    "You arrive at fridge 1. The fridge 1 is open. In it, you see nothing.",
    "You move the apple 1 to the fridge 1.",
  ]
  assert [o[1] for o in out] == [False] * 7 + [True]
  assert out[-1][2] == ["close fridge 1", "examine fridge 1", "go to cabinet 1", "go to countertop 1",
                        "go to microwave 1", "go to sinkbasin 1"] + BASIC + ["take apple 1 from fridge 1"]
  # reset restores the initial state; placing it back unheated, or heated then cooled, does not win
  obs, _ = game.reset()
  assert obs.endswith("Your task is to: put a hot apple in fridge.")
  out = run(game, ["go to fridge 1", "open fridge 1", "take apple 1 from fridge 1", "move apple 1 to fridge 1"])
  assert out[-1][:2] == ("You move the apple 1 to the fridge 1.", False)
  game.reset()
  out = run(game, ["go to fridge 1", "open fridge 1", "take apple 1 from fridge 1", "go to microwave 1",
                   "heat apple 1 with microwave 1", "go to fridge 1", "cool apple 1 with fridge 1",
                   "examine apple 1", "move apple 1 to fridge 1"])
  assert [o[0] for o in out[-3:]] == ["You cool the apple 1 using the fridge 1.", "This is a cold apple 1.",
                                      "You move the apple 1 to the fridge 1."]
  assert not any(o[1] for o in out)


def test_unknown_and_bad_commands(engine):
  game = tier1.Tier1Game(HEAT, engine)
  with pytest.raises(RuntimeError, match="reset"):
    game.step("look")
  game.reset()
  for cmd in ["take apple 1 from fridge 1", "GO TO FRIDGE 1", "", "go to fridge 1; rm -rf /", "{__import__('os')}"]:
    fb, won, adm = game.step(cmd)
    assert (fb, won) == ("Nothing happens.", False)
    assert adm == ["go to cabinet 1", "go to countertop 1", "go to fridge 1", "go to microwave 1",
                   "go to sinkbasin 1"] + BASIC
  with pytest.raises(ValueError, match="str"):
    game.step(None)
  assert game.step("inventory")[0] == "You are not carrying anything."
  # "look" binds the location to the agent's: no receptacle stands at the start, unlike the intro's list
  assert game.step("look")[0] == "You are in the middle of a room. Looking quickly around you, you see nothing."
  game.step("go to sinkbasin 1")
  assert game.step("look")[0] == "You are facing the sinkbasin 1. Next to it, you see nothing."


# ------------------------------------------------------------------------------------------------ look


def test_look_sequences(engine):
  game = tier1.Tier1Game(LOOK, engine)
  obs, adm = game.reset()
  assert obs == (INTRO_HEAD + "a bed 1, a desk 1, a drawer 2, a drawer 1, and a sidetable 1.\n\n"
                 "Your task is to: look at alarmclock under the desklamp.")
  gotos = ["go to bed 1", "go to desk 1", "go to drawer 1", "go to drawer 2", "go to sidetable 1"]
  assert adm == gotos + BASIC
  fb, won, adm = game.step("go to desk 1")
  assert fb == "You arrive at desk 1. On the desk 1, you see a pen 2, and a pen 1."
  assert adm == (["examine desk 1"] + [g for g in gotos if g != "go to desk 1"] + BASIC
                 + ["take pen 1 from desk 1", "take pen 2 from desk 1"])
  out = run(game, ["go to drawer 2", "open drawer 2", "take alarmclock 1 from drawer 2", "go to sidetable 1",
                   "use desklamp 1"])
  assert [o[0] for o in out] == [
    "You arrive at drawer 2. The drawer 2 is closed.",
    "You open the drawer 2. The drawer 2 is open. In it, you see a alarmclock 1.",
    "You pick up the alarmclock 1 from the drawer 2.",
    "You arrive at sidetable 1. On the sidetable 1, you see a desklamp 1.",
    "You turn on the desklamp 1.",
  ]
  # the lamp is not pickupable: no "take desklamp 1"; it can be used while holding the clock
  assert out[3][2] == (["examine alarmclock 1", "examine sidetable 1", "go to bed 1", "go to desk 1",
                        "go to drawer 1", "go to drawer 2"] + BASIC
                       + ["move alarmclock 1 to sidetable 1", "use desklamp 1"])
  assert [o[1] for o in out] == [False] * 4 + [True]
  # losing: the lamp is turned on first, then the clock is fetched but the agent stays away from the lamp
  game.reset()
  out = run(game, ["go to sidetable 1", "use desklamp 1", "go to drawer 2", "open drawer 2",
                   "take alarmclock 1 from drawer 2", "inventory"])
  assert out[1][:2] == ("You turn on the desklamp 1.", False)
  assert out[5][0] == "You are carrying: a alarmclock 1."
  assert not any(o[1] for o in out)


# ------------------------------------------------------------------------------------------------ pick two


def test_pick_two_sequences(engine):
  game = tier1.Tier1Game(PICK_TWO, engine)
  obs, adm = game.reset()
  assert obs == (INTRO_HEAD + "a armchair 1, a cabinet 1, a coffeetable 1, and a sofa 1.\n\n"
                 "Your task is to: put two keychain in sofa.")
  assert adm == ["go to armchair 1", "go to cabinet 1", "go to coffeetable 1", "go to sofa 1"] + BASIC
  out = run(game, ["go to coffeetable 1", "take keychain 1 from coffeetable 1", "go to cabinet 1", "open cabinet 1",
                   "move keychain 1 to cabinet 1"])
  assert out[0][0] == "You arrive at coffeetable 1. On the coffeetable 1, you see a keychain 1, and a remotecontrol 1."
  assert out[0][2] == (["examine coffeetable 1", "go to armchair 1", "go to cabinet 1", "go to sofa 1"] + BASIC
                       + ["take keychain 1 from coffeetable 1", "take remotecontrol 1 from coffeetable 1"])
  assert out[3][0] == "You open the cabinet 1. The cabinet 1 is open. In it, you see a vase 1."
  # a cabinet cannot hold a keychain (canContain): no move command, and trying it does nothing
  assert out[3][2] == (["close cabinet 1", "examine cabinet 1", "examine keychain 1", "go to armchair 1",
                        "go to coffeetable 1", "go to sofa 1"] + BASIC)
  assert out[4][:2] == ("Nothing happens.", False)
  out = run(game, ["go to sofa 1", "move keychain 1 to sofa 1", "go to armchair 1",
                   "take keychain 2 from armchair 1", "go to sofa 1", "move keychain 2 to sofa 1"])
  assert [o[0] for o in out] == [
    "You arrive at sofa 1. On the sofa 1, you see nothing.",
    "You move the keychain 1 to the sofa 1.",
    "You arrive at armchair 1. On the armchair 1, you see a keychain 2.",
    "You pick up the keychain 2 from the armchair 1.",
    "You arrive at sofa 1. On the sofa 1, you see a keychain 1.",
    "You move the keychain 2 to the sofa 1.",
  ]
  assert [o[1] for o in out] == [False] * 5 + [True]
  # losing: the same keychain put on the sofa twice
  records = tier1.play(PICK_TWO, ["go to coffeetable 1", "take keychain 1 from coffeetable 1", "go to sofa 1",
                                  "move keychain 1 to sofa 1", "take keychain 1 from sofa 1",
                                  "move keychain 1 to sofa 1"], engine=engine)
  assert [r["step"] for r in records] == list(range(7))
  assert records[0]["command"] is None and records[0]["feedback"] == obs
  assert [r["feedback"] for r in records[4:]] == ["You move the keychain 1 to the sofa 1.",
                                                  "You pick up the keychain 1 from the sofa 1.",
                                                  "You move the keychain 1 to the sofa 1."]
  assert not any(r["won"] for r in records)
  # the game that lost the engine to play() must be reset before stepping again
  with pytest.raises(RuntimeError, match="reset"):
    game.step("look")


# ------------------------------------------------------------------------------------------------ PDDL + input


def test_pddl_problem_text():
  text = tier1.scene_to_pddl(PICK_TWO)
  kc1 = "KeyChain_bar__plus_99_dot_98_bar__plus_00_dot_00_bar__plus_00_dot_00"
  sofa = "Sofa_bar__plus_99_dot_98_bar__plus_00_dot_00_bar__plus_00_dot_00"
  for fact in [f"{kc1} - object", f"{sofa} - receptacle", f"(objectType {kc1} KeyChainType)",
               f"(receptacleType {sofa} SofaType)", f"(pickupable {kc1})", "(canContain SofaType KeyChainType)",
               "(atLocation agent1 loc_bar_0_bar_0_bar_0_bar_30)", f"(receptacleAtLocation {sofa} loc_bar_1_bar_0_bar_0_bar_30)",
               "(openable Cabinet_bar__plus_99_dot_98_bar__plus_00_dot_00_bar__plus_00_dot_00)", "(not (= ?o1 ?o2))",
               "(objectType ?o1 KeyChainType)", "(receptacleType ?r SofaType)"]:
    assert fact in text, fact
  assert "(canContain CabinetType KeyChainType)" not in text
  assert "(opened " not in text
  assert text.count("(") == text.count(")")
  heat = tier1.scene_to_pddl(HEAT)
  assert "Sink_bar__plus_99_dot_98_bar__plus_00_dot_00_bar__plus_00_dot_00_bar_SinkBasin - receptacle" in heat
  assert "(isHot ?o)" in heat and "(receptacleType ?r FridgeType)" in heat
  assert tier1.mangle_id("Apple", 2) == "Apple_bar__plus_99_dot_97_bar__plus_00_dot_00_bar__plus_00_dot_00"


def _with(spec, **changes):
  out = {k: (list(v) if isinstance(v, list) else v) for k, v in spec.items()}
  out.update(changes)
  return out


@pytest.mark.parametrize("bad, match", [
  ("not a dict", "mapping"),
  (_with(HEAT, room=3), "room"),
  (_with(HEAT, receptacles=[]), "no receptacles"),
  (_with(HEAT, task_text="put {__import__('os')} in fridge"), "task_text"),
  (_with(HEAT, task_text="   "), "task_text"),
  (_with(HEAT, goal={"family": "pick_and_juggle", "object_type": "Apple", "receptacle_type": "Fridge"}), "family"),
  (_with(HEAT, goal={"family": "look_at_obj_in_light", "object_type": "Apple"}), "lamp_type"),
  (_with(HEAT, goal={"family": "pick_and_place_simple", "object_type": "Apple", "receptacle_type": "Moon"}),
   "receptacle type"),
  (_with(HEAT, objects=[obj("apple 2", "Apple", "fridge 1", "pickupable")]), "numbered"),
  (_with(HEAT, objects=[obj("apple 1", "Apple", "shelf 1", "pickupable")]), "location"),
  (_with(HEAT, objects=[obj("pear 1", "Apple", "fridge 1", "pickupable")]), "must read"),
  (_with(HEAT, objects=[obj("unicorn 1", "Unicorn", "fridge 1")]), "object type"),
  (_with(HEAT, objects=[dict(obj("apple 1", "Apple", "fridge 1"), heatable="yes")]), "bool"),
  (_with(HEAT, objects=[obj("apple 1", "Apple", "fridge 1"), obj("apple 1", "Apple", "fridge 1")]), "duplicate"),
])
def test_malformed_specs_are_value_errors(bad, match):
  with pytest.raises(ValueError, match=match):
    tier1.scene_to_pddl(bad)
  with pytest.raises(ValueError, match=match):
    tier1.Tier1Game(bad)


def test_missing_pipeline_is_a_clear_error(monkeypatch):
  monkeypatch.setitem(sys.modules, "textworld.envs.pddl", None)
  with pytest.raises(tier1.Tier1Unavailable, match="textworld"):
    tier1.Tier1Game(HEAT)
  with pytest.raises(ValueError):
    tier1.play(HEAT, "go to fridge 1")


def test_memoized_textworld_parsers_hand_out_fresh_equal_copies(engine):
  """The parse cache every engine installs (tier1 docstring): a repeated string is parsed once, and each
  call gets its own copy (TextWorld sets a context on the symbols it derives), equal to a fresh parse."""
  import importlib

  textgen = importlib.import_module("textworld.envs.pddl.textgen")
  parse = textgen._parse_and_convert
  raw = parse.__wrapped_parse__
  text = "You see #list_objects# on {r.name}. [{o.indefinite + ' ' + o.name | inReceptacle(o, r)}]"
  before = parse.cache_info()
  a = parse(text, rule_name="symbols")
  b = parse(text, rule_name="symbols")
  assert parse.cache_info().hits >= before.hits + 1
  assert a is not b and a[0] is not b[0]
  assert repr(a) == repr(b) == repr(raw(text, rule_name="symbols"))
  a[0].context = {"state": "mutated"}
  assert parse(text, rule_name="symbols")[0].context == {}
  # installing again (a second engine) keeps one layer of caching
  tier1.memoize_textworld_parsers()
  assert textgen._parse_and_convert is parse
  for name in tier1.PARSE_MODULES:
    assert importlib.import_module(name)._parse_and_convert.__wrapped_parse__ is not None
