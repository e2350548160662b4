"""Prompt text of the harness: the system prompt per mode and ablation, and the per-turn user message
(public code EvoHarnessRL/EvoHarness-RL ``evoharness/envs/alfworld/prompts.py``, its per-turn context).

Every model call is a fresh ``[system, user]`` pair (the per-turn context), so a prompt's length does not grow
with the episode: the user message holds only the OBJECTIVE, the current OBSERVATION, the ADMISSIBLE
COMMANDS, the last ``HISTORY_WINDOW`` (10) entries of PREVIOUS ACTION(S) -- meta entries annotated, e.g.
``track [apple] -> (belief checked)`` -- and then the harness views: the PLAN panel, the RECALLED HINTS panel
and the last result (``Harness.views``; the always-on mode adds its WORLD panel first).

System prompt sections, in order (the public prompt's order; the wording is ours, the protocol strings are the paper's):
1. role and inputs; 2. environment verbs (ALFWorld 0.4.x places objects with ``move X to Y``), choose exactly
from the admissible list; 3. harness actions with usage examples (``commit``, ``track``, ``recall`` in its three
query modes, ``note``), said to cost a step when ``charge_meta_actions``; 4. when to use each; 5. output format
and rules; 6. with Experience on, the rule to ``note`` right after a successful ``take`` when the recalled hint
was missing or wrong. ``always_on`` replaces 3-4 and 6 by a description of the injected panels and forbids
meta actions; ``env_only`` keeps 1, 2 and 5. Ablated modules lose their verbs, examples and panels.
"""

from __future__ import annotations

from typing import Any, Sequence

from codjax.agents.harness.workspace import MODES, MODULES

HISTORY_WINDOW = 10
MAX_ENTRY_CHARS = 200  # one PREVIOUS ACTION(S) entry is clipped to this many characters

_ROLE = """You are an agent acting in a text-based household (ALFWorld). You complete one household task by issuing \
one command per turn.

Each turn you are shown:
- OBJECTIVE: the task to complete.
- OBSERVATION: what you perceived after your last command.
- ADMISSIBLE COMMANDS: every environment command that is valid right now.
- PREVIOUS ACTION(S): your most recent actions, oldest first."""

_ENV_VERBS = """## Environment commands
Copy one command EXACTLY from ADMISSIBLE COMMANDS. They take these forms:
- `go to <receptacle>`, `open <receptacle>`, `close <receptacle>`
- `take <object> from <receptacle>`, `move <object> to <receptacle>` (this is how you put an object in or on \
something)
- `heat <object> with <receptacle>`, `cool <object> with <receptacle>`, `clean <object> with <receptacle>`
- `use <object>` (switch a lamp on or off), `slice <object> with <object>`
- `examine <something>`, `look`, `inventory`"""

_HARNESS_HEAD = {
    True: """## Harness actions (your memory and plan; each one costs a step, like a command)
They never change the world. Write the argument in square brackets.""",
    False: """## Harness actions (your memory and plan; they do not use up your step budget, but use them only \
when they help)
They never change the world. Write the argument in square brackets.""",
}

_TOOLS = {
    "progress": """- `commit [subgoal]` writes the subgoal you are starting into your PLAN; the subgoals you were \
working on are then marked complete. Example: `commit [find an apple]`, later `commit [heat the apple with \
microwave]`.""",
    "belief": """- `track [name]` asks your belief what you have seen of an object or place: where it is, its state \
(open, heated, cleaned, ...), or that it was not found yet and which places you already visited. \
`track [world]` gives a short summary of everything. Example: `track [apple]`, `track [cabinet]`.""",
    "experience": """- `recall [query]` searches the experience kept from earlier episodes; the query decides what you \
get:
  - `recall [where to find <object>]`: places where that object turned up before;
  - `recall [how to do <task> task]`: procedures, general skills and known mistakes;
  - `recall [mistakes to avoid]`: common mistakes and how to avoid them.
- `note [insight]` stores a lesson for future episodes (it is merged into experience later). Example: \
`note [apple found in fridge]`.""",
}

_WHEN = {
    "progress": """- commit: at the start of the task, and each time you finish one subgoal and move to the next.""",
    "experience": """- recall: at the start, to learn where the target usually is; before a heat, cool or clean \
procedure; and when you are stuck or repeating yourself.""",
    "belief": """- track: before searching again for something you may already have passed, e.g. the second \
object of a "two" task, or after visiting many places.""",
}

_NOTE_RULE = """- Right after a successful `take` of the target, `note` where you found it when RECALLED HINTS \
showed nothing for it or pointed somewhere else, e.g. `note [found kettle in stoveburner, hints said \
countertop]`."""

_FORMAT = """## Output format
<think>one or two sentences of reasoning</think>
<action>exactly one action</action>"""

_RULES_INLINE = """Rules:
1. Issue exactly one action per turn, inside <think>...</think><action>...</action>.
2. An environment command must be copied exactly from ADMISSIBLE COMMANDS.
3. Do not repeat an action that failed; try something else.
4. Be efficient: use a harness action only when it saves you steps."""

_RULES_ENV = """Rules:
1. Issue exactly one action per turn, inside <think>...</think><action>...</action>.
2. Copy the command exactly from ADMISSIBLE COMMANDS.
3. Do not repeat an action that failed; try something else.
4. Be efficient, and check that the object is in the required state before you place it."""

