"""Blackjack with an indexed deck (ORBIT training game; ORBIT paper Appendix B.7; rules and instance as in
XiaofengLin7/ORBIT ``envs/blackjack_env_adapter.py``).

Hidden instance (pack seed, ``random.Random``). A 52-card deck of values (ace = 1, 2-9, four 10-valued ranks
per suit) is shuffled; while the dealer's two top cards total less than ``dealer_min`` (17) the deck is
reshuffled from the same stream, at most 50 times. The dealer keeps the top two cards, the player gets the
next two, and the remaining 48 cards are laid out face down at indices 0..47. Deck order, both hands and
therefore every later draw are the same in every episode of a pack.

Totals: the sum of values, with one ace counted as 11 when that does not exceed 21. The dealer shows one
card and never draws.

Episode (H = 4 turns). ``\\boxed{hit i}`` draws the card at index i (it then shows face up in the deck view for
the rest of the episode); ``\\boxed{stand}`` ends the hand. Text that is neither, and a hit on an index that
is out of range or already drawn, is treated as a stand (``format_error`` in info when it is neither form).
Over 21 after a hit loses at once (bust). On a stand the player wins iff their total is at most 21 and
above the dealer's; a tie loses. Playing turn H without standing ends the episode as a loss.
Faithful quirk: ORBIT's adapter flags truncation whenever turn >= H and needs a non-truncated win, so only a
stand on turns 1..H-1 can succeed; with ``faithful=False`` a winning stand on turn H counts, and a hit on
turn H that does not bust is compared as a stand. Raw reward: 1 for a win that counts, else 0.
"""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

from codjax.envs import helpers
from codjax.envs.base import derive_seed
from codjax.envs.games import common
from codjax.envs.registry import register

_HIT_RE = re.compile(r"hit\s+(\d+)", re.IGNORECASE)
_STAND_RE = re.compile(r"stand", re.IGNORECASE)
_SALT = 5006
DECK_VALUES = tuple(v for _ in range(4) for v in (*range(1, 10), 10, 10, 10, 10))


def hand_total(cards: tuple[int, ...] | list[int]) -> int:
  total = sum(cards)
  return total + 10 if 1 in cards and total + 10 <= 21 else total


def card_name(value: int) -> str:
  return "A" if value == 1 else str(value)


def hand_text(cards: list[int] | tuple[int, ...]) -> str:
  return f"{', '.join(card_name(v) for v in cards)} (total {hand_total(cards)})"


@dataclasses.dataclass(frozen=True)
class BlackjackConfig:
  max_turns: int = 4
  dealer_min: int = 17
  faithful: bool = True
  # environment evolution (codjax's direction "lower starting hands", docs/methods/environment_evolution.md): the
  # deal is also reshuffled while the player's two-card total exceeds ``player_max`` or the dealer's exceeds
  # ``dealer_max``, at most ``shuffles`` times; 21, 21 and 50 keep the deal above
  player_max: int = 21
  dealer_max: int = 21
  shuffles: int = 50

  def __post_init__(self):
    helpers.check_int("max_turns", self.max_turns, 1, 48)
    helpers.check_int("player_max", self.player_max, 4, 21)
    helpers.check_int("shuffles", self.shuffles, 1, 100_000)
    helpers.check_int("dealer_min", self.dealer_min, 2, 21)
    helpers.check_int("dealer_max", self.dealer_max, self.dealer_min, 21)
    helpers.check_bool("faithful", self.faithful)


@dataclasses.dataclass(frozen=True)
class BlackjackInstance:
  dealer: tuple[int, int]
  player: tuple[int, int]
  deck: tuple[int, ...]  # 48 values, index-addressable


def make_instance(cfg: BlackjackConfig, pack_seed: int) -> BlackjackInstance:
  rng = random.Random(derive_seed(pack_seed, _SALT))
  deck = list(DECK_VALUES)
  rng.shuffle(deck)
  for _ in range(cfg.shuffles):
    if cfg.dealer_min <= hand_total(deck[:2]) <= cfg.dealer_max and hand_total(deck[2:4]) <= cfg.player_max:
      break
    rng.shuffle(deck)
  return BlackjackInstance(dealer=(deck[0], deck[1]), player=(deck[2], deck[3]), deck=tuple(deck[4:]))


