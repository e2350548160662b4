"""FrozenLake-Obscure: published map generator, pack mapping, rewards, feedback texts, presets and the expert."""

import collections
import random
import re

import numpy as np
import pytest

from codjax.agents.cod import run_text_packs
from codjax.envs import cod_protocol as proto
from codjax.envs import derive_seed, make
from codjax.envs.experts import make_policy
from codjax.envs.frozenlake.env import (ALL_PERMUTATIONS, DELTAS, HOLE_FEEDBACK, PARSE_ERROR_FEEDBACK, SUCCESS_FEEDBACK,
                                    FrozenLakeTask, TaskInstance, build_config, generate_map, mapping_from_seed,
                                    shortest_path_length)
from codjax.envs.frozenlake.expert import FrozenLakeExpert, Planner, hint_pairs


def _answer(k):
  return f"thinking\n<answer>Direction {k}</answer>"


def _task(rows, mapping=None, budget=8, **cfg):
  rows = tuple(rows)  # S start, F ice, H hole, G goal
  start = next((r, row.index("S")) for r, row in enumerate(rows) if "S" in row)
  goal = next((r, row.index("G")) for r, row in enumerate(rows) if "G" in row)
  mapping = mapping or {1: "Down", 2: "Right", 3: "Up", 4: "Left"}
  return FrozenLakeTask(build_config("train", **cfg), TaskInstance(rows, start, goal, mapping, budget))


def test_maps_match_reference_generator():
  # computed with the published generator (modelscope/Trinity-RFT trinity/common/workflows/envs/frozen_lake/utils.py:
  # gymnasium seeding.np_random + rllm DFS validity check)
  assert generate_map(5, 0.65, 12345, 6) == ("FFFGF", "FFFFF", "FFFFH", "FHSHF", "FHFFF")
  assert generate_map(7, 0.62, 99, 8) == ("HHFFFHF", "HHHFFFH", "FFFHFFF", "HHHFFHH", "FFSFGFH", "FHFHHFF",
                                          "FFHHFFF")
  assert generate_map(4, 0.6, 0, 6) == ("HFGS", "HHHH", "FHHF", "HFHF")


@pytest.mark.parametrize("preset", ["train", "hard", "tiny"])
def test_every_map_solvable_within_budget(preset):
  fam = make("frozenlake_obscure", preset=preset)
  cfg = fam.cfg
  sizes = set()
  for k in range(150):
    for task in fam.sample_pack(derive_seed(11, k), 2):
      inst = task.inst
      sizes.add(len(inst.rows))
      d = shortest_path_length(inst.rows, inst.start, inst.goal)
      assert d is not None and 1 <= d <= min(cfg.env_max_steps + 1, inst.budget)
      if preset == "tiny":
        assert inst.budget == d + cfg.budget_slack
  assert sizes == set(range(cfg.min_size, cfg.max_size + 1))


def test_determinism_and_fresh_state():
  fam = make("frozenlake_obscure", preset="train")
  a, b = fam.sample_pack(123, 4), fam.sample_pack(123, 4)
  assert [t.reset() for t in a] == [t.reset() for t in b]
  a[0].step(_answer(1))
  a[0].step(_answer(2))
  assert b[0].reset() == fam.sample_pack(123, 4)[0].reset()  # stepping one copy never touches another
  assert [t.inst for t in make("frozenlake_obscure").sample_pack(123, 4)] == [t.inst for t in b]
  assert [t.inst.rows for t in fam.sample_pack(124, 4)] != [t.inst.rows for t in b]


def test_pack_mapping_shared_and_uniform():
  fam = make("frozenlake_obscure")
  packs = [fam.sample_pack(derive_seed(5, k), 3) for k in range(40)]
  for tasks in packs:
    assert len({tuple(sorted(t.inst.mapping.items())) for t in tasks}) == 1
  assert len({tuple(sorted(p[0].inst.mapping.items())) for p in packs}) > 10
  assert packs[0][0].inst.mapping == mapping_from_seed(derive_seed(5, 0))
  dirs = ["Down", "Right", "Up", "Left"]
  random.Random(77).shuffle(dirs)
  assert mapping_from_seed(77) == dict(enumerate(dirs, start=1))
  counts = collections.Counter(tuple(mapping_from_seed(derive_seed(9, k)).values()) for k in range(4800))
  assert set(counts) == set(ALL_PERMUTATIONS)
  chi2 = sum((c - 200) ** 2 / 200 for c in counts.values())
  assert chi2 < 49.7  # 23 degrees of freedom, p = 0.001


