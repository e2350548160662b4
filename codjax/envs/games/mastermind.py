"""Mastermind (ORBIT held-out test game, paper Appendix B.4; axon-rl/gem ``gem/envs/game_env/mastermind.py``
registered as ``game:Mastermind-v0-random``, with the settings of XiaofengLin7/ORBIT
``configs/multi_task_multi_episode_config.yaml``: 3 digits from 1..6, no repeated digit, H = 3).

Rules. The pack seed fixes a secret code of ``code_length`` digits from 1..``num_digits`` (distinct unless
``duplicates``): 120 codes in the ORBIT setting. Each turn the player writes a full guess as
space-separated integers, ``\\boxed{1 2 3}``, and is told
``"... guessed [1, 2, 3]. This guess receives B black peg(s) and W white peg(s)."`` with
B = #positions where guess and code agree and W = (multiset overlap of guess and code) - B. B = code_length
wins ("Congratulations! ..."). A guess of the wrong length, with a digit outside 1..num_digits, or repeating
an earlier guess of the same episode is invalid: the turn is spent, raw reward 0. Content that is not
space-separated integers is a format error (common.py: faithful ends the episode with raw reward -0.1).
In faithful mode the pegs of a losing guess on turn H are not shown (GEM prints only the max-turns line).
Raw reward (GEM's milestone shaping): (B - best B so far) / code_length whenever B improves.

The instructions' example guess is drawn from the pack seed, so every episode of a pack reads the same.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import re
from typing import Any

from codjax.envs import helpers
from codjax.envs.base import derive_seed
from codjax.envs.games import common
from codjax.envs.registry import register

_GUESS_RE = re.compile(r"\d+(?:\s+\d+)*")
_SALT = 5001


def pegs(guess: tuple[int, ...], code: tuple[int, ...]) -> tuple[int, int]:
  """(black, white) of ``guess`` against ``code`` (equal lengths)."""
  black = sum(g == c for g, c in zip(guess, code))
  overlap = sum((collections.Counter(guess) & collections.Counter(code)).values())
  return black, overlap - black


def format_code(code: tuple[int, ...], limit: int = 12) -> str:
  """``[1, 2, 3]`` (long guesses are cut after ``limit`` entries)."""
  items = [str(d) for d in code[:limit]] + (["..."] if len(code) > limit else [])
  return "[" + ", ".join(items) + "]"


@dataclasses.dataclass(frozen=True)
class MastermindConfig:
  code_length: int = 3
  num_digits: int = 6
  duplicates: bool = False
  max_turns: int = 3
  faithful: bool = True

  def __post_init__(self):
    helpers.check_int("code_length", self.code_length, 1, 8)
    helpers.check_int("num_digits", self.num_digits, 2, 20)
    helpers.check_bool("duplicates", self.duplicates)
    if not self.duplicates and self.num_digits < self.code_length:
      raise ValueError(f"num_digits ({self.num_digits}) must be >= code_length ({self.code_length}) "
                       "when duplicates are not allowed")
    helpers.check_int("max_turns", self.max_turns, 1, 100)
    helpers.check_bool("faithful", self.faithful)


@dataclasses.dataclass(frozen=True)
class MastermindInstance:
  code: tuple[int, ...]
  example: tuple[int, ...]


def make_instance(cfg: MastermindConfig, pack_seed: int) -> MastermindInstance:
  rng = random.Random(derive_seed(pack_seed, _SALT))
  digits = range(1, cfg.num_digits + 1)
  draw = (lambda: rng.choices(digits, k=cfg.code_length)) if cfg.duplicates else (
      lambda: rng.sample(digits, cfg.code_length))
  code = tuple(draw())
  return MastermindInstance(code=code, example=tuple(draw()))


class MastermindTask(common.GemTask):
  game = "Mastermind"

  def __init__(self, cfg: MastermindConfig, inst: MastermindInstance, episode_seed: int):
    super().__init__(cfg.max_turns, episode_seed, cfg.faithful)
    self.cfg = cfg
    self.instance = inst
    self._tried: set[tuple[int, ...]] = set()
    self._best_black = 0

  def _new_episode(self) -> None:
    self._tried = set()
    self._best_black = 0

  def instructions(self) -> str:
    c = self.cfg
    repeat = "digits may repeat" if c.duplicates else "no digit appears twice"
    example = " ".join(map(str, self.instance.example))
    return (f"{common.title(self.game)}\n"
            f"A secret code of {c.code_length} digits is hidden. Each digit is between 1 and {c.num_digits}, and "
            f"{repeat}. You have {c.max_turns} turns to find it.\n"
            "Each turn, guess a complete code. The reply counts black pegs (a right digit in the right place) and "
            "white pegs (a right digit in a wrong place).\n"
            f"Write the guess as digits separated by spaces inside \\boxed{{}}, for example \\boxed{{{example}}}.")

  def play(self, content: str) -> common.Outcome:
    t, k = self.turn, self.cfg.code_length
    if not _GUESS_RE.fullmatch(content):
      return common.Outcome(f"At turn {t}, no guess was found. Answer with digits separated by spaces, such as "
                            f"\\boxed{{{' '.join(map(str, self.instance.example))}}}.", format_error=True)
    guess = tuple(common.parse_int(tok) for tok in content.split())
    shown = format_code(guess)
    if len(guess) != k:
      return common.Outcome(f"At turn {t}, your guess {shown} has {len(guess)} digits, but the code has {k}.",
                            invalid=True)
    if any(not 1 <= d <= self.cfg.num_digits for d in guess):
      return common.Outcome(f"At turn {t}, your guess {shown} uses a digit outside 1 to {self.cfg.num_digits}.",
                            invalid=True)
    if guess in self._tried:
      return common.Outcome(f"At turn {t}, you already tried {shown} in this episode.", invalid=True)
    self._tried.add(guess)
    black, white = pegs(guess, self.instance.code)
    reward = 0.0
    if black > self._best_black:
      reward = (black - self._best_black) / k
      self._best_black = black
    if black == k:
      return common.Outcome(f"Congratulations! {shown} is the secret code; you found it in {t} turn(s).",
                            raw_reward=reward, ended=True, success=True, state_key=guess)
    return common.Outcome(f"At turn {t}, you guessed {shown}. This guess receives {black} black peg(s) and "
                          f"{white} white peg(s).", raw_reward=reward, state_key=guess)


PRESETS: dict[str, dict[str, Any]] = {"orbit": {}}


@register("mastermind")
def make_family(preset: str = "orbit", **overrides: Any) -> common.GameFamily:
  """``make("mastermind", code_length=3, num_digits=6, duplicates=False, max_turns=3, faithful=True)``."""
  cfg = helpers.config_from_preset(MastermindConfig, PRESETS, preset, overrides, env="mastermind")
  return common.GameFamily("mastermind", cfg, make_instance, MastermindTask)
