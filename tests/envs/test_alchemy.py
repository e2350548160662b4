"""Alchemy-Random: graph generation, pack sharing, solvable targets, rules, feedback, rewards and the expert."""

import random

import numpy as np
import pytest

from codjax.agents.cod import run_text_packs
from codjax.envs import cod_protocol as proto
from codjax.envs import derive_seed, make
from codjax.envs.alchemy.env import PARSE_ERROR_FEEDBACK, rounds_needed, solution_recipes
from codjax.envs.alchemy.expert import AlchemyExpert, Knowledge
from codjax.envs.experts import make_policy


def _say(a, b):
  return f"hmm\n<answer>{a} + {b}</answer>"


def _oracle_crafts(task):
  """The solution's crafts in post order (repeated per use in limited mode), from the hidden graph."""
  chosen = solution_recipes(task.inst.graph)
  out, made = [], set()

  def visit(e):
    if e not in chosen or (not task.limited and e in made):
      return
    a, b = chosen[e]
    visit(a)
    visit(b)
    out.append((a, b))
    made.add(e)

  visit(task.inst.target)
  return out


@pytest.mark.parametrize("preset", ["easy", "hard"])
def test_targets_reachable_and_won_within_round_limit(preset):
  fam = make("alchemy_random", preset=preset)
  for k in range(60):
    tasks = fam.sample_pack(derive_seed(4, k), 4)
    for task in tasks:
      task.reset()
      crafts = _oracle_crafts(task)
      assert 1 <= len(crafts) == rounds_needed(task.inst.target, solution_recipes(task.inst.graph), task.limited)
      assert len(crafts) <= fam.cfg.max_rounds
      for i, (a, b) in enumerate(crafts):
        r = task.step(_say(a, b))
        assert r.done == (i == len(crafts) - 1), r.info["feedback"]
      assert r.info["raw_reward"] == 1.0 and r.reward == pytest.approx(1 - 0.1 * len(crafts) / fam.cfg.max_rounds)
      assert r.info["feedback"] == f"Success! Synthesized {task.inst.target}."


def test_pack_shares_graph_and_is_deterministic():
  fam = make("alchemy_random", preset="hard")
  a, b = fam.sample_pack(99, 8), fam.sample_pack(99, 8)
  assert [t.reset() for t in a] == [t.reset() for t in b]
  assert len({t.inst.graph.tiers for t in a}) == 1 and len({id(t.inventory) for t in a}) == 8
  targets = [t.inst.target for t in a]
  graph, ordered = fam.pack_graph(99, 8)
  assert targets == [ordered[i % len(ordered)] for i in range(8)]
  assert len(set(targets)) == len(ordered)
  assert all(t not in graph.noise and t not in graph.tiers[0] for t in targets)
  assert fam.sample_pack(100, 8)[0].inst.graph.tiers != graph.tiers
  ralph = fam.sample_pack(99, 3, task_seeds=[7, 7, 7])
  assert len({t.inst.target for t in ralph}) == 1
  per_task = make("alchemy_random", scope="per_task").sample_pack(5, 3)
  assert len({t.inst.graph.tiers for t in per_task}) == 3


def test_presets_follow_table2():
  easy, hard = make("alchemy_random").cfg, make("alchemy_random", preset="hard").cfg
  assert (easy.max_rounds, easy.material_mode, easy.max_recipes_per_element) == (8, "unlimited", 1)
  assert (hard.max_rounds, hard.material_mode, hard.max_base_elements, hard.max_noise_node_ratio) == (15, "limited",
                                                                                                        6, 0.3)
  for k in range(40):
    g, _ = make("alchemy_random", preset="hard").pack_graph(k, 4)
    assert 3 <= len(g.tiers) <= 4 and 4 <= len(g.tiers[0]) <= 6
    assert all(3 <= len(e) <= 5 and e.isalpha() and e.islower() for t in g.tiers for e in t)


def test_unlimited_rules_and_feedback():
  task = make("alchemy_random").sample_pack(3, 1)[0]
  system, obs = task.reset()
  target = task.inst.target
  assert f'"{target}"' in system and "## Element tiers" in system and "<answer>Element1 + Element2</answer>" in system
  assert obs.startswith("Round 1/8\n\nTarget: ") and "Available elements in your inventory:\n- " in obs
  base = [e for e, _ in task.inst.inventory]
  fail = next((a, b) for a in base for b in base if tuple(sorted((a, b))) not in task.inst.graph.recipes)
  r = task.step(_say(*fail))
  assert r.info["feedback"] == f"{fail[0]} + {fail[1]} — nothing happened." and not r.done
  assert sorted(task.inventory) == sorted(base)  # nothing consumed
  r = task.step(_say("zzzzzz", base[0]))
  assert r.info["feedback"] == "'zzzzzz' is not in your inventory." and not r.done
  r = task.step(_say("qqq", "zzz"))
  assert r.info["feedback"] == "'qqq' and 'zzz' are not in your inventory."
  (a, b), res = next(iter(task.inst.graph.recipes.items()))
  if a in base and b in base:
    r = task.step(_say(a.upper(), b))  # names match case-insensitively
    assert r.info["feedback"] == f"You combined {a} + {b} and created: {res}!"
  for _ in range(8):
    r = task.step(_say(*fail))
    if r.done:
      break
  assert r.done and r.reward == 0.0 and r.info["feedback"].startswith("Failed: Ran out of rounds (8/8)")


