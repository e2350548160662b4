"""Oracles and scripted players: exact Mastermind optimum, Maze belief planning, knowledge carried by hints."""

import random

import pytest

from codjax.envs import cod_protocol as proto
from codjax.envs import derive_seed, make
from codjax.envs.base import Turn
from codjax.envs.experts import make_policy
from codjax.envs.games import GAMES
from codjax.envs.games.mastermind import MastermindInstance, MastermindTask, pegs
from codjax.envs.games.oracles import base
from codjax.envs.games.oracles.mastermind import Solver, all_codes
from codjax.envs.games.oracles.maze import Belief


@pytest.mark.parametrize("visible", [True, False])
def test_mastermind_exact_optimum(visible):
  s = Solver(3, 6, False, 3, last_pegs_visible=visible)
  assert round(s.value(s.full, 3, 1) * 120) == 44  # one episode of 3 guesses wins at most 44 of 120 codes
  assert s.value(s.full, 3, 3) == pytest.approx(2 + 44 / 120)


def test_mastermind_repeated_digit_guesses_win_one_more_code():
  s = Solver(3, 6, False, 3, last_pegs_visible=True, guess_pool="all")
  assert round(s.value(s.full, 3, 1) * 120) == 45


def test_mastermind_small_setting_by_brute_force():
  # 2 digits of 1..3, no repeats, 2 guesses: guess A wins 1 code; its answers split the other 5 codes into classes
  # that each yield one more win, so P(win) = (1 + #non-winning classes) / 6, maximised over the first guess.
  s = Solver(2, 3, False, 2, last_pegs_visible=True)
  codes = all_codes(2, 3, False)
  best = max(1 + len({pegs(g, c) for c in codes if c != g}) for g in codes)
  assert s.value(s.full, 2, 1) == pytest.approx(best / 6)


@pytest.mark.parametrize("faithful", [True, False])
def test_mastermind_oracle_plays_every_code(play_episodes, faithful):
  fam = make("mastermind", faithful=faithful)
  oracle = make_policy("mastermind", "expert", faithful=faithful)
  totals = [0, 0, 0]
  for i, code in enumerate(all_codes(3, 6, False)):
    inst = MastermindInstance(code=code, example=(1, 2, 3))
    ok, _ = play_episodes([MastermindTask(fam.cfg, inst, e) for e in range(3)], oracle, seed=i)
    totals = [t + o for t, o in zip(totals, ok)]
  assert totals == [44, 120, 120]


def test_maze_oracle_learns_across_episodes(play_episodes):
  fam = make("maze")
  for planner in ("frontier", "shaped"):
    oracle = make_policy("maze", "expert", planner=planner)
    rates = [0, 0, 0]
    for k in range(24):
      ok, _ = play_episodes(fam.sample_pack(derive_seed(0, k), 3), oracle)
      rates = [r + o for r, o in zip(rates, ok)]
    assert rates[2] >= 18 and rates[2] > rates[0], (planner, rates)


def test_maze_belief_reads_observations_and_hint_bullets():
  text = ("You are at (2,3). Around you, up leads to wall, down leads to path, left leads to goal, and right leads to "
          "wall.")
  b = Belief([text])
  assert b.known[(3, 3)] == "path" and b.goal() == (2, 2) and b.visited == {(2, 3)}
  assert Belief(b.bullets()).known == b.known


@pytest.mark.parametrize("game", ["rps", "minesweeper", "hangman", "wordle", "blackjack"])
def test_scripted_players_beat_random(play_episodes, game):
  fam = make(game)
  scores = {}
  for kind in ("expert", "random"):
    policy = make_policy(game, kind)
    scores[kind] = sum(sum(play_episodes(fam.sample_pack(derive_seed(1, k), 3), policy, seed=k)[0])
                       for k in range(16))
  assert scores["expert"] > scores["random"] + 4, scores


