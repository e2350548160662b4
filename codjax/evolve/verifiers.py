"""The three verifiers every candidate environment must pass (Environment Evolution paper, arXiv 2609.04128,
Sec. 4.1; codjax's versions of them: docs/methods/environment_evolution.md).

1. **Oracle.** The parameterisation's scripted reference solver solves the candidate within its budget: one
   episode of at most H turns (``oracle_episodes`` episodes of the same instance for ORBIT-style games, one
   growing conversation, as in ORBIT). Its turn count up to the first win is ``L_oracle``.
2. **Invalid-test.** Trivial policies must *fail*, so the success check is not vacuous: a constant action
   (``Parameterisation.constant_action`` every turn), a seeded random policy, and a replay of the parent's
   oracle actions ("echo the seed environment's solution": the child must not be solvable the old way).
   Each gets the same episode budget as the oracle.
3. **Quality.** The parameters build (constructor validation: parameters in range), the prompt text is
   well formed (non-empty strings, printable, no unrendered ``{...}`` placeholders or ``None``), the answer
   strings the parameterisation names do not occur in the system prompt or the first observation (no
   leak), and the parameterisation's own checks (a unique intended answer, ...) report nothing.

``verify(param, point, parent_actions)`` runs all three (a candidate that fails quality skips the rest) and
returns a ``Verdict``: whether it is accepted, every outcome (recorded in the lineage file) and the oracle's
actions (the next generation's replay check). Playing only uses the environment's text interface; nothing
of the model's or a policy's text is ever executed.
"""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any, Sequence

from codjax.envs.base import StepResult, TaskEnv
from codjax.envs.experts import TextPolicy
from codjax.evolve.base import EnvPoint, Parameterisation

# an unrendered ``{name}`` placeholder (not a game's ``\boxed{move}`` answer format) or a stray ``None``
_PLACEHOLDER_RE = re.compile(r"(?<!\\boxed)\{[a-z_][a-z0-9_]*\}|\bNone\b")
_MAX_PROMPT_CHARS = 200_000


@dataclasses.dataclass
class PlayResult:
  solved: bool
  turns: int  # turns played until the first win (all turns played when never won)
  actions: list[str]  # every action taken, in order, across episodes


class ConstantPolicy(TextPolicy):
  """Answers every turn with the same text."""

  def __init__(self, action: str):
    self.action = action

  def respond(self, messages, rng) -> str:
    del messages, rng
    return self.action


class ReplayPolicy(TextPolicy):
  """Replays a fixed action list (the parent's oracle actions), then repeats its last action."""

  def __init__(self, actions: Sequence[str]):
    self.actions = list(actions) or [""]
    self.i = 0

  def respond(self, messages, rng) -> str:
    del messages, rng
    a = self.actions[min(self.i, len(self.actions) - 1)]
    self.i += 1
    return a


def is_solved(last: StepResult | None) -> bool:
  """A finished episode counts as solved when its last step says ``success`` (games, household) or, for
  environments without that flag, when its raw outcome is a full reward (>= 1)."""
  if last is None:
    return False
  if "success" in last.info:
    return bool(last.info["success"])
  return float(last.info.get("raw_reward", last.reward)) >= 1.0 - 1e-9


def play(policy: TextPolicy, tasks: Sequence[TaskEnv], seed: int, solved=is_solved) -> PlayResult:
  """Plays ``tasks`` (episodes of one instance) in order in one growing conversation until the first win.

  As in ORBIT's context (``codjax.agents.orbit``), a finished episode's terminal observation and the next
  episode's first observation share one user message."""
  rng = random.Random(seed)
  messages: list[dict[str, str]] = []
  actions: list[str] = []
  turns = 0
  carry = ""
  for k, env in enumerate(tasks):
    system, obs = env.reset()
    if k == 0:
      messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": f"{carry}\n\n{obs}" if carry else obs})
    last = None
    for _ in range(max(1, int(env.max_turns))):
      action = policy.respond(messages, rng)
      if not isinstance(action, str):
        action = ""
      actions.append(action)
      turns += 1
      last = env.step(action)
      messages.append({"role": "assistant", "content": action})
      if last.done:
        break
      messages.append({"role": "user", "content": last.observation})
    if solved(last):
      return PlayResult(True, turns, actions)
    carry = last.observation if last is not None and last.done else ""
  return PlayResult(False, turns, actions)


