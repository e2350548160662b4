"""Progress P_t: the per-episode ordered subgoal list (public code EvoHarnessRL/EvoHarness-RL ``evoharness/plan.py``).

Rules, stated once:

* At most ``capacity`` (8) subgoals, in the order they were added; each has a status among ``STATUSES``
  (open / partial / complete / blocked / dropped). Complete and dropped ones are *finished*.
* ``commit [s]`` marks every open or partial subgoal complete, then adds s. When s is already on the list
  (same text after lowercasing and collapsing whitespace) nothing is added: a dropped duplicate is re-opened,
  any other duplicate keeps its status.
* When an addition overflows the capacity, one subgoal is evicted: the oldest finished one if any, else the
  oldest one. The objective subgoal is never evicted.
* The objective subgoal belongs to the belief's progress estimate, not to the policy: ``commit`` does not
  close it. After every environment step ``fold`` updates it (adding it first when missing): complete when
  won (and it stays complete), partial when the step advanced the objective, blocked when the step failed
  ("Nothing happens."; the public code's reading of a failed step), and back to partial/open on the next
  successful step.
* Rendered as a ``PLAN:`` checklist, one line per subgoal that is not dropped, the objective first and the
  others in order: ``[ ]`` open, ``[~]`` partial, ``[x]`` complete, ``[!]`` blocked, with the status in
  parentheses; the objective line says so.
"""

from __future__ import annotations

import dataclasses

STATUSES: tuple[str, ...] = ("open", "partial", "complete", "blocked", "dropped")
FINISHED: tuple[str, ...] = ("complete", "dropped")
CAPACITY = 8
_MARKS = {"open": "[ ]", "partial": "[~]", "complete": "[x]", "blocked": "[!]"}


def _key(text: str) -> str:
  return " ".join(str(text).split()).lower()


@dataclasses.dataclass
class Subgoal:
  text: str
  status: str = "open"
  objective: bool = False


class Progress:
  """The subgoal list of one episode (module docstring)."""

  def __init__(self, capacity: int = CAPACITY):
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 2:
      raise ValueError(f"progress capacity must be an int >= 2, got {capacity!r}")
    self.capacity = capacity
    self.items: list[Subgoal] = []
    self.commits = 0
    self._objective_advanced = False

  def find(self, text: str) -> Subgoal | None:
    key = _key(text)
    return next((s for s in self.items if _key(s.text) == key), None)

  @property
  def objective(self) -> Subgoal | None:
    return next((s for s in self.items if s.objective), None)

  def add(self, text: str, objective: bool = False) -> Subgoal:
    """Adds a subgoal without closing others; a duplicate is returned (re-opened when it was dropped)."""
    text = " ".join(str(text).split())
    if not text:
      raise ValueError("a subgoal needs text")
    found = self.find(text)
    if found is not None:
      if found.status == "dropped":
        found.status = "open"
      found.objective = found.objective or objective
      return found
    sub = Subgoal(text, objective=objective)
    self.items.append(sub)
    while len(self.items) > self.capacity:
      self._evict()
    return sub

  def _evict(self) -> None:
    candidates = [i for i, s in enumerate(self.items) if not s.objective]
    finished = [i for i in candidates if self.items[i].status in FINISHED]
    self.items.pop((finished or candidates)[0])

  def commit(self, text: str) -> Subgoal:
    """The ``commit [s]`` meta action (module docstring)."""
    for s in self.items:
      if not s.objective and s.status in ("open", "partial"):
        s.status = "complete"
    self.commits += 1
    return self.add(text)

  def set_status(self, text: str, status: str) -> bool:
    """Sets a subgoal's status by its text (e.g. drop or block it); False when it is not on the list."""
    if status not in STATUSES:
      raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    found = self.find(text)
    if found is None:
      return False
    found.status = status
    return True

  def fold(self, objective: str, advanced: bool, won: bool, failed: bool = False) -> Subgoal:
    """Folds one environment step's progress estimate onto the objective subgoal (module docstring)."""
    sub = self.objective or self.add(objective, objective=True)
    self._objective_advanced = self._objective_advanced or advanced
    if sub.status == "complete":
      return sub
    if won:
      sub.status = "complete"
    elif failed:
      sub.status = "blocked"
    elif advanced or sub.status in ("blocked", "dropped"):
      sub.status = "partial" if self._objective_advanced else "open"
    return sub

  def render(self) -> str:
    lines = []
    for s in sorted(self.items, key=lambda s: not s.objective):  # the objective first, then in order
      if s.status == "dropped":
        continue
      label = f"objective: {s.text}" if s.objective else s.text
      lines.append(f"{_MARKS[s.status]} {label} ({s.status})")
    return "PLAN:\n" + "\n".join(lines) if lines else "PLAN: (no subgoals yet)"
