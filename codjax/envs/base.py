"""The text-environment interface shared by every environment in codjax.

An *environment family* (``EnvFamily``) is what ``codjax.envs.make(name, **params)`` returns. It samples
packs: ``family.sample_pack(pack_seed, num_tasks)`` returns ``num_tasks`` task environments (``TaskEnv``) that
share the pack's hidden structure (a direction mapping, a recipe graph, dynamics, a cost field, ...). Every
call to ``sample_pack`` builds fresh mutable pack state, so the G concurrent repeats of one pack each get
their own copy and can never collide; the hidden structure itself is a pure function of ``pack_seed``.

A task environment speaks text only:

* ``reset() -> (system_prompt, observation)``
* ``step(action_text) -> StepResult(observation, reward, done, info)``

``info`` always carries ``feedback`` (str), ``format_error`` (bool) and ``raw_reward`` (the outcome before
any length penalty). Environments parse the model's raw text themselves and never raise on bad model output:
malformed text is a format error with its own feedback and reward. They never execute model output on the
host (no ``eval``/``exec``/subprocess/filesystem).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Sequence

# Section markers the update-context trajectory rendering strips from a solve system prompt (as
# agentscope-ai/Trinity-RFT ``connect_the_dots/base_workflow.py`` does). Defined here so envs can override
# rendering without importing agents.
HINT_SECTION_MARKER = "\n\n## Hints"
LENGTH_SECTION_MARKER = "\n\n## Response length limit"


@dataclasses.dataclass
class StepResult:
  """What ``TaskEnv.step`` returns. ``info`` holds at least feedback, format_error and raw_reward."""

  observation: str
  reward: float
  done: bool
  info: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Turn:
  """One solve-episode turn as the update-context renderer sees it."""

  observation: str  # the user message shown before the action
  action: str  # the assistant's full response text


class TaskEnv(abc.ABC):
  """One task of a pack. Single use: ``reset`` once, then ``step`` until ``done``."""

  #: maximum number of agent turns of this task (for the episode-wise length penalty and budgets)
  max_turns: int = 1

  @abc.abstractmethod
  def reset(self) -> tuple[str, str]:
    """Returns ``(system_prompt, first_observation)``."""

  @abc.abstractmethod
  def step(self, action_text: str) -> StepResult:
    """Consumes one raw model response; never raises on bad text."""

  def final_feedback(self) -> str:
    """Feedback string for the update-context prompt once the episode ended (default: last feedback)."""
    return getattr(self, "_last_feedback", "")

  def render_trajectory(self, system_prompt: str, turns: Sequence[Turn]) -> str:
    """Renders the finished episode for the update-context prompt (docs/methods/cod.md).

    ``"System:\\n" + system prompt`` (hint and length-limit sections removed), then one
    ``"Step k:\\nObservation: ...\\nAction: ..."`` block per turn, joined by blank lines. An empty
    ``system_prompt`` (the compact protocol) leaves the System block out. Environments with
    their own rendering (GridNavigation, OptimalControl, PDE) override this.
    """
    sys_text = system_prompt.split(HINT_SECTION_MARKER)[0].split(LENGTH_SECTION_MARKER)[0]
    blocks = ["System:\n" + sys_text] if sys_text else []  # "" (compact protocol): no System block
    for k, turn in enumerate(turns, start=1):
      obs = turn.observation.split("\n\nHere are some reference examples:\n\n")[0]
      blocks.append(f"Step {k}:\nObservation: {obs}\nAction: {turn.action}")
    return "\n\n".join(blocks)

  #: when False the update-context prompt omits the ``Reward:`` line (PDE variant; docs/methods/cod.md)
  show_reward_in_update: bool = True


class EnvFamily(abc.ABC):
  """An environment with its parameters fixed; samples packs of tasks that share hidden structure."""

  #: registry name, e.g. ``"frozenlake_obscure"``
  name: str = ""

  @abc.abstractmethod
  def sample_pack(self, pack_seed: int, num_tasks: int, task_seeds: Sequence[int] | None = None) -> list[TaskEnv]:
    """Returns ``num_tasks`` fresh task environments sharing the hidden structure drawn from ``pack_seed``.

    ``task_seeds`` (dataset rows) pick the per-task instances; when None they are derived from
    ``pack_seed``. Ralph modes pass the same task seed several times.
    """

  def score_hint(self, pack_seed: int, hint: str) -> float | None:
    """Accuracy of the facts a hint states about the pack's hidden structure, in [0, 1]; None when the
    hint states none or the environment defines no such score. For evaluation only (never a reward)."""
    del pack_seed, hint
    return None

  def update_protocol_reminder(self) -> str:
    """Extra text appended to the update-context user prompt (PDE's delimiter reminder); default none."""
    return ""


def derive_seed(*parts: int) -> int:
  """A stable 63-bit seed from integers (same on every machine and Python process)."""
  import hashlib

  h = hashlib.sha256(",".join(str(int(p)) for p in parts).encode()).digest()
  return int.from_bytes(h[:8], "big") >> 1
