"""Shared machinery of the ORBIT games (docs/methods/orbit.md): action extraction, the episode loop, families.

**Action extraction** (XiaofengLin7/ORBIT ``agents/gem_text_agent.py``). The action is the content of the *last*
``\\boxed{...}`` whose content holds no brace; a response without such a box is taken whole (ORBIT re-wraps it as
``\\boxed{text}``). Each game then matches that content, stripped, against its own grammar as a full match, so
``\\boxed{reveal 1 2}``, a long reasoning ending in ``\\boxed{reveal 1 2}`` and a bare ``reveal 1 2`` are one
action, and anything else takes the game's invalid-action or format-error path. Nothing here raises on model text.

**Episode** (ORBIT paper Sec. 2; XiaofengLin7/ORBIT ``envs/multi_episode_env.py``). One ``TaskEnv`` is one episode
of at most ``H = max_turns`` turns. It ends when the game ends (a win or a loss) or when turn H is played.
``success`` means the game ended in a win within H turns; the step reward is ORBIT's binary completion reward
(paper eq. for R(M; tau), section 3.1): 1.0 on the step that wins, else 0.0, so the last-step reward is also the
CoD task reward. ``info["raw_reward"]`` holds the game's own shaped reward (GEM constants: format error -0.1,
invalid action 0, loss 0). The feedback of the final step is the whole terminal observation (message and final
board), since a CoD update episode sees nothing else of that step; earlier steps' feedback is the message alone.

**GEM-style games** (Minesweeper, Hangman, Wordle, Mastermind) share two behaviours of GEM that the ``faithful``
switch (codjax's; axon-rl/gem ``gem/envs/game_env/``) keeps: a response whose content does not fit the action
grammar at all ends the episode at once with raw reward -0.1, and when turn H is played without a win the
observation is only ``"You have reached the maximum number of turns."`` (GEM drops the last turn's feedback, e.g.
Mastermind's pegs of the third guess). With ``faithful=False`` a format error costs the turn like an invalid
action and the last feedback is shown above the terminal line.

**Families.** ``sample_pack(pack_seed, n)`` draws ONE hidden instance from ``pack_seed`` (a pure function
of it) and returns n fresh episodes of it: ORBIT's T episodes of one task instance, and equally a CoD pack
of tasks that share the instance. ``task_seeds`` only seed per-episode randomness (RPS draws).
"""

from __future__ import annotations

import abc
import dataclasses
import re
from typing import Any, Callable, Hashable, Sequence

from codjax.envs.base import EnvFamily, StepResult, TaskEnv
from codjax.envs.helpers import pack_args

BOX_RE = re.compile(r"\\boxed\{([^{}]*)\}")
MAX_TURNS_LINE = "You have reached the maximum number of turns."
ENTER_GUESS = "Enter your guess."
FORMAT_ERROR_REWARD = -0.1
# Integers longer than this are out of range for every game (and int() on them is never attempted).
_MAX_INT_DIGITS = 9


def extract_action(text: Any) -> str:
  """Content of the last brace-free ``\\boxed{...}``, else the whole text; stripped ('' for non-strings)."""
  if not isinstance(text, str):
    return ""
  last = None
  for last in BOX_RE.finditer(text):
    pass
  return (last.group(1) if last is not None else text).strip()


def parse_int(token: str) -> int:
  """Decimal token -> int; absurdly long tokens map to a huge value (always out of range)."""
  token = token.lstrip("0") or "0"
  return int(token) if len(token) <= _MAX_INT_DIGITS else 10**_MAX_INT_DIGITS


def system_prompt(game: str) -> str:
  """The single-episode system prompt (codjax wording; the ORBIT protocol may replace it)."""
  return (f"You are playing {game}, a text game. The user's messages give the rules and the game state. Think "
          "briefly, then give exactly one move per turn inside \\boxed{}, for example \\boxed{...} with your move "
          "in place of the dots.")


@dataclasses.dataclass
class Outcome:
  """What one turn of a game produced (before the episode-level turn limit is applied)."""

  message: str
  raw_reward: float = 0.0
  ended: bool = False  # the game itself ended (win or loss)
  success: bool = False
  format_error: bool = False  # the content did not fit the action grammar at all
  invalid: bool = False  # well-formed but not a legal move (turn consumed)
  state_key: Hashable = None


