"""The rubric reviewer's verdict (the plan reviewer of loop 1, Environment Evolution paper, arXiv 2609.04128,
Sec. 4.1; docs/methods/environment_evolution.md).

The model answers ``{"accept": true|false, "violations": [...]}`` against the rubric bank. ``parse_review``
returns (accepted, reason): a rejection's reason lists the violations it named; a reply without a boolean
``accept`` is a ``ValueError``.
"""

from __future__ import annotations

from typing import Any


def parse_review(obj: Any) -> tuple[bool, str]:
  if not isinstance(obj, dict) or not isinstance(obj.get("accept"), bool):
    raise ValueError("the review must be a JSON object with a boolean 'accept'")
  raw = obj.get("violations", [])
  items = [" ".join(str(v).split())[:200] for v in raw[:10]] if isinstance(raw, list) else []
  if obj["accept"]:
    return True, ""
  return False, "reviewer rejected the plan: " + ("; ".join(items) if items else "no reason given")
