"""The modifier's structured edit of a task: the residual Delta E of loop 2 (Environment Evolution paper,
arXiv 2609.04128, Sec. 4.1; docs/methods/environment_evolution.md).

An edit is a JSON object with only these keys, each optional::

  {"instruction": str, "os": str,
   "local": {"remove": [path, ...], "add": [ITEM, ...]}, "remote": {"remove": [...], "add": [...]},
   "checks": [CHECK, ...], "oracle": [command, ...]}

``apply_edit(parent_data, edit)`` returns the child's task data: the instruction and OS replaced when given,
the named items removed (exact path match after the machine's path rules) and the new items added (replacing
an item at the same path), checks and oracle replaced when given. The result must pass
``codjax.envs.terminal.data.validate_data`` (path rules, sizes, simulator-only commands); every violation is a
``ValueError`` with the reason. Nothing is executed or written anywhere.
"""

from __future__ import annotations

from typing import Any

from codjax.envs.terminal.data import LIMITS, parse_path, validate_data
from codjax.envs.terminal.fs import LINUX

KEYS = ("instruction", "os", "local", "remote", "checks", "oracle")


def apply_edit(parent: dict, edit: Any) -> dict:
  if not isinstance(edit, dict):
    raise ValueError("the edit must be a JSON object")
  unknown = sorted(str(k)[:30] for k in edit if k not in KEYS)
  if unknown:
    raise ValueError(f"the edit holds unknown keys {unknown}; allowed: {list(KEYS)}")
  if not edit:
    raise ValueError("the edit is empty")
  child = {k: (list(v) if isinstance(v, list) else v) for k, v in validate_data(parent).items()}
  for key in ("instruction", "os"):
    if key in edit:
      child[key] = edit[key]
  for side in ("local", "remote"):
    if side not in edit:
      continue
    change = edit[side]
    if not isinstance(change, dict) or set(change) - {"remove", "add"}:
      raise ValueError(f"edit {side} must be an object with 'remove' and/or 'add' lists")
    remove, add = change.get("remove", []), change.get("add", [])
    if not isinstance(remove, list) or not isinstance(add, list):
      raise ValueError(f"edit {side}: remove and add must be lists")
    if len(remove) + len(add) > 2 * LIMITS["items"]:
      raise ValueError(f"edit {side} holds more than {2 * LIMITS['items']} changes")
    os_type = LINUX if side == "remote" else child["os"]
    gone = {parse_path(p, os_type, f"edit {side} remove path") for p in remove}
    for it in add:
      if not isinstance(it, dict):
        raise ValueError(f"edit {side}: every added item must be an object")
      gone.add(parse_path(it.get("path"), os_type, f"edit {side} add path"))
    kept = [it for it in child[side] if parse_path(it["path"], os_type) not in gone]
    child[side] = kept + list(add)
  for key in ("checks", "oracle"):
    if key in edit:
      child[key] = edit[key]
  return validate_data(child)
