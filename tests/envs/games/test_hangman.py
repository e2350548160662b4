"""Hangman rules (axon-rl/gem ``gem/envs/game_env/hangman.py``; ORBIT paper Appendix B.2)."""

from codjax.envs import make
from codjax.envs.games import words
from codjax.envs.games.common import MAX_TURNS_LINE
from codjax.envs.games.hangman import HangmanInstance, HangmanTask


def _task(secret="BOB", **params):
  return HangmanTask(make("hangman", **params).cfg, HangmanInstance(secret=secret), 0)


def test_secret_from_vocabulary():
  assert make("hangman").instance(3).secret in words.vocabulary(3)


def test_letters_board_and_word_win(run_actions):
  out = run_actions(_task(), ["\\boxed{b}", "\\boxed{E}", "\\boxed{B}", "\\boxed{bob}"])
  assert out[0].info["feedback"] == "At turn 1, the letter 'B' is in the secret word."
  assert "C00 C01 C02\n  B   _   B " in out[0].observation
  assert out[0].info["raw_reward"] == 2 / 3 * 0.5
  assert out[1].info["feedback"] == "At turn 2, the letter 'E' is not in the secret word."
  assert not out[1].info["invalid"]
  assert out[2].info["invalid"] and "already guessed" in out[2].info["feedback"]
  assert out[3].info["success"]
  assert out[3].info["feedback"].startswith("Congratulations! BOB is the secret word.\n\nCurrent Hangman grid:")
  assert out[3].info["raw_reward"] == 0.5 + 0.5 / 3


def test_wrong_and_misfit_words(run_actions):
  out = run_actions(_task(), ["\\boxed{CAT}", "\\boxed{BOBBY}"])
  assert "which is not the secret word" in out[0].info["feedback"] and not out[0].info["invalid"]
  assert out[1].info["invalid"] and "has 5 letters" in out[1].info["feedback"]


def test_revealing_all_letters_wins_only_when_not_faithful(run_actions):
  out = run_actions(_task(), ["\\boxed{B}", "\\boxed{O}"])
  assert not out[1].done  # faithful: a whole-word guess is still needed
  out = run_actions(_task(faithful=False), ["\\boxed{B}", "\\boxed{O}"])
  assert out[1].done and out[1].info["success"] and "Congratulations! BOB" in out[1].info["feedback"]


def test_turn_limit_and_format_errors(run_actions):
  out = run_actions(_task(max_turns=2), ["\\boxed{X}", "\\boxed{Z}"])
  assert out[-1].done and out[-1].info["feedback"].startswith(MAX_TURNS_LINE + "\n\n") and not out[-1].info["success"]
  r = run_actions(_task(), ["\\boxed{B O B}"])[0]  # spaces are not letters: a format error
  assert r.done and r.info["format_error"] and r.info["raw_reward"] == -0.1
  r = run_actions(_task(faithful=False), ["\\boxed{B O B}"])[0]
  assert not r.done and r.info["format_error"]
