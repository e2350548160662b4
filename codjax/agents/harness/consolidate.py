"""Experience consolidation between batches: evidence, validated ops, rule-based and LLM consolidators
(codjax's reconciliation of the paper's consolidation, EvoHarness-RL arXiv 2608.05446, with the public code
EvoHarnessRL/EvoHarness-RL ``evoharness/experience.py`` and ``evoharness/evolver.py``, whose numbers are the defaults;
docs/methods/evoharness.md).

Rules, stated once:

* Evidence (``build_evidence``). Finished episodes arrive as ``EpisodeRecord(objective, task_type, won,
  actions)``. Per task type at most ``per_kind`` (20) successful and 20 failed episodes are taken, round-robin
  over distinct objectives (objectives in first-seen order; the first episode of each, then the second, ...).
  Each is shown as its objective and an action summary: environment actions only (meta verbs dropped),
  lowercased, instance numbers dropped ("take apple 1 from countertop 2" -> "take apple from countertop"),
  runs of the same step folded ("go to cabinet (x3)"), joined by " > ", at most 40 steps. Search counts come
  from every successful episode's ``take X from Y`` actions (object type -> receptacle type -> count). The
  pending notes of the bank are part of the evidence.
* Ops payload (JSON object): ``{"ops": [...], "search_priorities": {object: [receptacle, ...]}}`` with
    ``{"op": "add", "category": C, "task_type": T (task_specific_skills only), "entry": {fields}}``,
    ``{"op": "update", "id": I, "fields": {fields}}``, ``{"op": "archive", "id": I}`` (``"delete"`` is an alias),
    ``{"op": "merge", "ids": [keep, other, ...], "fields": {...} (optional)}`` and ``{"op": "skip"}``;
  every op may also carry a string ``"rationale"``, which is ignored. Skill fields are title / principle /
  when_to_apply, mistake fields description / why / how_to_avoid. A search priority list replaces the
  object's list (an empty list removes it).
* Validation (``validate_ops``) happens before the bank is touched: the ops are run in order on a scratch copy
  of the bank, so an op is judged against the bank as the earlier accepted ops leave it. Rejected, with a
  reason: an unknown op, id, category, task type or field, wrong types, a duplicate title, an oversize text, a
  protected entry (usage_count >= 3) to archive (veto), a full bucket of protected entries, more than
  ``MAX_OPS`` (64) ops or ``MAX_PRIORITY_OBJECTS`` (50) priority objects. A payload that is not an object,
  lacks both keys, holds ``ops`` that is not a list, or is hostile (nested deeper than ``MAX_DEPTH``, more
  than ``MAX_NODES`` values) is malformed as a whole. ``apply_ops`` applies only the accepted ops.
* A consolidation that succeeds first orders the search priorities of the evidence by frequency (cumulative
  ``bank.search_counts``; ties keep the current order, then alphabetical; at most 8 receptacles), then applies
  the accepted ops and priorities, and removes the notes it consumed. A consolidation that fails (the
  generator raised, or its reply holds no JSON object, or the payload is malformed) changes nothing: the notes
  stay in the bank, the episode records are carried into the next window, and the failure is recorded in the
  report and in ``LLMConsolidator.failures``. No exception leaves ``consolidate``.
* ``RuleConsolidator`` (no LLM): per task type, one templated procedure from the most frequent verb skeleton of
  the successful episodes (the shortest such episode as the worked example); each note becomes a skill of its
  task type (a general skill when the type is unknown); titles already in the bank become ``skip``.
* ``LLMConsolidator(generate)``: ``generate(list[str]) -> list[str]``; one prompt per consolidation; the reply
  may wrap the JSON object in a ```json fence or prose, after a ``<think>...</think>`` block (at most
  ``MAX_REPLY_CHARS`` characters).
* Both return a report dict: ``ok``, ``error``, ``applied`` (count by kind, including evictions and priority
  lists), ``rejected`` ([{op, reason}]), ``notes_consumed``, ``episodes`` (records seen), ``carried`` and bank
  ``sizes_before`` / ``sizes_after`` (``ExperienceBank.stats``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections import Counter
from typing import Any, Callable, Sequence

from codjax.agents.harness.experience import (CATEGORIES, MAX_NAME_CHARS, MAX_RECEPTACLES, MAX_TEXT_CHARS,
                                              MAX_TITLE_CHARS, OP_COUNTERS, TASK_TYPES, ExperienceBank,
                                              fields_of, normalize_title, type_name)

META_VERBS = ("track", "commit", "recall", "note")
MAX_OPS = 64
MAX_PRIORITY_OBJECTS = 50
MAX_DEPTH = 8
MAX_NODES = 10_000
MAX_REPLY_CHARS = 100_000
MAX_SUMMARY_STEPS = 40
MAX_CARRY = 1000
_JSON_STARTS = 32  # '{' positions tried when the reply is prose around a JSON object

TASK_LABELS = {
  "pick_and_place_simple": "Pick-and-place", "look_at_obj_in_light": "Look-at-in-light",
  "pick_clean_then_place_in_recep": "Clean-and-place", "pick_heat_then_place_in_recep": "Heat-and-place",
  "pick_cool_then_place_in_recep": "Cool-and-place", "pick_two_obj_and_place": "Pick-two-and-place",
}
_TAKE = re.compile(r"^take (.+?) from (.+)$")
_NOTE = re.compile(r"^\[([^\]]*)\]\s*(.*)$", re.S)


@dataclasses.dataclass(frozen=True)
class EpisodeRecord:
  """One finished episode as consolidation sees it. ``actions``: the action text of every turn."""

  objective: str
  task_type: str
  won: bool
  actions: tuple[str, ...] = ()

  def __post_init__(self):
    if not isinstance(self.objective, str) or not isinstance(self.task_type, str):
      raise ValueError("EpisodeRecord: objective and task_type must be strings")
    if not isinstance(self.won, bool):
      raise ValueError(f"EpisodeRecord: won must be a bool, got {type(self.won).__name__}")
    if isinstance(self.actions, str) or not all(isinstance(a, str) for a in self.actions):
      raise ValueError("EpisodeRecord: actions must be a sequence of strings")
    object.__setattr__(self, "actions", tuple(self.actions))


def strip_instances(action: str) -> str:
  """Lowercase, collapse whitespace and drop instance numbers: "go to CounterTop 2" -> "go to countertop"."""
  return " ".join(t for t in action.lower().split() if not t.isdigit())


def _verb(action: str) -> str:
  head = action.lower().split("[", 1)[0].split()
  return head[0] if head else ""


def env_steps(actions: Sequence[str]) -> list[str]:
  """The environment actions of a turn list, instance numbers stripped (meta verbs and empty turns dropped)."""
  return [s for s in (strip_instances(a) for a in actions if _verb(a) not in META_VERBS) if s]


def action_summary(actions: Sequence[str], max_steps: int = MAX_SUMMARY_STEPS) -> str:
  """Environment steps with repeats folded, joined by " > " (at most ``max_steps`` steps shown)."""
  folded: list[list] = []
  for step in env_steps(actions):
    if folded and folded[-1][0] == step:
      folded[-1][1] += 1
    else:
      folded.append([step, 1])
  parts = [s if n == 1 else f"{s} (x{n})" for s, n in folded]
  if len(parts) > max_steps:
    parts = parts[:max_steps] + [f"... ({len(parts) - max_steps} more)"]
  return " > ".join(parts) if parts else "(no environment actions)"


def take_pairs(actions: Sequence[str]) -> list[tuple[str, str]]:
  """(object type, receptacle type) of every ``take X from Y`` action."""
  out = []
  for step in env_steps(actions):
    m = _TAKE.match(step)
    if m:
      obj, rec = type_name(m.group(1)), type_name(m.group(2))
      if 0 < len(obj) <= MAX_NAME_CHARS and 0 < len(rec) <= MAX_NAME_CHARS:
        out.append((obj, rec))
  return out


@dataclasses.dataclass(frozen=True)
class Evidence:
  """What one consolidation reads. ``episodes[task_type]["won" | "failed"]`` = [(objective, summary)]."""

  episodes: dict[str, dict[str, list[tuple[str, str]]]]
  won_records: dict[str, list[EpisodeRecord]]
  search_counts: dict[str, dict[str, int]]
  notes: tuple[str, ...]
  num_records: int


def _round_robin(records: list[EpisodeRecord], limit: int) -> list[EpisodeRecord]:
  groups: dict[str, list[EpisodeRecord]] = {}
  for r in records:
    groups.setdefault(normalize_title(r.objective), []).append(r)
  out: list[EpisodeRecord] = []
  depth = 0
  while len(out) < limit and any(len(g) > depth for g in groups.values()):
    out += [g[depth] for g in groups.values() if len(g) > depth][:limit - len(out)]
    depth += 1
  return out


def build_evidence(records: Sequence[EpisodeRecord], notes: Sequence[str], per_kind: int = 20) -> Evidence:
  """Sample the evidence of a window (see the module docstring)."""
  by_type: dict[str, dict[bool, list[EpisodeRecord]]] = {}
  counts: dict[str, Counter] = {}
  for r in records:
    by_type.setdefault(r.task_type, {True: [], False: []})[r.won].append(r)
    if r.won:
      for obj, rec in take_pairs(r.actions):
        counts.setdefault(obj, Counter())[rec] += 1
  episodes, won_records = {}, {}
  for t, split in by_type.items():
    won, failed = _round_robin(split[True], per_kind), _round_robin(split[False], per_kind)
    episodes[t] = {"won": [(r.objective, action_summary(r.actions)) for r in won],
                   "failed": [(r.objective, action_summary(r.actions)) for r in failed]}
    won_records[t] = won
  return Evidence(episodes, won_records, {o: dict(c) for o, c in counts.items()}, tuple(notes), len(records))


def update_search_priorities(bank: ExperienceBank, counts: dict[str, dict[str, int]]) -> int:
  """Add take-from counts to ``bank.search_counts`` and re-order the touched objects' priority lists by
  cumulative count (ties: current order, then alphabetical; at most 8). Returns the lists changed."""
  changed = 0
  for obj, recs in sorted(counts.items()):
    total = bank.search_counts.setdefault(obj, {})
    for rec, n in recs.items():
      total[rec] = total.get(rec, 0) + n
    current = bank.search_priorities.get(obj, [])
    pool = set(current) | set(total)
    rank = {r: i for i, r in enumerate(current)}
    order = sorted(pool, key=lambda r: (-total.get(r, 0), rank.get(r, len(rank)), r))[:MAX_RECEPTACLES]
    if order != current:
      bank.set_priorities(obj, order)
      changed += 1
  return changed


# ---------------------------------------------------------------------------------------------- ops


@dataclasses.dataclass
class OpsCheck:
  """The verdict on one payload. ``error`` set: malformed as a whole, nothing may be applied."""

  accepted: list[dict] = dataclasses.field(default_factory=list)
  rejected: list[dict] = dataclasses.field(default_factory=list)
  priorities: dict[str, list[str]] = dataclasses.field(default_factory=dict)
  error: str | None = None

  @property
  def ok(self) -> bool:
    return self.error is None


def _short(x: Any, limit: int = 200) -> str:
  try:
    text = json.dumps(x, ensure_ascii=False, sort_keys=True)
  except (TypeError, ValueError, RecursionError):
    text = repr(type(x))
  return text if len(text) <= limit else text[:limit] + "..."


def shape_error(value: Any, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> str | None:
  """Why a parsed JSON value is too deep or too large to consider (iterative: safe on hostile input)."""
  stack, nodes = [(value, 1)], 0
  while stack:
    v, depth = stack.pop()
    nodes += 1
    if nodes > max_nodes:
      return f"payload too large (more than {max_nodes} values)"
    if depth > max_depth:
      return f"payload nested too deeply (more than {max_depth} levels)"
    if isinstance(v, dict):
      stack += [(x, depth + 1) for x in v.values()]
    elif isinstance(v, list):
      stack += [(x, depth + 1) for x in v]
  return None


def _check_keys(op: dict, allowed: set[str], required: set[str]):
  unknown = sorted(str(k) for k in op if k not in allowed | {"op", "rationale"})
  if unknown:
    raise ValueError(f"unknown key(s) {', '.join(unknown)}")
  missing = sorted(required - set(op))
  if missing:
    raise ValueError(f"missing key(s) {', '.join(missing)}")
  if "rationale" in op and not isinstance(op["rationale"], str):
    raise ValueError("rationale must be a string")


def _id(value: Any) -> str:
  if not isinstance(value, str) or not value:
    raise ValueError(f"id must be a non-empty string, got {_short(value, 40)}")
  return value


def normalize_op(op: Any, task_types: set[str]) -> dict:
  """A payload op in canonical form, or ValueError with the reason (no bank needed)."""
  if not isinstance(op, dict):
    raise ValueError("op must be an object")
  kind = op.get("op")
  if not isinstance(kind, str):
    raise ValueError("op name must be a string")
  kind = kind.strip().lower()
  if kind == "add":
    _check_keys(op, {"category", "task_type", "entry"}, {"category", "entry"})
    category = op["category"]
    if not isinstance(category, str) or category not in CATEGORIES:
      raise ValueError(f"unknown category {_short(category, 60)}")
    task_type = op.get("task_type")
    if category == "task_specific_skills":
      if not isinstance(task_type, str) or task_type not in task_types:
        raise ValueError(f"unknown task type {_short(task_type, 60)}")
    elif task_type is not None:
      raise ValueError(f"task_type is only for task_specific_skills, not {category}")
    if not isinstance(op["entry"], dict):
      raise ValueError("entry must be an object")
    return {"op": "add", "category": category, "task_type": task_type, "entry": dict(op["entry"])}
  if kind == "update":
    _check_keys(op, {"id", "fields"}, {"id", "fields"})
    if not isinstance(op["fields"], dict):
      raise ValueError("fields must be an object")
    return {"op": "update", "id": _id(op["id"]), "fields": dict(op["fields"])}
  if kind in ("archive", "delete"):
    _check_keys(op, {"id"}, {"id"})
    return {"op": "archive", "id": _id(op["id"]), "reason": kind}
  if kind == "merge":
    _check_keys(op, {"ids", "fields"}, {"ids"})
    ids = op["ids"]
    if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
      raise ValueError("ids must be a list of strings")
    fields = op.get("fields")
    if fields is not None and not isinstance(fields, dict):
      raise ValueError("fields must be an object")
    return {"op": "merge", "ids": list(ids), "fields": None if fields is None else dict(fields)}
  if kind == "skip":
    _check_keys(op, set(), set())
    return {"op": "skip"}
  raise ValueError(f"unknown op {_short(kind, 40)}")


def execute_op(bank: ExperienceBank, op: dict):
  """Apply one canonical op to ``bank``; ValueError (bank unchanged) when the bank refuses it."""
  kind = op["op"]
  if kind == "add":
    bank.add_entry(op["category"], op["entry"], op["task_type"])
  elif kind == "update":
    bank.update_entry(op["id"], op["fields"])
  elif kind == "archive":
    bank.archive_entry(op["id"], op["reason"])
  elif kind == "merge":
    bank.merge_entries(op["ids"], op["fields"])
  else:
    bank.count_op("skip")


def validate_ops(bank: ExperienceBank, payload: Any) -> OpsCheck:
  """Judge every op of ``payload`` against a scratch copy of ``bank`` (``bank`` itself is never touched)."""
  check = OpsCheck()
  if not isinstance(payload, dict):
    check.error = f"payload is not a JSON object ({type(payload).__name__})"
    return check
  shape = shape_error(payload)
  if shape is not None:
    check.error = shape
    return check
  if "ops" not in payload and "search_priorities" not in payload:
    check.error = "payload has neither 'ops' nor 'search_priorities'"
    return check
  ops = payload.get("ops", [])
  if not isinstance(ops, list):
    check.error = f"'ops' is not a list ({type(ops).__name__})"
    return check
  prios = payload.get("search_priorities", {})
  if prios is None:
    prios = {}
  if not isinstance(prios, dict):
    check.error = f"'search_priorities' is not an object ({type(prios).__name__})"
    return check
  for key in payload:
    if key not in ("ops", "search_priorities"):
      check.rejected.append({"op": _short(key, 60), "reason": "unknown top-level key ignored"})
  scratch = copy.deepcopy(bank)
  task_types = set(TASK_TYPES) | set(bank.task_specific_skills)
  for i, raw in enumerate(ops):
    if i >= MAX_OPS:
      check.rejected.append({"op": _short(raw), "reason": f"too many ops (more than {MAX_OPS})"})
      continue
    try:
      op = normalize_op(raw, task_types)
      execute_op(scratch, op)
    except ValueError as e:
      check.rejected.append({"op": _short(raw), "reason": str(e)})
      continue
    check.accepted.append(op)
  for i, (obj, recs) in enumerate(prios.items()):
    item = {obj: recs}
    if i >= MAX_PRIORITY_OBJECTS:
      check.rejected.append({"op": _short(item), "reason": f"too many priority objects (> {MAX_PRIORITY_OBJECTS})"})
      continue
    if not isinstance(recs, list):
      check.rejected.append({"op": _short(item), "reason": "receptacles must be a list of strings"})
      continue
    try:
      scratch.set_priorities(obj, recs)
    except ValueError as e:
      check.rejected.append({"op": _short(item), "reason": str(e)})
      continue
    check.priorities[type_name(obj)] = [type_name(r) for r in recs]
  return check


def apply_ops(bank: ExperienceBank, check: OpsCheck) -> list[dict]:
  """Apply the accepted ops and priorities of ``check`` in order (nothing when ``check.error``). Returns the
  ops the bank refused after all (only possible when it changed since ``validate_ops``), with reasons."""
  if check.error is not None:
    return []
  late = []
  for op in check.accepted:
    try:
      execute_op(bank, op)
    except ValueError as e:
      late.append({"op": _short(op), "reason": str(e)})
  for obj, recs in check.priorities.items():
    try:
      bank.set_priorities(obj, recs)
    except ValueError as e:
      late.append({"op": _short({obj: recs}), "reason": str(e)})
  return late


# ---------------------------------------------------------------------------------------------- replies


def extract_json(reply: Any, max_chars: int = MAX_REPLY_CHARS) -> tuple[Any, str | None]:
  """The JSON object in a model reply: (object, None) or (None, why not). Everything up to the last
  ``</think>`` is dropped; then ```json fences, the whole text, and the text from each of the first 32 '{'
  are tried in turn. Linear in the reply length per try; never raises."""
  if not isinstance(reply, str):
    return None, f"reply is not a string ({type(reply).__name__})"
  if len(reply) > max_chars:
    return None, f"reply too long ({len(reply)} > {max_chars} characters)"
  low = reply.lower()
  text = reply[low.rindex("</think>") + len("</think>"):] if "</think>" in low else reply
  found_other = None

  def attempt(candidate: str, raw: bool = False) -> Any:
    nonlocal found_other
    try:
      value = json.JSONDecoder().raw_decode(candidate)[0] if raw else json.loads(candidate)
    except (ValueError, RecursionError):
      return None
    if isinstance(value, dict):
      return value
    found_other = type(value).__name__
    return None

  for block in re.findall(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", text, flags=re.S):
    value = attempt(block.strip())
    if value is not None:
      return value, None
  value = attempt(text.strip())
  if value is not None:
    return value, None
  start = text.find("{")
  for _ in range(_JSON_STARTS):
    if start < 0:
      break
    value = attempt(text[start:], raw=True)
    if value is not None:
      return value, None
    start = text.find("{", start + 1)
  if found_other is not None:
    return None, f"reply holds JSON that is not an object ({found_other})"
  return None, "no JSON object found in the reply"


# ---------------------------------------------------------------------------------------------- prompts


def _cut(text: str, limit: int = 200) -> str:
  return text if len(text) <= limit else text[:limit - 3] + "..."


def render_bank(bank: ExperienceBank) -> str:
  """The bank as the consolidator sees it: ids, usage counts and (cut) fields of every live entry."""
  lines = []
  for category, task_type, lst in bank.buckets():
    head = category if task_type is None else f"{category} / {task_type}"
    names = fields_of(category)
    lines.append(f"{head} ({len(lst)}/{bank.capacity}):")
    for e in lst:
      body = " | ".join(f"{k}: {_cut(e[k])}" for k in names)
      lines.append(f"  [{e['id']}] (used {e['usage_count']}x) {body}")
    if not lst:
      lines.append("  (empty)")
  lines.append("search_priorities:")
  lines += [f"  {o}: {', '.join(r)}" for o, r in sorted(bank.search_priorities.items())] or ["  (empty)"]
  return "\n".join(lines)


def render_evidence(evidence: Evidence) -> str:
  lines = []
  for t, split in sorted(evidence.episodes.items()):
    lines.append(f"Task type {t}:")
    for key, label in (("won", "successful"), ("failed", "failed")):
      lines.append(f"  {label} episodes ({len(split[key])}):")
      lines += [f"    - {_cut(obj, 160)}: {summary}" for obj, summary in split[key]] or ["    (none)"]
  if not evidence.episodes:
    lines.append("(no finished episodes in this window)")
  lines.append("Where objects were taken in successful episodes (object: receptacle x count):")
  lines += [f"  {o}: " + ", ".join(f"{r} x{n}" for r, n in sorted(c.items(), key=lambda x: (-x[1], x[0])))
            for o, c in sorted(evidence.search_counts.items())] or ["  (none)"]
  lines.append("Notes written by the agent:")
  lines += [f"  - {_cut(n, 320)}" for n in evidence.notes] or ["  (none)"]
  return "\n".join(lines)


def consolidation_prompt(bank: ExperienceBank, evidence: Evidence) -> str:
  """The one prompt of an LLM consolidation (instructions, bank, evidence, reply format)."""
  return f"""You curate the experience bank of a household agent that solves text tasks (find, take, clean, heat, \
cool, examine and place objects). Between training batches you compare what happened in recent episodes with \
the bank and edit the bank so that future episodes can recall knowledge that is correct, useful and not \
redundant.

=== CURRENT BANK ===
{render_bank(bank)}

=== EVIDENCE FROM THIS WINDOW ===
{render_evidence(evidence)}

=== WHAT TO DO ===
Decide, for each piece of evidence, one operation:
- add: knowledge the bank lacks.
  {{"op": "add", "category": "general_skills" | "task_specific_skills" | "common_mistakes", "task_type": "<only for \
task_specific_skills, one of {', '.join(TASK_TYPES)}>", "entry": {{...}}}}
  A skill entry has "title", "principle", "when_to_apply"; a mistake entry has "description", "why", "how_to_avoid".
- update: an existing entry needs refining or correcting. {{"op": "update", "id": "<id shown above>", "fields": {{...}}}}
- archive: an entry the evidence shows to be wrong or useless. {{"op": "archive", "id": "<id>"}} \
Entries used 3 or more times cannot be archived.
- merge: several entries say the same thing. {{"op": "merge", "ids": ["<id to keep>", "<id>", ...], "fields": {{...}}}} \
("fields" is optional and rewrites the kept entry).
- skip: the evidence adds nothing. {{"op": "skip"}}
You may also set search priorities: "search_priorities": {{"<object type>": ["<receptacle type>", ...]}} replaces \
the list for that object, most likely place first; an empty list removes it. A note that says a recalled hint \
was wrong is a reason to correct that object's list.

Rules: use only the ids shown above; titles are unique within a category; a title or description has at most \
{MAX_TITLE_CHARS} characters and every other field at most {MAX_TEXT_CHARS}; prefer update or merge over add when \
an entry already covers the idea; write types, never instance numbers ("countertop", not "countertop 2"); at \
most {MAX_OPS} ops.

Reply with a single JSON object and nothing else:
{{"ops": [...], "search_priorities": {{...}}}}"""


# ---------------------------------------------------------------------------------------------- consolidators


def _parse_note(note: str) -> tuple[str, str]:
  m = _NOTE.match(note)
  return (m.group(1).strip(), m.group(2).strip()) if m else ("", note.strip())


def _ops_delta(before: dict, after: dict) -> dict:
  return {k: after.get(k, 0) - before.get(k, 0) for k in OP_COUNTERS if k not in ("rejected", "consolidations")}


def _finish(bank: ExperienceBank, evidence: Evidence, check: OpsCheck) -> dict:
  """The shared success path: priorities by frequency, the accepted ops, notes consumed, counters."""
  ops_before = dict(bank.meta["ops"])
  update_search_priorities(bank, evidence.search_counts)
  rejected = check.rejected + apply_ops(bank, check)
  bank.consume_notes(len(evidence.notes))
  bank.count_op("rejected", len(rejected))
  bank.count_op("consolidations")
  return {"ok": True, "error": None, "applied": _ops_delta(ops_before, bank.meta["ops"]), "rejected": rejected,
          "notes_consumed": len(evidence.notes)}


@dataclasses.dataclass
class RuleConsolidator:
  """Consolidation without an LLM (codjax's choice): templated procedures, frequency priorities, skipped duplicates."""

  per_kind: int = 20

  def propose(self, bank: ExperienceBank, evidence: Evidence) -> dict:
    """The ops payload this consolidator would apply for ``evidence``."""
    ops: list[dict] = []
    for task_type, won in sorted(evidence.won_records.items()):
      if not won:
        continue
      by_skeleton: dict[tuple[str, ...], list[EpisodeRecord]] = {}
      for r in won:
        verbs = [s.split()[0] for s in env_steps(r.actions) if not s.startswith("go ")]
        skeleton = tuple(v for i, v in enumerate(verbs) if i == 0 or verbs[i - 1] != v)
        by_skeleton.setdefault(skeleton, []).append(r)
      skeleton, group = max(by_skeleton.items(), key=lambda kv: len(kv[1]))  # first-seen wins ties
      example = min(group, key=lambda r: len(env_steps(r.actions)))
      label = TASK_LABELS.get(task_type, task_type)
      steps = ", ".join(env_steps(example.actions))
      ops.append(self._add(bank, "task_specific_skills", task_type, {
        "title": _cut(f"{label} procedure: {' > '.join(skeleton) or 'navigate'}", MAX_TITLE_CHARS),
        "principle": _cut(f"A sequence that solved '{_cut(example.objective, 100)}': {steps}. Reach each "
                          f"receptacle with 'go to' and open closed ones before looking inside.", MAX_TEXT_CHARS),
        "when_to_apply": _cut(f"{label} tasks ({len(group)} of {len(won)} recent successes followed these steps).",
                              MAX_TEXT_CHARS)}))
    for note in evidence.notes:
      task_type, body = _parse_note(note)
      if not body:
        ops.append({"op": "skip"})
        continue
      known = task_type in TASK_TYPES or task_type in bank.task_specific_skills
      category = "task_specific_skills" if known else "general_skills"
      scope = f"{TASK_LABELS.get(task_type, task_type)} tasks" if known else "Any task"
      ops.append(self._add(bank, category, task_type if known else None, {
        "title": _cut(f"Note: {body}", 80), "principle": _cut(body, MAX_TEXT_CHARS),
        "when_to_apply": f"{scope} (written by the agent during an episode)."}))
    return {"ops": ops}

  @staticmethod
  def _add(bank: ExperienceBank, category: str, task_type: str | None, entry: dict) -> dict:
    lst = bank.bucket(category, task_type)
    if any(normalize_title(e["title"]) == normalize_title(entry["title"]) for e in lst):
      return {"op": "skip"}
    op = {"op": "add", "category": category, "entry": entry}
    return op if task_type is None else {**op, "task_type": task_type}

  def consolidate(self, bank: ExperienceBank, records: Sequence[EpisodeRecord]) -> dict:
    before = bank.stats()
    evidence = build_evidence(records, bank.notes, self.per_kind)
    check = validate_ops(bank, self.propose(bank, evidence))
    # The proposal's titles are unique per bucket except when one window repeats a note: validation rejects
    # the second copy as a duplicate, which is a skip in spirit; count it so.
    dupes = [r for r in check.rejected if r["reason"].startswith("duplicate")]
    check.rejected = [r for r in check.rejected if not r["reason"].startswith("duplicate")]
    report = _finish(bank, evidence, check)
    bank.count_op("skip", len(dupes))
    report["applied"]["skip"] += len(dupes)
    return {"consolidator": "rule", **report, "episodes": evidence.num_records, "carried": 0,
            "sizes_before": before, "sizes_after": bank.stats()}


@dataclasses.dataclass
class LLMConsolidator:
  """Consolidation by a language model: ``generate(list[str] prompts) -> list[str] replies``."""

  generate: Callable[[list[str]], list[str]]
  per_kind: int = 20
  max_reply_chars: int = MAX_REPLY_CHARS
  max_carry: int = MAX_CARRY
  carry: list[EpisodeRecord] = dataclasses.field(default_factory=list)
  failures: list[str] = dataclasses.field(default_factory=list)

  def consolidate(self, bank: ExperienceBank, records: Sequence[EpisodeRecord]) -> dict:
    before = bank.stats()
    pool = self.carry + list(records)
    evidence = build_evidence(pool, bank.notes, self.per_kind)
    prompt = consolidation_prompt(bank, evidence)
    error, check = None, None
    try:
      replies = self.generate([prompt])
    except Exception as e:  # noqa: BLE001 - any engine failure keeps the evidence for the next window
      replies, error = None, f"generate failed: {type(e).__name__}: {_cut(str(e), 200)}"
    if error is None:
      if not isinstance(replies, (list, tuple)) or len(replies) != 1:
        error = f"generate must return one reply for one prompt, got {_short(replies, 80)}"
      else:
        payload, error = extract_json(replies[0], self.max_reply_chars)
        if error is None:
          check = validate_ops(bank, payload)
          error = check.error
    if error is not None or check is None:
      self.carry = pool[-self.max_carry:]
      self.failures = (self.failures + [error])[-100:]
      return {"consolidator": "llm", "ok": False, "error": error, "applied": {}, "rejected": [],
              "notes_consumed": 0, "episodes": len(pool), "carried": len(self.carry), "sizes_before": before,
              "sizes_after": bank.stats()}
    self.carry = []
    report = _finish(bank, evidence, check)
    return {"consolidator": "llm", **report, "episodes": len(pool), "carried": 0, "sizes_before": before,
            "sizes_after": bank.stats()}