class GameTask(TaskEnv):
  """One episode of a game. Subclasses implement the hooks below; the turn loop and info are shared."""

  #: game name; the instructions start with ``f"You are playing {game}."`` (marks an episode start in text)
  game: str = ""

  def __init__(self, max_turns: int, episode_seed: int):
    self.max_turns = max_turns
    self.episode_seed = episode_seed
    self._turn = 0
    self._done = False
    self._started = False
    self._last_feedback = ""
    self._final: StepResult | None = None

  # ---------------------------------------------------------------------------------------- hooks
  @abc.abstractmethod
  def instructions(self) -> str:
    """Rules text of one episode; must start with ``title(game)``."""

  @abc.abstractmethod
  def play(self, content: str) -> Outcome:
    """Applies one extracted action content (``self.turn`` is already the 1-based number of this turn)."""

  def board(self) -> str:
    """Rendered state shown after every message ('' when the game has none)."""
    return ""

  def prompt_line(self) -> str:
    """The request that ends every non-terminal observation."""
    return ENTER_GUESS

  def timeout(self, out: Outcome) -> Outcome:
    """The outcome when turn H is played without the game ending (a failure): the turn's message, then
    the max-turns line."""
    return dataclasses.replace(out, message=f"{out.message}\n{MAX_TURNS_LINE}", ended=True, success=False)

  def on_format_error(self, out: Outcome) -> Outcome:
    """What a format error does to the episode (default: it only costs the turn)."""
    return out

  @abc.abstractmethod
  def _new_episode(self) -> None:
    """Resets the per-episode game state (called by ``reset``)."""

  @property
  def initial_state_key(self) -> Hashable:
    """The state the episode starts in, for the exploration metric (None when states are actions)."""
    return None

  # ---------------------------------------------------------------------------------------- protocol
  @property
  def turn(self) -> int:
    return self._turn

  @property
  def done(self) -> bool:
    return self._done

  def reset(self) -> tuple[str, str]:
    self._turn = 0
    self._done = False
    self._started = True
    self._final = None
    self._last_feedback = ""
    self._new_episode()
    return system_prompt(self.game), self._observe(self.instructions(), terminal=False)

  def step(self, action_text: str) -> StepResult:
    if not self._started:
      raise RuntimeError("call reset() before step()")
    if self._done:
      return dataclasses.replace(self._final, observation="", reward=0.0, info=dict(self._final.info))
    self._turn += 1
    out = self.play(extract_action(action_text))
    if out.format_error:
      out = self.on_format_error(out)
    truncated = False
    if not out.ended and self._turn >= self.max_turns:
      out = self.timeout(out)
      truncated = not out.success
    self._done = out.ended
    observation = self._observe(out.message, terminal=out.ended)
    # The last feedback is all a CoD update episode sees of the final step, so it carries the final board too.
    self._last_feedback = observation if out.ended else out.message
    info = {
        "feedback": self._last_feedback,
        "format_error": out.format_error,
        "raw_reward": float(out.raw_reward),
        "success": bool(out.ended and out.success),
        "terminated": bool(out.ended and not truncated),
        "truncated": truncated,
        "invalid": out.invalid,
        "turn": self._turn,
        "state_key": out.state_key,
    }
    result = StepResult(observation, 1.0 if info["success"] else 0.0, out.ended, info)
    if out.ended:
      self._final = result
    return result

  def _observe(self, message: str, terminal: bool) -> str:
    parts = [message]
    board = self.board()
    if board:
      parts.append(board)
    if not terminal:
      parts.append(self.prompt_line())
    return "\n\n".join(p for p in parts if p)


class GemTask(GameTask):
  """GEM's shared behaviours (module docstring): faithful format errors end the episode, and the last
  turn's feedback is replaced by the max-turns line."""

  def __init__(self, max_turns: int, episode_seed: int, faithful: bool):
    super().__init__(max_turns, episode_seed)
    self.faithful = faithful

  def on_format_error(self, out: Outcome) -> Outcome:
    if self.faithful:
      return dataclasses.replace(out, ended=True, success=False, raw_reward=FORMAT_ERROR_REWARD)
    return out

  def timeout(self, out: Outcome) -> Outcome:
    if self.faithful:
      return dataclasses.replace(out, message=MAX_TURNS_LINE, ended=True, success=False)
    return super().timeout(out)


def title(game: str) -> str:
  """First line of a game's instructions; also how text policies find episode starts in a transcript."""
  return f"You are playing {game}."


# ------------------------------------------------------------------------------------------ families


class GameFamily(EnvFamily):
  """A game with fixed parameters; ``instance(pack_seed)`` is the hidden instance shared by a pack."""

  def __init__(self, name: str, cfg: Any, make_instance: Callable[[Any, int], Any],
               make_task: Callable[[Any, Any, int], GameTask]):
    self.name = name
    self.cfg = cfg
    self._make_instance = make_instance
    self._make_task = make_task

  def instance(self, pack_seed: int) -> Any:
    """The hidden instance of a pack (immutable; a pure function of ``pack_seed``)."""
    return self._make_instance(self.cfg, int(pack_seed))

  def sample_pack(self, pack_seed: int, num_tasks: int, task_seeds: Sequence[int] | None = None) -> list[GameTask]:
    pack_seed, seeds = pack_args(pack_seed, num_tasks, task_seeds, salt=(7,))
    inst = self.instance(pack_seed)
    return [self._make_task(self.cfg, inst, s) for s in seeds]
