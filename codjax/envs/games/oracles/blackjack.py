"""Blackjack (indexed deck) scripted player: one-episode expectimax with cross-episode card memory.

Knowledge (any episode, or the CoD hint): the value at every deck index seen face up, and the dealer's
full hand once an episode has ended (the deal is the same every episode). Unseen cards are modelled as
draws from the deck's remaining composition (52 values minus every card seen); an unknown dealer card is
that composition restricted to values giving the dealer at least ``dealer_min`` (17), as the deal
guarantees. On turn t the player compares: stand (probability the total beats the dealer), hit a known
index (each distinct value once), or hit an unknown index (expectation over the composition), looking ahead
to the last turn on which a stand still counts (H - 1 with ``faithful``: ORBIT's adapter only credits
stands before turn H; H otherwise). Ties prefer standing, then known cards; indices are taken lowest
first. It maximises this episode's win probability only (no deliberate exploration).
"""

from __future__ import annotations

import collections
import functools
import random
import re

from codjax.envs.games.blackjack import DECK_VALUES, hand_total
from codjax.envs.games.oracles import base

_CARD = r"(?:A|10|[2-9])"
_DECK_RE = re.compile(r"Deck: ((?:\d{1,6}:(?:A|10|[2-9?]) ?)+)")
_SEEN_RE = re.compile(r"deck cards seen \(index:value\):((?: \d{1,6}:(?:A|10|[2-9]))+)")
_DREW_RE = re.compile(rf"You drew ({_CARD}) from index (\d{{1,6}})\b")
_DEALER_RE = re.compile(rf"Dealer's hand: ({_CARD}(?:, {_CARD})*) \(total \d+\)")
_UP_RE = re.compile(rf"Dealer's cards: ({_CARD}), \?")
_HAND_RE = re.compile(rf"Your hand: ({_CARD}(?:, {_CARD})*) \(total \d+\)")
_PAIR_RE = re.compile(r"(\d{1,6}):(A|10|[2-9?])")


def _value(card: str) -> int:
  return 1 if card == "A" else int(card)


def _cards(text: str) -> tuple[int, ...]:
  return tuple(_value(c) for c in text.split(", "))


class Knowledge:
  def __init__(self, reading: base.Reading):
    self.deck: dict[int, int] = {}
    self.dealer: tuple[int, ...] | None = None
    for text in reading.texts():
      for m in _DECK_RE.finditer(text):
        self.deck.update({int(i): _value(v) for i, v in _PAIR_RE.findall(m.group(1)) if v != "?"})
      for m in _SEEN_RE.finditer(text):
        self.deck.update({int(i): _value(v) for i, v in _PAIR_RE.findall(m.group(1))})
      self.deck.update({int(i): _value(v) for v, i in _DREW_RE.findall(text)})
      for m in _DEALER_RE.finditer(text):
        self.dealer = _cards(m.group(1))

  def bullets(self) -> list[str]:
    out = []
    if self.deck:
      out.append("Blackjack deck cards seen (index:value):" +
                 "".join(f" {i}:{'A' if v == 1 else v}" for i, v in sorted(self.deck.items())))
    if self.dealer:
      names = ", ".join("A" if v == 1 else str(v) for v in self.dealer)
      out.append(f"Blackjack: Dealer's hand: {names} (total {hand_total(self.dealer)}). The deal is the same in every "
                 "task.")
    return out or ["Blackjack: nothing about the deck is known yet."]


class Expert(base.GameExpert):
  game = "Blackjack"

  def __init__(self, faithful: bool = True, dealer_min: int = 17):
    self.faithful = faithful
    self.dealer_min = dealer_min

  def knowledge_bullets(self, reading: base.Reading) -> list[str]:
    return Knowledge(reading).bullets()

  def act(self, reading: base.Reading, rng: random.Random) -> str:
    k = Knowledge(reading)
    up, hand = _UP_RE.search(reading.current), _HAND_RE.search(reading.current)
    deck_line = _DECK_RE.search(reading.current)
    if up is None or hand is None or deck_line is None:
      return "stand"
    up_card, cards = _value(up.group(1)), _cards(hand.group(1))
    n_deck = len(_PAIR_RE.findall(deck_line.group(1)))
    drawn = {int(i) for i, v in _PAIR_RE.findall(deck_line.group(1)) if v != "?"}
    free = [i for i in range(n_deck) if i not in drawn]
    pool = collections.Counter(DECK_VALUES)
    pool.subtract([up_card, *cards[:2], *k.deck.values(), *(k.dealer[1:] if k.dealer else ())])
    pool = +pool
    if k.dealer:
      dealer = {hand_total(k.dealer): 1.0}
    else:
      ok = {v: n for v, n in pool.items() if hand_total((up_card, v)) >= self.dealer_min} or dict(pool)
      total = sum(ok.values())
      dealer = collections.Counter()
      for v, n in ok.items():
        dealer[hand_total((up_card, v))] += n / total
    turns = reading.intro_int(r"You have {n} turns", 4)
    last_stand = turns - 1 if self.faithful else turns
    known = tuple(sorted(k.deck[i] for i in free if i in k.deck))
    unknown = sum(i not in k.deck for i in free)
    plan = _Planner(dealer, last_stand)
    _, action = plan.best(tuple(cards), reading.turns_used + 1, tuple(sorted(pool.items())), known, unknown)
    if action == "stand":
      return "stand"
    if action == "unknown":
      return f"hit {next(i for i in free if i not in k.deck)}"
    return f"hit {min(i for i in free if k.deck.get(i) == action)}"


class _Planner:
  """Expectimax over stand / hit a known value / hit an unknown index (module docstring)."""

  def __init__(self, dealer: dict[int, float], last_stand: int):
    self.dealer = dealer
    self.last_stand = last_stand
    self.best = functools.lru_cache(maxsize=None)(self._best)

  def win(self, hand: tuple[int, ...]) -> float:
    total = hand_total(hand)
    return 0.0 if total > 21 else sum(p for d, p in self.dealer.items() if d < total)

  def _best(self, hand: tuple[int, ...], t: int, pool: tuple[tuple[int, int], ...], known: tuple[int, ...],
           unknown: int) -> tuple[float, object]:
    options: list[tuple[float, object]] = [(self.win(hand) if t <= self.last_stand else 0.0, "stand")]
    if t < self.last_stand:
      for v in sorted(set(known)):
        rest = list(known)
        rest.remove(v)
        options.append((self._after(hand + (v,), t, pool, tuple(rest), unknown), v))
      size = sum(n for _, n in pool)
      if unknown and size:
        value = 0.0
        for v, n in pool:
          left = tuple((u, m - (u == v)) for u, m in pool if m - (u == v) > 0)
          value += n / size * self._after(hand + (v,), t, left, known, unknown - 1)
        options.append((value, "unknown"))
    best = options[0]
    for opt in options[1:]:
      if opt[0] > best[0] + 1e-12:
        best = opt
    return best

  def _after(self, hand: tuple[int, ...], t: int, pool, known, unknown) -> float:
    return 0.0 if hand_total(hand) > 21 else self.best(hand, t + 1, pool, known, unknown)[0]


class Random(base.RandomPlayer):
  game = "Blackjack"

  def random_action(self, reading: base.Reading, rng: random.Random) -> str:
    return "stand" if rng.random() < 0.3 else f"hit {rng.randrange(48)}"
