"""Hangman scripted player: candidate elimination over the game's word list.

Knowledge (any episode, or the CoD hint): letters known at positions (boards), letters known absent, whole
words known wrong, and the secret once a win line names it. Candidates are the words of
``words.vocabulary(n)`` that fit: known letters in place, no absent letter, and no position left hidden
holding a letter known to be in the word (a hit reveals every position of its letter). The player guesses
the word when it is known or unique, or when this is the episode's last turn (the first candidate);
otherwise it guesses the untried letter found in the most candidates (most common letters first when no
candidate is left). Faithful Hangman is only won by a whole-word guess (hangman.py), which this respects.
"""

from __future__ import annotations

import random
import re

from codjax.envs.games import words
from codjax.envs.games.oracles import base

_BOARD_RE = re.compile(r"C00(?: C\d\d)*\n((?: {2}[A-Z_] )+)")
_ABSENT_RE = re.compile(r"letter '([A-Z])' is not in the secret word")
_WRONG_RE = re.compile(r"you guessed '([A-Z]+)', which is not the secret word")
_SECRET_RE = re.compile(r"Congratulations! ([A-Z]+) is the secret word|Hangman secret word: ([A-Z]+)")
_KNOWN_RE = re.compile(r"Hangman known letters: ((?:[A-Z_] ?)+)")
_ABSENT_LIST_RE = re.compile(r"Hangman letters not in the word: ([A-Z](?:, [A-Z])*)")
_WRONG_LIST_RE = re.compile(r"Hangman wrong words: ([A-Z]+(?:, [A-Z]+)*)")
_ENGLISH = "ETAOINSHRDLCUMWFGYPBVKJXQZ"


class Knowledge:
  def __init__(self, texts: list[str], length: int):
    self.length = length
    self.pattern = ["_"] * length
    self.absent: set[str] = set()
    self.wrong: set[str] = set()
    self.secret: str | None = None
    for text in texts:
      boards = [m.group(1).split() for m in _BOARD_RE.finditer(text)]
      boards += [m.group(1).split() for m in _KNOWN_RE.finditer(text)]
      for cells in boards:
        if len(cells) == length:
          self.pattern = [c if c != "_" else p for c, p in zip(cells, self.pattern)]
      self.absent.update(_ABSENT_RE.findall(text))
      self.wrong.update(_WRONG_RE.findall(text))
      for m in _ABSENT_LIST_RE.finditer(text):
        self.absent.update(m.group(1).split(", "))
      for m in _WRONG_LIST_RE.finditer(text):
        self.wrong.update(m.group(1).split(", "))
      for m in _SECRET_RE.finditer(text):
        self.secret = m.group(1) or m.group(2)

  def candidates(self) -> list[str]:
    if self.secret is not None:
      return [self.secret]
    present = set(self.pattern) - {"_"}
    return [w for w in words.vocabulary(self.length) if w not in self.wrong and all(
        (ch == p) if p != "_" else (ch not in present and ch not in self.absent) for ch, p in zip(w, self.pattern))]

  def bullets(self) -> list[str]:
    if self.secret is not None:
      return [f"Hangman secret word: {self.secret}"]
    out = [f"Hangman known letters: {' '.join(self.pattern)}"]
    if self.absent:
      out.append(f"Hangman letters not in the word: {', '.join(sorted(self.absent))}")
    if self.wrong:
      out.append(f"Hangman wrong words: {', '.join(sorted(self.wrong))}")
    return out


def _episode_letters(reading: base.Reading) -> set[str]:
  return {x.content.upper() for x in reading.episodes[-1] if len(x.content) == 1} if reading.episodes else set()


class Expert(base.GameExpert):
  game = "Hangman"

  def knowledge_bullets(self, reading: base.Reading) -> list[str]:
    return Knowledge(reading.texts(), reading.intro_int(r"secret {n}-letter word", 3)).bullets()

  def act(self, reading: base.Reading, rng: random.Random) -> str:
    length = reading.intro_int(r"secret {n}-letter word", 3)
    k = Knowledge(reading.texts(), length)
    cands = k.candidates()
    turns_left = reading.intro_int(r"You have {n} turns", 10) - reading.turns_used
    tried = {x.content.upper() for x in reading.episodes[-1]} if reading.episodes else set()
    untried_words = [w for w in cands if w not in tried]
    if untried_words and (len(cands) == 1 or turns_left <= 1):
      return untried_words[0]
    used = set(k.pattern) | k.absent | _episode_letters(reading)
    scores = {ch: sum(ch in w for w in cands) for ch in _ENGLISH if ch not in used}
    if scores and max(scores.values()) > 0:
      return max(scores, key=lambda ch: (scores[ch], -_ENGLISH.index(ch)))
    if untried_words:
      return untried_words[0]
    return next((ch for ch in _ENGLISH if ch not in used), "E")


class Random(base.RandomPlayer):
  game = "Hangman"

  def random_action(self, reading: base.Reading, rng: random.Random) -> str:
    return rng.choice(_ENGLISH)
