"""One JSON object out of model text (every reply of the LLM evolver is JSON; docs/methods/environment_evolution.md).

``parse_object(text)`` takes the first ```` ```json ```` fenced block when there is one, else the first
``{ ... }`` that decodes, and returns it as a dict. Anything else (not a string, too long, no object, an
object nested too deeply) is a ``ValueError`` with a short reason; model text is only ever parsed, never run.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_TEXT_CHARS = 40_000
MAX_DEPTH = 12
MAX_STARTS = 200  # opening braces tried per candidate (bounded work on garbage)
_FENCE_RE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def _depth(obj: Any, d: int = 0) -> int:
  if d > MAX_DEPTH:
    return d
  if isinstance(obj, dict):
    return max([_depth(v, d + 1) for v in obj.values()] or [d + 1])
  if isinstance(obj, list):
    return max([_depth(v, d + 1) for v in obj] or [d + 1])
  return d


def parse_object(text: Any) -> dict:
  """The JSON object in ``text`` (module docstring); ValueError otherwise."""
  if not isinstance(text, str):
    raise ValueError(f"the reply is not text ({type(text).__name__})")
  if len(text) > MAX_TEXT_CHARS:
    raise ValueError(f"the reply is longer than {MAX_TEXT_CHARS} characters ({len(text)})")
  candidates = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
  decoder = json.JSONDecoder()
  for cand in candidates:
    starts = [i for i, ch in enumerate(cand) if ch == "{"][:MAX_STARTS]
    for start in starts:
      try:
        obj, _ = decoder.raw_decode(cand, start)
      except (ValueError, RecursionError):
        continue
      if isinstance(obj, dict):
        if _depth(obj) > MAX_DEPTH:
          raise ValueError(f"the JSON object is nested deeper than {MAX_DEPTH} levels")
        return obj
  raise ValueError("no JSON object found in the reply")
