"""Rock-Paper-Scissors against a hidden stochastic adversary (ORBIT training game, paper Appendix B.6; instance
and rules as in XiaofengLin7/ORBIT ``envs/rps_env_adapter.py``).

Hidden instance (pack seed). A dominant move is drawn uniformly from {rock, paper, scissors}; its probability
is ``p_dom = min_dom + (1 - min_dom) * t`` with t ~ Beta(2, 2) (min_dom = 0.4, so E[p_dom] = 0.7); the other
two moves split ``1 - p_dom`` by Dirichlet(1, 1), i.e. a uniform share u and 1 - u.

Episode. ``rounds`` rounds (H = 5). Each round the adversary draws its move i.i.d. from that distribution;
the draws come from a per-episode stream (seeded by the episode seed), so they differ across episodes while
the distribution is shared. The player answers ``\\boxed{rock|paper|scissors}`` (case ignored); anything else
counts as a lost round (``format_error`` in info, the episode goes on). Each round reports only the player's
own move and "You win" / "You lose" / "You draw" (the adversary's move is implied). After the last round
the episode succeeds iff wins / rounds >= ``win_threshold`` (3 of 5 wins), with raw reward 1 then, else
0, and the text adds "Now play the next episode".

Reference ceiling (computed for codjax; docs/methods/orbit.md): a best response that knows the distribution
succeeds with probability E[P(Bin(5, p_dom) >= 3)] ~ 0.80 per episode.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

from codjax.envs import helpers
from codjax.envs.base import derive_seed
from codjax.envs.games import common
from codjax.envs.registry import register

MOVES = ("rock", "paper", "scissors")
BEATS = {"rock": "scissors", "paper": "rock", "scissors": "paper"}  # key beats value
_SALT = 5005


@dataclasses.dataclass(frozen=True)
class RpsConfig:
  rounds: int = 5
  min_dom: float = 0.4
  win_threshold: float = 0.5

  def __post_init__(self):
    helpers.check_int("rounds", self.rounds, 1, 1000)
    helpers.check_prob("min_dom", self.min_dom)
    helpers.check_prob("win_threshold", self.win_threshold, low_open=True)

  @property
  def wins_needed(self) -> int:
    return math.ceil(self.win_threshold * self.rounds - 1e-9)


@dataclasses.dataclass(frozen=True)
class RpsInstance:
  probs: tuple[float, float, float]  # adversary's P(rock), P(paper), P(scissors)


def make_instance(cfg: RpsConfig, pack_seed: int) -> RpsInstance:
  rng = random.Random(derive_seed(pack_seed, _SALT))
  dom = rng.randrange(3)
  p_dom = cfg.min_dom + (1.0 - cfg.min_dom) * rng.betavariate(2.0, 2.0)
  u = rng.random()
  rest = [(1.0 - p_dom) * u, (1.0 - p_dom) * (1.0 - u)]
  probs = [rest.pop(0) if i != dom else p_dom for i in range(3)]
  return RpsInstance(probs=tuple(probs))


class RpsTask(common.GameTask):
  game = "Rock-Paper-Scissors"

  def __init__(self, cfg: RpsConfig, inst: RpsInstance, episode_seed: int):
    super().__init__(cfg.rounds, episode_seed)
    self.cfg = cfg
    self.instance = inst
    self._new_episode()

  def _new_episode(self) -> None:
    self._rng = random.Random(derive_seed(self.episode_seed, _SALT))
    self._wins = 0

  def instructions(self) -> str:
    c = self.cfg
    return (f"{common.title(self.game)}\n"
            f"You play {c.rounds} rounds against an adversary. Every round it picks its move at random from a fixed "
            "hidden distribution over rock, paper and scissors; the distribution is set by the task seed and does "
            "not change between rounds or episodes. Rock beats scissors, scissors beats paper, paper beats rock. "
            f"You succeed if you win at least {c.wins_needed} of the {c.rounds} rounds, so play to maximise your "
            "chance of winning each round.\n"
            "Answer each round with \\boxed{rock}, \\boxed{paper} or \\boxed{scissors}.")

  def prompt_line(self) -> str:
    return "Choose your move."

  def play(self, content: str) -> common.Outcome:
    t = self.turn
    opponent = self._rng.choices(MOVES, weights=self.instance.probs)[0]
    move = content.lower()
    if move not in MOVES:
      message = f"Round {t}: your answer is not rock, paper or scissors, so the round counts as lost. You lose."
      out = common.Outcome(message, format_error=True)
    else:
      result = "win" if BEATS[move] == opponent else ("draw" if move == opponent else "lose")
      self._wins += result == "win"
      out = common.Outcome(f"Round {t}: you played {move}. You {result}.", state_key=move)
    if t >= self.cfg.rounds:
      success = self._wins >= self.cfg.wins_needed
      verdict = "a success" if success else "a failure"
      out.message += (f"\nThe episode is over: you won {self._wins} of {self.cfg.rounds} rounds, {verdict}. "
                      "Now play the next episode.")
      out.ended, out.success, out.raw_reward = True, success, float(success)
    return out


PRESETS: dict[str, dict[str, Any]] = {"orbit": {}}


@register("rps")
def make_family(preset: str = "orbit", **overrides: Any) -> common.GameFamily:
  """``make("rps", rounds=5, min_dom=0.4, win_threshold=0.5)``."""
  cfg = helpers.config_from_preset(RpsConfig, PRESETS, preset, overrides, env="rps")
  return common.GameFamily("rps", cfg, make_instance, RpsTask)