@pytest.mark.parametrize("game", GAMES)
def test_hint_round_trip_carries_knowledge(game):
  """Solve one task, write the update-context hint, solve the next task of the pack with it: the expert must not
  do worse than the same policy without the hint, and the hint must list what the first task revealed."""
  fam = make(game)
  policy = make_policy(game, "expert")
  rng = random.Random(0)
  first, second = fam.sample_pack(derive_seed(2, GAMES.index(game)), 2)
  system, obs = first.reset()
  msgs = [{"role": "system", "content": proto.augment_system_prompt(system, proto.INITIAL_HINT)},
          {"role": "user", "content": obs}]
  turns = []
  while True:
    action = policy.respond(msgs, rng)
    turns.append(Turn(msgs[-1]["content"], action))
    r = first.step(action)
    msgs += [{"role": "assistant", "content": action}, {"role": "user", "content": r.observation}]
    if r.done:
      break
  update = [{"role": "system", "content": proto.update_system_prompt()},
            {"role": "user", "content": proto.update_user_prompt(
                proto.INITIAL_HINT, first.render_trajectory(msgs[0]["content"], turns), r.reward,
                first.final_feedback())}]
  hint = proto.parse_hint(policy.respond(update, rng))
  assert hint is not None and len(base.hint_lines(hint)) >= 1
  # The hint read back gives the same knowledge as the first episode's own transcript.
  system2, obs2 = second.reset()
  with_hint = base.read([{"role": "system", "content": proto.augment_system_prompt(system2, hint)},
                         {"role": "user", "content": obs2}], first.game)
  from_transcript = base.read(msgs[:-1] + [{"role": "user", "content": r.observation}], first.game)
  assert sorted(policy.knowledge_bullets(with_hint)) == sorted(policy.knowledge_bullets(from_transcript))


def test_reading_splits_episodes(play_episodes):
  fam = make("mastermind")
  _, msgs = play_episodes(fam.sample_pack(5, 3), make_policy("mastermind", "random"))
  reading = base.read(msgs[:-1] if msgs[-1]["role"] == "assistant" else msgs, "Mastermind")
  assert len(reading.intros) == len(reading.episodes) == 3
  assert all(1 <= len(ep) <= 3 for ep in reading.episodes[:2])
  assert all(x.reply for ep in reading.episodes[:2] for x in ep)


_HOSTILE = ("[" + "9" * 5000 + "]. This guess receives 1 black peg(s) and 0 white peg(s). You drew 5 from index "
            + "7" * 6000 + "\nCurrent board:\n  0 1\n²  . .\nDeck: " + "1" * 5000 + ":5 (3,2). Around you, up leads "
            "to wall, down leads to path, left leads to goal, and right leads to wall. Minesweeper first click: "
            "(9999, 9999) RPS adversary moves seen so far: rock 999999, paper 1, scissors 2 Hangman known letters: "
            "A B C D E F Wordle feedback: ABCDE ['G', 'G', 'G', 'G', 'G'] Dealer's hand: A, A (total 12)")


@pytest.mark.parametrize("game", GAMES)
def test_players_survive_crafted_hostile_text(game):
  task = make(game).sample_pack(1, 1)[0]
  system, obs = task.reset()
  solve = [{"role": "system", "content": proto.augment_system_prompt(system, "Hints: " + _HOSTILE)},
           {"role": "user", "content": obs + _HOSTILE},
           {"role": "assistant", "content": "\\boxed{" + "1 " * 3000 + "}"},
           {"role": "user", "content": _HOSTILE + obs}]
  trajectory = f"System:\nx\n\nStep 1:\nObservation: {_HOSTILE}\nAction: \\boxed{{{'9' * 5000} 1 2}}"
  update = [{"role": "system", "content": proto.update_system_prompt()},
            {"role": "user", "content": proto.update_user_prompt("Hints: " + _HOSTILE, trajectory, 0.0, _HOSTILE)}]
  for kind in ("expert", "random"):
    policy = make_policy(game, kind)
    for msgs in (solve[:2], solve):
      assert "\\boxed{" in policy.respond(msgs, random.Random(0))
    assert proto.parse_hint(policy.respond(update, random.Random(0))) is not None


def _loop_erased(cells, moves):
  """Last exit from every cell of a walk: cell -> move (independent of the player's text parsing)."""
  return {c: m for c, m in zip(cells, moves)}


