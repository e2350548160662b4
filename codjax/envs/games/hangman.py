"""Hangman (ORBIT training game, paper Appendix B.2; axon-rl/gem ``gem/envs/game_env/hangman.py`` registered as
``game:Hangman-v0-easy``: 3 letters; H = 10 as set in XiaofengLin7/ORBIT
``configs/multi_task_multi_episode_config.yaml``).

Rules. The pack seed draws the secret uniformly from ``words.vocabulary(word_length)`` (words.py). There is
no life counter, only the turn limit H. ``\\boxed{A}`` (one letter, case ignored) guesses a letter: a letter
already guessed this episode is invalid (turn spent); a hit reveals every position of the letter (raw
reward 0.5 * revealed/length); a miss reveals nothing. ``\\boxed{WORD}`` (several letters) guesses the
whole word: the right word wins (raw reward 0.5 + 0.5 * share still hidden), a word of the wrong length is
invalid, any other word is a miss. Faithful (GEM): only a correct whole-word guess wins; revealing every
letter one by one does not end the game. With ``faithful=False`` revealing the last hidden letter also wins.
Content that is not one run of letters is a format error (common.py).
The board is a row of ``C00 C01 ...`` headers over ``_`` or the revealed letters.
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

_GUESS_RE = re.compile(r"[a-zA-Z]+")
_SALT = 5003


def render_board(cells: list[str]) -> str:
  header = " ".join(f"C{i:02}" for i in range(len(cells)))
  return header + "\n" + "".join(f"  {c} " for c in cells)


@dataclasses.dataclass(frozen=True)
class HangmanConfig:
  word_length: int = 3
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
class HangmanInstance:
  secret: str


def make_instance(cfg: HangmanConfig, pack_seed: int) -> HangmanInstance:
  rng = random.Random(derive_seed(pack_seed, _SALT))
  return HangmanInstance(secret=rng.choice(_secret_pool(cfg)))


def _secret_pool(cfg: HangmanConfig) -> tuple[str, ...]:
  return words.pool(cfg.word_length, cfg.category, cfg.min_rare, cfg.min_repeats)


class HangmanTask(common.GemTask):
  game = "Hangman"

  def __init__(self, cfg: HangmanConfig, inst: HangmanInstance, episode_seed: int):
    super().__init__(cfg.max_turns, episode_seed, cfg.faithful)
    self.cfg = cfg
    self.instance = inst
    self._cells = ["_"] * cfg.word_length
    self._letters: set[str] = set()

  def _new_episode(self) -> None:
    self._cells = ["_"] * self.cfg.word_length
    self._letters = set()

  def instructions(self) -> str:
    c = self.cfg
    win = ("You win only by guessing the whole word." if c.faithful else
           "You win by guessing the whole word or by revealing all of its letters.")
    return (f"{common.title(self.game)}\n"
            f"Find the secret {c.word_length}-letter word.{words.category_line(c.category)} Hidden letters are "
            "shown as '_'.\n"
            "Each turn, either guess one letter, for example \\boxed{E}, or guess the whole word, for example "
            f"\\boxed{{{'A' * c.word_length}}}. A letter in the word is revealed at every position where it "
            f"appears. {win} You have {c.max_turns} turns, one guess per turn.")

  def board(self) -> str:
    return "Current Hangman grid:\n" + render_board(self._cells)

  def play(self, content: str) -> common.Outcome:
    t, secret = self.turn, self.instance.secret
    if not _GUESS_RE.fullmatch(content):
      return common.Outcome(f"At turn {t}, no guess was found. Answer with one letter or one word, such as "
                            "\\boxed{E}.", format_error=True)
    guess = content.upper()
    if len(guess) > 1:
      shown = guess if len(guess) <= 40 else guess[:40] + "..."
      if guess == secret:
        hidden = self._cells.count("_") / len(secret)
        self._cells = list(secret)
        return common.Outcome(f"Congratulations! {secret} is the secret word.", raw_reward=0.5 + 0.5 * hidden,
                              ended=True, success=True, state_key=guess)
      if len(guess) != len(secret):
        return common.Outcome(f"At turn {t}, you guessed '{shown}', which has {len(guess)} letters; the secret "
                              f"word has {len(secret)}.", invalid=True)
      return common.Outcome(f"At turn {t}, you guessed '{guess}', which is not the secret word.", state_key=guess)
    if guess in self._letters:
      return common.Outcome(f"At turn {t}, you already guessed the letter '{guess}'.", invalid=True)
    self._letters.add(guess)
    if guess not in secret:
      return common.Outcome(f"At turn {t}, the letter '{guess}' is not in the secret word.", state_key=guess)
    hits = [i for i, ch in enumerate(secret) if ch == guess]
    for i in hits:
      self._cells[i] = guess
    message = f"At turn {t}, the letter '{guess}' is in the secret word."
    reward = 0.5 * len(hits) / len(secret)
    if not self.cfg.faithful and "_" not in self._cells:
      return common.Outcome(f"{message}\nCongratulations! {secret} is the secret word.", raw_reward=reward + 0.5,
                            ended=True, success=True, state_key=guess)
    return common.Outcome(message, raw_reward=reward, state_key=guess)


PRESETS: dict[str, dict[str, Any]] = {"orbit": {}}


@register("hangman")
def make_family(preset: str = "orbit", **overrides: Any) -> common.GameFamily:
  """``make("hangman", word_length=3, max_turns=10, faithful=True)``."""
  cfg = helpers.config_from_preset(HangmanConfig, PRESETS, preset, overrides, env="hangman")
  return common.GameFamily("hangman", cfg, make_instance, HangmanTask)
