"""Mastermind oracle: exact dynamic programming over belief states across episodes (ORBIT paper Appendix C;
the recursion below is codjax's, docs/methods/orbit.md).

Belief: the set S of codes consistent with every peg answer seen so far (any episode, or the CoD hint),
minus guesses known to be wrong. Codes are uniform a priori. With t guesses left in the current episode
and e episodes left (this one included), the optimal expected number of future successful episodes is

  V(S, 0, e) = V(S, H, e - 1)  (e > 1),   V(S, 0, 1) = 0          (the episode is lost)
  V(S, t, e) = e                                 if |S| = 1        (guess it now and in every later episode)
  V(S, t, e) = max_g sum_f P(f | S, g) * (e  if f wins  else  V(S_f, t - 1, e)),

over guesses g from ``guess_pool`` ("codes", the default: the legal codes; "all": any digit string, which
GEM also accepts). A win means every later episode is won too (the code is known). When the pegs of a
losing last guess are hidden (GEM, faithful mode), the last-turn outcomes merge into "not g": S -> S \\ {g}.
Sets are bitmasks over the code list; V is memoised and each max stops at the upper bound
e - 1 + (1/|S| if t = 1 else 1). Identical partitions of S are evaluated once, and on the full set only one
guess per multiplicity pattern is tried (digit relabelling and position permutation fix the full set).

Result (ORBIT setting: 3 digits of 1..6, no repeats, H = 3, T = 3): V = 2.3667, per episode 44/120 =
0.367, 1.0, 1.0, with the last pegs shown or hidden (``launch/orbit_oracles.py`` measures it by playing).
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import random
import re

from codjax.envs.games import common
from codjax.envs.games.mastermind import format_code, pegs
from codjax.envs.games.oracles import base

_PEGS_RE = re.compile(r"\[(\d+(?:, \d+)*)\]\. This guess receives (\d{1,3}) black peg\(s\) and (\d{1,3}) white "
                      r"peg\(s\)")
_WIN_RE = re.compile(r"\[(\d+(?:, \d+)*)\] is the secret code")
_NOT_RE = re.compile(r"\[(\d+(?:, \d+)*)\] is not the secret code")
_GUESS_RE = re.compile(r"\d+(?:\s+\d+)*")
_EXACT_LIMIT = 400  # universes larger than this use the greedy partition rule instead of the exact DP


def all_codes(length: int, digits: int, duplicates: bool) -> list[tuple[int, ...]]:
  pool = range(1, digits + 1)
  gen = itertools.product(pool, repeat=length) if duplicates else itertools.permutations(pool, length)
  return [tuple(c) for c in gen]


class Solver:
  """Exact V(S, t, e) and its argmax for one game setting (module docstring)."""

  def __init__(self, length: int, digits: int, duplicates: bool, turns: int, last_pegs_visible: bool,
               guess_pool: str = "codes"):
    if guess_pool not in ("codes", "all"):
      raise ValueError(f"guess_pool must be 'codes' or 'all', got {guess_pool!r}")
    self.codes = all_codes(length, digits, duplicates)
    self.index = {c: i for i, c in enumerate(self.codes)}
    self.guesses = self.codes if guess_pool == "codes" else all_codes(length, digits, True)
    self.turns = turns
    self.visible = last_pegs_visible
    self.full = (1 << len(self.codes)) - 1
    self.win = (length, 0)
    self.parts: list[list[tuple[tuple[int, int], int]]] = []
    for g in self.guesses:
      masks: dict[tuple[int, int], int] = collections.defaultdict(int)
      for i, c in enumerate(self.codes):
        masks[pegs(g, c)] |= 1 << i
      self.parts.append(sorted(masks.items()))
    self.code_of_guess = [self.index.get(g) for g in self.guesses]
    patterns = {}
    for gi, g in enumerate(self.guesses):
      patterns.setdefault(tuple(sorted(collections.Counter(g).values())), gi)
    self.full_set_guesses = sorted(patterns.values())
    self.guess_of_code = [self.guesses.index(c) for c in self.codes]
    outcomes = max(len(p) for p in self.parts) - 1  # non-winning answers of one guess
    self.sure_cap = [sum(outcomes ** i for i in range(t)) for t in range(turns + 1)]
    self._memo: dict[tuple[int, int, int], tuple[float, int]] = {}
    self._sure_memo: dict[tuple[int, int], int] = {}

  def mask(self, codes) -> int:
    return functools.reduce(lambda m, c: m | (1 << self.index[c]), codes, 0)

  def consistent(self, evidence, wrong=(), known=None) -> int:
    """Bitmask of codes matching every (guess, black, white) in ``evidence``, minus ``wrong`` guesses."""
    if known is not None:
      return self.mask([known]) if known in self.index else 0
    out = 0
    for i, c in enumerate(self.codes):
      if c not in wrong and all(pegs(g, c) == (b, w) for g, b, w in evidence if len(g) == len(c)):
        out |= 1 << i
    return out

  def value(self, s: int, t: int, e: int) -> float:
    return self._solve(s, t, e)[0]

  def best_guess(self, s: int, t: int, e: int) -> tuple[int, ...]:
    return self.guesses[self._solve(s, t, e)[1]]

  def _candidates(self, s: int) -> list[int]:
    if s == self.full:
      return self.full_set_guesses
    inside = [g for g, ci in enumerate(self.code_of_guess) if ci is not None and s >> ci & 1]
    outside = [g for g, ci in enumerate(self.code_of_guess) if ci is None or not s >> ci & 1]
    return inside + outside

  def _solve(self, s: int, t: int, e: int) -> tuple[float, int]:
    if t == 0:
      return (self._solve(s, self.turns, e - 1)[0] if e > 1 else 0.0), -1
    key = (s, t, e)
    if key in self._memo:
      return self._memo[key]
    sure = self._sure(s, t)
    if sure >= 0:  # the code is found within this episode for certain: every episode is won
      self._memo[key] = (float(e), sure)
      return self._memo[key]
    n = s.bit_count()
    cap = self.sure_cap[t - 1]
    options, seen = [], set()
    for g in self._candidates(s):
      split = tuple((f, s & m) for f, m in self.parts[g] if s & m)
      if split not in seen:
        seen.add(split)
        # optimistic value: every later episode won, and min(|part|, cap) codes of each part won in this one
        wins = sum(1 if f == self.win else min(sub.bit_count(), cap) for f, sub in split)
        options.append((e - 1 + wins / n, g))
    options.sort(key=lambda o: -o[0])
    best, best_g = -1.0, -1
    for optimistic, g in options:
      if optimistic <= best + 1e-12:
        break
      q = self._q(s, n, t, e, g)
      if q > best + 1e-12:
        best, best_g = q, g
    self._memo[key] = (best, best_g)
    return best, best_g

  def _sure(self, s: int, t: int) -> int:
    """A guess that wins this episode for certain within t guesses from belief s, else -1 (memoised).

    Only the pegs of non-final guesses matter here, so it holds whether the last pegs are shown or not."""
    if s.bit_count() == 1:
      return self.guess_of_code[s.bit_length() - 1]
    if t == 1 or s.bit_count() > self.sure_cap[t]:
      return -1
    key = (s, t)
    if key not in self._sure_memo:
      self._sure_memo[key] = -1
      seen = set()
      for g in self._candidates(s):
        split = tuple((f, s & m) for f, m in self.parts[g] if s & m)
        if split in seen:
          continue
        seen.add(split)
        if all(f == self.win or self._sure(sub, t - 1) >= 0 for f, sub in split):
          self._sure_memo[key] = g
          break
    return self._sure_memo[key]

  def _q(self, s: int, n: int, t: int, e: int, g: int) -> float:
    ci = self.code_of_guess[g]
    wins = int(ci is not None and bool(s >> ci & 1))
    if t == 1 and not self.visible:
      rest = s & ~(1 << ci) if ci is not None else s
      return (wins * e + (rest.bit_count() * self._solve(rest, 0, e)[0] if rest else 0.0)) / n
    total = float(wins * e)
    for f, m in self.parts[g]:
      sub = s & m
      if sub and f != self.win:
        total += sub.bit_count() * self._solve(sub, t - 1, e)[0]
    return total / n


@functools.lru_cache(maxsize=32)
def solver(length: int, digits: int, duplicates: bool, turns: int, last_pegs_visible: bool,
           guess_pool: str = "codes") -> Solver:
  """A shared solver per setting (its memo table is a pure cache)."""
  return Solver(length, digits, duplicates, turns, last_pegs_visible, guess_pool)


def _digits(text: str) -> tuple[int, ...]:
  return tuple(common.parse_int(x) for x in re.findall(r"\d+", text))


class Knowledge:
  """Peg answers, known-wrong guesses and the code if found, read from text."""

  def __init__(self, reading: base.Reading):
    self.evidence: set[tuple[tuple[int, ...], int, int]] = set()
    self.wrong: set[tuple[int, ...]] = set()
    self.code: tuple[int, ...] | None = None
    for text in reading.texts():
      for m in _PEGS_RE.finditer(text):
        self.evidence.add((_digits(m.group(1)), int(m.group(2)), int(m.group(3))))
      for m in _NOT_RE.finditer(text):
        self.wrong.add(_digits(m.group(1)))
      for m in _WIN_RE.finditer(text):
        self.code = _digits(m.group(1))
    for episode in reading.episodes:
      for x in episode:
        if common.MAX_TURNS_LINE in x.reply and not _PEGS_RE.search(x.reply) and _GUESS_RE.fullmatch(x.content):
          self.wrong.add(_digits(x.content))

  def bullets(self) -> list[str]:
    if self.code is not None:
      return [f"{format_code(self.code)} is the secret code."]
    out = [f"{format_code(g)}. This guess receives {b} black peg(s) and {w} white peg(s)."
           for g, b, w in sorted(self.evidence)]
    return out + [f"{format_code(g)} is not the secret code." for g in sorted(self.wrong)]


def _setting(reading: base.Reading) -> tuple[int, int, bool, int]:
  intro = reading.intros[-1] if reading.intros else ""
  length = reading.intro_int(r"code of {n} digits", 3)
  digits = reading.intro_int(r"between 1 and {n}", 6)
  return length, digits, "digits may repeat" in intro, reading.intro_int(r"You have {n} turns", 3)


class Expert(base.GameExpert):
  """The exact oracle (module docstring). ``episodes`` is T; in a CoD task (one episode per conversation)
  the player plans for T episodes of the pack's code. ``faithful`` assumes GEM hides a losing last guess's
  pegs (it only changes the plan, not what is read)."""

  game = "Mastermind"

  def __init__(self, episodes: int = 3, faithful: bool = True, guess_pool: str = "codes",
               exact_limit: int = _EXACT_LIMIT):
    self.episodes = episodes
    self.faithful = faithful
    self.guess_pool = guess_pool
    self.exact_limit = exact_limit  # universes larger than this use the greedy rule (fast, not optimal)

  def knowledge_bullets(self, reading: base.Reading) -> list[str]:
    return Knowledge(reading).bullets()

  def act(self, reading: base.Reading, rng: random.Random) -> str:
    length, digits, dup, turns = _setting(reading)
    k = Knowledge(reading)
    tried = {_digits(x.content) for x in reading.episodes[-1] if _GUESS_RE.fullmatch(x.content)}
    if (digits ** length if dup else math.perm(digits, length)) > self.exact_limit:
      return " ".join(map(str, _greedy(k, length, digits, dup, tried)))
    sol = solver(length, digits, dup, turns, not self.faithful, self.guess_pool)
    s = sol.consistent(k.evidence, k.wrong, k.code)
    if s == 0:  # contradictory text: fall back to any untried legal code
      s = sol.full
    t = max(1, turns - reading.turns_used)
    e = max(1, self.episodes - reading.episode_index + 1)
    guess = sol.best_guess(s, t, e)
    if guess in tried:  # only possible with contradictory text; a repeat would be invalid
      guess = next(c for c in sol.codes if c not in tried)
    return " ".join(map(str, guess))


def _greedy(k: Knowledge, length: int, digits: int, dup: bool, tried: set) -> tuple[int, ...]:
  """Large settings: the first consistent untried code found by lexicographic search."""
  if k.code is not None:
    return k.code
  pool = range(1, digits + 1)
  gen = itertools.product(pool, repeat=length) if dup else itertools.permutations(pool, length)
  first = None
  for c in gen:
    first = first or c
    if c not in tried and c not in k.wrong and all(pegs(g, c) == (b, w) for g, b, w in k.evidence
                                                   if len(g) == length):
      return c
  return first


class Random(base.RandomPlayer):
  game = "Mastermind"

  def random_action(self, reading: base.Reading, rng: random.Random) -> str:
    length, digits, dup, _ = _setting(reading)
    pool = range(1, digits + 1)
    code = [rng.choice(pool) for _ in range(length)] if dup else rng.sample(pool, min(length, digits))
    return " ".join(map(str, code))
