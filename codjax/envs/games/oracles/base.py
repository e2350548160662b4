"""Reading a game conversation as text, and the two policy bases every game's players share.

Scripted players act only through the conversation (experts.py contract). ``read(messages, game)`` turns a
conversation into a ``Reading``:

* **Solve conversations** ``[system, user, assistant, user, ...]``: one episode or several (ORBIT's one
  growing context). An episode starts at every user message holding the game's title line
  (``common.title``), which every episode's instructions begin with; the text of that message before the
  title is still the reply to the previous action. ``hint`` is the CoD hint inside the system prompt.
* **CoD update conversations** (``cod_protocol.is_update_prompt``): the previous hint and one rendered
  trajectory ``Step k:\\nObservation: ...\\nAction: ...``; the reply to action k is the observation of
  step k + 1, and the reply to the last action is the environment feedback.

Everything a player knows about the hidden instance comes from ``Reading.texts()`` (hint, instructions and
replies; scanned with each game's own line patterns) and ``Reading.episodes`` (which action got which
reply). Experts answer update conversations with a hint block (``cod_protocol.format_hint_block``) whose
bullets restate that knowledge in lines their own scanners read back, so knowledge carries from task to
task in a CoD pack exactly as it carries from episode to episode in ORBIT's context.
"""

from __future__ import annotations

import abc
import dataclasses
import random
import re

from codjax.envs import cod_protocol
from codjax.envs.experts import TextPolicy
from codjax.envs.games import common

_STEP_RE = re.compile(r"\n\nStep \d+:\nObservation: ")
_INT_RE = r"(\d{1,6})"


@dataclasses.dataclass
class Exchange:
  action: str  # the assistant's full response
  reply: str  # the environment's answer to it ('' while pending)

  @property
  def content(self) -> str:
    return common.extract_action(self.action)


@dataclasses.dataclass
class Reading:
  hint: str
  intros: list[str]  # the instructions (first observation) of each episode, in order
  episodes: list[list[Exchange]]  # exchanges of each episode; in solve mode the last one is current
  current: str  # solve mode: the latest observation, the one to answer ('' in update mode)
  update: bool

  def texts(self) -> list[str]:
    return [self.hint, *self.intros, *(x.reply for ep in self.episodes for x in ep)]

  @property
  def turns_used(self) -> int:
    """Actions already taken in the current episode."""
    return len(self.episodes[-1]) if self.episodes else 0

  @property
  def episode_index(self) -> int:
    """1-based index of the current (last) episode."""
    return max(1, len(self.episodes))

  def intro_int(self, pattern: str, default: int) -> int:
    """An integer read from the instructions with ``pattern`` (one ``{n}`` placeholder), else ``default``."""
    m = re.search(pattern.replace("{n}", _INT_RE), self.intros[-1] if self.intros else "")
    return int(m.group(1)) if m else default


def read(messages: list[dict[str, str]], game: str) -> Reading:
  """Parses a solve or update conversation (module docstring)."""
  if cod_protocol.is_update_prompt(messages):
    return _read_update(messages)
  system = messages[0]["content"] if messages and messages[0].get("role") == "system" else ""
  marker = common.title(game)
  intros: list[str] = []
  episodes: list[list[Exchange]] = []
  pending: str | None = None
  current = ""
  for m in messages:
    role, text = m.get("role"), m.get("content", "") or ""
    if role == "assistant":
      pending = text
      continue
    if role != "user":
      continue
    idx = text.rfind(marker)
    if pending is not None and episodes:
      episodes[-1].append(Exchange(pending, text if idx < 0 else text[:idx]))
    pending = None
    if idx >= 0 or not episodes:
      intros.append(text[max(idx, 0):])
      episodes.append([])
    current = text[max(idx, 0):]
  return Reading(hint=cod_protocol.hint_from_system_prompt(system), intros=intros, episodes=episodes,
                 current=current, update=False)


def _read_update(messages: list[dict[str, str]]) -> Reading:
  user = next(m["content"] for m in messages if m.get("role") == "user"
              and m.get("content", "").startswith(cod_protocol.PREV_HINTS_HEADER))
  parsed = cod_protocol.parse_update_user_prompt(user)
  steps = _STEP_RE.split("\n\n" + parsed.trajectory)[1:]
  observations, actions = [], []
  for block in steps:
    obs, _, action = block.rpartition("\nAction: ")
    observations.append(obs)
    actions.append(action)
  replies = observations[1:] + [parsed.feedback]
  exchanges = [Exchange(a, r) for a, r in zip(actions, replies)]
  return Reading(hint=parsed.prev_hint, intros=observations[:1], episodes=[exchanges], current="", update=True)


def hint_lines(hint: str) -> list[str]:
  """Bullet lines of a hint (``Hints: `` prefix and ``- `` markers removed)."""
  text = hint[len(cod_protocol.HINT_PREFIX):] if hint.startswith(cod_protocol.HINT_PREFIX) else hint
  lines = [ln.strip().lstrip("-").strip() for ln in text.splitlines()]
  return [ln for ln in lines if ln and ln not in ("null", "no hint available.", "(nothing learned yet)")]


class GameExpert(TextPolicy):
  """A scripted player: ``act`` in solve conversations, a hint block of ``knowledge_bullets`` in updates."""

  game: str = ""

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    reading = read(messages, self.game)
    if reading.update:
      return cod_protocol.format_hint_block(self.knowledge_bullets(reading))
    return self.solve_reply(reading, self.act(reading, rng))

  def solve_reply(self, reading: Reading, content: str) -> str:
    """The solve turn's reply around the action content (a player may write a note before the box)."""
    del reading
    return f"\\boxed{{{content}}}"

  @abc.abstractmethod
  def act(self, reading: Reading, rng: random.Random) -> str:
    """The content of the next action box."""

  @abc.abstractmethod
  def knowledge_bullets(self, reading: Reading) -> list[str]:
    """Everything learned about the hidden instance, as hint bullets the player's scanners read back."""


class RandomPlayer(TextPolicy):
  """Uniformly random legal-looking moves; in updates it hands the previous hint on unchanged."""

  game: str = ""

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    reading = read(messages, self.game)
    if reading.update:
      return cod_protocol.format_hint_block(hint_lines(reading.hint))
    return self.solve_reply(reading, self.random_action(reading, rng))

  def solve_reply(self, reading: Reading, content: str) -> str:
    """The solve turn's reply around the action content (as ``GameExpert.solve_reply``)."""
    del reading
    return f"\\boxed{{{content}}}"

  @abc.abstractmethod
  def random_action(self, reading: Reading, rng: random.Random) -> str:
    """A random action content."""
