"""EvoHarness cost-aware reward (codjax/agents/harness/reward.py, docs/methods/evoharness.md): every term on hand-built
trajectories with hand-computed values, the cosine annealing of the diversity weight, both diversity modes,
the spam count and its cap, and the config's validation."""

from __future__ import annotations

import dataclasses
import math

import pytest

from codjax.agents.harness.reward import (RewardConfig, diversity_score, diversity_weight, leading_verb,
                                          repeat_count, trajectory_reward)

HEAT_WIN = [
  "recall [how to heat an apple]",
  "go to countertop 1",
  "take apple 1 from countertop 1",
  "go to microwave 1",
  "heat apple 1 with microwave 1",
  "go to fridge 1",
  "open fridge 1",
  "move apple 1 to fridge 1",
]


def test_winning_trajectory_every_term():
  # 8 turns: R_eff = (70 - 8) / 70; verbs recall, go, take, heat, open, move = 6 distinct of 8 turns.
  terms = trajectory_reward(HEAT_WIN, won=True, invalid_turns=0, updates=0)
  assert terms.turns == 8
  assert terms.success == 10.0
  assert terms.r_eff == pytest.approx(62 / 70)
  assert terms.efficiency == pytest.approx(62 / 70)
  assert terms.r_div == pytest.approx(0.75)
  assert terms.lambda_div == pytest.approx(1.0)
  assert terms.diversity == pytest.approx(0.75)
  assert terms.repeats == 0 and terms.spam == 0.0 and terms.invalid == 0.0
  assert terms.total == pytest.approx(10 + 62 / 70 + 0.75)
  logged = terms.as_dict()
  assert logged["total"] == pytest.approx(terms.total) and logged["r_div"] == pytest.approx(0.75)


def test_meta_turns_count_toward_length_and_failure_pays_no_efficiency():
  # The same win with two more meta turns: |tau| = 10, R_eff = 60 / 70; verbs add commit and track.
  longer = ["commit [find apple]", "track [apple]"] + HEAT_WIN
  terms = trajectory_reward(longer, won=True, invalid_turns=0, updates=0)
  assert terms.r_eff == pytest.approx(60 / 70)
  assert terms.r_div == pytest.approx(8 / 10)  # commit, track, recall, go, take, heat, open, move
  lost = trajectory_reward(HEAT_WIN[:3], won=False, invalid_turns=1, updates=0)
  # failed: no success, no efficiency; verbs recall, go, take = 3/3; one invalid turn costs 0.1
  assert (lost.success, lost.r_eff, lost.efficiency) == (0.0, 0.0, 0.0)
  assert lost.r_div == pytest.approx(1.0)
  assert lost.invalid == pytest.approx(-0.1)
  assert lost.total == pytest.approx(1.0 - 0.1)


def test_efficiency_is_floored_at_zero():
  cfg = RewardConfig(max_turns=5)
  terms = trajectory_reward(["go to desk 1"] * 3 + ["look", "look", "inventory", "look"], won=True,
                            invalid_turns=0, updates=0, config=cfg)
  assert terms.turns == 7 and terms.r_eff == 0.0
  empty = trajectory_reward([], won=True, invalid_turns=0, updates=0, config=cfg)
  assert empty.r_eff == 1.0 and empty.r_div == 0.0 and empty.total == pytest.approx(11.0)


@pytest.mark.parametrize("updates, expected", [(0, 1.0), (50, 0.75), (75, 0.5), (150, 0.0), (151, 0.0),
                                               (10_000, 0.0)])
def test_diversity_weight_cosine_annealing(updates, expected):
  # 0.5 * (1 + cos(pi * min(u, 150) / 150)): u=50 -> 0.5 * (1 + 0.5) = 0.75; u=75 -> 0.5; u>=150 -> 0
  assert diversity_weight(updates, RewardConfig()) == pytest.approx(expected, abs=1e-12)


def test_annealing_scales_with_lambda_div_max_and_horizon():
  cfg = RewardConfig(lambda_div_max=0.5, anneal_updates=10)
  assert diversity_weight(0, cfg) == pytest.approx(0.5)
  assert diversity_weight(5, cfg) == pytest.approx(0.25)
  assert diversity_weight(10, cfg) == pytest.approx(0.0, abs=1e-12)
  terms = trajectory_reward(HEAT_WIN, won=True, invalid_turns=0, updates=5, config=cfg)
  assert terms.diversity == pytest.approx(0.25 * 0.75)
  late = trajectory_reward(HEAT_WIN, won=True, invalid_turns=0, updates=99, config=cfg)
  assert late.diversity == pytest.approx(0.0, abs=1e-12)
  assert late.total == pytest.approx(10 + 62 / 70)


