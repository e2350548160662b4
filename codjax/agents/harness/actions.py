"""Parsing one model reply into an environment action or a harness meta action (EvoHarness-RL, arXiv 2608.05446:
the action protocol; public code EvoHarnessRL/EvoHarness-RL ``evoharness/actions.py``).

Rules, stated once:

* The reply format is ``<think>...</think><action>...</action>``; the think block is optional. A reply is
  well-formed when it holds exactly one ``<action>`` opening tag and exactly one ``</action>`` closing tag
  (tags matched case-insensitively), the opening tag comes first, and the text between them is non-empty
  after trimming whitespace and surrounding quote characters (``'``, ``"``, backticks).
* The action text is lowercased and its whitespace collapsed to single spaces (``ParsedAction.text``).
* The verb is the first token; a ``[`` also ends it, so ``track[apple]`` has the verb ``track``.
* The meta verbs are ``track``, ``commit``, ``recall`` and ``note``; their argument sits in square brackets:
  ``recall [how to heat an apple]``. The argument runs from the first ``[`` to the last ``]``. A meta action is
  malformed (with a reason) when the bracket is missing, unclosed or empty, when words stand between the verb
  and the bracket, or when text follows the closing bracket.
* Anything else is an environment command (kind ``"env"``, ``arg`` = the text after the verb); whether it is
  admissible is the caller's business.
* ``parse_action`` never raises: any input (not even a string) gives a ``ParsedAction``.
"""

from __future__ import annotations

import dataclasses

META_VERBS: tuple[str, ...] = ("track", "commit", "recall", "note")
KINDS: tuple[str, ...] = ("env", "meta", "malformed")

_OPEN = "<action>"
_CLOSE = "</action>"
_QUOTES = "'\"`"


@dataclasses.dataclass(frozen=True)
class ParsedAction:
  """One parsed reply. ``kind`` is env | meta | malformed; ``reason`` explains a malformed one ("" otherwise)."""

  kind: str
  verb: str = ""
  arg: str = ""
  text: str = ""
  reason: str = ""

  @property
  def is_meta(self) -> bool:
    return self.kind == "meta"


def normalize(text: str) -> str:
  """Lowercase and collapse whitespace: the canonical form of an action."""
  return " ".join(str(text).split()).lower()


def leading_verb(action: str) -> str:
  """The first token of an action, where ``[`` also ends a token (``"track[x]"`` -> ``"track"``)."""
  head = normalize(action).split("[", 1)[0].split()
  return head[0] if head else ""


def _malformed(reason: str, verb: str = "", text: str = "") -> ParsedAction:
  return ParsedAction("malformed", verb=verb, text=text, reason=reason)


def _extract(reply: str) -> tuple[str | None, str]:
  """(action content lowercased, "") or (None, reason). Linear time in the reply length."""
  low = reply.lower()
  opens, closes = low.count(_OPEN), low.count(_CLOSE)
  if opens == 0 and closes == 0:
    return None, "no <action>...</action> tag"
  if opens != 1 or closes != 1:
    return None, f"expected exactly one <action>...</action>, found {opens} opening and {closes} closing tags"
  start = low.index(_OPEN) + len(_OPEN)
  end = low.index(_CLOSE)
  if end < start:
    return None, "</action> comes before <action>"
  return low[start:end], ""


def parse_meta(verb: str, text: str) -> ParsedAction:
  """A normalised action whose verb is a meta verb -> meta or malformed."""
  rest = text[len(verb):].strip()  # ``verb`` is ``leading_verb(text)``, so ``text`` starts with it
  if not rest.startswith("["):
    if "[" in rest:
      return _malformed(f"{verb}: put nothing between the verb and the bracket (write `{verb} [...]`)", verb, text)
    return _malformed(f"{verb} needs a bracketed argument, e.g. `{verb} [...]`", verb, text)
  close = rest.rfind("]")
  if close < 0:
    return _malformed(f"{verb}: the bracket is not closed", verb, text)
  if rest[close + 1:].strip():
    return _malformed(f"{verb}: text after the closing bracket", verb, text)
  arg = rest[1:close].strip()
  if not arg:
    return _malformed(f"{verb}: the bracketed argument is empty", verb, text)
  return ParsedAction("meta", verb=verb, arg=arg, text=f"{verb} [{arg}]")


def parse_action(reply: object) -> ParsedAction:
  """Parses one model reply (module docstring). Never raises."""
  try:
    if not isinstance(reply, str):
      return _malformed(f"the reply is not text ({type(reply).__name__})")
    content, reason = _extract(reply)
    if content is None:
      return _malformed(reason)
    text = normalize(content.strip().strip(_QUOTES))
    if not text:
      return _malformed("the <action> tag is empty")
    verb = leading_verb(text)
    if verb in META_VERBS:
      return parse_meta(verb, text)
    return ParsedAction("env", verb=verb, arg=text[len(verb):].strip(), text=text)
  except Exception as e:  # pragma: no cover - a last guard: bad text is a malformed reply, never a crash
    return _malformed(f"unparseable reply ({type(e).__name__})")
