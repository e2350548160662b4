"""Properties every ORBIT game must have: registry, determinism, shared hidden instance, hostile text."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codjax.envs import cod_protocol as proto
from codjax.envs import make
from codjax.envs.experts import make_policy
from codjax.envs.games import GAMES
from codjax.envs.games.common import extract_action, parse_int
from codjax.envs.games.mastermind import MastermindConfig
from codjax.envs.helpers import config_from_preset

_FAMILIES = {g: make(g) for g in GAMES}
_UNFAITHFUL = {g: make(g, faithful=False) for g in ("minesweeper", "hangman", "wordle", "blackjack", "mastermind")}
_KEYS = {"feedback", "format_error", "raw_reward", "success", "terminated", "truncated", "invalid", "turn",
         "state_key"}


def _hidden(game, task):
  """A comparable view of a task's hidden instance (Minesweeper: the board after a centre first click)."""
  return task.instance.layout((2, 2)) if game == "minesweeper" else task.instance


def test_extract_action():
  assert extract_action("think... \\boxed{1 2} then \\boxed{ reveal 1 2 }") == "reveal 1 2"
  assert extract_action("no box here ") == "no box here"
  assert extract_action("\\boxed{{x}}") == "\\boxed{{x}}"  # nested braces: no valid box, whole text
  assert extract_action("\\boxed{a} \\boxed{b{c}}") == "a"
  assert extract_action(None) == ""
  assert parse_int("0007") == 7 and parse_int("9" * 5000) == 10**9


def test_build_config_errors():
  with pytest.raises(ValueError, match="unknown preset"):
    config_from_preset(MastermindConfig, {"orbit": {}}, "nope", {})
  with pytest.raises(ValueError, match="unknown parameter"):
    config_from_preset(MastermindConfig, {"orbit": {}}, "orbit", {"colour": 3})


@pytest.mark.parametrize("game,bad", [
    ("mastermind", {"code_length": 0}), ("mastermind", {"num_digits": 2, "code_length": 3}),
    ("mastermind", {"faithful": "yes"}), ("wordle", {"word_length": 40}), ("hangman", {"max_turns": 0}),
    ("minesweeper", {"mines": 17}), ("minesweeper", {"rows": True}), ("rps", {"min_dom": 1.5}),
    ("rps", {"win_threshold": 0}), ("blackjack", {"dealer_min": 30}), ("maze", {"max_path": 3}),
    ("maze", {"shapes": [(6,)]}), ("maze", {"size": 7}), ("rps", {"preset": "hard"})])
def test_bad_params_raise(game, bad):
  with pytest.raises(ValueError):
    make(game, **bad)


@pytest.mark.parametrize("game", GAMES)
def test_pack_shares_one_instance_and_packs_differ(game):
  fam = _FAMILIES[game]
  pack = fam.sample_pack(11, 3)
  assert len({repr(_hidden(game, t)) for t in pack}) == 1
  again = fam.sample_pack(11, 3)
  assert _hidden(game, again[0]) == _hidden(game, pack[0]) and again[0] is not pack[0]
  distinct = {repr(_hidden(game, fam.sample_pack(seed, 1)[0])) for seed in range(40)}
  assert len(distinct) >= 8, distinct


@pytest.mark.parametrize("game", GAMES)
def test_deterministic_transcripts(game):
  def transcript(pack_seed):
    env = _FAMILIES[game].sample_pack(pack_seed, 2)[1]
    policy = make_policy(game, "random")
    rng = random.Random(5)
    system, obs = env.reset()
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
    lines = [obs]
    while True:
      action = policy.respond(msgs, rng)
      r = env.step(action)
      lines.append(r.observation)
      msgs += [{"role": "assistant", "content": action}, {"role": "user", "content": r.observation}]
      if r.done:
        return lines, r.info

  assert transcript(3) == transcript(3)


@pytest.mark.parametrize("game", GAMES)
def test_fresh_state_per_pack_and_step_guards(game):
  a, b = _FAMILIES[game].sample_pack(5, 1)[0], _FAMILIES[game].sample_pack(5, 1)[0]
  with pytest.raises(RuntimeError):
    a.step("x")
  _, obs_a = a.reset()
  _, obs_b = b.reset()
  assert obs_a == obs_b and obs_a.startswith(f"You are playing {a.game}.")
  r = None
  for _ in range(a.max_turns):
    r = a.step("\\boxed{???}")
    assert set(r.info) >= _KEYS
    if r.done:
      break
  assert r.done and (game == "blackjack" or not r.info["success"])  # a blackjack stand may win
  after = a.step("anything")
  assert after.done and after.reward == 0.0 and after.observation == ""
  assert b.turn == 0  # the other pack's episode is untouched


_META = ["\\boxed{", "}", "{", "\\boxed{}", "reveal", "flag", "hit", "stand", "up", "left", "rock", " ", "\n", "\x00",
         "é", "😀", "\u202e", "٣", "-", "9" * 60, "[1, 2, 3]", "Congratulations!", "You are playing Maze."]
_pieces = st.one_of(st.text(max_size=30), st.sampled_from(_META), st.integers(-10**40, 10**40).map(str))
texts = st.one_of(
    st.text(max_size=200),
    st.lists(_pieces, max_size=10).map("".join),
    st.lists(_pieces, max_size=6).map(lambda xs: "\\boxed{" + " ".join(xs) + "}"),
    st.integers(1, 100_000).map(lambda n: "\\boxed{" + "1 " * n + "}"),
    st.integers(1, 100_000).map(lambda n: "\\boxed{hit " + "9" * (n % 6000) + "}"),
    st.integers(1, 50_000).map(lambda n: "\\boxed{" * n),
)
_ALL = [(g, False) for g in GAMES] + [(g, True) for g in _UNFAITHFUL]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(_ALL), pack_seed=st.integers(0, 2**63 - 1), actions=st.lists(texts, min_size=1, max_size=4))
def test_arbitrary_text_never_raises(case, pack_seed, actions):
  game, unfaithful = case
  task = (_UNFAITHFUL if unfaithful else _FAMILIES)[game].sample_pack(pack_seed, 1)[0]
  system, obs = task.reset()
  assert isinstance(system, str) and isinstance(obs, str)
  for turn in range(task.max_turns):
    r = task.step(actions[turn % len(actions)])
    assert set(r.info) >= _KEYS and isinstance(r.info["feedback"], str)
    assert r.reward in (0.0, 1.0) and r.reward == float(r.info["success"])
    assert len(r.observation) < 20_000
    assert not r.info["success"] or r.done
    if r.done:
      return
  raise AssertionError("episode did not end within its turn budget")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(game=st.sampled_from(GAMES), hint=texts, seed=st.integers(0, 1000), trajectory=texts)
def test_players_survive_arbitrary_hints_and_updates(game, hint, seed, trajectory):
  task = _FAMILIES[game].sample_pack(seed, 1)[0]
  system, obs = task.reset()
  solve = [{"role": "system", "content": proto.augment_system_prompt(system, "Hints: " + hint)},
           {"role": "user", "content": obs}]
  update = [{"role": "system", "content": proto.update_system_prompt()},
            {"role": "user", "content": proto.update_user_prompt("Hints: " + hint, trajectory, 0.0, hint)}]
  for kind in ("expert", "random"):
    policy = make_policy(game, kind)
    answer = policy.respond(solve, random.Random(seed))
    assert isinstance(answer, str) and "\\boxed{" in answer
    task.step(answer)
    assert proto.parse_hint(policy.respond(update, random.Random(seed))) is not None