def test_mapping_modes():
  per_task = make("frozenlake_obscure", mapping_mode="per_task").sample_pack(3, 4)
  assert [t.inst.mapping for t in per_task] == [mapping_from_seed(derive_seed(3, i)) for i in range(4)]
  glob = make("frozenlake_obscure", mapping_mode="global")
  assert glob.sample_pack(1, 1)[0].inst.mapping == {1: "Down", 2: "Right", 3: "Up", 4: "Left"}
  idx = make("frozenlake_obscure", mapping_mode="global", mapping_index=23)
  assert tuple(idx.sample_pack(1, 1)[0].inst.mapping.values()) == ALL_PERMUTATIONS[23]


def test_success_reward_and_reference_feedback():
  task = _task(["SFG", "FFF", "FFF"])
  system, obs = task.reset()
  assert "Direction 1" in system and "<answer>Direction X</answer>" in system
  assert obs.startswith("Step 1/8\n\nCurrent map:\n P \t _ \t G \t\n")
  assert obs.endswith("You have not reached the goal (row=0, col=2) yet. Please decide your next action.")
  r = task.step(_answer(4))  # Left at the edge: blocked
  assert not r.done and r.info["feedback"] == (
      "You executed action Direction 4. Your position did not change (stayed at row=0, col=0). This may be "
      "because you tried to move beyond the edge of the map.")
  assert r.observation.startswith("Step 2/8\n\nYou executed action Direction 4.")
  r = task.step(_answer(2))
  assert r.info["feedback"] == ("You executed action Direction 2. Your position changed from (row=0, col=0) to "
                                "(row=0, col=1).")
  r = task.step(_answer(2))
  assert r.done and r.info["feedback"] == SUCCESS_FEEDBACK and task.final_feedback() == SUCCESS_FEEDBACK
  assert r.info["raw_reward"] == 1.0 and r.reward == pytest.approx(1 - 0.1 * 3 / 8)
  assert not r.info["format_error"]
  assert task.step(_answer(2)).done  # stepping a finished task is harmless


def test_hole_and_out_of_steps():
  task = _task(["SHG", "FFF", "FFF"])
  task.reset()
  r = task.step(_answer(2))
  assert r.done and r.reward == 0.0 and r.info["raw_reward"] == 0.0 and r.info["feedback"] == HOLE_FEEDBACK
  task = _task(["SFG", "FFF", "FFF"], budget=2)
  task.reset()
  task.step(_answer(1))
  r = task.step(_answer(3))
  assert r.done and r.reward == 0.0
  assert r.info["feedback"] == ("Failed: Ran out of steps (2/2) without reaching the goal. Try to find a shorter "
                                "path.")


@pytest.mark.parametrize("text,fb", [
    ("no answer here", PARSE_ERROR_FEEDBACK),
    ("<answer>Direction 1</answer><answer>Direction 2</answer>", PARSE_ERROR_FEEDBACK),
    ("<answer>go left</answer>", PARSE_ERROR_FEEDBACK),
    ("<answer>Direction 5</answer>",
     "Invalid format: Direction 5 is not a valid action. Expected: Direction 1, 2, 3, or 4. Game over."),
])
def test_format_errors_end_episode(text, fb):
  task = _task(["SFG", "FFF", "FFF"])
  task.reset()
  r = task.step(text)
  assert r.done and r.reward == 0.0 and r.info["format_error"] and r.info["feedback"] == fb