@pytest.mark.parametrize("preset,take_goal", [("orbit", True), ("compact", True), ("compact", False)])
def test_maze_replay_player(play_episodes, preset, take_goal):
  """Explores without walls or reversals (onto the goal when it is next to it, with take_goal) until an
  episode wins, then replays that episode's last exits."""
  from codjax.envs.games.maze import DIRS

  fam = make("maze", preset=preset)
  player = make_policy("maze", "expert", planner="replay", take_goal=take_goal)
  goal_steps = 0
  back = {"up": "down", "down": "up", "left": "right", "right": "left"}
  wins = [0, 0, 0]
  for k in range(40):
    envs = fam.sample_pack(derive_seed(3, k), 3)
    inst = envs[0].instance
    ok, messages = play_episodes(envs, player, seed=k)
    wins = [w + o for w, o in zip(wins, ok)]
    moves = [base.common.extract_action(m["content"]) for m in messages if m["role"] == "assistant"]
    # replay the walk on the true map, episode by episode (each ends on the goal or after 9 moves)
    i, exits = 0, None
    for e in range(3):
      cell, prev, cells, ep_moves = inst.start, None, [], []
      while True:
        m = moves[i]
        i += 1
        options = [n for n, (dr, dc) in DIRS.items() if inst.cell_type((cell[0] + dr, cell[1] + dc)) != "wall"]
        if exits is not None and cell in exits:
          assert m == exits[cell]  # the winning episode's last exit from this cell
        else:
          goal = [n for n in options if inst.cell_type((cell[0] + DIRS[n][0], cell[1] + DIRS[n][1])) == "goal"]
          assert m in ((goal if take_goal else []) or options)  # never into a wall
          goal_steps += bool(goal) and m != goal[0]
          assert m != back.get(prev) or options == [back[prev]]  # never straight back unless a dead end
        cells.append(cell)
        ep_moves.append(m)
        cell, prev = (cell[0] + DIRS[m][0], cell[1] + DIRS[m][1]), m
        if cell == inst.goal or len(ep_moves) == 9:
          break
      assert ok[e] == (cell == inst.goal)
      if ok[e]:
        exits = _loop_erased(cells, ep_moves)
      if e and ok[e - 1]:
        assert ok[e]  # a replayed winning route always wins again
  assert wins[0] < wins[1] < wins[2]
  assert (goal_steps == 0) == take_goal  # without take_goal it sometimes walks past a goal it sees


@pytest.mark.parametrize("note", ["position", "options"])
def test_maze_players_note_their_position(play_episodes, note):
  from codjax.envs.experts import MixedPolicy, make_teacher
  from codjax.envs.games.maze import DIRS

  fam = make("maze", preset="compact")
  teacher = make_teacher("maze", 0.5, planner="replay", note=note)
  assert isinstance(teacher, MixedPolicy) and teacher.other.note == note  # the shared reply format
  back = {"up": "down", "down": "up", "left": "right", "right": "left"}
  for seed in range(6):
    envs = fam.sample_pack(seed, 2)
    _, messages = play_episodes(envs, teacher, seed=seed)
    inst, cell, prev = envs[0].instance, envs[0].instance.start, None
    for m in messages:
      if m["role"] == "user" and "[Episode" in m["content"]:
        cell, prev = inst.start, None
      if m["role"] != "assistant":
        continue
      move = base.common.extract_action(m["content"])
      want = f"({cell[0]},{cell[1]}) "
      if note == "options":  # the goal if adjacent, else the open neighbours but the way back (all at a dead end)
        opened = [n for n, (dr, dc) in DIRS.items() if inst.cell_type((cell[0] + dr, cell[1] + dc)) != "wall"]
        goal = [n for n in opened if inst.cell_type((cell[0] + DIRS[n][0], cell[1] + DIRS[n][1])) == "goal"]
        options = goal or [n for n in opened if n != back.get(prev)] or opened
        want += "".join(f"{n} " for n in options)
      assert m["content"] == want + f"\\boxed{{{move}}}"
      nxt = (cell[0] + DIRS[move][0], cell[1] + DIRS[move][1])
      moved = inst.cell_type(nxt) != "wall"
      cell, prev = (nxt, move) if moved else (cell, None)
  with pytest.raises(TypeError):
    make_teacher("maze", 0.5, planner="replay", bogus=1)
  with pytest.raises(ValueError, match="note must be one of"):
    make_policy("maze", "expert", note="everything")
