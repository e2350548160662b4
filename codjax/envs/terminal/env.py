"""TerminalSimulator environment: file-operation tasks in a simulated local and remote shell (CoD paper,
Sec. 3.2.1 and Appendix C Table 6; after the authors' shiweijiezero/Trinity-RFT
`trinity/common/workflows/connect_the_dots/terminal/env.py`).

Each turn the agent answers one command line in ``<answer>COMMAND</answer>`` (``&&``/``;`` chains allowed); a
missing or empty answer ends the episode with reward 0. The command runs in the in-memory shell
(``commands.Shell``; nothing reaches the host), then the goal checks run: when they all hold the episode ends
with reward 1, otherwise it ends after ``agent_max_steps`` commands with the final check as reward (binary, no
length penalty). Observations: ``Step k/N``, the previous command's output (from step 2 on), then the prompt
of the current machine (``user@localhost:~$``, ``user@MacBook ~ %``, ``C:\\Users\\user>``, or the remote's).

Packs hold independent tasks (no hidden pack structure: what transfers is command knowledge). Presets are in
``presets.py``. With ``task_data`` (an explicit task as JSON data, ``data.py``; default None) every task of every
pack is that one task instead of a generated one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from codjax.envs.base import EnvFamily, StepResult, TaskEnv
from codjax.envs.cod_protocol import extract_answer
from codjax.envs.helpers import check_int, config_from_preset, pack_args
from codjax.envs.registry import register
from codjax.envs.terminal.commands import COMMAND_LIST, Shell
from codjax.envs.terminal.data import task_from_data
from codjax.envs.terminal.fs import WINDOWS
from codjax.envs.terminal.presets import PRESETS
from codjax.envs.terminal.tasks import TEMPLATES, TerminalTaskSpec, check_goal, generate_task

PARSE_ERROR_OUTPUT = "ERROR: Could not parse command from <answer>...</answer> tags. Episode terminated."
FORMAT_FEEDBACK = "Failed: Episode terminated due to action format error."
SUCCESS_FEEDBACK = "Success! Task completed correctly."
FAIL_FEEDBACK = "Failed: Goal state not achieved."
MAX_OUTPUT = 3000  # longer command output is cut (keeps observations bounded)
OS_NAMES = {WINDOWS: "Windows", "mac": "macOS", "linux": "Linux"}


@dataclasses.dataclass(frozen=True)
class TerminalConfig:
  agent_max_steps: int = 12
  composite_ratio: float = 0.5
  task_kind: str | None = None  # force one template (tests, per-template evaluation)
  #: an explicit task as JSON data (``data.py``): every task of every pack is this task; None: generated tasks
  task_data: Any = None

  def __post_init__(self):
    check_int("agent_max_steps", self.agent_max_steps, 1)
    r = self.composite_ratio
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
      raise ValueError(f"composite_ratio must be a number in [0, 1], got {r!r}")
    if self.task_kind is not None and self.task_kind not in TEMPLATES:
      raise ValueError(f"task_kind must be one of {sorted(TEMPLATES)} or None, got {self.task_kind!r}")
    if self.task_data is not None:
      task_from_data(self.task_data)  # ValueError naming the broken rule


def system_prompt(spec: TerminalTaskSpec, max_steps: int) -> str:
  return f"""\
You are working in a simulated terminal. Your goal is to carry out a file operation by typing commands.

## Environment
- Local machine: {OS_NAMES[spec.os_type]} (type: {spec.os_type}, hostname: localhost)
- Remote server: {spec.host} (Linux; SSH keys are already set up)
- Remote username: {spec.user}

## Commands you may try
{COMMAND_LIST}

Not every command exists on every system.

## Task
{spec.description}

## How to answer
Think step by step about which command to run, then end with it:

[THINKING]
<answer>COMMAND</answer>

where COMMAND is one shell command line to run this turn.

Further requirements:
- Keep the reasoning short.
- Run exactly ONE command line per turn; you may chain commands inside it with `&&` or `;`.
- A response without a parsable `<answer>` block ends the episode at once.
- You have {max_steps} steps for the whole task.
- Put the `<answer>` block at the END of your response."""


class TerminalTask(TaskEnv):
  """One TerminalSimulator task (single use)."""

  def __init__(self, cfg: TerminalConfig, spec: TerminalTaskSpec):
    self.cfg = cfg
    self.spec = spec
    self.max_turns = cfg.agent_max_steps
    self.shell = Shell(*spec.build())
    self._steps = 0
    self._done = False
    self._last_feedback = ""

  def reset(self) -> tuple[str, str]:
    return system_prompt(self.spec, self.cfg.agent_max_steps), self._observation(None)

  def _observation(self, output: str | None) -> str:
    parts = [f"Step {self._steps + 1}/{self.cfg.agent_max_steps}"]
    if output:
      parts.append(output if len(output) <= MAX_OUTPUT else output[:MAX_OUTPUT] + "\n... (output truncated)")
    parts.append(self.shell.prompt())
    return "\n\n".join(parts)

  def goal_reached(self) -> bool:
    return check_goal(self.spec, self.shell.local, self.shell.remote)

  def step(self, action_text: str) -> StepResult:
    if self._done:
      return StepResult("", 0.0, True, {"feedback": self._last_feedback, "format_error": False, "raw_reward": 0.0})
    ans = extract_answer(action_text if isinstance(action_text, str) else "")
    command = ans.strip() if ans is not None else ""
    if not command:
      self._steps += 1
      return self._finish(FORMAT_FEEDBACK, 0.0, PARSE_ERROR_OUTPUT, format_error=True)
    self._steps += 1
    output = self.shell.run_line(command)
    if self.goal_reached():
      return self._finish(SUCCESS_FEEDBACK, 1.0, output)
    if self._steps >= self.cfg.agent_max_steps:
      return self._finish(FAIL_FEEDBACK, 0.0, output)
    self._last_feedback = output
    return StepResult(self._observation(output), 0.0, False,
                      {"feedback": output, "format_error": False, "raw_reward": 0.0})

  def _finish(self, feedback: str, reward: float, output: str, format_error: bool = False) -> StepResult:
    self._done = True
    self._last_feedback = feedback
    return StepResult(output[:MAX_OUTPUT], reward, True, {"feedback": feedback, "format_error": format_error,
                                                          "raw_reward": reward, "steps": self._steps})


class TerminalFamily(EnvFamily):
  """TerminalSimulator with fixed parameters; the tasks of a pack are independent."""

  name = "terminal_simulator"

  def __init__(self, cfg: TerminalConfig):
    self.cfg = cfg

  def sample_pack(self, pack_seed: int, num_tasks: int, task_seeds: Sequence[int] | None = None) -> list[TaskEnv]:
    _, seeds = pack_args(pack_seed, num_tasks, task_seeds)
    if self.cfg.task_data is not None:
      return [TerminalTask(self.cfg, task_from_data(self.cfg.task_data, s)) for s in seeds]
    return [TerminalTask(self.cfg, generate_task(s, self.cfg.composite_ratio, self.cfg.task_kind)) for s in seeds]


def build_config(preset: str = "eval", **overrides: Any) -> TerminalConfig:
  """The named preset (presets.py) with field overrides."""
  return config_from_preset(TerminalConfig, PRESETS, preset, overrides, env="terminal_simulator")


@register("terminal_simulator")
def make_terminal(preset: str = "eval", **overrides: Any) -> TerminalFamily:
  return TerminalFamily(build_config(preset, **overrides))
