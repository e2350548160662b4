"""The EvoHarness core (docs/methods/evoharness.md): reply parsing, Belief, Progress, the Harness workspace and
rendering.

Expected strings are written by hand from the ALFWorld grammar (alfworld/data/alfred.twl2) and the module rules.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codjax.agents.harness import render
from codjax.agents.harness.actions import KINDS, META_VERBS, ParsedAction, normalize, parse_action
from codjax.agents.harness.belief import MAX_EDGES, Belief, Edge, Goal, parse_goal, task_type_of
from codjax.agents.harness.progress import Progress
from codjax.agents.harness.workspace import Harness

INTRO = ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you "
         "see a cabinet 1, a countertop 1, a fridge 1, and a microwave 1.\n\nYour task is to: put a hot apple in "
         "fridge.")
HEAT_OBJECTIVE = "put a hot apple in fridge."
HEAT_TYPE = "pick_heat_then_place_in_recep"
# (command, feedback, won) of a winning heat episode, with one failed step
HEAT_STEPS = [
    ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1, a bread 1, and a "
     "knife 1.", False),
    ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1.", False),
    ("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed.", False),
    ("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1.", False),
    ("open cabinet 1", "Nothing happens.", False),
    ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed.", False),
    ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a egg 1, and a lettuce 2.", False),
    ("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1.", True),
]


def act(text: str) -> str:
  return f"<think>ok</think><action>{text}</action>"


class FakeBank:
  """The three bank methods the harness uses, scripted."""

  def __init__(self, entries=None, capacity=50):
    self.entries = entries if entries is not None else []
    self.recalls: list[tuple[str, str, int]] = []
    self.notes: list[str] = []
    self.capacity = capacity

  def recall(self, query, task_type, top_k):
    self.recalls.append((query, task_type, top_k))
    return [dict(e) for e in self.entries if any(w in e["title"] for w in query.split())][:top_k]

  def render_entries(self, entries):
    return "\n".join(f"- {e['title']}" for e in entries) if entries else "No matching hints."

  def note(self, text, task_type):
    if len(self.notes) >= self.capacity:
      return False
    self.notes.append(f"[{task_type}] {text}")
    return True


# ---------------------------------------------------------------------------------------------- parser
@pytest.mark.parametrize("reply, expected", [
    ("<think>go</think><action>  Go To   CounterTop 1 </action>",
     ParsedAction("env", "go", "to countertop 1", "go to countertop 1")),
    ("<action>look</action>", ParsedAction("env", "look", "", "look")),
    ("<ACTION>Inventory</ACTION>", ParsedAction("env", "inventory", "", "inventory")),
    ("<action>`move apple 1 to fridge 1`</action>", ParsedAction("env", "move", "apple 1 to fridge 1",
                                                                 "move apple 1 to fridge 1")),
    ("<think>x</think>\n<action>recall [How to heat an Apple]</action>",
     ParsedAction("meta", "recall", "how to heat an apple", "recall [how to heat an apple]")),
    ("<action>track[apple]</action>", ParsedAction("meta", "track", "apple", "track [apple]")),
    ("<action>commit [  find   apple ]</action>", ParsedAction("meta", "commit", "find apple", "commit [find apple]")),
    ("<action>note [found apple [1] in fridge]</action>",
     ParsedAction("meta", "note", "found apple [1] in fridge", "note [found apple [1] in fridge]")),
    ("<action>tracker [x]</action>", ParsedAction("env", "tracker", "[x]", "tracker [x]")),
])
def test_parse_well_formed(reply, expected):
  assert parse_action(reply) == expected


@pytest.mark.parametrize("reply, verb, reason", [
    ("go to fridge 1", "", "no <action>...</action> tag"),
    ("<action>   </action>", "", "the <action> tag is empty"),
    ("<action>''</action>", "", "the <action> tag is empty"),
    ("<action>look</action><action>inventory</action>", "",
     "expected exactly one <action>...</action>, found 2 opening and 2 closing tags"),
    ("<action><action>look</action></action>", "",
     "expected exactly one <action>...</action>, found 2 opening and 2 closing tags"),
    ("<action>look", "", "expected exactly one <action>...</action>, found 1 opening and 0 closing tags"),
    ("</action>look<action>", "", "</action> comes before <action>"),
    ("<action>track apple</action>", "track", "track needs a bracketed argument, e.g. `track [...]`"),
    ("<action>commit</action>", "commit", "commit needs a bracketed argument, e.g. `commit [...]`"),
    ("<action>commit [ ]</action>", "commit", "commit: the bracketed argument is empty"),
    ("<action>recall [where is the apple</action>", "recall", "recall: the bracket is not closed"),
    ("<action>note [x] and more</action>", "note", "note: text after the closing bracket"),
    ("<action>track the [apple]</action>", "track",
     "track: put nothing between the verb and the bracket (write `track [...]`)"),
    (None, "", "the reply is not text (NoneType)"),
    (b"<action>look</action>", "", "the reply is not text (bytes)"),
])
def test_parse_malformed(reply, verb, reason):
  p = parse_action(reply)
  assert (p.kind, p.verb, p.reason) == ("malformed", verb, reason)


def test_parse_huge_inputs_quickly():
  t0 = time.perf_counter()
  assert parse_action("<action>" + "go " * 300_000 + "</action>").kind == "env"
  assert parse_action("<action>" * 50_000).kind == "malformed"
  assert parse_action("<think>" + "x" * 1_000_000).reason == "no <action>...</action> tag"
  assert parse_action("<action>recall [" + "[" * 100_000 + "</action>").kind == "malformed"
  assert time.perf_counter() - t0 < 2.0


_TAGS = st.sampled_from(["<action>", "</action>", "<ACTION>", "<think>", "</think>", "[", "]", " ", "\n", "track",
                         "commit", "recall", "note", "go to", "apple 1", "\x00", "İ", "'", "`"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=400), st.lists(st.one_of(_TAGS, st.text(max_size=8)), max_size=40).map("".join)))
def test_parse_never_raises(reply):
  p = parse_action(reply)
  assert p.kind in KINDS
  if p.kind == "malformed":
    assert p.reason
  else:
    assert p.text and p.text == normalize(p.text) and p.reason == ""
    assert reply.lower().count("<action>") == 1 and reply.lower().count("</action>") == 1
    assert (p.kind == "meta") == (p.verb in META_VERBS)
    if p.kind == "meta":
      assert p.arg and p.text == f"{p.verb} [{p.arg}]"


# ---------------------------------------------------------------------------------------------- belief
def test_belief_arrive_listing_and_track():
  b = Belief(HEAT_OBJECTIVE)
  upd = b.observe(*HEAT_STEPS[0][:2])
  assert upd.changed and not upd.failed
  assert b.edges == [Edge("apple 1", "on", "countertop 1"), Edge("bread 1", "on", "countertop 1"),
                     Edge("knife 1", "on", "countertop 1")]
  assert b.location == "countertop 1" and b.visited == ["countertop 1"]
  assert b.nodes["countertop 1"].attrs == {"visited": True}
  assert b.track("apple") == "TRACK [apple]:\n- apple 1: on countertop 1"
  assert b.track("Countertop") == "TRACK [countertop]:\n- countertop 1: contains apple 1, bread 1, knife 1; visited"
  assert b.track("mug") == "TRACK [mug]: not found yet. Locations visited so far: countertop 1."
  assert Belief().track("mug") == "TRACK [mug]: not found yet. Locations visited so far: none."


def test_belief_open_close_and_contents():
  b = Belief()
  b.observe("go to cabinet 2", "You arrive at cabinet 2. The cabinet 2 is closed.")
  assert b.nodes["cabinet 2"].attrs == {"visited": True, "isOpen": False}
  assert b.track("cabinet") == "TRACK [cabinet]:\n- cabinet 2: contents unknown; closed, visited"
  b.observe("open cabinet 2", "You open the cabinet 2. The cabinet 2 is open. In it, you see nothing.")
  assert b.track("cabinet") == "TRACK [cabinet]:\n- cabinet 2: contains nothing; open, visited"
  b.observe("close cabinet 2", "You close the cabinet 2.")
  assert b.nodes["cabinet 2"].attrs["isOpen"] is False
  b.observe("open cabinet 2", "You open the cabinet 2. The cabinet 2 is open. In it, you see a mug 1.")
  assert b.edges == [Edge("mug 1", "in", "cabinet 2")]


def test_belief_action_effects():
  b = Belief()
  for cmd, fb, _ in HEAT_STEPS[:4]:
    b.observe(cmd, fb)
  assert b.edges[0] == Edge("apple 1", "held_by", "agent") and b.holding() == ["apple 1"]
  assert b.nodes["apple 1"].attrs == {"isPickedUp": True, "isHeated": True, "isCooled": False}
  b.observe("cool apple 1 with fridge 1", "You cool the apple 1 using the fridge 1.")
  assert b.nodes["apple 1"].attrs == {"isPickedUp": True, "isHeated": False, "isCooled": True}
  b.observe("clean apple 1 with sinkbasin 1", "You clean the apple 1 using the sinkbasin 1.")
  b.observe("move apple 1 to countertop 1", "You move the apple 1 to the countertop 1.")
  assert b.location_of("apple 1") == Edge("apple 1", "on", "countertop 1")  # not openable: on
  assert [e.subject for e in b.edges].count("apple 1") == 1  # functional
  b.observe("take knife 1 from countertop 1", "You pick up the knife 1 from the countertop 1.")
  b.observe("slice apple 1 with knife 1", "You sliced the apple 1 with the knife 1.")
  assert b.track("apple") == "TRACK [apple]:\n- apple 1: on countertop 1; cooled, cleaned, sliced"
  b.observe("move knife 1 to drawer 1", "You move the knife 1 to the drawer 1.")
  assert b.location_of("knife 1") == Edge("knife 1", "in", "drawer 1")  # drawer is openable: in
  b.observe("use desklamp 1", "You turn on the desklamp 1.")
  assert b.nodes["desklamp 1"].attrs == {"isToggled": True}
  b.observe("use desklamp 1", "You turn off the desklamp 1.")
  assert b.track("desklamp") == "TRACK [desklamp]:\n- desklamp 1: location unknown; off"


def test_belief_nothing_happens_changes_nothing():
  b = Belief(HEAT_OBJECTIVE)
  b.observe(*HEAT_STEPS[0][:2])
  before = (list(b.edges), {k: dict(v.attrs) for k, v in b.nodes.items()}, b.location)
  upd = b.observe("take apple 2 from countertop 1", "Nothing happens.")
  assert (upd.changed, upd.failed, upd.advanced) == (False, True, False)
  assert (list(b.edges), {k: dict(v.attrs) for k, v in b.nodes.items()}, b.location) == before


def test_belief_inventory_examine_and_look():
  b = Belief()
  b.observe("inventory", "You are carrying: a mug 1.")
  assert b.holding() == ["mug 1"] and b.nodes["mug 1"].attrs == {"isPickedUp": True}
  b.observe("inventory", "You are not carrying anything.")
  assert b.holding() == [] and b.nodes["mug 1"].attrs == {"isPickedUp": False}
  b.observe("examine apple 1", "This is a hot and clean sliced apple 1.")
  assert b.nodes["apple 1"].attrs == {"isHeated": True, "isCleaned": True, "isSliced": True}
  b.observe("examine potato 1", "This is a cold potato 1.")
  assert b.nodes["potato 1"].attrs == {"isCooled": True}
  b.observe("examine desklamp 1", "This desklamp 1 is on.")
  assert b.nodes["desklamp 1"].attrs == {"isToggled": True}
  b.observe("examine bowl 1", "This is a normal bowl 1. In it, you see a egg 2.")
  assert b.location_of("egg 2") == Edge("egg 2", "in", "bowl 1")
  b.observe("examine fork 1", "There's nothing special about fork 1.")
  assert "fork 1" in b.nodes
  b.observe("look", "You are facing the sidetable 1. Next to it, you see nothing.")
  assert b.location == "sidetable 1"
  b.observe("look", "You are in the middle of a room. Looking quickly around you, you see a bed 1, and a desk 1.")
  assert b.location is None and b.receptacles[-2:] == ["bed 1", "desk 1"]


def test_belief_listing_is_complete_and_refreshes_recency():
  b = Belief()
  b.observe("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1, and a bread 1.")
  b.observe("go to shelf 1", "You arrive at shelf 1. On the shelf 1, you see a vase 1.")
  b.observe("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a bread 1.")
  assert b.edges == [Edge("bread 1", "on", "countertop 1"), Edge("vase 1", "on", "shelf 1")]
  assert b.track("apple") == "TRACK [apple]:\n- apple 1: location unknown"


def test_belief_edge_cap_keeps_newest_48():
  b = Belief()
  first = [f"pen {i}" for i in range(1, 31)]
  second = [f"cd {i}" for i in range(1, 31)]
  b.observe("go to desk 1", "You arrive at desk 1. On the desk 1, you see " + ", ".join(f"a {o}" for o in first) + ".")
  assert [e.subject for e in b.edges] == first
  b.observe("go to desk 2", "You arrive at desk 2. On the desk 2, you see " + ", ".join(f"a {o}" for o in second) + ".")
  assert len(b.edges) == MAX_EDGES == 48
  assert [e.subject for e in b.edges] == second + first[:18]
  b.observe("take pen 1 from desk 1", "You pick up the pen 1 from the desk 1.")
  assert b.edges[0] == Edge("pen 1", "held_by", "agent") and len(b.edges) == 48
  assert [e.subject for e in b.edges][1:] == second + first[1:18]


def test_belief_intro_and_world_summary():
  b = Belief(HEAT_OBJECTIVE)
  b.observe_intro(INTRO)
  assert b.receptacles == ["cabinet 1", "countertop 1", "fridge 1", "microwave 1"] and b.visited == []
  assert b.track("world") == ("WORLD:\n- you are in the middle of the room; holding nothing\n- visited: none\n"
                              "- not visited yet: cabinet 1, countertop 1, fridge 1, microwave 1\n"
                              "- objects: none seen yet")
  for cmd, fb, won in HEAT_STEPS[:4]:
    b.observe(cmd, fb, won)
  assert b.track("world") == ("WORLD:\n- you are at microwave 1; holding apple 1\n"
                              "- visited: countertop 1, microwave 1 (closed)\n"
                              "- not visited yet: cabinet 1, fridge 1\n"
                              "- objects: apple 1 held (heated); bread 1 on countertop 1; knife 1 on countertop 1")


def test_belief_progress_estimate_heat():
  b = Belief(HEAT_OBJECTIVE)
  got = [(b.observe(c, f, w).estimate, b.steps) for c, f, w in HEAT_STEPS]
  assert [e for e, _ in got] == [0.25, 0.5, 0.5, 0.75, 0.75, 0.75, 0.75, 1.0]
  b2 = Belief(HEAT_OBJECTIVE)
  assert [b2.observe(c, f, w).advanced for c, f, w in HEAT_STEPS] == [True, True, False, True, False, False, False,
                                                                      True]


def test_belief_progress_estimate_look_and_two():
  b = Belief("look at bowl under the desklamp.")
  steps = [("go to sidetable 1", "You arrive at sidetable 1. On the sidetable 1, you see a bowl 1, and a desklamp 1."),
           ("take bowl 1 from sidetable 1", "You pick up the bowl 1 from the sidetable 1."),
           ("use desklamp 1", "You turn on the desklamp 1.")]
  assert [round(b.observe(c, f).estimate, 3) for c, f in steps] == [0.333, 0.667, 1.0]
  b = Belief("find two cellphone and put them in sofa.")
  steps = [("go to bed 1", "You arrive at bed 1. On the bed 1, you see a cellphone 1, and a cellphone 2."),
           ("take cellphone 1 from bed 1", "You pick up the cellphone 1 from the bed 1."),
           ("move cellphone 1 to sofa 1", "You move the cellphone 1 to the sofa 1."),
           ("go to bed 1", "You arrive at bed 1. On the bed 1, you see a cellphone 2."),
           ("take cellphone 2 from bed 1", "You pick up the cellphone 2 from the bed 1."),
           ("go to sofa 1", "You arrive at sofa 1. On the sofa 1, you see a cellphone 1."),
           ("move cellphone 2 to sofa 1", "You move the cellphone 2 to the sofa 1.")]
  assert [b.observe(c, f).estimate for c, f in steps] == [0.25, 0.5, 0.75, 0.75, 0.75, 0.75, 1.0]


def test_belief_unparsed_objective_falls_back_to_change():
  b = Belief("do something odd")
  assert b.observe("go to bed 1", "You arrive at bed 1. On the bed 1, you see nothing.").advanced
  assert not b.observe("go to bed 1", "You arrive at bed 1. On the bed 1, you see nothing.").advanced
  assert b.observe("look", "Nothing happens.", won=True).won


@pytest.mark.parametrize("objective, family", [
    ("put a apple in fridge.", "pick_and_place_simple"),
    ("put some spraybottle on toilet.", "pick_and_place_simple"),
    ("put a clean cloth in cabinet.", "pick_clean_then_place_in_recep"),
    ("clean some cloth and put it in cabinet.", "pick_clean_then_place_in_recep"),
    ("put a hot apple in fridge.", "pick_heat_then_place_in_recep"),
    ("heat some egg and put it in countertop.", "pick_heat_then_place_in_recep"),
    ("put a cool mug in shelf.", "pick_cool_then_place_in_recep"),
    ("put a cold tomato in microwave.", "pick_cool_then_place_in_recep"),
    ("put two cellphone in sofa.", "pick_two_obj_and_place"),
    ("find two pen and put them in drawer.", "pick_two_obj_and_place"),
    ("look at bowl under the desklamp.", "look_at_obj_in_light"),
    ("examine the alarmclock with the floorlamp.", "look_at_obj_in_light"),
    ("Your task is to: look at a clean plate under the desklamp.", "look_at_obj_in_light"),  # look comes first
    ("put a hot and clean apple in two fridges", "pick_clean_then_place_in_recep"),  # clean before heat/two
    ("put a hotdog in fridge.", "pick_and_place_simple"),  # words, not substrings
])
def test_task_type_routing(objective, family):
  assert task_type_of(objective) == family
  from codjax.agents.harness.experience import task_type_of as bank_task_type
  assert bank_task_type(objective) == family  # the bank routes notes and recalls the same way


def test_parse_goal():
  assert parse_goal("Your task is to: put a hot apple in fridge.") == Goal(HEAT_TYPE, "apple", "fridge")
  assert parse_goal("clean some cloth and put it in cabinet.") == Goal("pick_clean_then_place_in_recep", "cloth",
                                                                        "cabinet")
  assert parse_goal("examine the alarmclock with the floorlamp.") == Goal("look_at_obj_in_light", "alarmclock",
                                                                           "floorlamp")
  assert parse_goal("find two pen and put them in drawer.") == Goal("pick_two_obj_and_place", "pen", "drawer")
  assert parse_goal("put some spraybottle on toilet.") == Goal("pick_and_place_simple", "spraybottle", "toilet")
  assert not parse_goal("dance").parsed


# ---------------------------------------------------------------------------------------------- progress
def test_progress_commit_closes_open_and_renders():
  p = Progress()
  p.commit("find apple")
  p.fold(HEAT_OBJECTIVE, advanced=True, won=False)
  p.commit("heat apple with microwave")
  assert p.render() == ("PLAN:\n[~] objective: put a hot apple in fridge. (partial)\n[x] find apple (complete)\n"
                        "[ ] heat apple with microwave (open)")
  p.fold(HEAT_OBJECTIVE, advanced=False, won=False, failed=True)
  assert p.render().splitlines()[1] == "[!] objective: put a hot apple in fridge. (blocked)"
  p.fold(HEAT_OBJECTIVE, advanced=False, won=False)  # a successful step lifts the block
  assert p.objective.status == "partial"
  p.fold(HEAT_OBJECTIVE, advanced=False, won=True)
  p.commit("celebrate")  # commit never closes the objective; a won objective stays complete
  p.fold(HEAT_OBJECTIVE, advanced=False, won=False, failed=True)
  assert [(s.text, s.status) for s in p.items] == [
      ("find apple", "complete"), (HEAT_OBJECTIVE, "complete"), ("heat apple with microwave", "complete"),
      ("celebrate", "open")]
  assert Progress().render() == "PLAN: (no subgoals yet)"


def test_progress_objective_open_until_advanced():
  p = Progress()
  p.fold("x", advanced=False, won=False)
  assert p.objective.status == "open"
  p.fold("x", advanced=False, won=False, failed=True)
  p.fold("x", advanced=False, won=False)
  assert p.objective.status == "open"


def test_progress_duplicates():
  p = Progress()
  p.commit("find apple")
  p.commit("Find  Apple")  # a duplicate: closed by the commit itself, nothing added
  assert [(s.text, s.status) for s in p.items] == [("find apple", "complete")]
  p.commit("heat apple")
  assert p.set_status("heat apple", "dropped")
  assert p.render() == "PLAN:\n[x] find apple (complete)"
  p.commit("heat apple")  # re-opens the dropped one
  assert [(s.text, s.status) for s in p.items] == [("find apple", "complete"), ("heat apple", "open")]
  assert not p.set_status("missing", "blocked")
  with pytest.raises(ValueError):
    p.set_status("heat apple", "done")


def test_progress_capacity_and_eviction():
  p = Progress()
  for i in range(8):
    p.add(f"s{i}")
  p.set_status("s3", "complete")
  p.set_status("s5", "dropped")
  p.add("s8")  # evicts the oldest finished: s3
  assert [s.text for s in p.items] == ["s0", "s1", "s2", "s4", "s5", "s6", "s7", "s8"]
  p.add("s9")  # then s5
  p.add("s10")  # nothing finished: the oldest, s0
  assert [s.text for s in p.items] == ["s1", "s2", "s4", "s6", "s7", "s8", "s9", "s10"]
  q = Progress()
  q.fold("goal", advanced=True, won=False)
  for i in range(8):
    q.add(f"s{i}")
  assert [s.text for s in q.items] == ["goal"] + [f"s{i}" for i in range(1, 8)]  # the objective is kept
  r = Progress()
  for i in range(10):
    r.commit(f"c{i}")  # every commit closes the previous one, so the oldest complete goes first
  assert [(s.text, s.status) for s in r.items] == [(f"c{i}", "complete") for i in range(2, 9)] + [("c9", "open")]
  with pytest.raises(ValueError):
    Progress(capacity=1)


# ---------------------------------------------------------------------------------------------- workspace
def test_inline_episode_meta_actions_and_views():
  bank = FakeBank([{"id": "s-1", "title": "heat apple in microwave"}, {"id": "s-2", "title": "apple is on countertop"}])
  h = Harness(HEAT_OBJECTIVE, bank=bank, initial_observation=INTRO)
  assert h.task_type == HEAT_TYPE and h.views() == []
  res = h.apply_meta(parse_action(act("commit [find apple]")))
  assert (res.valid, res.verb, res.annotation) == (True, "commit", "plan updated")
  assert res.text == 'COMMIT: now pursuing "find apple" (open); earlier open subgoals are marked complete.'
  assert h.views() == ["PLAN:\n[ ] find apple (open)", "LAST RESULT:\n" + res.text]
  res = h.apply_meta(parse_action(act("recall [where is apple]")))
  assert res.text == "RECALL [where is apple]: 2 entries retrieved; see RECALLED HINTS."
  assert bank.recalls == [("where is apple", HEAT_TYPE, 3)]
  assert h.hints_panel() == "RECALLED HINTS:\n- heat apple in microwave\n- apple is on countertop"
  h.observe_env(*HEAT_STEPS[0])
  assert h.last_result == ""
  assert h.views() == ["PLAN:\n[~] objective: put a hot apple in fridge. (partial)\n[ ] find apple (open)",
                       "RECALLED HINTS:\n- heat apple in microwave\n- apple is on countertop"]
  res = h.apply_meta(parse_action(act("track [apple]")))
  assert (res.text, res.annotation) == ("TRACK [apple]:\n- apple 1: on countertop 1", "belief checked")
  res = h.apply_meta(parse_action(act("note [apple found on countertop]")))
  assert res.text == f"NOTE kept for later consolidation: [{HEAT_TYPE}] apple found on countertop"
  assert bank.notes == [f"[{HEAT_TYPE}] apple found on countertop"]
  res = h.apply_meta(parse_action(act("recall [mug]")))
  assert res.text == "RECALL [mug]: nothing in experience matches yet."
  assert h.hints_panel() == 'RECALLED HINTS: (nothing matched "mug")'  # the latest recall replaces the panel
  for step in HEAT_STEPS[1:]:
    h.observe_env(*step)
  assert h.progress.objective.status == "complete" and h.env_steps == 8
  res = h.apply_meta(parse_action(act("track [world]")))
  assert res.text.splitlines()[:2] == ["WORLD:", "- you are at fridge 1; holding nothing"]
  assert h.counts() == {"attempted": {"track": 2, "commit": 1, "recall": 2, "note": 1},
                        "executed": {"track": 2, "commit": 1, "recall": 2, "note": 1},
                        "failed": {"track": 0, "commit": 0, "recall": 0, "note": 0}}


def test_note_buffer_full_and_invalid_calls():
  bank = FakeBank(capacity=0)
  h = Harness(HEAT_OBJECTIVE, bank=bank)
  res = h.apply_meta(parse_action(act("note [x]")))
  assert (res.text, res.valid, res.annotation) == ("NOTE not kept: the note buffer is full.", True, "note buffer full")
  res = h.apply_meta(parse_action(act("track apple")))
  assert (res.valid, res.verb, res.annotation) == (False, "track", "invalid format")
  assert res.text == "Invalid harness action: track needs a bracketed argument, e.g. `track [...]`."
  res = h.apply_meta(parse_action(act("go to fridge 1")))
  assert (res.valid, res.verb, res.text) == (False, "", "Invalid harness action: not a meta action.")
  res = h.apply_meta(parse_action(act("commit [" + "a" * 301 + "]")))
  assert (res.valid, res.annotation) == (False, "invalid: argument too long")
  assert h.progress.items == []
  assert h.counts()["failed"] == {"track": 1, "commit": 1, "recall": 0, "note": 0}


@pytest.mark.parametrize("modules, disabled", [
    (("progress", "experience"), {"track"}),
    (("belief", "experience"), {"commit"}),
    (("belief", "progress"), {"recall", "note"}),
])
def test_ablations_disable_verbs_and_panels(modules, disabled):
  bank = FakeBank([{"id": "s-1", "title": "apple tip"}])
  h = Harness(HEAT_OBJECTIVE, bank=bank, modules=modules)
  for verb in ("track", "commit", "recall", "note"):
    res = h.apply_meta(parse_action(act(f"{verb} [apple]")))
    assert res.valid == (verb not in disabled), verb
    if verb in disabled:
      assert (res.text, res.annotation) == (f"`{verb}` is not available in this run. Choose another action.",
                                            "unavailable")
  h.observe_env(*HEAT_STEPS[0])
  panels = "\n".join(h.views())
  assert ("PLAN:" in panels) == ("commit" not in disabled)
  assert ("RECALLED HINTS:" in panels) == ("recall" not in disabled)
  if "commit" in disabled:
    assert h.progress is None and h.belief is not None  # the belief still runs (track needs it)
  if "track" in disabled:
    assert h.belief.location == "countertop 1"  # silently updated for Progress


def test_no_bank_means_no_experience_verbs():
  h = Harness(HEAT_OBJECTIVE, bank=None)
  assert not h.enabled("recall") and not h.enabled("note") and h.enabled("track") and h.enabled("commit")
  assert not h.apply_meta(parse_action(act("recall [apple]"))).valid


def test_env_only_mode_has_no_harness():
  h = Harness(HEAT_OBJECTIVE, bank=FakeBank(), mode="env_only")
  assert h.belief is None and h.progress is None and h.bank is None
  for verb in ("track", "commit", "recall", "note"):
    res = h.apply_meta(parse_action(act(f"{verb} [apple]")))
    assert not res.valid
    assert res.text == f"`{verb}` is not available: this run has no harness actions. Choose an admissible command."
  h.observe_env(*HEAT_STEPS[0])
  h.last_result = "'x' is not an admissible command; nothing happened."
  assert h.views() == []


def test_always_on_injects_panels_and_rejects_meta():
  bank = FakeBank([{"id": "s-1", "title": "put hot apple: heat with microwave first"}])
  h = Harness(HEAT_OBJECTIVE, bank=bank, mode="always_on", initial_observation=INTRO)
  assert bank.recalls == [(HEAT_OBJECTIVE, HEAT_TYPE, 3)]  # recalled once, from the objective
  assert h.views() == [
      "WORLD:\n- you are in the middle of the room; holding nothing\n- visited: none\n"
      "- not visited yet: cabinet 1, countertop 1, fridge 1, microwave 1\n- objects: none seen yet",
      "PLAN:\n[ ] objective: put a hot apple in fridge. (open)",
      "RECALLED HINTS:\n- put hot apple: heat with microwave first"]
  res = h.apply_meta(parse_action(act("track [apple]")))
  assert not res.valid and h.calls["track"] == 1 and h.failed["track"] == 1
  for step in HEAT_STEPS[:2]:
    h.observe_env(*step)
  assert h.views()[1] == "PLAN:\n[~] objective: put a hot apple in fridge. (partial)"
  assert len(bank.recalls) == 1
  h2 = Harness(HEAT_OBJECTIVE, bank=bank, mode="always_on", modules=("progress",))
  assert h2.views() == ["PLAN:\n[ ] objective: put a hot apple in fridge. (open)"]


def test_harness_rejects_bad_settings():
  for kwargs in ({"mode": "sometimes"}, {"modules": ("belief", "memory")}, {"recall_top_k": 0},
                 {"charge_meta_actions": "yes"}):
    with pytest.raises(ValueError):
      Harness("x", **kwargs)


def test_real_bank_through_the_harness():
  from codjax.agents.harness.experience import ExperienceBank

  bank = ExperienceBank()
  bank.set_priorities("apple", ["countertop", "fridge"])
  bank.add_entry("task_specific_skills", {"title": "heat an object", "principle": "take it, heat it with the "
                                          "microwave, then place it", "when_to_apply": "heat tasks"}, HEAT_TYPE)
  h = Harness(HEAT_OBJECTIVE, bank=bank)
  res = h.apply_meta(parse_action(act("recall [where to find apple]")))
  assert res.valid and h.hints_panel() == "RECALLED HINTS:\n- [where] apple: check countertop, then fridge"
  res = h.apply_meta(parse_action(act("recall [how to do heat task]")))
  assert res.text.startswith("RECALL [how to do heat task]: 1 entry retrieved")
  assert "[procedure] heat an object" in h.hints_panel()
  assert bank.task_specific_skills[HEAT_TYPE][0]["usage_count"] == 1
  assert h.apply_meta(parse_action(act("note [apple was on countertop 1]"))).valid
  assert bank.notes == [f"[{HEAT_TYPE}] apple was on countertop 1"]


# ---------------------------------------------------------------------------------------------- render
def test_user_message_layout_and_history_window():
  h = Harness(HEAT_OBJECTIVE, bank=FakeBank())
  h.apply_meta(parse_action(act("commit [find apple]")))
  history = [(f"go to cabinet {i}", "") for i in range(1, 11)] + [("commit [find apple]", "plan updated"),
                                                                    ("track [apple]", "(belief checked)")]
  msg = render.user_message(h, HEAT_OBJECTIVE, "You arrive at cabinet 10. The cabinet 10 is closed.",
                            ["go to fridge 1", "open cabinet 10"], history)
  assert msg == (
      "OBJECTIVE: put a hot apple in fridge.\n"
      "OBSERVATION: You arrive at cabinet 10. The cabinet 10 is closed.\n"
      "ADMISSIBLE COMMANDS: 'go to fridge 1', 'open cabinet 10'\n"
      "PREVIOUS ACTION(S):\n"
      + "".join(f"{i - 2}. go to cabinet {i}\n" for i in range(3, 11))
      + "9. commit [find apple] -> (plan updated)\n"
      "10. track [apple] -> (belief checked)\n\n"
      "PLAN:\n[ ] find apple (open)\n\n"
      'LAST RESULT:\nCOMMIT: now pursuing "find apple" (open); earlier open subgoals are marked complete.')
  assert render.user_message(None, "x", "y", [], []) == ("OBJECTIVE: x\nOBSERVATION: y\nADMISSIBLE COMMANDS: (none)\n"
                                                          "PREVIOUS ACTION(S): none yet")
  assert render.history_line(("go " * 200, "not admissible")).endswith("... -> (not admissible)")


def test_system_prompts_per_mode_and_ablation():
  inline = render.system_prompt("inline")
  for s in ("<think>", "<action>", "track [", "commit [", "recall [where to find", "recall [how to do",
            "recall [mistakes", "note [", "move <object> to <receptacle>", "each one costs a step", "ADMISSIBLE"):
    assert s in inline, s
  assert "put <object> in" not in inline
  assert "do not use up your step budget" in render.system_prompt("inline", charge_meta_actions=False)
  no_exp = render.system_prompt("inline", ("belief", "progress"))
  assert "track [" in no_exp and "commit [" in no_exp and "recall [" not in no_exp and "note [" not in no_exp
  no_belief = render.system_prompt("inline", ("progress", "experience"))
  assert "track [" not in no_belief and "recall [" in no_belief
  for mode in ("always_on", "env_only"):
    text = render.system_prompt(mode)
    assert not any(f"{v} [" in text for v in META_VERBS) and "<action>" in text and "move <object>" in text
  assert "WORLD" in render.system_prompt("always_on") and "WORLD" not in render.system_prompt("env_only")
  assert "RECALLED HINTS" not in render.system_prompt("always_on", ("belief", "progress"))
  with pytest.raises(ValueError):
    render.system_prompt("chatty")
  with pytest.raises(ValueError):
    render.system_prompt("inline", ("belief", "vision"))


def _scripted_episode(mode: str, turns: int = 70) -> list[int]:
  """Prompt lengths (system + user, characters) over a long scripted episode in a 24-receptacle room."""
  recs = [f"cabinet {i}" for i in range(1, 13)] + [f"drawer {i}" for i in range(1, 7)] + [
      "countertop 1", "countertop 2", "fridge 1", "microwave 1", "sinkbasin 1", "stoveburner 1"]
  bank = FakeBank([{"id": f"s-{i}", "title": f"apple hint {i}: " + "look in the fridge first " * 4}
                   for i in range(6)])
  intro = ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you "
           "see " + ", ".join(f"a {r}" for r in recs[:-1]) + f", and a {recs[-1]}.\n\nYour task is to: "
           + HEAT_OBJECTIVE)
  h = Harness(HEAT_OBJECTIVE, bank=bank, mode=mode, initial_observation=intro)
  system = render.system_prompt(mode)
  history, observation, lengths = [], intro, []
  for t in range(turns):
    admissible = [f"go to {r}" for r in recs] + ["inventory", "look", "examine countertop 1"]
    lengths.append(len(system) + len(render.user_message(h, HEAT_OBJECTIVE, observation, admissible, history)))
    if mode == "inline" and t % 3 == 1:
      verb = ("track", "commit", "recall", "note")[t % 4]
      res = h.apply_meta(parse_action(act(f"{verb} [apple hint and a fairly long argument number {t}]")))
      history.append((res and f"{verb} [apple hint and a fairly long argument number {t}]", res.annotation))
      continue
    r = recs[t % len(recs)]
    items = ", ".join(f"a {o} {t % 5 + k}" for k, o in enumerate(("mug", "plate", "fork", "spoon", "bowl")))
    observation = f"You arrive at {r}. On the {r}, you see {items}."
    h.observe_env(f"go to {r}", observation, False)
    history.append((f"go to {r}", ""))
  return lengths


@pytest.mark.parametrize("mode", ["inline", "always_on", "env_only"])
def test_prompt_length_is_bounded_over_70_turns(mode):
  lengths = _scripted_episode(mode)
  assert max(lengths) < 8000
  assert max(lengths[35:]) <= max(lengths[10:35]) + 300  # no growth with the episode length
