"""Mastermind rules (axon-rl/gem ``gem/envs/game_env/mastermind.py``; ORBIT paper Appendix B.4)."""

import itertools

import pytest

from codjax.envs import make
from codjax.envs.games.common import MAX_TURNS_LINE
from codjax.envs.games.mastermind import MastermindInstance, MastermindTask, pegs


def _task(code=(1, 2, 3), **params):
  cfg = make("mastermind", **params).cfg
  return MastermindTask(cfg, MastermindInstance(code=code, example=(4, 5, 6)), 0)


def test_pegs():
  assert pegs((1, 3, 4), (1, 2, 3)) == (1, 1)
  assert pegs((3, 1, 2), (1, 2, 3)) == (0, 3)
  assert pegs((1, 1, 2), (1, 2, 3)) == (1, 1)  # repeated digits count once
  assert pegs((4, 5, 6), (1, 2, 3)) == (0, 0)


def test_codes_are_legal_and_uniformish():
  fam = make("mastermind")
  codes = [fam.instance(s).code for s in range(600)]
  assert all(len(set(c)) == 3 and all(1 <= d <= 6 for d in c) for c in codes)
  assert len(set(codes)) > 100  # 120 possible


def test_win_and_peg_lines(run_actions):
  out = run_actions(_task(), ["\\boxed{1 3 4}", "I think it is \\boxed{1 2 3}"])
  assert out[0].info["feedback"] == ("At turn 1, you guessed [1, 3, 4]. This guess receives 1 black peg(s) and "
                                     "1 white peg(s).")
  assert not out[0].done and out[0].observation.endswith("Enter your guess.")
  assert out[1].done and out[1].info["success"] and out[1].reward == 1.0
  assert out[1].info["feedback"].startswith("Congratulations! [1, 2, 3] is the secret code")
  assert out[1].info["state_key"] == (1, 2, 3)


@pytest.mark.parametrize("action,text", [("\\boxed{1 2}", "has 2 digits"), ("\\boxed{1 2 9}", "outside 1 to 6"),
                                         ("\\boxed{1 2 99999999999999999999}", "outside 1 to 6")])
def test_invalid_guesses_spend_the_turn(run_actions, action, text):
  r = run_actions(_task(), [action])[0]
  assert text in r.info["feedback"] and r.info["invalid"] and not r.done and r.info["raw_reward"] == 0.0


def test_repeat_within_episode_is_invalid(run_actions):
  out = run_actions(_task(), ["\\boxed{4 5 6}", "\\boxed{4 5 6}"])
  assert "already tried" in out[1].info["feedback"] and out[1].info["invalid"]


def test_faithful_last_turn_hides_pegs(run_actions):
  out = run_actions(_task(), ["\\boxed{4 5 6}", "\\boxed{1 3 2}", "\\boxed{2 1 3}"])
  assert out[2].done and not out[2].info["success"] and out[2].info["truncated"]
  assert out[2].info["feedback"] == MAX_TURNS_LINE
  out = run_actions(_task(faithful=False), ["\\boxed{4 5 6}", "\\boxed{1 3 2}", "\\boxed{2 1 3}"])
  assert out[2].info["feedback"].endswith("1 black peg(s) and 2 white peg(s).\n" + MAX_TURNS_LINE)


def test_format_error_ends_only_when_faithful(run_actions):
  r = run_actions(_task(), ["\\boxed{one two three}"])[0]
  assert r.done and r.info["format_error"] and r.info["raw_reward"] == -0.1 and not r.info["success"]
  r = run_actions(_task(faithful=False), ["\\boxed{one two three}"])[0]
  assert not r.done and r.info["format_error"]


def test_bare_answer_without_box_is_read():
  t = _task()
  t.reset()
  assert t.step("1 2 3").info["success"]


def test_milestone_reward():
  t = _task()
  t.reset()
  assert t.step("\\boxed{1 5 6}").info["raw_reward"] == pytest.approx(1 / 3)
  assert t.step("\\boxed{1 2 6}").info["raw_reward"] == pytest.approx(1 / 3)


def test_every_code_reachable_from_some_seed():
  fam = make("mastermind", code_length=2, num_digits=3)
  seen = {fam.instance(s).code for s in range(200)}
  assert seen == set(itertools.permutations(range(1, 4), 2))
