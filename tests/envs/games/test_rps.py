"""Rock-Paper-Scissors against a hidden stochastic adversary (XiaofengLin7/ORBIT ``envs/rps_env_adapter.py``)."""

import statistics

from codjax.envs import make
from codjax.envs.games.rps import BEATS, MOVES


def test_adversary_distribution():
  fam = make("rps")
  doms = []
  for seed in range(400):
    p = fam.instance(seed).probs
    assert abs(sum(p) - 1) < 1e-9 and min(p) >= 0 and max(p) >= 0.4
    doms.append(max(p))
  assert abs(statistics.mean(doms) - 0.7) < 0.03  # E[p_dom] = 0.4 + 0.6 * E[Beta(2,2)] = 0.7


def test_draws_differ_across_episodes_but_not_across_repeats():
  fam = make("rps")

  def outcomes(env):
    env.reset()
    return [env.step("\\boxed{rock}").info["feedback"] for _ in range(5)]

  first, second = fam.sample_pack(9, 2)
  assert outcomes(fam.sample_pack(9, 2)[0]) == outcomes(first)
  runs = [outcomes(env) for env in fam.sample_pack(9, 12)]
  assert len({tuple(r) for r in runs}) > 1


def test_success_needs_three_wins_and_terminal_line():
  fam = make("rps")
  for seed in range(30):
    env = fam.sample_pack(seed, 1)[0]
    env.reset()
    wins = 0
    for t in range(1, 6):
      r = env.step(f"I pick \\boxed{{{MOVES[t % 3].upper()}}}")
      line = r.info["feedback"].splitlines()[0]
      assert line.startswith(f"Round {t}: you played {MOVES[t % 3]}. You ")
      wins += line.endswith("You win.")
      assert r.done == (t == 5)
    assert r.info["success"] == (wins >= 3) and r.reward == float(wins >= 3)
    assert r.info["feedback"].endswith("Now play the next episode.")


def test_invalid_move_is_a_lost_round():
  env = make("rps").sample_pack(1, 1)[0]
  env.reset()
  r = env.step("\\boxed{lizard}")
  assert r.info["format_error"] and r.info["feedback"].endswith("You lose.") and not r.done


def test_outcome_identifies_adversary_move():
  env = make("rps", min_dom=1.0).sample_pack(4, 1)[0]  # deterministic adversary
  dominant = MOVES[max(range(3), key=lambda i: env.instance.probs[i])]
  winner = next(m for m in MOVES if BEATS[m] == dominant)
  env.reset()
  assert all(env.step(f"\\boxed{{{winner}}}").info["feedback"].startswith(f"Round {t}: you played {winner}. You win.")
             for t in range(1, 6))
