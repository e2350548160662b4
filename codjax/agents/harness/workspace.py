"""The per-episode harness H_t = (B_t, P_t, E_t) and its four meta actions (EvoHarness-RL, arXiv 2608.05446;
public code EvoHarnessRL/EvoHarness-RL ``evoharness/workspace.py``).

One ``Harness`` per episode holds a ``Belief``, a ``Progress`` and a reference to the shared experience bank
(an object with ``recall(query, task_type, top_k)``, ``render_entries(entries)`` and ``note(text,
task_type)``; ``codjax.agents.harness.experience.ExperienceBank``). Rules, stated once:

* ``mode``: ``env_only`` (ReAct baseline: no harness, no panels), ``always_on`` (the panels are injected every
  turn without calls: a world belief summary, the plan, and hints recalled once from the objective; meta
  verbs are invalid) or ``inline`` (EvoHarness-RL: the policy reaches the harness through the verbs).
* ``modules`` (ablations) is a subset of belief / progress / experience. A removed module's verb is invalid
  and its panel is not shown (track: belief; commit: progress; recall and note: experience, which also needs
  a bank). Without the belief module the belief still runs silently to feed Progress.
* ``track [q]`` -> the belief's answer; ``commit [s]`` -> Progress.commit; ``recall [q]`` -> bank.recall with
  the episode's task type and ``recall_top_k`` (3 in training) -- its entries replace the persistent RECALLED
  HINTS panel; ``note [x]`` -> bank.note(x, task type), buffered for consolidation (a full buffer is reported,
  the call is still valid). An argument longer than ``MAX_ARG_CHARS`` makes the call invalid.
* Every meta call is counted per verb (``calls``), and the failed ones (``failed``). The result text of the
  last meta action (``last_result``) is shown until the next environment step clears it; callers may also
  put their own feedback there (an inadmissible command, a malformed reply).
* ``observe_env(command, feedback, won)`` updates the belief silently and folds the step's progress estimate
  onto the objective subgoal.
* ``charge_meta_actions`` (whether a meta call costs a turn of the budget) is held for the caller, which owns
  the budget.
* The task type comes from the objective's keywords (``belief.task_type_of``; ALFWorld family names).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from codjax.agents.harness.actions import META_VERBS, ParsedAction
from codjax.agents.harness.belief import Belief, task_type_of
from codjax.agents.harness.progress import Progress

MODES: tuple[str, ...] = ("env_only", "always_on", "inline")
MODULES: tuple[str, ...] = ("belief", "progress", "experience")
VERB_MODULE: dict[str, str] = {"track": "belief", "commit": "progress", "recall": "experience", "note": "experience"}
ANNOTATIONS: dict[str, str] = {"track": "belief checked", "commit": "plan updated", "recall": "hints recalled",
                               "note": "noted"}
MAX_ARG_CHARS = 300


@dataclasses.dataclass(frozen=True)
class MetaResult:
  """What a meta action did: the text shown next turn, whether it was valid, its verb, and the short
  annotation of its PREVIOUS ACTION(S) entry."""

  text: str
  valid: bool
  verb: str
  annotation: str = ""


class Harness:
  """The workspace of one episode (module docstring)."""

  def __init__(self, objective: str, bank: Any = None, mode: str = "inline", modules: Sequence[str] = MODULES,
               charge_meta_actions: bool = True, recall_top_k: int = 3, initial_observation: str = ""):
    if mode not in MODES:
      raise ValueError(f"harness mode must be one of {MODES}, got {mode!r}")
    mods = tuple(modules)
    if not set(mods) <= set(MODULES):
      raise ValueError(f"harness modules must be among {MODULES}, got {mods!r}")
    if not isinstance(charge_meta_actions, bool):
      raise ValueError(f"charge_meta_actions must be a bool, got {charge_meta_actions!r}")
    if not isinstance(recall_top_k, int) or isinstance(recall_top_k, bool) or recall_top_k < 1:
      raise ValueError(f"recall_top_k must be an int >= 1, got {recall_top_k!r}")
    self.objective = " ".join(str(objective).split())
    self.mode = mode
    self.modules = frozenset(mods) if mode != "env_only" else frozenset()
    self.charge_meta_actions = charge_meta_actions
    self.recall_top_k = recall_top_k
    self.task_type = task_type_of(self.objective)
    self.bank = bank if "experience" in self.modules else None
    self.belief = Belief(self.objective) if self.modules & {"belief", "progress"} else None
    self.progress = Progress() if "progress" in self.modules else None
    self.calls = {v: 0 for v in META_VERBS}
    self.failed = {v: 0 for v in META_VERBS}
    self.env_steps = 0
    self.last_result = ""
    self.hints: list[dict] | None = None  # entries of the latest recall (None: no recall yet)
    self.hints_query = ""
    if initial_observation and self.belief is not None:
      self.belief.observe_intro(initial_observation)
    if mode == "always_on":
      if self.progress is not None:
        self.progress.add(self.objective, objective=True)
      if self.bank is not None:
        self._recall(self.objective)

  # -- meta actions -------------------------------------------------------------------------------------
  def enabled(self, verb: str) -> bool:
    """Whether ``verb`` is a meta action this harness accepts."""
    if self.mode != "inline" or VERB_MODULE.get(verb) not in self.modules:
      return False
    return verb not in ("recall", "note") or self.bank is not None

  def _unavailable(self, verb: str) -> str:
    if self.mode != "inline":
      return f"`{verb}` is not available: this run has no harness actions. Choose an admissible command."
    return f"`{verb}` is not available in this run. Choose another action."

  def apply_meta(self, parsed: ParsedAction) -> MetaResult:
    """Runs one meta action (module docstring); an invalid one changes nothing but is counted."""
    verb = parsed.verb if parsed.verb in META_VERBS else ""
    if verb:
      self.calls[verb] += 1
    if parsed.kind != "meta" or not verb:
      res = MetaResult(f"Invalid harness action: {parsed.reason or 'not a meta action'}.", False, verb,
                       "invalid format")
    elif not self.enabled(verb):
      res = MetaResult(self._unavailable(verb), False, verb, "unavailable")
    elif len(parsed.arg) > MAX_ARG_CHARS:
      res = MetaResult(f"Invalid harness action: the argument of `{verb}` is longer than {MAX_ARG_CHARS} "
                       "characters.", False, verb, "invalid: argument too long")
    else:
      res = getattr(self, f"_meta_{verb}")(parsed.arg)
    if not res.valid and verb:
      self.failed[verb] += 1
    self.last_result = res.text
    return res

  def _meta_track(self, arg: str) -> MetaResult:
    return MetaResult(self.belief.track(arg), True, "track", ANNOTATIONS["track"])

  def _meta_commit(self, arg: str) -> MetaResult:
    sub = self.progress.commit(arg)
    return MetaResult(f"COMMIT: now pursuing \"{sub.text}\" ({sub.status}); earlier open subgoals are marked "
                      "complete.", True, "commit", ANNOTATIONS["commit"])

  def _recall(self, query: str) -> list[dict]:
    entries = list(self.bank.recall(query, self.task_type, self.recall_top_k))[:self.recall_top_k]
    self.hints, self.hints_query = entries, query
    return entries

  def _meta_recall(self, arg: str) -> MetaResult:
    n = len(self._recall(arg))
    if n:
      text = f"RECALL [{arg}]: {n} entr{'y' if n == 1 else 'ies'} retrieved; see RECALLED HINTS."
    else:
      text = f"RECALL [{arg}]: nothing in experience matches yet."
    return MetaResult(text, True, "recall", ANNOTATIONS["recall"])

  def _meta_note(self, arg: str) -> MetaResult:
    if self.bank.note(arg, self.task_type):
      return MetaResult(f"NOTE kept for later consolidation: [{self.task_type}] {arg}", True, "note",
                        ANNOTATIONS["note"])
    return MetaResult("NOTE not kept: the note buffer is full.", True, "note", "note buffer full")

  # -- environment steps --------------------------------------------------------------------------------
  def observe_env(self, command: str, feedback: str, won: bool = False) -> None:
    """One environment step happened: update the belief silently, fold progress, clear the last result."""
    self.env_steps += 1
    self.last_result = ""
    if self.belief is None:
      return
    upd = self.belief.observe(command, feedback, bool(won))
    if self.progress is not None:
      self.progress.fold(self.objective, advanced=upd.advanced, won=upd.won, failed=upd.failed)

  # -- views --------------------------------------------------------------------------------------------
  def world_panel(self) -> str:
    """The always-on belief summary ("" in other modes or without the belief module)."""
    if self.mode != "always_on" or "belief" not in self.modules:
      return ""
    return self.belief.world_summary()

  def plan_panel(self) -> str:
    """The PLAN checklist: always on in always_on mode; inline once the policy has committed."""
    if self.progress is None or (self.mode == "inline" and self.progress.commits == 0):
      return ""
    return self.progress.render()

  def hints_panel(self) -> str:
    """The persistent RECALLED HINTS panel: the latest recall's entries ("" before any recall)."""
    if self.bank is None or self.hints is None:
      return ""
    if not self.hints:
      return f"RECALLED HINTS: (nothing matched \"{self.hints_query}\")"
    return "RECALLED HINTS:\n" + self.bank.render_entries(self.hints).strip()

  def views(self) -> list[str]:
    """The panels of this turn in order: world (always_on), plan, hints, ``LAST RESULT:`` and the last result;
    none in env_only."""
    if self.mode == "env_only":
      return []
    panels = [self.world_panel(), self.plan_panel(), self.hints_panel()]
    if self.last_result:
      panels.append("LAST RESULT:\n" + self.last_result)
    return [p for p in panels if p]

  def counts(self) -> dict[str, dict[str, int]]:
    """Meta calls per verb: attempted, executed (valid) and failed."""
    return {"attempted": dict(self.calls), "executed": {v: self.calls[v] - self.failed[v] for v in META_VERBS},
            "failed": dict(self.failed)}
