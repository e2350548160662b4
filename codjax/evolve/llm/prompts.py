"""Prompt texts of the LLM evolver (Environment Evolution paper, arXiv 2609.04128, Sec. 4.1; the paper publishes
no prompts, these are codjax's own). Each asks for one JSON object and states its shape.

The task is shown as its JSON data (``codjax.envs.terminal.data``); the vocabulary, the direction rule and the
effort rule are spelled out so that a model can follow them without the paper.
"""

from __future__ import annotations

import json
from typing import Sequence

from codjax.envs.terminal.data import LIMITS
from codjax.evolve.base import Pair
from codjax.evolve.params.terminal import SCENARIO_FREQ, SKILL_FREQ

DIRECTION_RULES = {
    "scenario": "replace the scenario of the chosen pair(s) by a rarer one and keep each paired skill",
    "skill": "replace the skill of the chosen pair(s) by a rarer one and keep each scenario",
    "length": "insert new (scenario, skill) pairs (extra operations); keep every old pair in order",
}
EFFORT_RULES = {
    "low": "edit exactly one pair (or insert exactly one pair)",
    "high": "edit one contiguous span of pairs (or insert one contiguous block)",
    "max": "edit any subset of the pairs",
}


def _pairs(pairs: Sequence[Pair]) -> str:
  return json.dumps([p.to_json() for p in pairs])


def _vocab() -> str:
  return (f"Scenarios (where an operation runs, with reference frequency): {json.dumps(SCENARIO_FREQ)}. One task "
          "has one local machine (linux, mac or windows); 'remote' is the Linux server reached by ssh.\n"
          f"Skills (operations, with reference frequency): {json.dumps(SKILL_FREQ)}. upload/download run only on "
          "the local machine; chmod does not exist on windows.")


def _rubrics(rubrics: Sequence[str]) -> str:
  return "\n".join(f"- {r}" for r in rubrics)


def proposer_prompt(task: dict, direction: str, effort: str, feedback: str = "") -> str:
  retry = f"\nYour previous answer was rejected: {feedback}\nFix that.\n" if feedback else ""
  return f"""You evolve a terminal task into a harder one.

{_vocab()}

The current task (JSON):
{json.dumps(task, indent=1)}

Step 1: extract its execution sequence: the (scenario, skill) pair of each operation, in order.
Step 2: edit the sequence along the direction '{direction}': {DIRECTION_RULES[direction]}.
Effort '{effort}': {EFFORT_RULES[effort]}.
Step 3: write a short plan of what changes in the task.
{retry}
Answer with one JSON object only:
{{"parent_pairs": [["scenario", "skill"], ...], "pairs": [["scenario", "skill"], ...], "plan": "..."}}"""


def reviewer_prompt(task: dict, old: Sequence[Pair], new: Sequence[Pair], plan: str, rubrics: Sequence[str]) -> str:
  return f"""You review a plan that turns a terminal task into a harder one.

The current task (JSON):
{json.dumps(task, indent=1)}

Old execution sequence: {_pairs(old)}
New execution sequence: {_pairs(new)}
Plan: {plan}

Rubrics the new task must satisfy:
{_rubrics(rubrics)}

Answer with one JSON object only: {{"accept": true or false, "violations": ["the rubric a plan breaks", ...]}}"""


def modifier_prompt(task: dict, old: Sequence[Pair], new: Sequence[Pair], plan: str, rubrics: Sequence[str],
                    feedback: str = "") -> str:
  repair = (f"\nYour previous edit failed verification in the simulator: {feedback}\nRepair it.\n"
            if feedback else "")
  return f"""You edit a terminal task (run only inside a file-system simulator) according to an accepted plan.

The current task (JSON):
{json.dumps(task, indent=1)}

Old execution sequence: {_pairs(old)}
New execution sequence: {_pairs(new)}
Plan: {plan}

Rubrics:
{_rubrics(rubrics)}

Limits: {json.dumps(LIMITS)}. Paths are absolute in the machine's spelling, under the local home or the remote's
/home/<user>, /var/www, /opt, /srv or /tmp. Items: {{"path", "type": "file", "content", "perm"}},
{{"path", "type": "dir"}} or {{"path", "type": "archive", "format": "tar"|"tar.gz"|"zip", "entries": {{...}}}}.
Checks: {{"kind": "file_exists"|"file_not_exists"|"dir_exists"|"permission_equals"|"archive_contains",
"machine": "local"|"remote", "path", "content"?, "value"?, "entries"?}}. Oracle: one simulator command line per turn.
{repair}
Answer with one JSON object only (keys you leave out keep the current value; checks and oracle replace the old
lists):
{{"instruction": "...", "os": "...", "local": {{"remove": ["path", ...], "add": [ITEM, ...]}},
 "remote": {{"remove": [...], "add": [...]}}, "checks": [CHECK, ...], "oracle": ["command", ...]}}"""
