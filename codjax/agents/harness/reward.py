"""EvoHarness-RL cost-aware trajectory reward (EvoHarness-RL, arXiv 2608.05446, training stage 2; exactly the
public code EvoHarnessRL/EvoHarness-RL ``evoharness/rl/reward.py``), paid once on the final turn:

  R(tau; u) = success * 1[won] + lambda_eff * R_eff + lambda_div(u) * R_div - lambda_spam * min(S, C_spam)
              - lambda_inv * I

* ``R_eff = max(0, (T_max - |tau|) / T_max)`` when won, else 0; |tau| counts every turn, meta-actions and
  invalid turns included (``T_max`` = the environment's step budget, 70 for ALFWorld).
* ``R_div``: ``"verb_ratio"`` (the public ``configs/train/common.yaml`` default) = distinct leading verbs
  among the turns' actions / number of turns; ``"bpe_coverage"`` (the public README's description) = fraction
  of the 4 meta verbs (track, commit, recall, note) used at least once. The leading verb is the first token of
  the lowercased action, where ``[`` also ends the token (``"recall[x]"`` -> ``recall``); an empty action (a
  malformed turn) has no verb but counts as a turn. No turns: R_div = 0.
* ``lambda_div(u) = lambda_div_max * 0.5 * (1 + cos(pi * min(u, U) / U))``, u = policy updates so far (the
  Experience bank's ``meta.updates``), U = ``anneal_updates`` (total epochs, 150).
* ``S`` = the number of turns whose action equals the previous turn's action after lowercasing and collapsing
  whitespace (a run of k identical actions gives k - 1); empty actions never count. ``C_spam`` = 10.
* ``I`` = the number of invalid turns (non-admissible env actions, malformed or disabled meta-actions), counted
  by the caller.

Defaults: success 10.0, lambda_eff 1.0, lambda_div_max 1.0, lambda_spam 0.1, lambda_inv 0.1, C_spam 10,
U 150, T_max 70, diversity "verb_ratio".
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from codjax.agents.harness.actions import META_VERBS, leading_verb, normalize  # noqa: F401  (re-exported)

DIVERSITY_MODES = ("verb_ratio", "bpe_coverage")


@dataclasses.dataclass(frozen=True)
class RewardConfig:
  """Weights of the cost-aware reward; every field is checked on construction (ValueError naming the field)."""

  success: float = 10.0
  lambda_eff: float = 1.0
  lambda_div_max: float = 1.0
  lambda_spam: float = 0.1
  lambda_inv: float = 0.1
  spam_cap: int = 10
  anneal_updates: int = 150
  max_turns: int = 70
  diversity: str = "verb_ratio"

  def __post_init__(self):
    for name in ("success", "lambda_eff", "lambda_div_max", "lambda_spam", "lambda_inv"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"RewardConfig.{name} must be a finite number >= 0, got {value!r}")
    for name, low in (("spam_cap", 0), ("anneal_updates", 1), ("max_turns", 1)):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"RewardConfig.{name} must be an integer >= {low}, got {value!r}")
    if self.diversity not in DIVERSITY_MODES:
      raise ValueError(f"RewardConfig.diversity must be one of {DIVERSITY_MODES}, got {self.diversity!r}")


@dataclasses.dataclass(frozen=True)
class RewardTerms:
  """The total and every term of one trajectory's reward (``as_dict`` for logging)."""

  total: float
  success: float  # success * 1[won]
  efficiency: float  # lambda_eff * R_eff
  diversity: float  # lambda_div(u) * R_div
  spam: float  # -lambda_spam * min(S, C_spam)
  invalid: float  # -lambda_inv * I
  r_eff: float
  r_div: float
  lambda_div: float
  repeats: int  # S, before the cap
  invalid_turns: int  # I
  turns: int  # |tau|

  def as_dict(self) -> dict[str, float]:
    return dataclasses.asdict(self)


def normalize_action(action: str) -> str:
  return normalize(action)


def diversity_weight(updates: int, config: RewardConfig) -> float:
  """lambda_div(u): cosine from lambda_div_max at u = 0 to 0 at u >= U."""
  if isinstance(updates, bool) or not isinstance(updates, int) or updates < 0:
    raise ValueError(f"updates must be a non-negative integer, got {updates!r}")
  u = min(updates, config.anneal_updates)
  return config.lambda_div_max * 0.5 * (1.0 + math.cos(math.pi * u / config.anneal_updates))


def repeat_count(actions: Sequence[str]) -> int:
  """S: turns whose normalised, non-empty action equals the previous turn's."""
  norm = [normalize_action(a) for a in actions]
  return sum(1 for prev, cur in zip(norm, norm[1:]) if cur and cur == prev)


def diversity_score(actions: Sequence[str], mode: str) -> float:
  """R_div in ``mode`` (see the module docstring)."""
  verbs = [leading_verb(a) for a in actions]
  if mode == "verb_ratio":
    return len({v for v in verbs if v}) / len(verbs) if verbs else 0.0
  if mode == "bpe_coverage":
    return len(set(verbs) & set(META_VERBS)) / len(META_VERBS)
  raise ValueError(f"unknown diversity mode {mode!r} (expected one of {DIVERSITY_MODES})")


def trajectory_reward(actions: Sequence[str], won: bool, invalid_turns: int, updates: int,
                      config: RewardConfig = RewardConfig()) -> RewardTerms:
  """The cost-aware reward of one finished trajectory. ``actions``: the action text of every turn (meta-actions and
  invalid turns included; ``""`` for a turn with no parsable action)."""
  if isinstance(actions, str) or not all(isinstance(a, str) for a in actions):
    raise ValueError("actions must be a sequence of strings, one per turn")
  if not isinstance(won, bool):
    raise ValueError(f"won must be a bool, got {won!r}")
  if isinstance(invalid_turns, bool) or not isinstance(invalid_turns, int) or invalid_turns < 0:
    raise ValueError(f"invalid_turns must be a non-negative integer, got {invalid_turns!r}")
  turns = len(actions)
  r_eff = max(0.0, (config.max_turns - turns) / config.max_turns) if won else 0.0
  r_div = diversity_score(actions, config.diversity)
  lam_div = diversity_weight(updates, config)
  repeats = repeat_count(actions)
  success = config.success if won else 0.0
  efficiency = config.lambda_eff * r_eff
  diversity = lam_div * r_div
  spam = -config.lambda_spam * min(repeats, config.spam_cap)
  invalid = -config.lambda_inv * invalid_turns
  return RewardTerms(total=success + efficiency + diversity + spam + invalid, success=success,
                     efficiency=efficiency, diversity=diversity, spam=spam, invalid=invalid, r_eff=r_eff,
                     r_div=r_div, lambda_div=lam_div, repeats=repeats, invalid_turns=invalid_turns, turns=turns)