def test_bpe_coverage_mode():
  cfg = RewardConfig(diversity="bpe_coverage")
  assert trajectory_reward(HEAT_WIN, won=True, invalid_turns=0, updates=0, config=cfg).r_div == 0.25
  all_four = ["track [apple]", "commit[find apple]", "Recall  [where apple]", "note [apple on table]", "look"]
  assert diversity_score(all_four, "bpe_coverage") == 1.0
  # verbs must be exactly a meta verb: "tracking" and "notes" are not
  assert diversity_score(["tracking [x]", "notes [y]", "commit [z]"], "bpe_coverage") == 0.25
  assert diversity_score([], "bpe_coverage") == 0.0
  with pytest.raises(ValueError, match="diversity mode"):
    diversity_score(HEAT_WIN, "entropy")


def test_leading_verb_rule():
  assert [leading_verb(a) for a in ["recall[where is x]", "  Go to desk 1", "", "   ", "note [a] b"]] == [
    "recall", "go", "", "", "note"]
  # an empty (malformed) turn has no verb but counts as a turn: 2 distinct verbs over 3 turns
  assert diversity_score(["look", "", "go to desk 1"], "verb_ratio") == pytest.approx(2 / 3)


def test_spam_counts_repeats_after_whitespace_normalisation():
  assert repeat_count(["Go  to desk 1", "go to desk 1", " go to desk 1 "]) == 2
  assert repeat_count(["look", "inventory", "look"]) == 0
  assert repeat_count(["", "", "look", "look"]) == 1  # empty turns never count
  assert repeat_count([]) == 0


def test_spam_penalty_is_capped_at_ten():
  actions = ["go to desk 1"] * 15  # S = 14, capped at 10 -> -1.0
  terms = trajectory_reward(actions, won=False, invalid_turns=3, updates=0)
  assert terms.repeats == 14
  assert terms.spam == pytest.approx(-1.0)
  assert terms.invalid == pytest.approx(-0.3)
  assert terms.r_div == pytest.approx(1 / 15)
  assert terms.total == pytest.approx(1 / 15 - 1.0 - 0.3)
  under = trajectory_reward(["look"] * 6, won=False, invalid_turns=0, updates=0)
  assert under.repeats == 5 and under.spam == pytest.approx(-0.5)
  uncapped = trajectory_reward(actions, won=False, invalid_turns=0, updates=0, config=RewardConfig(spam_cap=20))
  assert uncapped.spam == pytest.approx(-1.4)


def test_custom_weights_enter_linearly():
  cfg = RewardConfig(success=5.0, lambda_eff=2.0, lambda_div_max=0.0, lambda_spam=1.0, lambda_inv=0.5,
                     max_turns=10)
  actions = ["look", "look", "take apple 1 from desk 1"]
  terms = trajectory_reward(actions, won=True, invalid_turns=2, updates=0, config=cfg)
  # 5 + 2 * (10 - 3) / 10 + 0 - 1.0 * 1 - 0.5 * 2
  assert terms.total == pytest.approx(5 + 1.4 - 1.0 - 1.0)
  assert terms.diversity == 0.0


@pytest.mark.parametrize("field, value, message", [
  ("lambda_spam", -0.1, "lambda_spam"), ("success", math.nan, "success"), ("lambda_eff", math.inf, "lambda_eff"),
  ("lambda_inv", True, "lambda_inv"), ("lambda_div_max", "1", "lambda_div_max"),
  ("spam_cap", -1, "spam_cap"), ("spam_cap", 2.5, "spam_cap"), ("anneal_updates", 0, "anneal_updates"),
  ("max_turns", 0, "max_turns"), ("diversity", "entropy", "diversity"),
])
def test_config_validation(field, value, message):
  with pytest.raises(ValueError, match=message):
    RewardConfig(**{field: value})


def test_config_is_frozen_and_defaults_match_the_public_config():
  cfg = RewardConfig()
  assert (cfg.success, cfg.lambda_eff, cfg.lambda_div_max, cfg.lambda_spam, cfg.lambda_inv, cfg.spam_cap,
          cfg.anneal_updates, cfg.max_turns, cfg.diversity) == (10.0, 1.0, 1.0, 0.1, 0.1, 10, 150, 70, "verb_ratio")
  with pytest.raises(dataclasses.FrozenInstanceError):
    cfg.success = 1.0  # type: ignore[misc]


def test_bad_arguments_give_clear_errors():
  with pytest.raises(ValueError, match="one per turn"):
    trajectory_reward("go to desk 1", won=True, invalid_turns=0, updates=0)
  with pytest.raises(ValueError, match="updates"):
    trajectory_reward(HEAT_WIN, won=True, invalid_turns=0, updates=-1)
  with pytest.raises(ValueError, match="invalid_turns"):
    trajectory_reward(HEAT_WIN, won=True, invalid_turns=-2, updates=0)
  with pytest.raises(ValueError, match="won"):
    trajectory_reward(HEAT_WIN, won=1, invalid_turns=0, updates=0)  # type: ignore[arg-type]
