"""The CoD text protocol: hint injection, the update-context prompt and hint parsing.

These strings are the format contract between the policy, the environments' scripted experts and the CoD
workflow (``codjax.agents.cod``), so they live here, below both. The protocol is the CoD paper's minimal
update-context workflow (Sec. 3.1; prompts in Appendix C, Table 3) as implemented in agentscope-ai/Trinity-RFT
``trinity/common/workflows/connect_the_dots/base_workflow.py`` (hint injection) and ``update_context_workflow.py``
(update prompt, parsing); docs/methods/cod.md describes it. The prose is codjax's own wording; the markers
are Trinity-RFT's, because parsing depends on them.
"""

from __future__ import annotations

import dataclasses

from codjax.envs.base import HINT_SECTION_MARKER, LENGTH_SECTION_MARKER

HINT_START = "--- Start of updated hints ---"
HINT_END = "--- End of updated hints ---"
INITIAL_HINT = "Hints: null"
FAILED_HINT = "Hints: no hint available."
HINT_PREFIX = "Hints: "

PREV_HINTS_HEADER = "--- Previous hints ---"
TRAJECTORY_HEADER = "--- A new task-solving trajectory ---"
JOB_HEADER = "--- Your job ---"

_HINT_SECTION_BODY = (
    "These notes were written from earlier tasks in this same environment. They may be helpful, but they "
    "are not guaranteed to be correct or to apply to this task. Use them as prior knowledge, and combine "
    "them with what you observe while interacting with the environment."
)


PROTOCOL_STYLES = ("full", "compact")


def augment_system_prompt(system_prompt: str, hint: str | None, response_limit: int | None = None,
                          style: str = "full") -> str:
  """Appends the hint section (exactly when a hint is given) and the optional soft length limit (paper Table 1,
  "suggested response length").

  ``style="compact"`` (tiny CPU demos) keeps the section marker but drops the explanatory paragraph."""
  out = system_prompt
  if hint and style == "compact":
    out += f"{HINT_SECTION_MARKER}\n{hint}"
  elif hint:
    out += f"{HINT_SECTION_MARKER} that might help\n{_HINT_SECTION_BODY}\n\n{hint}"
  if response_limit:
    out += (f"{LENGTH_SECTION_MARKER}\nPlease keep your response (including any reasoning) within "
            f"{int(response_limit)} tokens.")
  return out


def update_system_prompt(response_limit: int | None = None, style: str = "full") -> str:
  """System prompt of the update-context episode (paper Appendix C, Table 3), in codjax's words.

  ``style="compact"`` states only the job and the exact block format (tiny CPU demos)."""
  if style == "compact":
    return (f"Rewrite the hints for the next task from the previous hints and this trajectory. Reply with:\n"
            f"{HINT_START}\n- ...\n{HINT_END}")
  text = (
      "You learn across a stream of tasks that all take place in the same environment. In this session your "
      "only job is to rewrite the hints that will be shown to you on the next task. You receive the previous "
      "hints and a new trajectory of you solving one task. Keep the guidance that is still useful, drop "
      "guidance the trajectory shows to be wrong, and add what the trajectory newly teaches.\n\n"
      "Principles:\n"
      "- The environment may change between tasks; hints you are unsure about may stay, marked as uncertain.\n"
      "- Two kinds of hints are most valuable: facts about the environment that the trajectory revealed, and "
      "techniques that were validated by the outcome.\n\n"
      "Response format: think briefly, then write exactly one block of this form:\n"
      f"{HINT_START}\n- ...\n{HINT_END}\n\n"
      "Copy both delimiter lines exactly and write nothing after the closing delimiter. Keep hints short, "
      "transferable and written as Markdown bullets; if you need headings, use ### or deeper.")
  if response_limit:
    text += f"\n\nPlease keep your response within {int(response_limit)} tokens."
  return text