def test_relative_and_compact_text():
  task = _task(["SFG", "FHF", "FFF"], feedback_style="relative", text_style="compact")
  system, obs = task.reset()
  assert len(system) < 700 and "<answer>Direction X</answer>" in system
  assert obs == "Step 1/8\nMap:\nP _ G\n_ O _\n_ _ _\nYou at (0,0). Goal at (0,2)."
  assert task.step(_answer(3)).observation == "Step 2/8\nD3: blocked, stayed at (0,0)\nGoal at (0,2)."
  assert task.step(_answer(1)).observation == "Step 3/8\nD1: moved down to (1,0)\nGoal at (0,2)."
  r = task.step(_answer(3))
  assert r.info["feedback"] == "D3: moved up to (0,0)"
  task.step(_answer(2))
  r = task.step(_answer(2))
  assert r.done and r.info["feedback"] == "D2: moved right to (0,2) " + SUCCESS_FEEDBACK
  full = _task(["SFG", "FFF", "FFF"], feedback_style="relative")
  full.reset()
  assert full.step(_answer(2)).info["feedback"] == "You executed action Direction 2: you moved right to (row=0, col=1)."
  assert full.step(_answer(3)).info["feedback"] == (
      "You executed action Direction 3: you were blocked by the edge and stayed at (row=0, col=1).")


def test_tiny_preset_is_short_and_budgeted():
  fam = make("frozenlake_obscure", preset="tiny")
  assert fam.cfg.feedback_style == "relative" and fam.cfg.text_style == "compact"
  task = fam.sample_pack(1, 1)[0]
  system, obs = task.reset()
  assert len(system) + len(obs) < 800 and "Map:" in obs


@pytest.mark.parametrize("params", [
    dict(preset="nope"), dict(bogus=1), dict(min_size=5, max_size=4), dict(min_p=0.0), dict(max_p=1.5),
    dict(min_p=0.7, max_p=0.6), dict(agent_max_steps=3), dict(agent_max_steps=8, budget_slack=1),
    dict(mapping_mode="x"), dict(mapping_index=3), dict(mapping_mode="global", mapping_index=24),
    dict(feedback_style="loud"), dict(text_style="tiny"), dict(length_penalty_coef=-0.1), dict(max_size=40),
    dict(min_size=2.5),
])
def test_bad_params_raise(params):
  with pytest.raises(ValueError):
    make("frozenlake_obscure", **params)


def test_bad_pack_arguments_raise():
  fam = make("frozenlake_obscure")
  for args in [(-1, 2), (1, 0), ("x", 2)]:
    with pytest.raises(ValueError):
      fam.sample_pack(*args)
  with pytest.raises(ValueError):
    fam.sample_pack(1, 2, task_seeds=[1])
  assert [t.inst.rows for t in fam.sample_pack(1, 2, task_seeds=[5, 5])][0] == fam.sample_pack(2, 1, [5])[0].inst.rows


def test_planner_values():
  rows = ["___", "___", "__G"]
  p = Planner(rows, (2, 2), budget=4)
  full = (1 << 24) - 1
  # four moves and no spare one: guess a progressing action (1/2), later the other one (1/3); reward 0.9
  assert p.value((0, 0), 0, full) == pytest.approx(0.9 / 6)
  assert p.value((0, 0), 1, full) == 0.0  # three moves left but four needed
  known = sum(1 << i for i, perm in enumerate(ALL_PERMUTATIONS) if perm == ("Down", "Right", "Up", "Left"))
  assert p.value((0, 0), 0, known) == pytest.approx(1 - 0.1 * 4 / 4)
  assert 0 < Planner(rows, (2, 2), budget=6).value((0, 0), 0, full) < 1


def test_expert_uses_hint_and_beats_random():
  mapping = {1: "Left", 2: "Up", 3: "Right", 4: "Down"}
  task = _task(["SFF", "FHF", "FFG"], mapping=mapping)
  system, obs = task.reset()
  system = proto.augment_system_prompt(system, "Hints: - mapping: 1=Left 2=Up 3=Right 4=Down")
  messages = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
  reply = FrozenLakeExpert().respond(messages, random.Random(0))
  assert reply.startswith("know 1=Left 2=Up 3=Right 4=Down; go ") and reply.endswith("</answer>")
  assert proto.extract_answer(reply) in ("Direction 3", "Direction 4")
  fam = make("frozenlake_obscure", preset="train")
  seeds = [derive_seed(21, k) for k in range(80)]
  expert = np.stack([t.task_rewards for t in run_text_packs(make_policy("frozenlake_obscure"), fam, seeds, 4)])
  rand = np.stack([t.task_rewards for t in run_text_packs(make_policy("frozenlake_obscure", "random"), fam, seeds, 4)])
  m = expert.mean(axis=0)
  assert m[0] > 0.4 and m[3] > 0.9 and m[3] - m[0] > 0.25
  assert rand.mean() < 0.3


