"""EvoHarness Experience bank: cross-episode skills, mistakes and search priors (EvoHarness-RL, arXiv 2608.05446;
public code EvoHarnessRL/EvoHarness-RL ``evoharness/experience.py``; docs/methods/evoharness.md).

The bank is the one part of the BPE workspace that outlives an episode. It holds

* ``general_skills``: entries ``{id, title, principle, when_to_apply, usage_count, last_used}``;
* ``task_specific_skills``: the same entries, one list per task type (ALFWorld family names, ``TASK_TYPES``);
* ``common_mistakes``: entries ``{id, description, why, how_to_avoid, usage_count, last_used}``;
* ``search_priorities``: object type -> receptacle types, most promising first (``search_counts`` keeps the
  take-from frequencies the rule-based update orders them by, consolidate.py);
* ``notes``: at most ``max_notes`` (50) pending ``"[task_type] text"`` lines from ``note [x]``; they are
  consolidated between batches (``codjax.agents.harness.consolidate``), never applied at once;
* ``archived``: entries removed by ARCHIVE / DELETE / MERGE / eviction, newest last (at most 1,000 kept);
* ``meta``: ``updates`` (u, the number of policy updates so far; the reward anneals its diversity weight on
  it), ``tick`` (the recall clock behind ``last_used``), ``next_id`` and operation counters.

Rules, stated once:

* Buckets. ``general_skills``, ``common_mistakes`` and each task type's list of ``task_specific_skills`` are
  separate buckets of at most ``capacity`` (80) entries each. Entry ids are unique over the whole bank.
* Recall (``recall(query, task_type, top_k)``) routes by intent words in the query: where / find / location /
  search -> search hints; how / procedure / steps / do / task -> the task type's procedures, general skills and
  mistakes; tip / mistake / avoid / error / wrong -> mistakes. Several intents route to the union of their
  sources; a query without an intent word searches every source. A candidate's score is the number of
  distinct query words (intent and stop words left out) plus the number of the task type's keywords that
  occur among the words of its fields (a task-specific entry's task type name counts as one of its fields).
  Words are lowercased alphanumeric runs, with a plural ``s`` dropped. Candidates scoring 0 are never
  returned; a search hint is returned only when a query word names its object (task keywords or a
  receptacle name alone do not make a hint relevant). The best ``top_k`` are returned, ties in source order
  (search hints, procedures, general skills, mistakes) then stored order.
* Usage. Every returned skill or mistake gets ``usage_count += 1`` and ``last_used = tick`` (one tick per
  recall call). Search hints are not entries: they carry no usage count.
* Capacity and eviction (the paper's LFU eviction; the protection rule is codjax's choice). ADD into a full
  bucket evicts the least-frequently-used entry (lowest ``usage_count``, ties: oldest ``last_used``, then the
  earliest stored) into ``archived``. Entries with
  ``usage_count >= protect_usage`` (3) are protected: ARCHIVE / DELETE of them is vetoed, and eviction never
  picks them. When every entry of a full bucket is protected the ADD is rejected (ValueError "capacity"):
  entries the policy has recalled repeatedly are worth more than an unproven newcomer, and the consolidator
  can still UPDATE or MERGE them.
* Duplicates. A skill's title (a mistake's description) is unique within its bucket, compared lowercased
  with whitespace collapsed.
* Frozen batches. ``snapshot()`` is a deep copy that a batch of rollouts reads (its content never changes
  during the batch); ``absorb(snapshot)`` folds the usage hits and notes the batch logged on it back into the
  bank, after which the bank is consolidated.
* Files. ``save`` writes a temp file in the same folder and ``os.replace``s it; ``load`` / ``from_json``
  check the whole structure and raise ``ValueError`` naming the file and the problem.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import re
import tempfile
from typing import Any, Sequence

TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
DEFAULT_TASK_TYPE = "pick_and_place_simple"

SKILL_FIELDS = ("title", "principle", "when_to_apply")
MISTAKE_FIELDS = ("description", "why", "how_to_avoid")
CATEGORIES = ("general_skills", "task_specific_skills", "common_mistakes")
SEARCH = "search_priorities"

MAX_TITLE_CHARS = 120  # title (skills) and description (mistakes)
MAX_TEXT_CHARS = 600  # every other text field
MAX_NOTE_CHARS = 300  # longer notes are cut
MAX_NAME_CHARS = 40  # object / receptacle type names in search priorities
MAX_RECEPTACLES = 8  # per object in search priorities
MAX_ARCHIVED = 1000
FORMAT_VERSION = 1

_ID_PREFIX = {"general_skills": "gs", "task_specific_skills": "ts", "common_mistakes": "cm"}
_ARCHIVE_REASONS = ("archive", "delete", "merge", "evict")
OP_COUNTERS = ("add", "update", "archive", "merge", "skip", "evict", "priorities", "rejected", "consolidations")

_INTENTS = {
  "search": frozenset({"where", "find", "location", "locate", "search"}),
  "procedure": frozenset({"how", "procedure", "step", "steps", "do", "task"}),
  "mistake": frozenset({"tip", "tips", "mistake", "mistakes", "avoid", "error", "errors", "wrong"}),
}
_INTENT_WORDS = frozenset().union(*_INTENTS.values())
_STOP_WORDS = frozenset({
  "a", "an", "the", "to", "of", "in", "on", "at", "for", "with", "and", "or", "is", "are", "it", "its", "i",
  "me", "my", "what", "which", "should", "can", "could", "some", "any", "this", "that", "then", "there", "be",
  "from", "into", "by", "obj", "recep", "simple",
})
_TASK_WORDS = {
  "pick_and_place_simple": ("pick", "place", "put"),
  "look_at_obj_in_light": ("look", "examine", "lamp", "desklamp", "floorlamp", "light"),
  "pick_clean_then_place_in_recep": ("clean", "sinkbasin", "sink"),
  "pick_heat_then_place_in_recep": ("heat", "hot", "microwave"),
  "pick_cool_then_place_in_recep": ("cool", "cold", "fridge"),
  "pick_two_obj_and_place": ("two", "second", "pick", "place"),
}
_WORD = re.compile(r"[a-z0-9]+")


def _word(token: str) -> str:
  return token[:-1] if len(token) > 3 and token.endswith("s") and not token.endswith("ss") else token


def words(text: str) -> set[str]:
  """The scoring words of ``text``: lowercased alphanumeric runs, a plural ``s`` dropped."""
  return {_word(t) for t in _WORD.findall(text.lower())}


def task_type_of(objective: str) -> str:
  """The ALFWorld family of an objective, by keyword in the public code's order (look/examine/lamp, clean, heat/hot,
  cool/cold, two); ``pick_and_place_simple`` otherwise."""
  tokens = _WORD.findall(objective.lower())
  if any(t in ("look", "examine") or "lamp" in t for t in tokens):
    return "look_at_obj_in_light"
  for keys, family in ((("clean",), "pick_clean_then_place_in_recep"), (("heat", "hot"), "pick_heat_then_place_in_recep"),
                       (("cool", "cold"), "pick_cool_then_place_in_recep"), (("two",), "pick_two_obj_and_place")):
    if any(t in keys for t in tokens):
      return family
  return DEFAULT_TASK_TYPE


def task_words(task_type: str) -> set[str]:
  """The keywords of a task type that recall scores against (a known family's list, else its name's words)."""
  listed = _TASK_WORDS.get(task_type)
  return set(listed) if listed is not None else words(task_type.replace("_", " ")) - _STOP_WORDS


def normalize_title(text: str) -> str:
  return " ".join(text.lower().split())


def type_name(text: str) -> str:
  """An object or receptacle *type*: lowercased, instance numbers dropped ("CounterTop 2" -> "countertop")."""
  return " ".join(t for t in text.lower().split() if not t.isdigit())


def fields_of(category: str) -> tuple[str, ...]:
  if category not in CATEGORIES:
    raise ValueError(f"unknown category {category!r} (expected one of {', '.join(CATEGORIES)})")
  return MISTAKE_FIELDS if category == "common_mistakes" else SKILL_FIELDS


def check_text(name: str, value: Any) -> str:
  """A stripped, non-empty text field within its length limit, or ValueError."""
  if not isinstance(value, str):
    raise ValueError(f"field {name!r} must be a string, got {type(value).__name__}")
  text = value.strip()
  limit = MAX_TITLE_CHARS if name in ("title", "description") else MAX_TEXT_CHARS
  if not text:
    raise ValueError(f"field {name!r} is empty")
  if len(text) > limit:
    raise ValueError(f"field {name!r} is oversize ({len(text)} > {limit} characters)")
  return text


@dataclasses.dataclass
class ExperienceBank:
  """The shared Experience store. Construct empty (``ExperienceBank()``) or with ``load`` / ``from_json``."""

  capacity: int = 80
  max_notes: int = 50
  protect_usage: int = 3
  general_skills: list[dict] = dataclasses.field(default_factory=list)
  task_specific_skills: dict[str, list[dict]] = dataclasses.field(default_factory=dict)
  common_mistakes: list[dict] = dataclasses.field(default_factory=list)
  search_priorities: dict[str, list[str]] = dataclasses.field(default_factory=dict)
  search_counts: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
  notes: list[str] = dataclasses.field(default_factory=list)
  archived: list[dict] = dataclasses.field(default_factory=list)
  meta: dict = dataclasses.field(default_factory=dict)
  # Usage logged since this bank was made by ``snapshot()``: id -> hits, and the notes count it started with.
  _hits: dict[str, int] = dataclasses.field(default_factory=dict, repr=False, compare=False)
  _base_notes: int = dataclasses.field(default=0, repr=False, compare=False)

  def __post_init__(self):
    for name in ("capacity", "max_notes", "protect_usage"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ExperienceBank.{name} must be a positive integer, got {value!r}")
    self.meta.setdefault("updates", 0)
    self.meta.setdefault("tick", 0)
    self.meta.setdefault("next_id", 1)
    ops = self.meta.setdefault("ops", {})
    for name in OP_COUNTERS:
      ops.setdefault(name, 0)

  # ------------------------------------------------------------------------------------------ buckets

  def bucket(self, category: str, task_type: str | None = None, create: bool = False) -> list[dict]:
    """The entry list of a category (of ``task_type`` for task-specific skills)."""
    fields_of(category)
    if category != "task_specific_skills":
      return getattr(self, category)
    if not isinstance(task_type, str) or not task_type.strip():
      raise ValueError("task_specific_skills needs a task_type")
    if create:
      return self.task_specific_skills.setdefault(task_type, [])
    return self.task_specific_skills.get(task_type, [])

  def buckets(self) -> list[tuple[str, str | None, list[dict]]]:
    """Every bucket as (category, task_type or None, entries), in source order."""
    out: list[tuple[str, str | None, list[dict]]] = [("general_skills", None, self.general_skills)]
    out += [("task_specific_skills", t, lst) for t, lst in self.task_specific_skills.items()]
    out.append(("common_mistakes", None, self.common_mistakes))
    return out

  def find(self, entry_id: str) -> tuple[str, str | None, list[dict], int] | None:
    """(category, task_type, bucket, index) of the live entry ``entry_id``, or None."""
    for category, task_type, lst in self.buckets():
      for i, entry in enumerate(lst):
        if entry["id"] == entry_id:
          return category, task_type, lst, i
    return None

  def entry(self, entry_id: str) -> dict | None:
    found = self.find(entry_id)
    return None if found is None else found[2][found[3]]

  def is_protected(self, entry: dict) -> bool:
    return entry["usage_count"] >= self.protect_usage

  # ------------------------------------------------------------------------------------------ edits

  def count_op(self, op: str, n: int = 1):
    """Add ``n`` to the operation counter ``op`` (reported by ``stats``)."""
    self.meta["ops"][op] = self.meta["ops"].get(op, 0) + n

  def _archive(self, category: str, task_type: str | None, entry: dict, reason: str):
    self.archived.append({"category": category, "task_type": task_type, "reason": reason, "entry": entry})
    del self.archived[:-MAX_ARCHIVED]

  def _title_taken(self, lst: list[dict], key: str, title: str, skip_ids: Sequence[str] = ()) -> bool:
    norm = normalize_title(title)
    return any(normalize_title(e[key]) == norm for e in lst if e["id"] not in skip_ids)

  def lfu_victim(self, lst: list[dict]) -> dict | None:
    """The entry eviction would remove: lowest usage_count, then oldest last_used, among unprotected ones."""
    free = [(e["usage_count"], e["last_used"], i) for i, e in enumerate(lst) if not self.is_protected(e)]
    return lst[min(free)[2]] if free else None

  def add_entry(self, category: str, fields: dict, task_type: str | None = None) -> tuple[str, str | None]:
    """Add an entry; returns (new id, evicted id or None). ValueError on unknown/missing/oversize fields, a
    duplicate title, or a full bucket whose entries are all protected. Nothing changes on error."""
    names = fields_of(category)
    if not isinstance(fields, dict):
      raise ValueError("entry must be an object")
    unknown = sorted(str(k) for k in fields if k not in names)
    if unknown:
      raise ValueError(f"unknown field(s) {', '.join(unknown)} for {category}")
    missing = [k for k in names if k not in fields]
    if missing:
      raise ValueError(f"missing field(s) {', '.join(missing)} for {category}")
    clean = {k: check_text(k, fields[k]) for k in names}
    lst = self.bucket(category, task_type)
    if self._title_taken(lst, names[0], clean[names[0]]):
      raise ValueError(f"duplicate {names[0]} {clean[names[0]]!r} in {category}")
    evicted = None
    if len(lst) >= self.capacity:
      victim = self.lfu_victim(lst)
      if victim is None:
        raise ValueError(f"capacity: {category} is full ({self.capacity}) and every entry is protected")
      evicted = victim["id"]
    lst = self.bucket(category, task_type, create=True)
    if evicted is not None:
      idx = next(i for i, e in enumerate(lst) if e["id"] == evicted)
      self._archive(category, task_type, lst.pop(idx), "evict")
      self.count_op("evict")
    new_id = f"{_ID_PREFIX[category]}-{self.meta['next_id']}"
    self.meta["next_id"] += 1
    lst.append({"id": new_id, **clean, "usage_count": 0, "last_used": self.meta["tick"]})
    self.count_op("add")
    return new_id, evicted

  def update_entry(self, entry_id: str, fields: dict):
    """Replace some text fields of an entry. ValueError on an unknown id/field, bad text, duplicate title."""
    found = self.find(entry_id)
    if found is None:
      raise ValueError(f"unknown id {entry_id!r}")
    category, _, lst, i = found
    names = fields_of(category)
    if not isinstance(fields, dict) or not fields:
      raise ValueError("fields must be a non-empty object")
    unknown = sorted(str(k) for k in fields if k not in names)
    if unknown:
      raise ValueError(f"unknown field(s) {', '.join(unknown)} for {category}")
    clean = {k: check_text(k, v) for k, v in fields.items()}
    if names[0] in clean and self._title_taken(lst, names[0], clean[names[0]], skip_ids=(entry_id,)):
      raise ValueError(f"duplicate {names[0]} {clean[names[0]]!r} in {category}")
    lst[i].update(clean)
    self.count_op("update")

  def archive_entry(self, entry_id: str, reason: str = "archive"):
    """Move an entry to ``archived``; vetoed (ValueError) when it is protected."""
    if reason not in ("archive", "delete"):
      raise ValueError(f"unknown archive reason {reason!r}")
    found = self.find(entry_id)
    if found is None:
      raise ValueError(f"unknown id {entry_id!r}")
    category, task_type, lst, i = found
    if self.is_protected(lst[i]):
      raise ValueError(f"protected entry {entry_id!r} vetoed (usage_count {lst[i]['usage_count']} >= "
                       f"{self.protect_usage})")
    self._archive(category, task_type, lst.pop(i), reason)
    self.count_op("archive")

  def merge_entries(self, ids: Sequence[str], fields: dict | None = None) -> str:
    """Merge entries of one bucket into the first id: usage counts summed, last_used the latest, the others
    archived (reason "merge"), then ``fields`` (optional) applied to the kept entry. Protection does not veto a
    merge (no usage is lost). Returns the kept id."""
    if not isinstance(ids, (list, tuple)) or len(ids) < 2 or not all(isinstance(x, str) for x in ids):
      raise ValueError("merge needs a list of at least two ids")
    if len(set(ids)) != len(ids):
      raise ValueError("merge ids repeat")
    found = [self.find(x) for x in ids]
    for x, f in zip(ids, found):
      if f is None:
        raise ValueError(f"unknown id {x!r}")
    if len({id(f[2]) for f in found}) != 1:
      raise ValueError("merge ids are in different categories or task types")
    category, task_type, lst, _ = found[0]
    names = fields_of(category)
    clean: dict[str, str] = {}
    if fields is not None:
      if not isinstance(fields, dict):
        raise ValueError("fields must be an object")
      unknown = sorted(str(k) for k in fields if k not in names)
      if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)} for {category}")
      clean = {k: check_text(k, v) for k, v in fields.items()}
      if names[0] in clean and self._title_taken(lst, names[0], clean[names[0]], skip_ids=ids):
        raise ValueError(f"duplicate {names[0]} {clean[names[0]]!r} in {category}")
    keep = lst[found[0][3]]
    others = [lst[f[3]] for f in found[1:]]
    keep["usage_count"] += sum(e["usage_count"] for e in others)
    keep["last_used"] = max([keep["last_used"]] + [e["last_used"] for e in others])
    keep.update(clean)
    for e in others:
      lst.remove(e)
      self._archive(category, task_type, e, "merge")
    self.count_op("merge")
    return keep["id"]

  def set_priorities(self, obj: str, receptacles: Sequence[str]):
    """Replace the search priority list of an object type (an empty list removes it)."""
    key = type_name(obj) if isinstance(obj, str) else ""
    if not key or len(key) > MAX_NAME_CHARS:
      raise ValueError(f"bad object type {obj!r}")
    if isinstance(receptacles, (str, bytes)) or not isinstance(receptacles, Sequence):
      raise ValueError(f"receptacles of {key!r} must be a list of strings")
    out: list[str] = []
    for r in receptacles:
      name = type_name(r) if isinstance(r, str) else ""
      if not name or len(name) > MAX_NAME_CHARS:
        raise ValueError(f"bad receptacle type {r!r} for {key!r}")
      if name not in out:
        out.append(name)
    if len(out) > MAX_RECEPTACLES:
      raise ValueError(f"too many receptacles for {key!r} ({len(out)} > {MAX_RECEPTACLES})")
    if out:
      self.search_priorities[key] = out
    else:
      self.search_priorities.pop(key, None)
    self.count_op("priorities")

  # ------------------------------------------------------------------------------------------ notes

  def note(self, text: str, task_type: str) -> bool:
    """Buffer ``"[task_type] text"`` for the next consolidation. False (nothing buffered) when the buffer is
    full or the text is empty; text longer than MAX_NOTE_CHARS is cut."""
    if not isinstance(text, str) or not text.strip() or len(self.notes) >= self.max_notes:
      return False
    body = " ".join(text.split())[:MAX_NOTE_CHARS]
    self.notes.append(f"[{' '.join(str(task_type).split()) or 'unknown'}] {body}")
    return True

  def consume_notes(self, n: int):
    """Drop the ``n`` oldest notes (they were consolidated)."""
    del self.notes[:max(0, n)]

  # ------------------------------------------------------------------------------------------ recall

  def recall(self, query: str, task_type: str, top_k: int) -> list[dict]:
    """The best ``top_k`` entries for ``query`` (see the module docstring). Returned dicts are copies with a
    ``category`` key (and ``task_type`` for procedures); search hints are ``{category: "search_priorities",
    object, receptacles}``. Each returned skill/mistake gets usage_count += 1 and last_used = this tick."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
      return []
    query = query if isinstance(query, str) else ""
    task_type = task_type if isinstance(task_type, str) else ""
    qwords = words(query)
    intents = [name for name, keys in _INTENTS.items() if qwords & keys]
    routed = set(intents) if intents else {"search", "procedure", "mistake", "general"}
    if "procedure" in routed:
      routed |= {"general", "mistake"}
    qwords -= _INTENT_WORDS | _STOP_WORDS
    twords = task_words(task_type)
    scored: list[tuple[int, dict, dict | None]] = []  # (score, view, live entry)
    if "search" in routed:
      for obj, recs in self.search_priorities.items():
        hint_words = words(obj) | words(" ".join(recs))
        if qwords & words(obj):
          scored.append((len(qwords & hint_words) + len(twords & hint_words),
                         {"category": SEARCH, "object": obj, "receptacles": list(recs)}, None))
    sources: list[tuple[str, str | None, list[dict]]] = []
    if "procedure" in routed:
      sources.append(("task_specific_skills", task_type, self.task_specific_skills.get(task_type, [])))
    if "general" in routed:
      sources.append(("general_skills", None, self.general_skills))
    if "mistake" in routed:
      sources.append(("common_mistakes", None, self.common_mistakes))
    for category, ttype, lst in sources:
      names = fields_of(category)
      for entry in lst:
        text = " ".join(entry[k] for k in names)
        if ttype is not None:
          text += " " + ttype.replace("_", " ")
        ewords = words(text)
        score = len(qwords & ewords) + len(twords & ewords)
        if score > 0:
          view = {"category": category, **({"task_type": ttype} if ttype is not None else {})}
          scored.append((score, view, entry))
    order = sorted(range(len(scored)), key=lambda i: -scored[i][0])[:top_k]
    if any(scored[i][2] is not None for i in order):
      self.meta["tick"] += 1
    out = []
    for i in order:
      _, view, live = scored[i]
      if live is not None:
        live["usage_count"] += 1
        live["last_used"] = self.meta["tick"]
        self._hits[live["id"]] = self._hits.get(live["id"], 0) + 1
        view = {**view, **copy.deepcopy(live)}
      out.append(view)
    return out

  @staticmethod
  def render_entries(entries: list[dict]) -> str:
    """The RECALLED HINTS panel text for ``recall``'s result: one line per entry, or "No matching hints."."""
    lines = []
    for e in entries:
      if not isinstance(e, dict):
        continue
      category = e.get("category")
      get = functools.partial(_text_of, e)
      if category == SEARCH:
        lines.append(f"- [where] {get('object')}: check {', then '.join(map(str, e.get('receptacles', ())))}")
      elif category == "common_mistakes":
        lines.append(f"- [mistake] {get('description')} Why: {get('why')} Avoid: {get('how_to_avoid')}")
      elif category in ("task_specific_skills", "general_skills"):
        tag = "procedure" if category == "task_specific_skills" else "skill"
        lines.append(f"- [{tag}] {get('title')}: {get('principle')} (when: {get('when_to_apply')})")
    return "\n".join(lines) if lines else "No matching hints."

  # ------------------------------------------------------------------------------------------ batches

  def snapshot(self) -> ExperienceBank:
    """A deep copy for one batch of rollouts; its usage hits and new notes go back with ``absorb``."""
    snap = copy.deepcopy(self)
    snap._hits = {}
    snap._base_notes = len(snap.notes)
    return snap

  def absorb(self, snap: ExperienceBank) -> int:
    """Fold a snapshot's recall hits (onto entries still live here) and its new notes (while the buffer has
    room) back into this bank. Returns the number of notes taken over."""
    if snap._hits:
      self.meta["tick"] = max(self.meta["tick"], snap.meta["tick"]) + 1
    for entry_id, hits in snap._hits.items():
      live = self.entry(entry_id)
      if live is not None:
        live["usage_count"] += hits
        live["last_used"] = self.meta["tick"]
    fresh = snap.notes[snap._base_notes:]
    room = max(0, self.max_notes - len(self.notes))
    self.notes.extend(fresh[:room])
    return min(len(fresh), room)

  def record_update(self, n: int = 1):
    """Count ``n`` policy updates (u of the reward's annealing)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
      raise ValueError(f"record_update needs a non-negative integer, got {n!r}")
    self.meta["updates"] += n

  @property
  def updates(self) -> int:
    return self.meta["updates"]

  def stats(self) -> dict:
    """Sizes and operation counters for logging."""
    by_type = {t: len(lst) for t, lst in sorted(self.task_specific_skills.items())}
    return {"general_skills": len(self.general_skills), "task_specific_skills": sum(by_type.values()),
            "task_specific_by_type": by_type, "common_mistakes": len(self.common_mistakes),
            "search_priorities": len(self.search_priorities), "notes": len(self.notes),
            "archived": len(self.archived), "updates": self.meta["updates"], "ops": dict(self.meta["ops"])}

  # ------------------------------------------------------------------------------------------ files

  def to_json(self) -> dict:
    return copy.deepcopy({
      "version": FORMAT_VERSION,
      "config": {"capacity": self.capacity, "max_notes": self.max_notes, "protect_usage": self.protect_usage},
      "general_skills": self.general_skills, "task_specific_skills": self.task_specific_skills,
      "common_mistakes": self.common_mistakes, SEARCH: self.search_priorities,
      "search_counts": self.search_counts, "notes": self.notes, "archived": self.archived, "meta": self.meta})

  @classmethod
  def from_json(cls, data: Any) -> ExperienceBank:
    """A bank from ``to_json`` output; ValueError("<where>: <problem>") on any structural problem."""
    return _parse_bank(data)

  def save(self, path: str | os.PathLike):
    """Write the bank as JSON atomically (temp file in the same folder, then os.replace)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".experience-", suffix=".tmp", dir=folder)
    try:
      with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(self.to_json(), f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
      os.replace(tmp, path)
    except BaseException:
      if os.path.exists(tmp):
        os.unlink(tmp)
      raise

  @classmethod
  def load(cls, path: str | os.PathLike) -> ExperienceBank:
    """Read a bank written by ``save``; ValueError naming the file on unreadable, truncated or bad content."""
    path = os.fspath(path)
    try:
      with open(path, encoding="utf-8") as f:
        text = f.read()
    except (OSError, UnicodeDecodeError) as e:
      raise ValueError(f"{path}: cannot read experience bank ({e})") from None
    try:
      data = json.loads(text)
    except (ValueError, RecursionError) as e:
      raise ValueError(f"{path}: not valid JSON (truncated or corrupt): {e}") from None
    try:
      return _parse_bank(data)
    except ValueError as e:
      raise ValueError(f"{path}: invalid experience bank: {e}") from None


# ---------------------------------------------------------------------------------------------- parsing


def _text_of(entry: dict, key: str) -> str:
  return str(entry.get(key, ""))


def _is_int(x: Any, low: int = 0) -> bool:
  return isinstance(x, int) and not isinstance(x, bool) and x >= low


def _parse_entries(where: str, raw: Any, names: tuple[str, ...], capacity: int, seen: set[str]) -> list[dict]:
  if not isinstance(raw, list):
    raise ValueError(f"{where}: expected a list")
  if len(raw) > capacity:
    raise ValueError(f"{where}: {len(raw)} entries exceed capacity {capacity}")
  out, titles = [], set()
  for i, e in enumerate(raw):
    at = f"{where}[{i}]"
    if not isinstance(e, dict):
      raise ValueError(f"{at}: expected an object")
    expected = {"id", *names, "usage_count", "last_used"}
    if set(e) != expected:
      raise ValueError(f"{at}: keys {sorted(map(str, e))} != {sorted(expected)}")
    if not isinstance(e["id"], str) or not e["id"]:
      raise ValueError(f"{at}: id must be a non-empty string")
    if e["id"] in seen:
      raise ValueError(f"{at}: duplicate id {e['id']!r}")
    seen.add(e["id"])
    try:
      for k in names:
        check_text(k, e[k])
    except ValueError as err:
      raise ValueError(f"{at}: {err}") from None
    if not _is_int(e["usage_count"]) or not _is_int(e["last_used"]):
      raise ValueError(f"{at}: usage_count and last_used must be non-negative integers")
    title = normalize_title(e[names[0]])
    if title in titles:
      raise ValueError(f"{at}: duplicate {names[0]} {e[names[0]]!r}")
    titles.add(title)
    out.append(dict(e))
  return out


def _parse_bank(data: Any) -> ExperienceBank:
  if not isinstance(data, dict):
    raise ValueError("top level: expected a JSON object")
  keys = {"version", "config", *CATEGORIES, SEARCH, "search_counts", "notes", "archived", "meta"}
  if set(data) != keys:
    missing, extra = sorted(keys - set(data)), sorted(map(str, set(data) - keys))
    raise ValueError(f"top level: missing keys {missing}, unexpected keys {extra}")
  if data["version"] != FORMAT_VERSION:
    raise ValueError(f"version: {data['version']!r} is not {FORMAT_VERSION}")
  config = data["config"]
  if (not isinstance(config, dict) or set(config) != {"capacity", "max_notes", "protect_usage"}
      or not all(_is_int(v, 1) for v in config.values())):
    raise ValueError("config: expected positive integers capacity, max_notes, protect_usage")
  cap = config["capacity"]
  seen: set[str] = set()
  general = _parse_entries("general_skills", data["general_skills"], SKILL_FIELDS, cap, seen)
  mistakes = _parse_entries("common_mistakes", data["common_mistakes"], MISTAKE_FIELDS, cap, seen)
  if not isinstance(data["task_specific_skills"], dict):
    raise ValueError("task_specific_skills: expected an object of task type -> list")
  specific = {}
  for t, lst in data["task_specific_skills"].items():
    if not isinstance(t, str) or not t.strip():
      raise ValueError("task_specific_skills: empty task type")
    specific[t] = _parse_entries(f"task_specific_skills[{t!r}]", lst, SKILL_FIELDS, cap, seen)
  prios = data[SEARCH]
  if not isinstance(prios, dict):
    raise ValueError(f"{SEARCH}: expected an object")
  for obj, recs in prios.items():
    if (not isinstance(obj, str) or not obj or len(obj) > MAX_NAME_CHARS or not isinstance(recs, list) or not recs
        or len(recs) > MAX_RECEPTACLES or not all(isinstance(r, str) and r and len(r) <= MAX_NAME_CHARS
                                                  for r in recs)):
      raise ValueError(f"{SEARCH}[{obj!r}]: expected 1..{MAX_RECEPTACLES} receptacle type names")
  counts = data["search_counts"]
  if not isinstance(counts, dict) or not all(
      isinstance(o, str) and isinstance(c, dict) and all(isinstance(r, str) and _is_int(n, 1) for r, n in c.items())
      for o, c in counts.items()):
    raise ValueError("search_counts: expected object -> receptacle -> positive count")
  notes = data["notes"]
  if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
    raise ValueError("notes: expected a list of strings")
  if len(notes) > config["max_notes"]:
    raise ValueError(f"notes: {len(notes)} exceed max_notes {config['max_notes']}")
  archived = data["archived"]
  if not isinstance(archived, list) or len(archived) > MAX_ARCHIVED:
    raise ValueError(f"archived: expected a list of at most {MAX_ARCHIVED}")
  for i, a in enumerate(archived):
    if (not isinstance(a, dict) or set(a) != {"category", "task_type", "reason", "entry"}
        or a["category"] not in CATEGORIES or a["reason"] not in _ARCHIVE_REASONS
        or not (a["task_type"] is None or isinstance(a["task_type"], str)) or not isinstance(a["entry"], dict)
        or not all(isinstance(k, str) and (isinstance(v, str) or _is_int(v)) for k, v in a["entry"].items())):
      raise ValueError(f"archived[{i}]: expected {{category, task_type, reason, entry}} with a flat entry")
  meta = data["meta"]
  if not isinstance(meta, dict) or set(meta) != {"updates", "tick", "next_id", "ops"}:
    raise ValueError("meta: expected exactly updates, tick, next_id and ops")
  if not (_is_int(meta["updates"]) and _is_int(meta["tick"]) and _is_int(meta["next_id"], 1)):
    raise ValueError("meta: updates, tick must be non-negative and next_id positive integers")
  if not isinstance(meta["ops"], dict) or not all(_is_int(v) for v in meta["ops"].values()):
    raise ValueError("meta.ops: expected counter name -> non-negative integer")
  largest = max((int(m.group(1)) for x in seen if (m := re.fullmatch(r"[a-z]+-(\d+)", x))), default=0)
  if meta["next_id"] <= largest:
    raise ValueError(f"meta.next_id {meta['next_id']} does not exceed the largest id number {largest}")
  return ExperienceBank(capacity=cap, max_notes=config["max_notes"], protect_usage=config["protect_usage"],
                        general_skills=general, task_specific_skills=specific, common_mistakes=mistakes,
                        search_priorities={k: list(v) for k, v in prios.items()},
                        search_counts={k: dict(v) for k, v in counts.items()}, notes=list(notes),
                        archived=copy.deepcopy(archived), meta=copy.deepcopy(meta))
