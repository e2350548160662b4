"""EvoHarness Experience bank (codjax/agents/harness/experience.py, docs/methods/evoharness.md): capacity and LFU
eviction order, the protection veto, recall routing per intent and top_k, usage counts, the note buffer, task
types, frozen snapshots, and save/load with corrupt files."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codjax.agents.harness.experience import ExperienceBank, task_type_of

HEAT = "pick_heat_then_place_in_recep"


def skill(title: str, principle: str = "p", when: str = "w") -> dict:
  return {"title": title, "principle": principle, "when_to_apply": when}


def ids(entries: list[dict]) -> list[str]:
  return [e["id"] for e in entries]


def sample_bank() -> ExperienceBank:
  bank = ExperienceBank()
  bank.add_entry("task_specific_skills", skill("Heat procedure", "take the object, heat it with the microwave, "
                                               "then place it", "heat tasks"), HEAT)  # ts-1
  bank.add_entry("general_skills", skill("Open closed receptacles", "open a cabinet or drawer before looking "
                                         "inside", "any receptacle that can be closed"))  # gs-2
  bank.add_entry("common_mistakes", {"description": "Placing the object before you heat it",
                                     "why": "the goal checks the object is hot when placed",
                                     "how_to_avoid": "heat it in the microwave first, then place it"})  # cm-3
  bank.set_priorities("apple", ["countertop 1", "Fridge"])
  bank.set_priorities("kettle", ["stoveburner"])
  return bank


# ------------------------------------------------------------------------------------------------ capacity


def test_capacity_and_lfu_eviction_order():
  bank = ExperienceBank(capacity=3)
  for name in ("alpha", "bravo", "charlie"):
    bank.add_entry("general_skills", skill(f"{name} skill"))
  assert ids(bank.general_skills) == ["gs-1", "gs-2", "gs-3"]
  for query in ("alpha", "alpha", "bravo", "charlie"):  # usage: alpha 2 (ticks 1, 2), bravo 1 (3), charlie 1 (4)
    assert len(bank.recall(query, "", 5)) == 1
  assert [(e["usage_count"], e["last_used"]) for e in bank.general_skills] == [(2, 2), (1, 3), (1, 4)]
  # full: bravo and charlie tie on usage 1, bravo was used longer ago -> bravo goes
  assert bank.add_entry("general_skills", skill("delta skill")) == ("gs-4", "gs-2")
  assert ids(bank.general_skills) == ["gs-1", "gs-3", "gs-4"]
  assert bank.archived[-1]["reason"] == "evict" and bank.archived[-1]["entry"]["title"] == "bravo skill"
  # the newest entry has usage 0: it is the least frequently used and goes before charlie
  assert bank.add_entry("general_skills", skill("echo skill")) == ("gs-5", "gs-4")
  assert ids(bank.general_skills) == ["gs-1", "gs-3", "gs-5"]
  assert bank.stats()["ops"]["evict"] == 2 and bank.stats()["archived"] == 2


def test_never_used_entries_evict_in_insertion_order():
  bank = ExperienceBank(capacity=2)
  bank.add_entry("common_mistakes", {"description": "first", "why": "w", "how_to_avoid": "a"})
  bank.add_entry("common_mistakes", {"description": "second", "why": "w", "how_to_avoid": "a"})
  assert bank.add_entry("common_mistakes", {"description": "third", "why": "w", "how_to_avoid": "a"}) == (
    "cm-3", "cm-1")
  assert [e["description"] for e in bank.common_mistakes] == ["second", "third"]


def test_capacity_is_per_task_type():
  bank = ExperienceBank(capacity=1)
  bank.add_entry("task_specific_skills", skill("heat one"), HEAT)
  assert bank.add_entry("task_specific_skills", skill("cool one"), "pick_cool_then_place_in_recep") == ("ts-2", None)
  assert bank.add_entry("general_skills", skill("general one")) == ("gs-3", None)
  assert bank.stats()["task_specific_by_type"] == {"pick_cool_then_place_in_recep": 1, HEAT: 1}


def test_protected_entries_veto_archive_and_eviction():
  bank = ExperienceBank(capacity=2)
  bank.add_entry("general_skills", skill("alpha skill"))
  bank.add_entry("general_skills", skill("bravo skill"))
  for _ in range(3):
    bank.recall("alpha", "", 1)
  bank.recall("bravo", "", 1)
  with pytest.raises(ValueError, match="protected"):
    bank.archive_entry("gs-1")
  with pytest.raises(ValueError, match="protected"):
    bank.archive_entry("gs-1", "delete")
  # eviction skips the protected alpha (usage 3) and takes bravo (usage 1)
  assert bank.add_entry("general_skills", skill("charlie skill")) == ("gs-3", "gs-2")
  bank.archive_entry("gs-3")  # unprotected: fine
  assert ids(bank.general_skills) == ["gs-1"] and bank.archived[-1]["reason"] == "archive"


def test_add_is_rejected_when_every_entry_is_protected():
  bank = ExperienceBank(capacity=2)
  bank.add_entry("general_skills", skill("alpha skill"))
  bank.add_entry("general_skills", skill("bravo skill"))
  for _ in range(3):
    bank.recall("alpha bravo", "", 2)
  before = bank.to_json()
  with pytest.raises(ValueError, match="capacity.*every entry is protected"):
    bank.add_entry("general_skills", skill("charlie skill"))
  assert bank.to_json() == before


def test_entry_checks():
  bank = sample_bank()
  before = bank.to_json()
  for bad, message in [(skill("heat PROCEDURE "), "duplicate title"), ({"title": "x"}, "missing"),
                       ({**skill("x"), "usage_count": 9}, "unknown field"), (skill("x" * 121), "oversize"),
                       (skill("  "), "empty"), (skill(3), "must be a string")]:  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
      bank.add_entry("task_specific_skills", bad, HEAT)
  with pytest.raises(ValueError, match="unknown category"):
    bank.add_entry("tricks", skill("x"))
  with pytest.raises(ValueError, match="task_type"):
    bank.add_entry("task_specific_skills", skill("x"))
  with pytest.raises(ValueError, match="unknown id"):
    bank.update_entry("gs-99", {"title": "x"})
  with pytest.raises(ValueError, match="duplicate description"):
    bank.add_entry("common_mistakes", {"description": "placing the object  BEFORE you heat it", "why": "x",
                                       "how_to_avoid": "y"})
  with pytest.raises(ValueError, match="unknown field"):
    bank.update_entry("cm-3", {"title": "mistakes have no title"})
  assert bank.to_json() == before


def test_update_and_merge():
  bank = ExperienceBank()
  bank.add_entry("general_skills", skill("alpha skill"))
  bank.add_entry("general_skills", skill("bravo skill"))
  bank.add_entry("general_skills", skill("charlie skill"))
  bank.recall("alpha", "", 1)
  bank.recall("bravo", "", 1)
  bank.recall("bravo", "", 1)
  bank.update_entry("gs-1", {"principle": "  new principle "})
  assert bank.entry("gs-1")["principle"] == "new principle"
  with pytest.raises(ValueError, match="duplicate"):
    bank.update_entry("gs-1", {"title": "Bravo  Skill"})
  assert bank.merge_entries(["gs-2", "gs-1"], {"title": "alpha skill"}) == "gs-2"
  merged = bank.entry("gs-2")
  assert (merged["title"], merged["usage_count"], merged["last_used"]) == ("alpha skill", 3, 3)
  assert ids(bank.general_skills) == ["gs-2", "gs-3"]
  assert bank.archived[-1]["reason"] == "merge" and bank.archived[-1]["entry"]["id"] == "gs-1"
  bank.add_entry("common_mistakes", {"description": "d", "why": "w", "how_to_avoid": "a"})
  with pytest.raises(ValueError, match="different categories"):
    bank.merge_entries(["gs-2", "cm-4"])


# ------------------------------------------------------------------------------------------------ recall


def test_recall_where_routes_to_search_hints_only():
  bank = sample_bank()
  assert bank.recall("where is the apple?", HEAT, 3) == [
    {"category": "search_priorities", "object": "apple", "receptacles": ["countertop", "fridge"]}]
  assert bank.recall("find kettles", HEAT, 3) == [
    {"category": "search_priorities", "object": "kettle", "receptacles": ["stoveburner"]}]
  # the procedure mentions a microwave, but "where" asks for search hints only, and there is none for it
  assert bank.recall("where is the microwave", HEAT, 3) == []
  assert bank.render_entries(bank.recall("where is the plate", HEAT, 3)) == "No matching hints."
  assert bank.render_entries(bank.recall("where is the apple", HEAT, 3)) == (
    "- [where] apple: check countertop, then fridge")
  assert [e["usage_count"] for _, _, lst in bank.buckets() for e in lst] == [0, 0, 0]  # hints are not entries


def test_recall_how_routes_to_procedures_skills_and_mistakes_ranked_by_score():
  bank = sample_bank()
  # task words of heat: heat, hot, microwave. mistake has all three (3), the procedure heat + microwave (2),
  # the general skill none (0: not returned)
  got = bank.recall("how to do this task", HEAT, 6)
  assert [(e["category"], e["id"]) for e in got] == [("common_mistakes", "cm-3"), ("task_specific_skills", "ts-1")]
  assert got[1]["task_type"] == HEAT and got[1]["usage_count"] == 1 and got[1]["last_used"] == 1
  assert bank.render_entries(got) == (
    "- [mistake] Placing the object before you heat it Why: the goal checks the object is hot when placed "
    "Avoid: heat it in the microwave first, then place it\n"
    "- [procedure] Heat procedure: take the object, heat it with the microwave, then place it (when: heat tasks)")
  # query words "open" and "cabinet" give the general skill 2, tied with the procedure, which comes first in
  # source order (search hints, procedures, general skills, mistakes)
  got = bank.recall("how to open a cabinet", HEAT, 6)
  assert [e["id"] for e in got] == ["cm-3", "ts-1", "gs-2"]
  assert [e["id"] for e in bank.recall("how to open a cabinet", HEAT, 1)] == ["cm-3"]
  # procedures of another task type are not candidates
  assert [e["id"] for e in bank.recall("steps", "pick_cool_then_place_in_recep", 6)] == []


def test_recall_mistake_intent_and_no_intent():
  bank = sample_bank()
  assert [e["id"] for e in bank.recall("tips to avoid errors", HEAT, 6)] == ["cm-3"]
  # pick-and-place task words are pick / place / put: the mistake says "place", the procedure is another type's
  assert [e["id"] for e in bank.recall("what goes wrong", "pick_and_place_simple", 6)] == ["cm-3"]
  # no intent word: every source, query words only (no task type given)
  assert [e["id"] for e in bank.recall("cabinet", "", 6)] == ["gs-2"]
  got = bank.recall("apple", "", 6)
  assert got == [{"category": "search_priorities", "object": "apple", "receptacles": ["countertop", "fridge"]}]


def test_recall_top_k_and_usage_counts():
  bank = sample_bank()
  assert bank.recall("how to do this task", HEAT, 0) == []
  assert bank.recall("how to do this task", HEAT, -2) == []
  assert bank.meta["tick"] == 0
  bank.recall("how to do this task", HEAT, 1)  # cm-3 only
  bank.recall("how to do this task", HEAT, 2)  # cm-3 and ts-1
  usage = {e["id"]: (e["usage_count"], e["last_used"]) for _, _, lst in bank.buckets() for e in lst}
  assert usage == {"gs-2": (0, 0), "ts-1": (1, 2), "cm-3": (2, 2)}
  # returned dicts are copies: editing them leaves the bank alone
  got = bank.recall("tips", HEAT, 1)
  got[0]["description"] = "changed"
  assert bank.entry("cm-3")["description"] == "Placing the object before you heat it"


# ------------------------------------------------------------------------------------------------ notes, types


def test_note_buffer():
  bank = ExperienceBank()
  assert bank.note("  kettle found at  stoveburner 3;\nhint said countertop ", HEAT)
  assert bank.notes == [f"[{HEAT}] kettle found at stoveburner 3; hint said countertop"]
  assert not bank.note("   ", HEAT) and len(bank.notes) == 1
  for i in range(49):
    assert bank.note(f"note {i}", "pick_and_place_simple")
  assert not bank.note("one too many", HEAT)
  assert len(bank.notes) == 50 and bank.notes[-1] == "[pick_and_place_simple] note 48"
  bank.consume_notes(10)
  assert len(bank.notes) == 40 and bank.notes[0] == "[pick_and_place_simple] note 9"
  small = ExperienceBank(max_notes=1)
  assert small.note("x" * 500, HEAT) and len(small.notes[0]) == len(f"[{HEAT}] ") + 300


@pytest.mark.parametrize("objective, family", [
  ("look at bowl under the desklamp", "look_at_obj_in_light"),
  ("examine the alarmclock with the desklamp", "look_at_obj_in_light"),
  ("put a clean lettuce in diningtable", "pick_clean_then_place_in_recep"),
  ("heat some egg and put it in garbagecan", "pick_heat_then_place_in_recep"),
  ("put a hot apple in fridge", "pick_heat_then_place_in_recep"),
  ("cool some pan and put it in stoveburner", "pick_cool_then_place_in_recep"),
  ("put two cellphone in sofa", "pick_two_obj_and_place"),
  ("put some spraybottle on toilet", "pick_and_place_simple"),
  ("put a clean hot mug in coffeemachine", "pick_clean_then_place_in_recep"),  # clean is checked before heat
])
def test_task_type_of(objective, family):
  assert task_type_of(objective) == family


# ------------------------------------------------------------------------------------------------ batches


def test_snapshot_is_frozen_and_absorb_merges_usage_and_notes():
  bank = sample_bank()
  snap = bank.snapshot()
  snap.recall("tips", HEAT, 1)
  snap.recall("tips", HEAT, 1)
  snap.note("kettle was on stoveburner", HEAT)
  bank.add_entry("general_skills", skill("added while the batch ran"))
  assert bank.entry("cm-3")["usage_count"] == 0 and bank.notes == []
  assert snap.entry("gs-4") is None  # the batch never sees the new entry
  assert bank.absorb(snap) == 1
  assert bank.entry("cm-3")["usage_count"] == 2
  assert bank.entry("cm-3")["last_used"] == bank.meta["tick"] == 3
  assert bank.notes == [f"[{HEAT}] kettle was on stoveburner"]


def test_updates_counter_and_stats():
  bank = sample_bank()
  bank.record_update()
  bank.record_update(4)
  with pytest.raises(ValueError):
    bank.record_update(-1)
  stats = bank.stats()
  assert bank.updates == 5 and stats["updates"] == 5
  assert (stats["general_skills"], stats["task_specific_skills"], stats["common_mistakes"],
          stats["search_priorities"], stats["notes"]) == (1, 1, 1, 2, 0)
  assert stats["ops"]["add"] == 3 and stats["ops"]["priorities"] == 2


# ------------------------------------------------------------------------------------------------ files


def test_save_load_round_trip(tmp_path):
  bank = sample_bank()
  bank.recall("how to do this task", HEAT, 2)
  bank.note("kettle on stoveburner", HEAT)
  bank.record_update(7)
  bank.archive_entry("gs-2")
  path = tmp_path / "bank.json"
  bank.save(path)
  assert os.listdir(tmp_path) == ["bank.json"]  # the temp file was replaced into place
  loaded = ExperienceBank.load(path)
  assert loaded.to_json() == bank.to_json()
  assert loaded.updates == 7 and loaded.entry("cm-3")["usage_count"] == 1
  assert loaded.add_entry("general_skills", skill("fresh")) == ("gs-4", None)  # ids keep counting
  bank.save(path)  # overwrite
  assert ExperienceBank.load(path).to_json() == bank.to_json()


def _write(path, text):
  path.write_text(text)
  return path


def test_corrupt_files_raise_value_error_naming_file_and_problem(tmp_path):
  good = sample_bank().to_json()
  text = json.dumps(good)
  cases = {
    "truncated.json": (text[:len(text) // 2], "not valid JSON"),
    "empty.json": ("", "not valid JSON"),
    "nested.json": ("[" * 100_000 + "]" * 100_000, "not valid JSON|top level"),
    "list.json": ("[1, 2]", "top level"),
    "notes.json": (json.dumps({**good, "notes": "oops"}), "notes"),
    "dup.json": (json.dumps({**good, "common_mistakes": [{**good["common_mistakes"][0], "id": "ts-1"}]}),
                 "duplicate id"),
    "usage.json": (json.dumps({**good, "general_skills": [{**good["general_skills"][0], "usage_count": -1}]}),
                   "usage_count"),
    "keys.json": (json.dumps({k: v for k, v in good.items() if k != "meta"}), "missing keys"),
    "version.json": (json.dumps({**good, "version": 99}), "version"),
    "over.json": (json.dumps({**good, "config": {**good["config"], "capacity": 0}}), "config"),
    "nextid.json": (json.dumps({**good, "meta": {**good["meta"], "next_id": 2}}), "next_id"),
  }
  for name, (content, message) in cases.items():
    path = _write(tmp_path / name, content)
    with pytest.raises(ValueError, match=message) as info:
      ExperienceBank.load(path)
    assert str(path) in str(info.value), name
  (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
  with pytest.raises(ValueError, match="binary.json"):
    ExperienceBank.load(tmp_path / "binary.json")
  with pytest.raises(ValueError, match="missing.json"):
    ExperienceBank.load(tmp_path / "missing.json")


_json = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats() | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(sorted(sample_bank().to_json())), field=st.sampled_from(
  ["id", "title", "principle", "when_to_apply", "usage_count", "last_used", None]), value=_json)
def test_from_json_rejects_damaged_banks_with_value_error(key, field, value):
  # the undamaged bank loads, as itself: a from_json that refused everything would pass the rest
  good = sample_bank().to_json()
  assert good["general_skills"] and ExperienceBank.from_json(json.loads(json.dumps(good))).to_json() == good
  data = sample_bank().to_json()
  if field is None or key != "general_skills":
    data[key] = value
  else:
    data[key][0][field] = value
  try:
    bank = ExperienceBank.from_json(data)
  except ValueError:
    return
  assert ExperienceBank.from_json(bank.to_json()).to_json() == bank.to_json()  # what loads is a sound bank
