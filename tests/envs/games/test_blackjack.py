"""Indexed-deck Blackjack rules and the turn-limit quirk (XiaofengLin7/ORBIT ``envs/blackjack_env_adapter.py``)."""

import collections

from codjax.envs import make
from codjax.envs.games.blackjack import DECK_VALUES, BlackjackInstance, BlackjackTask, hand_total


def _task(dealer=(10, 7), player=(10, 5), deck=(4, 2, 10, 6, 1) + (9,) * 43, **params):
  return BlackjackTask(make("blackjack", **params).cfg, BlackjackInstance(dealer, player, deck), 0)


def test_hand_total_and_deal():
  assert hand_total((1, 9)) == 20 and hand_total((1, 9, 5)) == 15 and hand_total((1, 1)) == 12
  fam = make("blackjack")
  for seed in range(100):
    inst = fam.instance(seed)
    assert hand_total(inst.dealer) >= 17 and len(inst.deck) == 48
    assert collections.Counter(inst.dealer + inst.player + inst.deck) == collections.Counter(DECK_VALUES)


def test_hit_reveals_and_stand_wins(run_actions):
  out = run_actions(_task(), ["\\boxed{hit 0}", "\\boxed{stand}"])
  assert out[0].info["feedback"] == "You drew 4 from index 0." and "0:4 1:?" in out[0].observation
  assert "Your hand: 10, 5, 4 (total 19)" in out[0].observation and "Available indices: 1, 2" in out[0].observation
  assert out[1].done and out[1].info["success"] and out[1].info["feedback"].endswith("You win!")
  assert "Dealer's hand: 10, 7 (total 17)" in out[1].info["feedback"]


def test_bust_tie_and_garbage_stand(run_actions):
  out = run_actions(_task(), ["\\boxed{hit 2}"])
  assert out[0].done and not out[0].info["success"] and "Bust!" in out[0].info["feedback"]
  out = run_actions(_task(player=(10, 7)), ["what now"])
  assert out[0].done and not out[0].info["success"] and out[0].info["format_error"]
  assert "a tie or a lower total loses" in out[0].info["feedback"]
  out = run_actions(_task(), ["\\boxed{hit 1}", "\\boxed{hit 1}"])  # a drawn index again means stand
  assert out[1].done and not out[1].info["format_error"] and not out[1].info["success"]  # 17 vs 17


def test_faithful_turn_limit_quirk(run_actions):
  actions = ["\\boxed{hit 1}", "\\boxed{hit 1x}", "\\boxed{stand}"]  # the 2nd is garbage: stand on turn 2
  assert run_actions(_task(), actions)[1].info["success"] is False  # 17 vs 17 ties
  late = ["\\boxed{hit 1}", "\\boxed{hit 4}", "\\boxed{hit 1}"]  # 15+2+1 = 18, then a stand on turn 3
  assert run_actions(_task(), late)[-1].info["success"]
  four = ["\\boxed{hit 1}", "\\boxed{hit 4}", "\\boxed{hit 3}", "\\boxed{stand}"]
  out = run_actions(_task(player=(2, 3)), four)  # 2+3+2+1+6 = 14 (the ace must count 1): a losing stand
  assert out[-1].done and not out[-1].info["success"]
  win4 = ["\\boxed{hit 2}", "\\boxed{hit 1}", "\\boxed{hit 4}", "\\boxed{stand}"]  # 5+10+2+1 = 18 on turn 4
  out = run_actions(_task(player=(2, 3)), win4)
  assert out[-1].info["feedback"].count("You win!") == 1 and not out[-1].info["success"]
  assert "does not count" in out[-1].info["feedback"]
  out = run_actions(_task(player=(2, 3), faithful=False), win4)
  assert out[-1].info["success"]


def test_timeout_without_standing(run_actions):
  hits = ["\\boxed{hit 1}", "\\boxed{hit 4}", "\\boxed{hit 0}", "\\boxed{hit 3}"]  # 2,1,4,6 onto 2+3
  out = run_actions(_task(player=(2, 3)), hits)
  assert out[-1].done and not out[-1].info["success"] and "maximum number of turns (4)" in out[-1].info["feedback"]
  out = run_actions(_task(player=(2, 3), faithful=False), hits)  # 5+13 = 18 > 17 compared as a stand
  assert out[-1].info["success"]
