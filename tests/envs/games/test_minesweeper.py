"""Minesweeper (only-reveal) rules and the first-click-dependent layout (axon-rl/gem
``gem/envs/game_env/minesweeper.py``, XiaofengLin7/ORBIT ``envs/custom_minesweeper.py``)."""

from codjax.envs import make
from codjax.envs.games.common import MAX_TURNS_LINE
from codjax.envs.games.minesweeper import neighbours


def _counts(mines, rows=5, cols=5):
  return {(r, c): sum(n in mines for n in neighbours((r, c), rows, cols)) for r in range(rows) for c in range(cols)}


def test_layout_is_a_function_of_seed_and_first_click():
  inst = make("minesweeper").instance(7)
  layouts = {click: inst.layout(click) for click in [(r, c) for r in range(5) for c in range(5)]}
  for (r, c), mines in layouts.items():
    assert len(mines) == 5 and all(abs(mr - r) > 1 or abs(mc - c) > 1 for mr, mc in mines)
  assert len(set(layouts.values())) > 1  # another first click can meet another board
  assert make("minesweeper").instance(7).layout((2, 2)) == layouts[(2, 2)]
  other = make("minesweeper", faithful=False).instance(7)
  assert len({other.layout(click) for click in layouts}) == 1


def test_flood_fill_and_win(run_actions):
  fam = make("minesweeper", max_turns=25)
  env = fam.sample_pack(3, 1)[0]
  mines = env.instance.layout((2, 2))
  counts = _counts(mines)
  out = run_actions(env, ["\\boxed{reveal 2 2}"])
  assert out[0].info["feedback"] == "At turn 1, you revealed cell (2, 2)." and counts[(2, 2)] == 0
  revealed = set(env._revealed)
  assert (2, 2) in revealed and all(n in revealed for n in neighbours((2, 2), 5, 5))
  assert all(env._revealed[c] == counts[c] for c in revealed)
  r = out[0]
  for cell in sorted(set(counts) - set(mines) - revealed):
    if cell not in env._revealed:
      r = env.step(f"\\boxed{{reveal {cell[0]} {cell[1]}}}")
  assert r.done and r.info["success"]
  assert r.info["feedback"].startswith("Congratulations! You revealed every safe cell.\n\nCurrent board:")


def test_mine_hit_even_when_flagged(run_actions):
  env = make("minesweeper").sample_pack(3, 1)[0]
  mine = sorted(env.instance.layout((2, 2)))[0]
  out = run_actions(env, ["\\boxed{reveal 2 2}", f"\\boxed{{flag {mine[0]} {mine[1]}}}",
                          f"\\boxed{{reveal {mine[0]} {mine[1]}}}"])
  assert "placed a flag" in out[1].info["feedback"] and " F" in out[1].observation
  assert out[2].done and not out[2].info["success"]
  assert out[2].info["feedback"].startswith(f"Game over! You hit a mine at ({mine[0]}, {mine[1]}).")


def test_invalid_moves_and_turn_limit(run_actions):
  env = make("minesweeper").sample_pack(3, 1)[0]
  out = run_actions(env, ["\\boxed{reveal 2 2}", "\\boxed{reveal 2 2}", "\\boxed{reveal 9 9}", "\\boxed{dig 1 1}",
                          "\\boxed{flag 2 2}", "\\boxed{flag 0 0}", "\\boxed{flag 0 0}", "\\boxed{flag 0 0}"])
  assert [r.info["invalid"] for r in out[1:5]] == [True] * 4
  assert "removed the flag" in out[6].info["feedback"]
  assert out[-1].done and out[-1].info["feedback"].startswith(MAX_TURNS_LINE) and out[-1].info["truncated"]


def test_format_error(run_actions):
  env = make("minesweeper").sample_pack(3, 1)[0]
  r = run_actions(env, ["\\boxed{reveal 1, 2}"])[0]
  assert r.done and r.info["format_error"] and r.info["raw_reward"] == -0.1
