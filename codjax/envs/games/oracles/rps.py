"""Rock-Paper-Scissors scripted player: best response to the adversary's estimated distribution.

Every round line "you played X. You win|lose|draw" identifies the adversary's move (win: the move X beats;
draw: X; lose: the move that beats X). The player counts these moves over every episode it can read (and
the counts in a CoD hint), adds one pseudo-count per move (Laplace) and plays the move that beats the most
likely adversary move, i.e. maximises P(win this round); ties go to rock, paper, scissors in that order.
Knowing the true distribution this rule succeeds in about 0.80 of episodes (rps.py).
"""

from __future__ import annotations

import random
import re

from codjax.envs.games.oracles import base
from codjax.envs.games.rps import BEATS, MOVES

_ROUND_RE = re.compile(r"you played (rock|paper|scissors)\. You (win|lose|draw)")
_COUNTS_RE = re.compile(r"adversary moves seen so far: rock (\d{1,6}), paper (\d{1,6}), scissors (\d{1,6})")
_LOSES_TO = {v: k for k, v in BEATS.items()}  # value beats key


def adversary_counts(reading: base.Reading) -> dict[str, int]:
  counts = dict.fromkeys(MOVES, 0)
  for text in reading.texts():
    for m in _COUNTS_RE.finditer(text):
      for move, n in zip(MOVES, m.groups()):
        counts[move] += int(n)
    for m in _ROUND_RE.finditer(text):
      mine, result = m.groups()
      counts[{"win": BEATS[mine], "draw": mine, "lose": _LOSES_TO[mine]}[result]] += 1
  return counts


class Expert(base.GameExpert):
  game = "Rock-Paper-Scissors"

  def knowledge_bullets(self, reading: base.Reading) -> list[str]:
    c = adversary_counts(reading)
    return [f"RPS adversary moves seen so far: rock {c['rock']}, paper {c['paper']}, scissors {c['scissors']}."]

  def act(self, reading: base.Reading, rng: random.Random) -> str:
    c = adversary_counts(reading)
    likely = max(MOVES, key=lambda m: c[m])
    return _LOSES_TO[likely]


class Random(base.RandomPlayer):
  game = "Rock-Paper-Scissors"

  def random_action(self, reading: base.Reading, rng: random.Random) -> str:
    return rng.choice(MOVES)
