"""Wordle rules (axon-rl/gem ``gem/envs/game_env/wordle.py``; ORBIT paper Appendix B.3)."""

import pytest

from codjax.envs import make
from codjax.envs.games import words
from codjax.envs.games.common import MAX_TURNS_LINE
from codjax.envs.games.wordle import WordleInstance, WordleTask, marks


def _task(secret="CRANE", **params):
  cfg = make("wordle", **params).cfg
  return WordleTask(cfg, WordleInstance(secret=secret, example="FENCE"), 0)


def test_marks_with_repeated_letters():
  assert marks("CRANE", "CRANE") == ("G",) * 5
  assert marks("NACRE", "CRANE") == ("Y", "Y", "Y", "Y", "G")
  assert marks("EERIE", "THEME") == ("Y", "X", "X", "X", "G")  # THEME has two Es: one green, one yellow
  assert marks("SPEED", "ABIDE") == ("X", "X", "Y", "X", "Y")
  assert marks("LLAMA", "HELLO") == ("Y", "Y", "X", "X", "X")


def test_vocabulary_is_offline_and_nonempty():
  assert len(words.vocabulary(5)) > 1000 and len(words.vocabulary(3)) > 250
  assert all(w.isalpha() and w.isupper() and len(w) == 5 for w in words.vocabulary(5))
  assert make("wordle").instance(1).secret in words.vocabulary(5)


def test_feedback_lines_and_win(run_actions):
  out = run_actions(_task(), ["\\boxed{nacre}", "\\boxed{C R A N E}"])
  assert out[0].info["feedback"] == "At turn 1, you guessed NACRE\nFeedback:\nNACRE\n['Y', 'Y', 'Y', 'Y', 'G']"
  assert out[0].info["raw_reward"] == pytest.approx(0.1)
  assert out[1].info["success"] and out[1].info["feedback"].startswith("Congratulations! CRANE")
  assert out[1].info["raw_reward"] == pytest.approx(0.4 + 0.5)


def test_invalid_and_repeat(run_actions):
  out = run_actions(_task(), ["\\boxed{CAT}", "\\boxed{QQQQQ}", "\\boxed{QQQQQ}"])
  assert out[0].info["invalid"] and "has 3 letters" in out[0].info["feedback"]
  assert not out[1].info["invalid"]  # no dictionary check in faithful mode
  assert out[2].info["invalid"] and "already guessed" in out[2].info["feedback"]


def test_dictionary_check_when_not_faithful(run_actions):
  r = run_actions(_task(faithful=False), ["\\boxed{QQQQQ}"])[0]
  assert r.info["invalid"] and "not in the word list" in r.info["feedback"]


def test_turn_limit_and_format_error(run_actions):
  guesses = [f"\\boxed{{{w}}}" for w in words.vocabulary(5)[:10] if w != "CRANE"]
  out = run_actions(_task(max_turns=3), guesses)
  assert len(out) == 3 and out[-1].done and out[-1].info["feedback"] == MAX_TURNS_LINE
  r = run_actions(_task(), ["\\boxed{12345}"])[0]
  assert r.done and r.info["format_error"] and r.info["raw_reward"] == -0.1
