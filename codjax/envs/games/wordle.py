"""Wordle (ORBIT training game, paper Appendix B.3; axon-rl/gem ``gem/envs/game_env/wordle.py`` registered as
``game:Wordle-v0-hard``: 5 letters; H = 10 as set in XiaofengLin7/ORBIT
``configs/multi_task_multi_episode_config.yaml``).

Rules. The pack seed draws the secret uniformly from ``words.vocabulary(word_length)`` (see words.py for how
this differs from GEM's nltk en-basic list). Each turn the player writes a word, ``\\boxed{CRANE}`` (letters,
spaces removed, case ignored) and gets the guess echoed with a Python-list string of marks, one per
position: ``G`` right letter in the right place, ``Y`` letter elsewhere in the word, ``X`` absent;
repeated letters are matched greens first, then yellows left to right, each secret letter used once. All
``G`` wins. A wrong-length guess or a repeat of an earlier guess of the episode is invalid (turn spent, raw
reward 0). GEM checks no dictionary (faithful); with ``faithful=False`` a word outside the vocabulary is
invalid too. Content that is not letters and spaces is a format error (common.py).
Raw reward (GEM's shaping): 0.5/word_length per position that turns green for the first time, plus 0.5 on
the win.
"""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

from codjax.envs import helpers
from codjax.envs.base import derive_seed
from codjax.envs.games import common, words
from codjax.envs.registry import register

_WORD_RE = re.compile(r"[a-zA-Z]+(?:\s+[a-zA-Z]+)*")
_SALT = 5002


def marks(guess: str, secret: str) -> tuple[str, ...]:
  """Per-position ``G``/``Y``/``X`` of ``guess`` against ``secret`` (equal lengths, module docstring)."""
  out = ["X"] * len(guess)
  left = list(secret)
  for i, (g, s) in enumerate(zip(guess, secret)):
    if g == s:
      out[i] = "G"
      left[i] = None
  for i, g in enumerate(guess):
    if out[i] != "G" and g in left:
      out[i] = "Y"
      left[left.index(g)] = None
  return tuple(out)


def format_marks(m: tuple[str, ...]) -> str:
  return "[" + ", ".join(f"'{x}'" for x in m) + "]"


@dataclasses.dataclass(frozen=True)
class WordleConfig:
  word_length: int = 5
  max_turns: int = 10
  faithful: bool = True
  # secret-pool knobs of environment evolution (codjax's, docs/methods/environment_evolution.md; words.pool); the
  # defaults draw from the whole vocabulary exactly as before
  category: str = "all"
  min_rare: int = 0
  min_repeats: int = 0

  def __post_init__(self):
    helpers.check_int("word_length", self.word_length, 2, 12)
    if not words.vocabulary(self.word_length):
      raise ValueError(f"no words of length {self.word_length} in the vocabulary")
    words.secret_pool_args(self.category, self.min_rare, self.min_repeats, self.word_length)
    helpers.check_int("max_turns", self.max_turns, 1, 100)
    helpers.check_bool("faithful", self.faithful)


@dataclasses.dataclass(frozen=True)
class WordleInstance:
  secret: str
  example: str


def make_instance(cfg: WordleConfig, pack_seed: int) -> WordleInstance:
  rng = random.Random(derive_seed(pack_seed, _SALT))
  vocab = words.vocabulary(cfg.word_length)
  secrets = words.pool(cfg.word_length, cfg.category, cfg.min_rare, cfg.min_repeats)
  return WordleInstance(secret=rng.choice(secrets), example=rng.choice(vocab))


class WordleTask(common.GemTask):
  game = "Wordle"

  def __init__(self, cfg: WordleConfig, inst: WordleInstance, episode_seed: int):
    super().__init__(cfg.max_turns, episode_seed, cfg.faithful)
    self.cfg = cfg
    self.instance = inst
    self._tried: set[str] = set()
    self._greens: set[int] = set()

  def _new_episode(self) -> None:
    self._tried = set()
    self._greens = set()

  def instructions(self) -> str:
    c = self.cfg
    dictionary = "" if c.faithful else " Only words from the game's word list are accepted."
    return (f"{common.title(self.game)}\n"
            f"Find the secret {c.word_length}-letter word within {c.max_turns} turns."
            f"{words.category_line(c.category)}{dictionary}\n"
            "After each guess you get one mark per letter:\n"
            "  - G (green): the letter is in the word at this position\n"
            "  - Y (yellow): the letter is in the word at another position\n"
            "  - X: the letter is not in the word (or not that many times)\n"
            f"Write the guess inside \\boxed{{}}, for example \\boxed{{{self.instance.example}}}.")

  def play(self, content: str) -> common.Outcome:
    t, n = self.turn, self.cfg.word_length
    if not _WORD_RE.fullmatch(content):
      return common.Outcome(f"At turn {t}, no word was found. Answer with letters only, such as "
                            f"\\boxed{{{self.instance.example}}}.", format_error=True)
    guess = "".join(content.split()).upper()
    shown = guess if len(guess) <= 40 else guess[:40] + "..."
    if len(guess) != n:
      return common.Outcome(f"At turn {t}, your guess {shown} has {len(guess)} letters, but the secret word has "
                            f"{n}.", invalid=True)
    if guess in self._tried:
      return common.Outcome(f"At turn {t}, you already guessed {guess} in this episode.", invalid=True)
    if not self.cfg.faithful and guess not in words.vocabulary(n):
      return common.Outcome(f"At turn {t}, {guess} is not in the word list.", invalid=True)
    self._tried.add(guess)
    m = marks(guess, self.instance.secret)
    new_greens = {i for i, x in enumerate(m) if x == "G"} - self._greens
    self._greens |= new_greens
    reward = 0.5 * len(new_greens) / n
    if all(x == "G" for x in m):
      return common.Outcome(f"Congratulations! {guess} is the secret word; you found it in {t} turn(s).",
                            raw_reward=reward + 0.5, ended=True, success=True, state_key=guess)
    return common.Outcome(f"At turn {t}, you guessed {guess}\nFeedback:\n{guess}\n{format_marks(m)}",
                          raw_reward=reward, state_key=guess)


PRESETS: dict[str, dict[str, Any]] = {"orbit": {}}


@register("wordle")
def make_family(preset: str = "orbit", **overrides: Any) -> common.GameFamily:
  """``make("wordle", word_length=5, max_turns=10, faithful=True)``."""
  cfg = helpers.config_from_preset(WordleConfig, PRESETS, preset, overrides, env="wordle")
  return common.GameFamily("wordle", cfg, make_instance, WordleTask)
