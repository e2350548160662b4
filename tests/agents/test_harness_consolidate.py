"""Experience consolidation (codjax/agents/harness/consolidate.py, docs/methods/evoharness.md): evidence
sampling and action summaries, frequency-ordered search priorities, op validation (partly invalid, malformed
and hostile payloads; a hypothesis test that arbitrary text and JSON never raise and never change the bank
unless valid), JSON extraction from replies, the rule consolidator on hand-built episodes and the LLM
consolidator with a scripted generator (good, partly invalid and garbage replies, failures carried to the next
window)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codjax.agents.harness.consolidate import (MAX_OPS, EpisodeRecord, LLMConsolidator, RuleConsolidator,
                                               action_summary, apply_ops, build_evidence, extract_json,
                                               strip_instances, update_search_priorities, validate_ops)
from codjax.agents.harness.experience import ExperienceBank

HEAT = "pick_heat_then_place_in_recep"
COOL = "pick_cool_then_place_in_recep"

R_HEAT_APPLE = EpisodeRecord("put a hot apple in fridge", HEAT, True, [
  "recall [how to heat]", "go to countertop 1", "take apple 1 from countertop 1", "go to microwave 1",
  "heat apple 1 with microwave 1", "go to fridge 1", "open fridge 1", "move apple 1 to fridge 1"])
R_HEAT_POTATO = EpisodeRecord("put a hot potato in fridge", HEAT, True, [
  "go to diningtable 1", "go to countertop 2", "take potato 2 from countertop 2", "go to microwave 1",
  "heat potato 2 with microwave 1", "go to fridge 1", "open fridge 1", "move potato 2 to fridge 1"])
R_HEAT_LOST = EpisodeRecord("put a hot apple in fridge", HEAT, False, [
  "go to cabinet 1", "go to cabinet 2", "track [apple]", "go to cabinet 2", "look"])
R_COOL = EpisodeRecord("put a cool apple in countertop", COOL, True, [
  "go to diningtable 1", "take apple 2 from diningtable 1", "go to fridge 1", "cool apple 2 with fridge 1",
  "go to countertop 1", "move apple 2 to countertop 1"])


def skill(title: str, principle: str = "p", when: str = "w") -> dict:
  return {"title": title, "principle": principle, "when_to_apply": when}


def small_bank() -> ExperienceBank:
  bank = ExperienceBank()
  bank.add_entry("general_skills", skill("Open closed receptacles", "open a cabinet before looking inside"))  # gs-1
  bank.add_entry("general_skills", skill("Check every countertop", "countertops hold most small objects"))  # gs-2
  bank.add_entry("common_mistakes", {"description": "Placing before heating", "why": "goal needs it hot",
                                     "how_to_avoid": "heat first"})  # cm-3
  for _ in range(3):
    bank.recall("cabinet", "", 1)  # gs-1 used 3 times: protected
  return bank


def content(bank: ExperienceBank) -> dict:
  data = bank.to_json()
  return {k: data[k] for k in ("general_skills", "task_specific_skills", "common_mistakes", "search_priorities")}


# ------------------------------------------------------------------------------------------------ evidence


def test_strip_instances_and_summary():
  assert strip_instances("Take Apple 1 from  CounterTop 2") == "take apple from countertop"
  assert action_summary(R_HEAT_LOST.actions) == "go to cabinet (x3) > look"
  assert action_summary(R_HEAT_APPLE.actions) == (
    "go to countertop > take apple from countertop > go to microwave > heat apple with microwave > go to fridge > "
    "open fridge > move apple to fridge")
  assert action_summary(["a", "b", "c", "d", "e"], max_steps=3) == "a > b > c > ... (2 more)"
  assert action_summary(["note [x]", ""]) == "(no environment actions)"


def test_evidence_round_robin_over_objectives_and_search_counts():
  recs = [EpisodeRecord(obj, HEAT, True, [f"take apple {i} from {rec} 1"])
          for i, (obj, rec) in enumerate([("A", "countertop"), ("A", "countertop"), ("B", "fridge"),
                                          ("A", "diningtable"), ("C", "countertop"), ("C", "countertop")])]
  recs.append(EpisodeRecord("A", HEAT, False, ["take apple 1 from sinkbasin 1"]))  # failures give no counts
  ev = build_evidence(recs, ["[x] note"], per_kind=4)
  assert [o for o, _ in ev.episodes[HEAT]["won"]] == ["A", "B", "C", "A"]
  assert ev.episodes[HEAT]["failed"] == [("A", "take apple from sinkbasin")]
  assert ev.search_counts == {"apple": {"countertop": 4, "fridge": 1, "diningtable": 1}}
  assert ev.notes == ("[x] note",) and ev.num_records == 7


def test_search_priorities_follow_cumulative_frequency():
  bank = ExperienceBank()
  bank.set_priorities("apple", ["fridge", "countertop"])
  assert update_search_priorities(bank, {"apple": {"countertop": 2, "diningtable": 1},
                                         "mug": {"cabinet": 1, "coffeemachine": 1}}) == 2
  # counted first (countertop 2, diningtable 1), then the listed-but-uncounted fridge; ties alphabetical
  assert bank.search_priorities == {"apple": ["countertop", "diningtable", "fridge"],
                                    "mug": ["cabinet", "coffeemachine"]}
  assert update_search_priorities(bank, {"mug": {"coffeemachine": 1}}) == 1
  assert bank.search_priorities["mug"] == ["coffeemachine", "cabinet"]
  assert update_search_priorities(bank, {"mug": {"cabinet": 1}}) == 0  # a 2:2 tie keeps the current order
  assert bank.search_priorities["mug"] == ["coffeemachine", "cabinet"]
  assert bank.search_counts["mug"] == {"cabinet": 2, "coffeemachine": 2}


# ------------------------------------------------------------------------------------------------ ops


def test_validate_partly_invalid_payload_then_apply():
  bank = small_bank()
  before = bank.to_json()
  payload = {"ops": [
    {"op": "add", "category": "general_skills", "entry": skill("Examine under a lamp"), "rationale": "new"},
    {"op": "add", "category": "general_skills", "entry": skill("open  CLOSED receptacles")},
    {"op": "add", "category": "tricks", "entry": skill("x")},
    {"op": "add", "category": "task_specific_skills", "task_type": "juggling", "entry": skill("x")},
    {"op": "add", "category": "general_skills", "entry": {"title": "x", "principle": "p", "when": "w"}},
    {"op": "update", "id": "gs-2", "fields": {"principle": "look on every countertop before the cabinets"}},
    {"op": "update", "id": "gs-77", "fields": {"principle": "x"}},
    {"op": "update", "id": "gs-2", "fields": {"principle": 5}},
    {"op": "update", "id": "gs-2", "fields": {"principle": "x" * 601}},
    {"op": "archive", "id": "gs-1"},
    {"op": "archive", "id": "gs-4"},  # the entry added by the first op of this payload
    {"op": "skip"},
    {"op": "fly"},
    "not an op",
    {"op": "merge", "ids": ["gs-2"]},
  ], "search_priorities": {"Apple": ["countertop 1", "fridge"], "mug": "cabinet", "": ["x"]}}
  check = validate_ops(bank, payload)
  assert bank.to_json() == before  # validation never touches the bank
  assert check.ok
  assert [op["op"] for op in check.accepted] == ["add", "update", "archive", "skip"]
  reasons = [r["reason"] for r in check.rejected]
  expected = ["duplicate title", "unknown category", "unknown task type", "unknown field", "unknown id",
              "must be a string", "oversize", "protected", "unknown op", "op must be an object",
              "at least two ids", "must be a list", "bad object type"]
  assert len(reasons) == len(expected)
  for got, want in zip(reasons, expected):
    assert want in got, (got, want)
  assert check.priorities == {"apple": ["countertop", "fridge"]}
  assert apply_ops(bank, check) == []
  assert [e["id"] for e in bank.general_skills] == ["gs-1", "gs-2"]
  assert bank.entry("gs-2")["principle"] == "look on every countertop before the cabinets"
  assert bank.archived[-1]["entry"]["title"] == "Examine under a lamp"
  assert bank.search_priorities == {"apple": ["countertop", "fridge"]}


def test_merge_op_sums_usage():
  bank = small_bank()
  check = validate_ops(bank, {"ops": [{"op": "merge", "ids": ["gs-2", "gs-1"],
                                       "fields": {"title": "Search countertops, then open receptacles"}}]})
  assert check.rejected == [] and apply_ops(bank, check) == []
  assert [(e["id"], e["title"], e["usage_count"]) for e in bank.general_skills] == [
    ("gs-2", "Search countertops, then open receptacles", 3)]


@pytest.mark.parametrize("payload, message", [
  ([{"op": "skip"}], "not a JSON object"),
  ("ops", "not a JSON object"),
  ({}, "neither"),
  ({"ops": "add everything"}, "'ops' is not a list"),
  ({"ops": [], "search_priorities": ["apple"]}, "not an object"),
  ({"ops": [{"op": "add", "category": "general_skills", "entry": {"a": {"b": {"c": {"d": {"e": {}}}}}}}]},
   "nested too deeply"),
  ({"ops": [{"op": "skip"}] * 6000}, "too large"),
])
def test_malformed_payloads_change_nothing(payload, message):
  bank = small_bank()
  before = bank.to_json()
  check = validate_ops(bank, payload)
  assert not check.ok and message in check.error
  assert apply_ops(bank, check) == [] and bank.to_json() == before


def test_too_many_ops_are_cut():
  check = validate_ops(small_bank(), {"ops": [{"op": "skip"}] * (MAX_OPS + 6)})
  assert len(check.accepted) == MAX_OPS and len(check.rejected) == 6
  assert all("too many ops" in r["reason"] for r in check.rejected)


def test_extract_json_from_replies():
  assert extract_json('```json\n{"ops": []}\n```') == ({"ops": []}, None)
  assert extract_json('Sure. Here they are: {"ops": [{"op": "skip"}]} Hope this helps {.') == (
    {"ops": [{"op": "skip"}]}, None)
  assert extract_json('<think>maybe {"ops": "wrong"}</think>\n{"ops": []}') == ({"ops": []}, None)
  assert extract_json('{"ops": [] ') == (None, "no JSON object found in the reply")
  assert extract_json("[1, 2]") == (None, "reply holds JSON that is not an object (list)")
  assert extract_json(None) == (None, "reply is not a string (NoneType)")
  assert extract_json("x" * 100_001)[1] == "reply too long (100001 > 100000 characters)"
  assert extract_json("{" * 50_000)[0] is None
  assert extract_json('{"a":' * 20_000 + "1" + "}" * 20_000)[0] is None  # too deep for the parser: no crash


_KEYS = ["ops", "op", "id", "ids", "category", "task_type", "entry", "fields", "title", "principle",
         "when_to_apply", "description", "why", "how_to_avoid", "search_priorities", "apple"]
_WORDS = ["add", "update", "archive", "delete", "merge", "skip", "general_skills", "task_specific_skills",
          "common_mistakes", HEAT, "gs-1", "gs-2", "cm-3", "ts-9", "countertop", "Open closed receptacles", ""]
_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.sampled_from(_WORDS) | \
  st.text(max_size=12)
_json = st.recursive(_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(
  st.sampled_from(_KEYS) | st.text(max_size=6), c, max_size=5), max_leaves=25)
# op-shaped payloads, so that a good share of the generated ops is valid and gets applied
_field_text = st.one_of(st.sampled_from(["Open closed receptacles", "heat first", "look under the lamp", "check"]),
                        st.text(min_size=1, max_size=20), st.sampled_from(["", " ", "x" * 700]))
_ids = st.sampled_from(["gs-1", "gs-2", "cm-3", "gs-4", "zz-1", ""]) | _scalars
_ops = st.one_of(
  st.fixed_dictionaries({"op": st.just("add"), "category": st.sampled_from(
    ["general_skills", "task_specific_skills", "common_mistakes", "bogus"]), "entry": st.fixed_dictionaries(
      {"title": _field_text, "principle": _field_text, "when_to_apply": _field_text}) | st.fixed_dictionaries(
      {"description": _field_text, "why": _field_text, "how_to_avoid": _field_text}) | _json},
    optional={"task_type": st.sampled_from([HEAT, "juggling"]) | _scalars}),
  st.fixed_dictionaries({"op": st.just("update"), "id": _ids, "fields": st.dictionaries(
    st.sampled_from(["title", "principle", "why", "usage_count"]), _field_text | _scalars, max_size=3)}),
  st.fixed_dictionaries({"op": st.sampled_from(["archive", "delete"]), "id": _ids}),
  st.fixed_dictionaries({"op": st.just("merge"), "ids": st.lists(_ids, max_size=3)}),
  st.just({"op": "skip"}), _json)
_payloads = st.fixed_dictionaries({"ops": st.lists(_ops, max_size=6)}, optional={
  "search_priorities": st.dictionaries(st.sampled_from(["apple", "Mug", "", "x" * 50]), st.lists(
    st.sampled_from(["countertop 1", "fridge", "", 3]), max_size=4) | _scalars, max_size=3)})
_texts = st.one_of(st.text(max_size=300), _json.map(json.dumps), _json.map(lambda v: f"```json\n{json.dumps(v)}\n```"),
                   _payloads.map(json.dumps), _payloads.map(lambda v: f"Ops:\n```json\n{json.dumps(v)}\n``` done"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reply=_texts)
def test_arbitrary_replies_never_raise_or_corrupt_the_bank(reply):
  bank = small_bank()
  bank.note("kettle on stoveburner", HEAT)
  before = bank.to_json()
  payload, error = extract_json(reply)
  check = validate_ops(bank, payload) if error is None else None
  assert bank.to_json() == before  # looking never changes the bank
  cons = LLMConsolidator(lambda prompts: [reply])
  report = cons.consolidate(bank, [R_HEAT_LOST])
  if not report["ok"]:
    assert bank.to_json() == before and cons.carry == [R_HEAT_LOST]
  else:
    assert check is not None and check.ok and bank.notes == []
    if not check.accepted and not check.priorities:
      assert content(bank) == content(ExperienceBank.from_json(before))
  assert ExperienceBank.from_json(bank.to_json()).to_json() == bank.to_json()  # still a valid bank


@settings(max_examples=200, deadline=None)
@given(payload=_json | _payloads)
def test_arbitrary_json_payloads_never_raise(payload):
  bank = small_bank()
  before = bank.to_json()
  check = validate_ops(bank, payload)
  assert bank.to_json() == before
  late = apply_ops(bank, check)
  assert late == []  # accepted ops stay acceptable on the unchanged bank
  if not check.ok or (not check.accepted and not check.priorities):
    assert content(bank) == content(ExperienceBank.from_json(before))
  ExperienceBank.from_json(bank.to_json())


# ------------------------------------------------------------------------------------------------ rule consolidator


def test_rule_consolidator_on_hand_built_episodes():
  bank = ExperienceBank()
  bank.note("kettle found at stoveburner 3, hint said countertop", HEAT)
  bank.note("always open drawers", "webshop")
  report = RuleConsolidator().consolidate(bank, [R_HEAT_APPLE, R_HEAT_POTATO, R_HEAT_LOST, R_COOL])
  assert report["ok"] and report["rejected"] == [] and report["notes_consumed"] == 2
  assert report["applied"] == {"add": 4, "update": 0, "archive": 0, "merge": 0, "skip": 0, "evict": 0,
                               "priorities": 2}
  assert report["sizes_before"]["notes"] == 2 and report["sizes_after"]["task_specific_skills"] == 3
  assert bank.task_specific_skills[COOL] == [{
    "id": "ts-1", "title": "Cool-and-place procedure: take > cool > move",
    "principle": "A sequence that solved 'put a cool apple in countertop': go to diningtable, take apple from "
                 "diningtable, go to fridge, cool apple with fridge, go to countertop, move apple to countertop. "
                 "Reach each receptacle with 'go to' and open closed ones before looking inside.",
    "when_to_apply": "Cool-and-place tasks (1 of 1 recent successes followed these steps).",
    "usage_count": 0, "last_used": 0}]
  heat = bank.task_specific_skills[HEAT]
  assert [e["title"] for e in heat] == ["Heat-and-place procedure: take > heat > open > move",
                                        "Note: kettle found at stoveburner 3, hint said countertop"]
  assert heat[0]["principle"].startswith(
    "A sequence that solved 'put a hot apple in fridge': go to countertop, take apple from countertop, go to "
    "microwave, heat apple with microwave, go to fridge, open fridge, move apple to fridge.")
  assert heat[0]["when_to_apply"] == "Heat-and-place tasks (2 of 2 recent successes followed these steps)."
  assert bank.general_skills == [{"id": "gs-4", "title": "Note: always open drawers",
                                  "principle": "always open drawers",
                                  "when_to_apply": "Any task (written by the agent during an episode).",
                                  "usage_count": 0, "last_used": 0}]
  assert bank.search_priorities == {"apple": ["countertop", "diningtable"], "potato": ["countertop"]}
  assert bank.notes == []
  # the next window: known procedures are skipped, a second cool win reorders apple's priorities
  cool_again = EpisodeRecord("put a cool apple in sidetable", COOL, True, [
    "go to diningtable 2", "take apple 1 from diningtable 2", "go to fridge 1", "cool apple 1 with fridge 1",
    "go to sidetable 1", "move apple 1 to sidetable 1"])
  report = RuleConsolidator().consolidate(bank, [R_HEAT_APPLE, R_COOL, cool_again])
  assert report["applied"] == {"add": 0, "update": 0, "archive": 0, "merge": 0, "skip": 2, "evict": 0,
                               "priorities": 1}
  assert bank.search_priorities["apple"] == ["diningtable", "countertop"]  # 3 against 2
  assert bank.stats()["ops"]["consolidations"] == 2


def test_rule_consolidator_skips_a_repeated_note():
  bank = ExperienceBank()
  bank.note("open the fridge first", COOL)
  bank.note("open the fridge first", COOL)
  report = RuleConsolidator().consolidate(bank, [])
  assert report["applied"]["add"] == 1 and report["applied"]["skip"] == 1 and report["rejected"] == []
  assert [e["title"] for e in bank.task_specific_skills[COOL]] == ["Note: open the fridge first"]


# ------------------------------------------------------------------------------------------------ LLM consolidator


class Script:
  """A fake generator returning scripted replies and recording its prompts."""

  def __init__(self, *replies):
    self.replies, self.prompts = list(replies), []

  def __call__(self, prompts: list[str]) -> list[str]:
    self.prompts.append(prompts)
    reply = self.replies.pop(0)
    if isinstance(reply, Exception):
      raise reply
    return [reply]


GOOD = """I looked at the evidence.
```json
{"ops": [
  {"op": "add", "category": "common_mistakes", "entry": {"description": "Searching cabinets for a kettle",
   "why": "kettles sit on stoveburners", "how_to_avoid": "check stoveburners first"}},
  {"op": "update", "id": "gs-2", "fields": {"when_to_apply": "when looking for small objects"}}
 ],
 "search_priorities": {"kettle": ["stoveburner", "countertop"]}}
```"""


def test_llm_consolidator_good_reply():
  bank = small_bank()
  bank.note("kettle found at stoveburner 3, hint said countertop", HEAT)
  gen = Script(GOOD)
  report = LLMConsolidator(gen).consolidate(bank, [R_HEAT_APPLE, R_HEAT_LOST])
  assert report["ok"] and report["error"] is None and report["rejected"] == []
  assert report["applied"] == {"add": 1, "update": 1, "archive": 0, "merge": 0, "skip": 0, "evict": 0,
                               "priorities": 2}  # apple from the evidence counts, kettle from the reply
  assert report["notes_consumed"] == 1 and bank.notes == []
  assert [e["description"] for e in bank.common_mistakes] == ["Placing before heating",
                                                               "Searching cabinets for a kettle"]
  assert bank.entry("gs-2")["when_to_apply"] == "when looking for small objects"
  assert bank.search_priorities == {"apple": ["countertop"], "kettle": ["stoveburner", "countertop"]}
  (prompt,), = gen.prompts
  for shown in ("[gs-1] (used 3x)", "[cm-3]", "put a hot apple in fridge: go to countertop > take apple from",
                "go to cabinet (x3) > look", "apple: countertop x1", "kettle found at stoveburner 3",
                '{"ops": [...], "search_priorities": {...}}'):
    assert shown in prompt, shown


def test_llm_consolidator_partly_invalid_reply():
  bank = small_bank()
  reply = json.dumps({"ops": [{"op": "archive", "id": "gs-1"}, {"op": "archive", "id": "gs-2"},
                              {"op": "update", "id": "zz-1", "fields": {"title": "t"}}]})
  report = LLMConsolidator(Script(f"Here you go: {reply}")).consolidate(bank, [])
  assert report["ok"] and report["applied"]["archive"] == 1
  assert [r["reason"][:20] for r in report["rejected"]] == ["protected entry 'gs-", "unknown id 'zz-1'"]
  assert [e["id"] for e in bank.general_skills] == ["gs-1"] and bank.stats()["ops"]["rejected"] == 2


def test_llm_consolidator_garbage_keeps_evidence_for_the_next_window():
  bank = small_bank()
  bank.note("kettle on stoveburner", HEAT)
  before = bank.to_json()
  gen = Script("I cannot do that.", RuntimeError("server gone"), '{"ops": "all of them"}',
               '```json\n{"ops": [{"op": "skip"}]}\n```')
  cons = LLMConsolidator(gen)
  report = cons.consolidate(bank, [R_HEAT_LOST])
  assert not report["ok"] and report["error"] == "no JSON object found in the reply"
  assert report["carried"] == 1 and bank.to_json() == before
  report = cons.consolidate(bank, [R_COOL])
  assert not report["ok"] and report["error"] == "generate failed: RuntimeError: server gone"
  assert report["carried"] == 2 and bank.to_json() == before
  report = cons.consolidate(bank, [])
  assert not report["ok"] and report["error"] == "'ops' is not a list (str)" and bank.to_json() == before
  assert cons.failures == ["no JSON object found in the reply", "generate failed: RuntimeError: server gone",
                           "'ops' is not a list (str)"]
  report = cons.consolidate(bank, [])
  assert report["ok"] and report["episodes"] == 2 and report["applied"]["skip"] == 1
  assert report["notes_consumed"] == 1 and bank.notes == [] and cons.carry == []
  assert bank.search_priorities == {"apple": ["diningtable"]}  # the carried cool win's take-from
  last_prompt = gen.prompts[-1][0]
  assert "put a hot apple in fridge: go to cabinet (x3) > look" in last_prompt
  assert "put a cool apple in countertop" in last_prompt and "kettle on stoveburner" in last_prompt


def test_llm_consolidator_wrong_reply_count():
  bank = small_bank()
  before = bank.to_json()
  report = LLMConsolidator(lambda prompts: ["{}", "{}"]).consolidate(bank, [])
  assert not report["ok"] and "one reply" in report["error"] and bank.to_json() == before