def update_user_prompt(prev_hint: str | None, trajectory: str, reward: float | None, feedback: str,
                       reminder: str = "", style: str = "full") -> str:
  """User prompt of the update-context episode (paper Appendix C, Table 3). ``reward=None`` omits the reward
  line (PDE).
  ``style="compact"`` ends with the job header alone (the compact system prompt states the job)."""
  prev = prev_hint if prev_hint else "(No previous hint available)"
  parts = [f"{PREV_HINTS_HEADER}\n\n{prev}\n\n", f"\n{TRAJECTORY_HEADER}\n\n{trajectory}\n\n"]
  if reward is not None:
    parts.append(f"Reward: {reward:.3f}\n\n")
  parts.append(f"Environment feedback: {feedback}\n\n")
  if style == "compact":
    parts.append(JOB_HEADER)
  else:
    parts.append(f"{JOB_HEADER}\n\nNow think it through and return your updated hints, following the "
                 "requirements of the system prompt.")
  if reminder:
    parts.append("\n\n" + reminder)
  return "".join(parts)


@dataclasses.dataclass(frozen=True)
class ParsedUpdatePrompt:
  prev_hint: str
  trajectory: str
  reward: float | None
  feedback: str


def parse_update_user_prompt(text: str) -> ParsedUpdatePrompt:
  """Inverse of ``update_user_prompt`` (used by scripted experts, which act only through text)."""
  head, _, rest = text.partition(f"\n{TRAJECTORY_HEADER}\n\n")
  prev = head[len(PREV_HINTS_HEADER):].strip()
  body = rest.split(f"{JOB_HEADER}")[0]
  reward = None
  feedback = ""
  fb_idx = body.rfind("\n\nEnvironment feedback: ")
  if fb_idx >= 0:
    feedback = body[fb_idx + len("\n\nEnvironment feedback: "):].strip()
    body = body[:fb_idx]
  rw_idx = body.rfind("\n\nReward: ")
  if rw_idx >= 0:
    try:
      reward = float(body[rw_idx + len("\n\nReward: "):].strip())
      body = body[:rw_idx]
    except ValueError:
      reward = None
  if prev == "(No previous hint available)":
    prev = ""
  return ParsedUpdatePrompt(prev_hint=prev, trajectory=body.strip(), reward=reward, feedback=feedback)


def extract_between(text: str, start: str, end: str) -> str | None:
  """Content between exactly one ``start`` and exactly one ``end`` marker, start first; else None."""
  if text.count(start) != 1 or text.count(end) != 1:
    return None
  i, j = text.index(start), text.index(end)
  if j < i + len(start):
    return None
  return text[i + len(start):j]


def parse_hint(response: str) -> str | None:
  """Parses an update-context response: ``"Hints: " + content`` or None on failure (docs/methods/cod.md)."""
  content = extract_between(response, HINT_START, HINT_END)
  if content is None or not content.strip():
    return None
  return HINT_PREFIX + content.strip()


def format_hint_block(bullets: list[str], reasoning: str = "") -> str:
  """Renders an update-context response in the marker format (for scripted experts)."""
  lines = [f"- {b}" for b in bullets] or ["- (nothing learned yet)"]
  pre = (reasoning.strip() + "\n") if reasoning else ""
  return f"{pre}{HINT_START}\n" + "\n".join(lines) + f"\n{HINT_END}"


def extract_answer(text: str) -> str | None:
  """The content of a unique ``<answer>...</answer>`` block (exactly one of each tag, in order)."""
  return extract_between(text, "<answer>", "</answer>")


def is_update_prompt(messages: list[dict]) -> bool:
  """True when a conversation is an update-context episode (its user turn has the protocol headers)."""
  return any(m.get("role") == "user" and m.get("content", "").startswith(PREV_HINTS_HEADER) for m in messages)


def hint_from_system_prompt(system_prompt: str) -> str:
  """The hint text injected into a solve system prompt by ``augment_system_prompt`` ('' if none)."""
  if HINT_SECTION_MARKER not in system_prompt:
    return ""
  sec = system_prompt.split(HINT_SECTION_MARKER, 1)[1].split(LENGTH_SECTION_MARKER)[0]
  return sec.split(_HINT_SECTION_BODY, 1)[-1].strip()