def test_limited_consumption_and_running_out():
  fam = make("alchemy_random", preset="hard", min_material_mult=1.0, max_material_mult=1.0, max_rounds=40)
  task = fam.sample_pack(8, 1)[0]
  _, obs = task.reset()
  assert "total copies):\n- " in obs and " x" in obs
  base = [e for e, _ in task.inst.inventory]
  recipes = task.inst.graph.recipes
  x, y = next((x, y) for x in base for y in base if x != y and tuple(sorted((x, y))) not in recipes)
  before = dict(task.inventory)
  r = task.step(_say(x, y))
  assert r.info["feedback"] == f"{x} + {y} — nothing happened. Materials consumed."
  assert task.inventory.get(x, 0) == before[x] - 1 and task.inventory.get(y, 0) == before[y] - 1
  while task.inventory.get(x, 0) > 1:  # use up x down to one copy
    r = task.step(_say(x, next(e for e in task.inventory if e != x)))
  assert task.inventory.get(x) == 1 and not r.done
  r = task.step(_say(x, x))
  assert r.info["feedback"] == f"Not enough '{x}' (need 2, have 1)." and task.inventory.get(x) == 1
  for _ in range(100):
    if r.done:
      break
    held = [e for e, n in task.inventory.items() for _ in range(n)]
    r = task.step(_say(held[0], held[1]))
  assert r.done and (r.info["raw_reward"] == 1.0 or r.info["feedback"].startswith("Failed: Ran out of materials."))
  assert r.info["raw_reward"] == 1.0 or sum(task.inventory.values()) < 2


@pytest.mark.parametrize("text", ["no tags", "<answer>a b</answer>", "<answer>a + b + c</answer>",
                                  "<answer> + b</answer>", "<answer>a+</answer>"])
def test_format_errors_end_episode(text):
  task = make("alchemy_random").sample_pack(3, 1)[0]
  task.reset()
  r = task.step(text)
  assert r.done and r.reward == 0.0 and r.info["format_error"] and r.info["feedback"] == PARSE_ERROR_FEEDBACK


@pytest.mark.parametrize("params", [dict(preset="x"), dict(foo=1), dict(max_num_tiers=1), dict(min_base_elements=0),
                                    dict(tier_shrink_min=0.9, tier_shrink_max=0.5), dict(material_mode="some"),
                                    dict(scope="global"), dict(max_rounds=0), dict(show_tiers="yes"),
                                    dict(max_cross_tier_prob=1.5)])
def test_bad_params_raise(params):
  with pytest.raises(ValueError):
    make("alchemy_random", **params)


def test_expert_reads_markdown_hints():
  know = Knowledge({"abc", "de", "fgh", "xyz"})
  know.read_hint("Hints: ### Key recipes\n- **abc + de** = fgh\n- failed: abc+abc; de + xyz\n- zz + qq = yy")
  assert know.recipes == {("abc", "de"): "fgh"} and know.failed == {("abc", "abc"), ("de", "xyz")}
  know.read_hint("- recipes: abc+xyz=de")
  assert know.hint_bullets() == ["recipes: abc+de=fgh; abc+xyz=de", "failed: abc+abc; de+xyz"]


def test_expert_follows_known_recipes():
  task = make("alchemy_random").sample_pack(12, 1)[0]
  system, obs = task.reset()
  crafts = _oracle_crafts(task)
  chosen = solution_recipes(task.inst.graph)
  hint = "Hints: - recipes: " + "; ".join(f"{a}+{b}={e}" for e, (a, b) in chosen.items())
  msgs = [{"role": "system", "content": proto.augment_system_prompt(system, hint)}, {"role": "user", "content": obs}]
  for a, b in crafts:
    reply = AlchemyExpert().respond(msgs, random.Random(0))
    assert proto.extract_answer(reply) == f"{a} + {b}" and "; make " in reply
    r = task.step(reply)
    msgs += [{"role": "assistant", "content": reply}, {"role": "user", "content": r.observation}]
  assert r.done and r.info["raw_reward"] == 1.0


@pytest.mark.parametrize("preset,lo,hi", [("easy", 0.55, 0.93), ("hard", 0.25, 0.6)])
def test_expert_cod_gain_over_random(preset, lo, hi):
  fam = make("alchemy_random", preset=preset)
  seeds = [derive_seed(17, k) for k in range(60)]
  ex = np.stack([t.task_rewards for t in run_text_packs(make_policy("alchemy_random"), fam, seeds, 4)])
  rnd = np.stack([t.task_rewards for t in run_text_packs(make_policy("alchemy_random", "random"), fam, seeds, 4)])
  m = ex.mean(axis=0)
  assert lo < m[0] < hi and m[3] > m[0] + 0.15 and rnd.mean() < m[0]