@pytest.mark.parametrize("feedback_style,text_style", [("coordinates", "full"), ("relative", "full"),
                                                       ("coordinates", "compact"), ("relative", "compact")])
def test_expert_hints_are_correct_in_every_wording(feedback_style, text_style):
  fam = make("frozenlake_obscure", preset="train", feedback_style=feedback_style, text_style=text_style)
  seeds = [derive_seed(31, k) for k in range(15)]
  trajs = run_text_packs(make_policy("frozenlake_obscure", know_style="auto"), fam, seeds, 4)
  n_pairs = 0
  for ps, t in zip(seeds, trajs):
    truth = fam.mapping_for(ps, 0)
    for hint in t.hints[1:]:
      assert proto.parse_hint(proto.format_hint_block([hint[len("Hints: - "):]])) is not None
      mapping = hint.split("mapping: ")[1]
      if text_style == "compact":  # slot scratchpad: all four directions in a fixed order, "?" when unknown
        assert re.fullmatch(r"Up=[1-4?] Down=[1-4?] Left=[1-4?] Right=[1-4?]", mapping), mapping
      pairs = hint_pairs(hint)
      assert len(pairs) == mapping.count("=") - mapping.count("=?") or mapping == "unknown"
      n_pairs += len(pairs)
      assert all(truth[k] == d for k, d in pairs)
      assert fam.score_hint(ps, hint) in (None, 1.0)
  assert n_pairs > 60


def test_expert_drops_contradicted_hint():
  task = _task(["SFF", "FFF", "FFG"], mapping={1: "Down", 2: "Right", 3: "Up", 4: "Left"})
  system, obs = task.reset()
  system = proto.augment_system_prompt(system, "Hints: - mapping: 1=Up 2=Left 3=Down 4=Right")
  r = task.step(_answer(1))  # really Down: contradicts the hint
  msgs = [{"role": "system", "content": system}, {"role": "user", "content": obs},
          {"role": "assistant", "content": _answer(1)}, {"role": "user", "content": r.observation}]
  reply = FrozenLakeExpert().respond(msgs, random.Random(0))
  assert reply.startswith("know 1=Down;")


def test_move_deltas_consistent():
  assert {d: DELTAS[d] for d in ("Up", "Down")} == {"Up": (-1, 0), "Down": (1, 0)}


def test_slot_scratchpad_on_compact_text_and_both_hint_orders():
  """Compact text gets the fixed-slot scratchpad (``go Right=4`` names the slot the answer digit comes from);
  a slot-style hint is read by the expert and scored like the pair style."""
  task = _task(["SFG", "FFF", "FFF"], mapping={1: "Down", 2: "Right", 3: "Up", 4: "Left"}, text_style="compact",
               feedback_style="relative")
  system, obs = task.reset()
  system = proto.augment_system_prompt(system, "Hints: - mapping: Up=3 Down=1 Left=? Right=2", style="compact")
  messages = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
  assert FrozenLakeExpert().respond(messages, random.Random(0)).startswith("know 1=Down 2=Right 3=Up 4=Left; go Right")
  reply = FrozenLakeExpert(know_style="auto").respond(messages, random.Random(0))
  assert reply == "know Up=3 Down=1 Left=4 Right=2; go Right=2\n<answer>Direction 2</answer>"
  assert hint_pairs("Up=3 Down=? 4=Left") == [(4, "Left"), (3, "Up")]
  fam = make("frozenlake_obscure", preset="tiny")
  truth = fam.mapping_for(7, 0)
  slots = " ".join(f"{d}={k}" for k, d in sorted(truth.items()))
  assert fam.score_hint(7, f"Hints: - mapping: {slots}") == 1.0
  wrong = {d: k % 4 + 1 for k, d in truth.items()}
  assert fam.score_hint(7, "Hints: - mapping: " + " ".join(f"{d}={k}" for d, k in wrong.items())) == 0.0
  assert fam.score_hint(7, "Hints: - mapping: Up=? Down=?") is None
