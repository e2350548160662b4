"""Alchemy-Random (CoD paper, Sec. 3.2.1) as an evolvable environment; the parameterisation is codjax's choice
(docs/methods/environment_evolution.md).

A point's pairs are the tiers of the recipe chain the target sits on top of: pair t is the step from tier t-1
to tier t (scenario = the element set that step draws from, skill = the kind of reaction it uses). The pairs set
the constructor of ``codjax.envs.make("alchemy_random", ...)`` as follows (L = number of pairs, n_x = number of
pairs whose scenario or skill is x):

* recipe depth (length): ``L + 1`` tiers and every target on the top tier (``min_target_tier = L``), so the
  solution needs at least L crafts; rounds ``max_rounds = 4 + 3 L`` (room to explore each tier);
* element set (scenario): ``plain`` keeps the reference base of 3-4 elements and shrink 0.4-0.6; each ``wide``
  pair adds one base element and 0.1 to the shrink range (more candidates per tier, so more failed pairs);
  each ``noisy`` pair adds 0.25 to the dead-end (noise) element ratio (decoys that craft but lead nowhere);
* reaction type (skill): ``chain`` is the reference's same-tier recipe; each ``cross_tier`` pair adds 0.3 to the
  probability that a recipe takes its second input from two or more tiers down (``max_tier_gap`` 1 + n, at
  most 4), which the tier-by-tier search finds late; any ``consume`` pair switches to limited materials (every
  attempt uses its inputs up, so a failed experiment costs materials as well as a round).

The pack's recipes are the answer that must not leak (the recipes of the target's solution, written
``a + b = c``). Reference frequencies: scenarios ``plain`` 0.75 / ``wide`` 0.18 / ``noisy`` 0.07, skills
``chain`` 0.80 / ``cross_tier`` 0.15 / ``consume`` 0.05 (the reference train graphs have 3-4 base elements,
cross-tier probability at most 0.1, no noise and unlimited materials; the rarer values are the hard eval's;
the numbers are declared, not fitted). Seeds are 3-4 tiers of plain chains, the reference train depth, with
the target on the top tier.
"""

from __future__ import annotations

from typing import Sequence

from codjax.envs.base import TaskEnv
from codjax.evolve.base import EnvPoint, Pair, Parameterisation
from codjax.evolve.registry import register


@register
class AlchemyParams(Parameterisation):
  """Pairs = tiers of the recipe chain (module docstring)."""

  name = "alchemy_random"
  env_name = "alchemy_random"
  scenario_freq = {"plain": 0.75, "wide": 0.18, "noisy": 0.07}
  skill_freq = {"chain": 0.80, "cross_tier": 0.15, "consume": 0.05}
  min_pairs = 2
  max_pairs = 8
  oracle_episodes = 1

  def env_params(self, point: EnvPoint) -> dict:
    pairs = self.checked_pairs(point)
    n = len(pairs)
    wide = sum(p.scenario == "wide" for p in pairs)
    noisy = sum(p.scenario == "noisy" for p in pairs)
    cross = sum(p.skill == "cross_tier" for p in pairs)
    consume = any(p.skill == "consume" for p in pairs)
    noise = round(min(2.0, 0.25 * noisy), 4)
    cross_p = round(min(0.9, 0.3 * cross), 4)
    return dict(
        preset="easy",
        min_num_tiers=n + 1, max_num_tiers=n + 1, min_target_tier=n,
        min_base_elements=3 + wide, max_base_elements=4 + wide,
        tier_shrink_min=round(min(0.9, 0.4 + 0.1 * wide), 4), tier_shrink_max=round(min(0.95, 0.6 + 0.1 * wide), 4),
        min_noise_node_ratio=noise, max_noise_node_ratio=noise,
        min_cross_tier_prob=cross_p, max_cross_tier_prob=cross_p, max_tier_gap=1 + min(cross, 3),
        material_mode="limited" if consume else "unlimited",
        max_rounds=4 + 3 * n + 5 * wide + 2 * noisy + 3 * cross + (6 if consume else 0),
    )

  def seed_pairs(self, index: int) -> tuple[Pair, ...]:
    return (Pair("plain", "chain"),) * 3

  def constant_action(self) -> str:
    return "<answer>water + fire</answer>"

  def answer_strings(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    from codjax.envs.alchemy.env import solution_recipes

    del point
    out: list[str] = []
    for task in tasks:
      chosen = solution_recipes(task.inst.graph)
      stack, seen = [task.inst.target], set()
      while stack:
        e = stack.pop()
        if e in chosen and e not in seen:
          seen.add(e)
          a, b = chosen[e]
          out += [f"{a} + {b} = {e}", f"{a}+{b}={e}", f"{a} + {b} -> {e}"]
          stack += [a, b]
    return out

  def quality_problems(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    from codjax.envs.alchemy.env import rounds_needed, solution_recipes

    params = self.env_params(point)
    problems = []
    for i, task in enumerate(tasks):
      inst = task.inst
      tier = inst.graph.tier_of().get(inst.target, -1)
      if tier < params["min_target_tier"]:
        problems.append(f"task {i}: target {inst.target!r} at tier {tier}, below the {params['min_target_tier']} "
                        "tiers of the pairs")
      chosen = solution_recipes(inst.graph)
      if inst.target not in chosen:
        problems.append(f"task {i}: target {inst.target!r} has no reachable recipe")
        continue
      need = rounds_needed(inst.target, chosen, params["material_mode"] == "limited")
      if need > params["max_rounds"]:
        problems.append(f"task {i}: the solution needs {need} rounds, more than the {params['max_rounds']} allowed")
    return problems
