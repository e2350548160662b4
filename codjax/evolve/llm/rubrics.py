"""The rubric bank: the rules the reviewer and the modifier see, growing from recorded failures (Environment
Evolution paper, arXiv 2609.04128, Sec. 4.1: issues human reviewers found became new rubrics; codjax turns
failure reasons into rubrics automatically; docs/methods/environment_evolution.md).

A bank starts from ``DEFAULT_RUBRICS`` (self-contained, unique answer, solvable within the turn budget,
harder than the parent, no answer leak). ``add_failure(reason)`` turns a failure reason into a rubric: known
failure classes map to one fixed rule each (``rubric_for``), any other reason becomes "Avoid: <reason>"; a
rubric already in the bank only counts one more occurrence. With a path the bank is a JSON file
(``{"rubrics": [{"text", "source", "count"}]}``), saved after every change; a file that is not such a bank is
a ``ValueError`` when loaded.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

DEFAULT_RUBRICS = (
    "Self-contained: the instruction names every path, file, permission and archive format the checks need.",
    "Unique answer: exactly one end state satisfies the checks; nothing is left to guess.",
    "Solvable within the turn budget: the oracle commands solve the task in the simulator, one line per turn.",
    "Harder than the parent: the new task needs more or rarer operations than the parent task.",
    "No answer leak: the instruction never contains the oracle's command lines.",
)

# (substring of a failure reason, rubric): the first match wins
_CLASSES = (
    ("path traversal", "Paths are absolute, inside the allowed trees, with plain names: never '..' or hidden names."),
    ("outside the allowed trees", "Paths stay under the local home or the remote's /home/<user>, /var/www, /opt, "
                                  "/srv, /tmp; never system trees such as /etc."),
    ("not a simulator command", "Oracle lines use only the simulator's commands (ls, cd, cp, mv, rm, mkdir, chmod, "
                                "scp, ssh, exit, tar, zip, unzip, ...), never host programs."),
    ("pipe, redirect", "Oracle lines use no pipes, redirects or command substitution."),
    ("longer than", "Keep every text short: instruction, contents and command lines within their limits."),
    ("more than", "Keep the task small: few files, few checks, few oracle lines."),
    ("deeper than", "Keep paths and JSON shallow."),
    ("vacuous", "Every check needs work: the goal must not hold initially, and file_not_exists only names files "
                "that exist at the start."),
    ("references missing", "Checks only require contents and files that exist in the initial file systems or "
                           "that the task produces."),
    ("not self-contained", "The instruction states every path and permission value that a check requires."),
    ("leaks", "The instruction must not contain the oracle's command lines."),
    ("oracle:", "The oracle commands must solve the task in the simulator within the turn budget."),
    ("invalid-test", "A constant, random or replayed parent solution must not satisfy the checks."),
    ("not harder", "The child must score harder than the parent: more or rarer (scenario, skill) pairs."),
    ("no JSON object", "Answer with exactly one JSON object in the requested shape."),
    ("does not match the parent", "Extract the parent's (scenario, skill) sequence exactly as recorded."),
    ("effort", "Respect the effort: low edits one pair, high one contiguous span, max any subset."),
    ("direction", "Respect the direction: scenario changes only scenarios, skill only skills, length only inserts."),
)


def rubric_for(reason: str) -> str:
  """The rubric a failure reason becomes (module docstring)."""
  low = reason.lower()
  for key, rubric in _CLASSES:
    if key.lower() in low:
      return rubric
  return "Avoid: " + " ".join(reason.split())[:200]


@dataclasses.dataclass
class Rubric:
  text: str
  source: str = "default"  # the failure reason that created it ("default" for the initial ones)
  count: int = 0  # failures recorded against it


class RubricBank:
  """Rubrics, optionally persisted as a JSON file (module docstring)."""

  def __init__(self, path: str | None = None):
    self.path = path
    self.rubrics = [Rubric(t) for t in DEFAULT_RUBRICS]
    if path and os.path.exists(path):
      self.rubrics = self._load(path)

  @staticmethod
  def _load(path: str) -> list[Rubric]:
    try:
      with open(path) as f:
        obj: Any = json.load(f)
    except (OSError, ValueError) as e:
      raise ValueError(f"rubric bank {path!r} is not readable JSON: {e}") from None
    items = obj.get("rubrics") if isinstance(obj, dict) else None
    if not isinstance(items, list) or not all(
        isinstance(x, dict) and isinstance(x.get("text"), str) and x["text"].strip() for x in items):
      raise ValueError(f"rubric bank {path!r} must hold {{'rubrics': [{{'text': ...}}, ...]}}")
    return [Rubric(x["text"], str(x.get("source", "default")), int(x.get("count", 0) or 0)) for x in items]

  def texts(self) -> list[str]:
    return [r.text for r in self.rubrics]

  def add_failure(self, reason: str) -> bool:
    """Records a failure; True when it created a new rubric."""
    text = rubric_for(reason)
    for r in self.rubrics:
      if r.text == text:
        r.count += 1
        self.save()
        return False
    self.rubrics.append(Rubric(text, " ".join(reason.split())[:300], 1))
    self.save()
    return True

  def save(self) -> None:
    if not self.path:
      return
    tmp = self.path + ".tmp"
    with open(tmp, "w") as f:
      json.dump({"rubrics": [dataclasses.asdict(r) for r in self.rubrics]}, f, indent=1)
    os.replace(tmp, self.path)
