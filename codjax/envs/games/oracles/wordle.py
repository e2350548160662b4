"""Wordle scripted player: candidate elimination with a letter-frequency choice.

Knowledge (any episode, or the CoD hint): every echoed guess with its marks, guesses known wrong (a
losing last guess whose marks GEM hides), and the secret once a win line names it. Candidates are the
words of ``words.vocabulary(n)`` whose marks against each known guess equal the marks seen
(``wordle.marks``). The player guesses the untried candidate with the highest score, the number of
candidates sharing each of its distinct letters plus the number sharing each letter at its position
(ties: alphabetical). When no candidate is left it falls back to the first untried vocabulary word.
"""

from __future__ import annotations

import collections
import random
import re

from codjax.envs.games import common, words
from codjax.envs.games.oracles import base
from codjax.envs.games.wordle import format_marks, marks

_MARKS_RE = re.compile(r"\b([A-Z]{2,})\s+\[((?:'[GYX]',\s*)*'[GYX]')\]")
_WIN_RE = re.compile(r"Congratulations! ([A-Z]+) is the secret word|Wordle secret word: ([A-Z]+)")
_WRONG_RE = re.compile(r"Wordle: ([A-Z]+) is not the secret word")
_WORD_RE = re.compile(r"[a-zA-Z]+(?:\s+[a-zA-Z]+)*")


class Knowledge:
  def __init__(self, reading: base.Reading):
    self.evidence: set[tuple[str, tuple[str, ...]]] = set()
    self.wrong: set[str] = set()
    self.secret: str | None = None
    for text in reading.texts():
      for m in _MARKS_RE.finditer(text):
        self.evidence.add((m.group(1), tuple(re.findall(r"[GYX]", m.group(2)))))
      self.wrong.update(_WRONG_RE.findall(text))
      for m in _WIN_RE.finditer(text):
        self.secret = m.group(1) or m.group(2)
    for episode in reading.episodes:
      for x in episode:
        if common.MAX_TURNS_LINE in x.reply and not _MARKS_RE.search(x.reply) and _WORD_RE.fullmatch(x.content):
          self.wrong.add("".join(x.content.split()).upper())

  def candidates(self, length: int) -> list[str]:
    if self.secret is not None:
      return [self.secret]
    return [w for w in words.vocabulary(length) if w not in self.wrong and all(
        len(g) != length or marks(g, w) == m for g, m in self.evidence)]

  def bullets(self) -> list[str]:
    if self.secret is not None:
      return [f"Wordle secret word: {self.secret}"]
    return ([f"Wordle feedback: {g} {format_marks(m)}" for g, m in sorted(self.evidence)] +
            [f"Wordle: {w} is not the secret word." for w in sorted(self.wrong)])


def _score(cands: list[str]) -> dict[str, int]:
  letters = collections.Counter(ch for w in cands for ch in set(w))
  places = collections.Counter((i, ch) for w in cands for i, ch in enumerate(w))
  return {w: sum(letters[ch] for ch in set(w)) + sum(places[(i, ch)] for i, ch in enumerate(w)) for w in cands}


class Expert(base.GameExpert):
  game = "Wordle"

  def knowledge_bullets(self, reading: base.Reading) -> list[str]:
    return Knowledge(reading).bullets()

  def act(self, reading: base.Reading, rng: random.Random) -> str:
    length = reading.intro_int(r"secret {n}-letter word", 5)
    tried = {"".join(x.content.split()).upper() for x in reading.episodes[-1]} if reading.episodes else set()
    cands = [w for w in Knowledge(reading).candidates(length) if w not in tried]
    if not cands:
      return next((w for w in words.vocabulary(length) if w not in tried), "A" * length)
    score = _score(cands)
    return max(cands, key=lambda w: (score[w], [-ord(c) for c in w]))


class Random(base.RandomPlayer):
  game = "Wordle"

  def random_action(self, reading: base.Reading, rng: random.Random) -> str:
    vocab = words.vocabulary(reading.intro_int(r"secret {n}-letter word", 5))
    return rng.choice(vocab) if vocab else "WORDS"