class BlackjackTask(common.GameTask):
  game = "Blackjack"

  def __init__(self, cfg: BlackjackConfig, inst: BlackjackInstance, episode_seed: int):
    super().__init__(cfg.max_turns, episode_seed)
    self.cfg = cfg
    self.instance = inst
    self._new_episode()

  def _new_episode(self) -> None:
    self._hand = list(self.instance.player)
    self._drawn: set[int] = set()

  def instructions(self) -> str:
    n = len(self.instance.deck)
    return (f"{common.title(self.game)}\n"
            "The dealer has two cards, one face up and one hidden, and never draws. You hold two cards. Card values: "
            "2-9 at face value, 10 and picture cards 10, and an ace 1 or 11 (11 when that keeps the total at most "
            "21).\n"
            f"The remaining {n} cards lie face down in a row, indexed 0 to {n - 1}; you may draw any card still in "
            f"the row by its index. Each turn, answer \\boxed{{hit i}} to draw the card at index i, or "
            "\\boxed{stand} to stop. A total above 21 loses at once. When you stand you win if your total is higher "
            f"than the dealer's; a tie loses. You have {self.cfg.max_turns} turns.")

  def board(self) -> str:
    if self.done:
      return ""
    deck = " ".join(f"{i}:{card_name(v) if i in self._drawn else '?'}" for i, v in enumerate(self.instance.deck))
    free = [i for i in range(len(self.instance.deck)) if i not in self._drawn]
    return (f"Dealer's cards: {card_name(self.instance.dealer[0])}, ? (one card hidden)\n"
            f"Your hand: {hand_text(self._hand)}\n"
            f"Deck: {deck}\n"
            f"Available indices: {', '.join(map(str, free))}")

  def prompt_line(self) -> str:
    return "Answer \\boxed{hit i} or \\boxed{stand}."

  def _showdown(self, prefix: str) -> common.Outcome:
    player, dealer = hand_total(self._hand), hand_total(self.instance.dealer)
    won = player <= 21 and player > dealer
    text = (f"{prefix}Dealer's hand: {hand_text(self.instance.dealer)}. Your hand: {hand_text(self._hand)}. " +
            ("You win!" if won else "You lose (a tie or a lower total loses)."))
    counts = won and (not self.cfg.faithful or self.turn < self.max_turns)
    if won and not counts:
      text += " But the turn limit was reached, so this episode does not count as a win."
    return common.Outcome(text, raw_reward=float(counts), ended=True, success=counts, state_key=("stand",))

  def play(self, content: str) -> common.Outcome:
    m = _HIT_RE.fullmatch(content)
    format_error = m is None and _STAND_RE.fullmatch(content) is None
    idx = common.parse_int(m.group(1)) if m else -1
    if not 0 <= idx < len(self.instance.deck) or idx in self._drawn:
      out = self._showdown("You stand. ")
      out.format_error = format_error
      return out
    self._drawn.add(idx)
    card = self.instance.deck[idx]
    self._hand.append(card)
    if hand_total(self._hand) > 21:
      return common.Outcome(f"You drew {card_name(card)} from index {idx}. Bust! Dealer's hand: "
                            f"{hand_text(self.instance.dealer)}. Your hand: {hand_text(self._hand)}. You lose.",
                            ended=True, state_key=("hit", idx))
    return common.Outcome(f"You drew {card_name(card)} from index {idx}.", state_key=("hit", idx))

  def timeout(self, out: common.Outcome) -> common.Outcome:
    if not self.cfg.faithful:
      return self._showdown(out.message + " The turn limit is reached, so your hand is compared now. ")
    return common.Outcome(f"{out.message} You reached the maximum number of turns ({self.max_turns}) without "
                          f"standing. Dealer's hand: {hand_text(self.instance.dealer)}. Your hand: "
                          f"{hand_text(self._hand)}. You lose.", ended=True, state_key=out.state_key)


PRESETS: dict[str, dict[str, Any]] = {"orbit": {}}


@register("blackjack")
def make_family(preset: str = "orbit", **overrides: Any) -> common.GameFamily:
  """``make("blackjack", max_turns=4, dealer_min=17, faithful=True)``."""
  cfg = helpers.config_from_preset(BlackjackConfig, PRESETS, preset, overrides, env="blackjack")
  return common.GameFamily("blackjack", cfg, make_instance, BlackjackTask)
