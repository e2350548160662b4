"""Maze generator and episode rules (XiaofengLin7/ORBIT ``envs/maze_env_adapter.py``; ORBIT paper Appendix B.5)."""

from codjax.envs import make
from codjax.envs.games.common import MAX_TURNS_LINE
from codjax.envs.games.maze import DIRS, bfs


def _open(inst):
  return {(r, c) for r, row in enumerate(inst.rows) for c, ch in enumerate(row) if ch != "#"}


def _path(inst):
  """Moves of a shortest start-goal path."""
  opened = _open(inst)
  dist = bfs(opened, inst.goal)
  cell, moves = inst.start, []
  while cell != inst.goal:
    name, cell = min(((n, (cell[0] + dr, cell[1] + dc)) for n, (dr, dc) in DIRS.items()
                      if (cell[0] + dr, cell[1] + dc) in dist), key=lambda x: dist[x[1]])
    moves.append(name)
  return moves


def test_generated_mazes():
  fam = make("maze")
  for seed in range(60):
    inst = fam.instance(seed)
    h, w = len(inst.rows), len(inst.rows[0])
    assert (w, h) in ((6, 6), (7, 6), (7, 7), (6, 7))
    assert inst.rows[0] == "#" * w and inst.rows[-1] == "#" * w and all(r[0] == r[-1] == "#" for r in inst.rows)
    dist = bfs(_open(inst), inst.start)
    assert set(dist) == _open(inst)  # connected
    assert dist[inst.goal] == inst.shortest == max(dist.values()) and 7 <= inst.shortest <= 8
    assert inst.rows[inst.goal[0]][inst.goal[1]] == "G"


def test_shortest_path_wins_and_every_episode_starts_at_start(run_actions):
  pack = make("maze").sample_pack(21, 2)
  moves = _path(pack[0].instance)
  out = run_actions(pack[0], [f"\\boxed{{{m}}}" for m in moves])
  assert out[-1].done and out[-1].info["success"] and len(out) == len(moves)
  assert out[-1].info["feedback"] == "Congratulations! You arrived at the goal! Let's play again."
  assert out[-1].info["state_key"] == pack[0].instance.goal
  _, obs = pack[1].reset()
  s = pack[1].instance.start
  assert f"You are at the START position ({s[0]},{s[1]}). Around you, up leads to" in obs
  assert pack[1].initial_state_key == s


def test_walls_invalid_and_turn_limit(run_actions):
  env = make("maze").sample_pack(4, 1)[0]
  inst = env.instance
  wall = next(n for n, (dr, dc) in DIRS.items() if inst.cell_type((inst.start[0] + dr, inst.start[1] + dc)) == "wall")
  out = run_actions(env, [f"\\boxed{{{wall}}}", "\\boxed{north}"] + [f"\\boxed{{{wall}}}"] * 7)
  assert out[0].info["feedback"].startswith("You hit the wall") and out[0].info["state_key"] == inst.start
  assert out[1].info["feedback"].startswith("Invalid action") and out[1].info["format_error"] and not out[1].done
  assert len(out) == 9 and out[-1].done and not out[-1].info["success"]
  assert out[-1].info["feedback"].endswith("You have reached the maximum number of turns (9). Let's play again.")
  assert MAX_TURNS_LINE not in out[-1].info["feedback"]


def test_observation_reports_neighbour_types(run_actions):
  env = make("maze").sample_pack(8, 1)[0]
  inst = env.instance
  move = next(n for n, (dr, dc) in DIRS.items() if inst.cell_type((inst.start[0] + dr, inst.start[1] + dc)) == "path")
  r = run_actions(env, [f"\\boxed{{{move.upper()}}}"])[0]
  pos = r.info["state_key"]
  kinds = [inst.cell_type((pos[0] + dr, pos[1] + dc)) for dr, dc in DIRS.values()]
  assert (f"You moved {move}. You are at ({pos[0]},{pos[1]}). Around you, up leads to {kinds[0]}, down leads to "
          f"{kinds[1]}, left leads to {kinds[2]}, and right leads to {kinds[3]}.") == r.info["feedback"]


def _kind(inst, cell, name):
  dr, dc = DIRS[name]
  return inst.cell_type((cell[0] + dr, cell[1] + dc))


def test_compact_text_says_the_same_things(run_actions):
  full, compact = make("maze").sample_pack(21, 1)[0], make("maze", preset="compact").sample_pack(21, 1)[0]
  inst = compact.instance
  assert inst == full.instance and compact.max_turns == full.max_turns == 9  # same instance and rules
  s = inst.start
  _, obs = compact.reset()
  view = ", ".join(f"{n} {_kind(inst, s, n)}" for n in ("up", "down", "left", "right"))
  assert obs.startswith("You are playing Maze.\n") and obs.endswith(f"\nSTART ({s[0]},{s[1]}): {view}")
  moves = _path(inst)
  a, b = run_actions(full, [f"\\boxed{{{m}}}" for m in moves]), run_actions(compact, [f"\\boxed{{{m}}}" for m in moves])
  assert [r.info["state_key"] for r in a] == [r.info["state_key"] for r in b]
  assert [(r.reward, r.done, r.info["success"]) for r in a] == [(r.reward, r.done, r.info["success"]) for r in b]
  cell = b[0].info["state_key"]
  view = ", ".join(f"{n} {_kind(inst, cell, n)}" for n in ("up", "down", "left", "right"))
  assert b[0].observation == f"moved {moves[0]}, at ({cell[0]},{cell[1]}): {view}"
  assert b[-1].info["feedback"] == "reached the goal! episode won" and b[-1].info["success"]
  wall = next(n for n in DIRS if _kind(inst, s, n) == "wall")
  out = run_actions(compact, [f"\\boxed{{{wall}}}", "\\boxed{north}"] + [f"\\boxed{{{wall}}}"] * 7)
  assert out[0].observation.startswith(f"hit a wall, at ({s[0]},{s[1]}): ")
  assert out[1].observation.startswith("invalid move, at ") and out[1].info["format_error"]
  assert out[-1].done and out[-1].info["feedback"].endswith("\nout of moves (9), episode lost")


def test_text_must_be_known():
  import pytest

  with pytest.raises(ValueError, match="text must be one of"):
    make("maze", text="terse")