@dataclasses.dataclass
class Verdict:
  accepted: bool
  outcomes: dict[str, Any]  # {"oracle": {...}, "invalid": {...}, "quality": {...}}
  oracle_turns: int = 0
  oracle_actions: list[str] = dataclasses.field(default_factory=list)
  reason: str = ""  # the first failure, '' when accepted


def quality_problems(param: Parameterisation, point: EnvPoint) -> tuple[list[str], list[TaskEnv] | None]:
  """Quality verifier (module docstring, item 3): the problems found and the built tasks (None if the
  parameters do not build)."""
  if point.family != param.name:
    return [f"point belongs to {point.family!r}, not {param.name!r}"], None
  if not param.compatible(point.pairs):
    return [f"pair sequence outside the vocabulary or length bounds ({len(point.pairs)} pairs)"], None
  try:
    tasks = param.tasks(point, max(1, int(param.oracle_episodes)))
    system, obs = param.tasks(point, 1)[0].reset()
  except ValueError as e:
    return [f"parameters do not build: {e}"], None
  problems = []
  for what, text in (("system prompt", system), ("first observation", obs)):
    if not isinstance(text, str) or not text.strip():
      problems.append(f"{what} is empty")
      continue
    if len(text) > _MAX_PROMPT_CHARS:
      problems.append(f"{what} is longer than {_MAX_PROMPT_CHARS} characters")
    if any(not (c.isprintable() or c in "\n\t") for c in text):
      problems.append(f"{what} holds non-printable characters")
    if _PLACEHOLDER_RE.search(text):
      problems.append(f"{what} holds an unrendered placeholder: {_PLACEHOLDER_RE.search(text).group(0)!r}")
  shown = f"{system}\n{obs}".lower()
  for ans in param.answer_strings(point, tasks):
    if ans and ans.lower() in shown:
      problems.append(f"the answer {ans!r} leaks into the prompt")
  problems.extend(param.quality_problems(point, tasks))
  return problems, tasks


def verify(param: Parameterisation, point: EnvPoint, parent_actions: Sequence[str] | None = None,
           seed: int = 0) -> Verdict:
  """Runs the three verifiers on ``point`` (module docstring)."""
  episodes = max(1, int(param.oracle_episodes))
  problems, tasks = quality_problems(param, point)
  outcomes: dict[str, Any] = {"seed": int(seed), "quality": {"ok": not problems, "problems": problems}}
  if problems:
    return Verdict(False, outcomes, reason="quality: " + problems[0])
  solved = getattr(param, "solved", is_solved)
  oracle = play(param.oracle(), tasks, seed, solved)
  outcomes["oracle"] = {"ok": oracle.solved, "turns": oracle.turns}
  if not oracle.solved:
    return Verdict(False, outcomes, reason="oracle: the reference solver does not solve it within the budget")
  trivial = {"constant": ConstantPolicy(param.constant_action()), "random": param.random_policy()}
  if parent_actions:
    trivial["replay_parent"] = ReplayPolicy(parent_actions)
  invalid = {}
  for name, policy in trivial.items():
    r = play(policy, param.tasks(point, episodes), seed + 1, solved)
    invalid[name] = {"ok": not r.solved, "solved": r.solved}
  outcomes["invalid"] = invalid
  failed = [n for n, v in invalid.items() if not v["ok"]]
  if failed:
    return Verdict(False, outcomes, oracle.turns, oracle.actions,
                   reason=f"invalid-test: the trivial policy {failed[0]!r} solves it")
  return Verdict(True, outcomes, oracle.turns, oracle.actions)