_ALWAYS_ON_HEAD = """## Memory panels (filled in for you every turn)
The harness maintains these panels and shows them below the turn when they have something to say:"""
_ALWAYS_ON_PANELS = {
    "belief": "- WORLD: what you have seen in this episode: where you are, what you hold, places visited and not "
              "yet visited, and the objects seen with their states.",
    "progress": "- PLAN: the objective and how far along it is.",
    "experience": "- RECALLED HINTS: experience from earlier episodes retrieved for this task.",
}
_ALWAYS_ON_TAIL = """The panels are evidence, not orders: when the OBSERVATION disagrees with them, trust the \
OBSERVATION. There are no harness actions in this run: every action must be an environment command."""


def _check(mode: str, modules: Sequence[str]) -> tuple[str, ...]:
  if mode not in MODES:
    raise ValueError(f"harness mode must be one of {MODES}, got {mode!r}")
  mods = tuple(m for m in MODULES if m in set(modules))
  if not set(modules) <= set(MODULES):
    raise ValueError(f"harness modules must be among {MODULES}, got {tuple(modules)!r}")
  return mods


_COMPACT = {
    "env": "Household task. Copy one command from ADMISSIBLE COMMANDS.",
    "inline": "Harness actions (each costs a step): {verbs}.",
    "always_on": "Panels below are filled in for you; use commands only.",
    "format": "Reply: <think>...</think><action>one action</action>",
}
_COMPACT_VERBS = {"progress": "commit [subgoal]", "belief": "track [name]",
                  "experience": "recall [where to find X], note [lesson]"}


def compact_system_prompt(mode: str, modules: Sequence[str] = MODULES) -> str:
  """A few-line system prompt with the same protocol strings (tiny CPU demos: every turn re-reads it)."""
  mods = _check(mode, modules)
  parts = [_COMPACT["env"]]
  if mode == "inline" and mods:
    parts.append(_COMPACT["inline"].format(verbs=", ".join(_COMPACT_VERBS[m] for m in
                                                           ("progress", "belief", "experience") if m in mods)))
  elif mode == "always_on" and mods:
    parts.append(_COMPACT["always_on"])
  parts.append(_COMPACT["format"])
  return "\n".join(parts)


def system_prompt(mode: str, modules: Sequence[str] = MODULES, charge_meta_actions: bool = True,
                  compact: bool = False) -> str:
  """The system prompt of a mode and ablation (module docstring); ``compact``: ``compact_system_prompt``."""
  if compact:
    return compact_system_prompt(mode, modules)
  mods = _check(mode, modules)
  parts = [_ROLE, _ENV_VERBS]
  if mode == "inline" and mods:
    parts.append(_HARNESS_HEAD[bool(charge_meta_actions)] + "\n" + "\n".join(_TOOLS[m] for m in
                                                                             ("progress", "belief", "experience")
                                                                             if m in mods))
    when = [_WHEN[m] for m in ("progress", "experience", "belief") if m in mods]
    if "experience" in mods:
      when.append(_NOTE_RULE)
    parts.append("## When to use them\n" + "\n".join(when))
    parts.append(_FORMAT + "\n\n" + _RULES_INLINE)
  elif mode == "always_on" and mods:
    parts.append(_ALWAYS_ON_HEAD + "\n" + "\n".join(_ALWAYS_ON_PANELS[m] for m in MODULES if m in mods) + "\n"
                 + _ALWAYS_ON_TAIL)
    parts.append(_FORMAT + "\n\n" + _RULES_ENV)
  else:
    parts.append(_FORMAT + "\n\n" + _RULES_ENV)
  return "\n\n".join(parts)


def _clip(text: str, limit: int = MAX_ENTRY_CHARS) -> str:
  text = " ".join(str(text).split())
  return text if len(text) <= limit else text[:limit - 3] + "..."


def history_line(entry: Any) -> str:
  """One PREVIOUS ACTION(S) entry: ``(action, annotation)`` -> ``"action -> (annotation)"``; a plain string is
  shown as is."""
  if isinstance(entry, (tuple, list)) and entry:
    action = _clip(entry[0])
    note = " ".join(str(entry[1]).split()).strip("()") if len(entry) > 1 else ""
    return f"{action} -> ({_clip(note, 80)})" if note else action
  return _clip(entry)


def user_message(harness: Any, objective: str, observation: str, admissible: Sequence[str],
                 history: Sequence[Any] = (), window: int = HISTORY_WINDOW) -> str:
  """The single user message of one turn (module docstring). ``harness`` may be None (no views)."""
  recent = list(history)[-window:] if window > 0 else []
  lines = [f"OBJECTIVE: {' '.join(str(objective).split())}",
           f"OBSERVATION: {str(observation).strip()}",
           "ADMISSIBLE COMMANDS: " + (", ".join(f"'{c}'" for c in admissible) if admissible else "(none)")]
  if recent:
    lines.append("PREVIOUS ACTION(S):")
    lines += [f"{i}. {history_line(e)}" for i, e in enumerate(recent, 1)]
  else:
    lines.append("PREVIOUS ACTION(S): none yet")
  body = "\n".join(lines)
  views = harness.views() if harness is not None else []
  return "\n\n".join([body] + views)
