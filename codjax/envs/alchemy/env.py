"""Alchemy-Random: synthesize a target element from a hidden, pack-shared recipe graph (CoD paper Sec. 3.2.1).

The generator follows shiweijiezero/Trinity-RFT ``trinity/common/workflows/connect_the_dots/alchemy/random_graph.py``
and ``env.py`` (the fork that holds Trinity-RFT's Alchemy code; docs/methods/cod.md).

Graph (``scope="per_pack"``: drawn from ``random.Random(pack_seed)``, shared by the pack). Draw the number of
tiers, the base-tier size, the shrink factor, the cross-tier probability and the noise ratio; tier sizes are
``s_0 = base``, ``s_t = max(1, round(s_{t-1} * shrink))``; names are unique random lowercase strings of length
3-5. Each element of tier t >= 1 gets ``randint(min_recipes, max_recipes)`` recipes: input1 from tier t-1,
input2 from tier t-1, or with probability ``cross_tier_prob`` (t >= 2) from a tier in
``[max(0, t - max_tier_gap), t - 2]`` (empty when the gap is 1, then tier t-1); a recipe is the sorted pair and
a pair already used is redrawn up to 50 times, then skipped. ``noise_chain_depth`` rounds add
``round(size_t * noise_ratio)`` dead-end elements per tier t >= 1 (halved after the first round), one recipe each.
Targets: the non-noise elements of tiers >= 1 that are *reachable* (every element of their solution has a
recipe) within the round limit; ``num_tasks`` draws pick a tier with weight (tier + 1) among non-exhausted tiers
and an element of it without replacement; the list is shuffled and task i gets ``targets[i mod len]``. (The
published generator draws from all non-noise elements; restricting to solvable ones is codjax's choice so every
task can be won.) ``min_target_tier`` (default 1, as published) keeps only targets of that tier or above
(codjax's recipe-depth handle for environment evolution, docs/methods/environment_evolution.md); a pack without
any target raises ValueError. A task seed that
already occurred earlier in the pack reuses that position's target, so Ralph packs (one seed S times) repeat
one task.

Solution and inventory: each element's solution uses its first recipe whose inputs are reachable. Unlimited
mode starts with one of each tier-0 element and needs one round per distinct crafted element; limited mode
needs one round per craft of the fully expanded solution tree (consumed ingredients must be crafted again)
and starts every tier-0 element with ``max(n, int(n * mult + 0.5))`` copies, n the largest base count of the
expanded tree and ``mult ~ U(min_material_mult, max_material_mult)`` from ``random.Random(task_seed)``.

Rounds. The answer ``<answer>A + B</answer>`` must split on ``+`` into exactly two non-empty names, otherwise
the episode ends with the format-error feedback and reward 0. Names match the inventory case-insensitively. An
element that is not held (or, in limited mode, a same-element pair with fewer than two copies) wastes the round.
In limited mode a valid attempt consumes its ingredients whether or not it is a recipe. A recipe adds its result.
The episode ends when the target is held (raw reward 1), at the round limit, or (limited) when fewer than two
copies remain. Reward: ``max(0, 1 - c * rounds / max_rounds)`` on success (c = 0.1), else 0.

Presets (paper Table 2: ``easy``, ``hard``) are in ``presets.py``.
"""

from __future__ import annotations

import dataclasses
import random
import string
from collections import Counter
from typing import Any, Sequence

from codjax.envs.alchemy.presets import PRESETS
from codjax.envs.base import EnvFamily, StepResult, TaskEnv
from codjax.envs.cod_protocol import extract_answer
from codjax.envs.helpers import check_int, config_from_preset, first_positions, pack_args
from codjax.envs.registry import register

PARSE_ERROR_FEEDBACK = ("Invalid format: could not parse combination. Expected format: {your reasoning process "
                        "here}<answer>Element1 + Element2</answer>. Game over.")


@dataclasses.dataclass(frozen=True)
class AlchemyConfig:
  """Validated parameters of an Alchemy-Random family (module docstring)."""

  min_num_tiers: int = 3
  max_num_tiers: int = 4
  min_base_elements: int = 3
  max_base_elements: int = 4
  tier_shrink_min: float = 0.4
  tier_shrink_max: float = 0.6
  min_recipes_per_element: int = 1
  max_recipes_per_element: int = 1
  max_tier_gap: int = 1
  min_cross_tier_prob: float = 0.0
  max_cross_tier_prob: float = 0.1
  min_noise_node_ratio: float = 0.0
  max_noise_node_ratio: float = 0.0
  noise_chain_depth: int = 2
  max_rounds: int = 8
  material_mode: str = "unlimited"
  min_material_mult: float = 1.5
  max_material_mult: float = 2.0
  scope: str = "per_pack"
  show_tiers: bool = True
  length_penalty_coef: float = 0.1
  min_target_tier: int = 1

  def __post_init__(self):
    check_int("min_num_tiers", self.min_num_tiers, 2)
    check_int("max_num_tiers", self.max_num_tiers, self.min_num_tiers)
    check_int("min_base_elements", self.min_base_elements, 1)
    check_int("max_base_elements", self.max_base_elements, self.min_base_elements)
    if self.max_num_tiers > 12 or self.max_base_elements > 64:
      raise ValueError("max_num_tiers must be <= 12 and max_base_elements <= 64")
    check_int("min_recipes_per_element", self.min_recipes_per_element, 1)
    check_int("max_recipes_per_element", self.max_recipes_per_element, self.min_recipes_per_element)
    check_int("max_tier_gap", self.max_tier_gap, 1)
    check_int("noise_chain_depth", self.noise_chain_depth, 0)
    check_int("max_rounds", self.max_rounds, 1)
    for lo, hi, low_bound, high_bound in (("tier_shrink_min", "tier_shrink_max", 0.0, 1.0),
                                          ("min_cross_tier_prob", "max_cross_tier_prob", 0.0, 1.0),
                                          ("min_noise_node_ratio", "max_noise_node_ratio", 0.0, 2.0),
                                          ("min_material_mult", "max_material_mult", 1.0, 10.0)):
      a, b = getattr(self, lo), getattr(self, hi)
      for name, v in ((lo, a), (hi, b)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not low_bound <= v <= high_bound:
          raise ValueError(f"{name} must be a number in [{low_bound}, {high_bound}], got {v!r}")
      if b < a:
        raise ValueError(f"{hi} ({b}) must be >= {lo} ({a})")
    if self.material_mode not in ("unlimited", "limited"):
      raise ValueError(f"material_mode must be 'unlimited' or 'limited', got {self.material_mode!r}")
    if self.scope not in ("per_pack", "per_task"):
      raise ValueError(f"scope must be 'per_pack' or 'per_task', got {self.scope!r}")
    if not isinstance(self.show_tiers, bool):
      raise ValueError(f"show_tiers must be a bool, got {self.show_tiers!r}")
    c = self.length_penalty_coef
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 <= c <= 1.0:
      raise ValueError(f"length_penalty_coef must be a number in [0, 1], got {c!r}")
    check_int("min_target_tier", self.min_target_tier, 1, self.max_num_tiers - 1)


# --------------------------------------------------------------------------------------------- graph


@dataclasses.dataclass(frozen=True)
class Graph:
  """A recipe DAG: tiers (noise included, in creation order), recipes (sorted pair -> result), noise set."""

  tiers: tuple[tuple[str, ...], ...]
  recipes: dict[tuple[str, str], str]
  noise: frozenset[str]

  def tier_of(self) -> dict[str, int]:
    return {e: t for t, elems in enumerate(self.tiers) for e in elems}


def _new_name(rng: random.Random, taken: set[str]) -> str:
  while True:
    name = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 5)))
    if name not in taken:
      taken.add(name)
      return name


def _draw_recipe(rng: random.Random, tier: int, tiers: list[list[str]], gap: int, cross_prob: float,
                 used: set) -> tuple[str, str] | None:
  for _ in range(50):
    a = rng.choice(tiers[tier - 1])
    if rng.random() < cross_prob and tier >= 2:
      lo, hi = max(0, tier - gap), tier - 2
      b = rng.choice(tiers[rng.randint(lo, hi)]) if lo <= hi else rng.choice(tiers[tier - 1])
    else:
      b = rng.choice(tiers[tier - 1])
    key = tuple(sorted((a, b)))
    if key not in used:
      return key
  return None


def generate_graph(rng: random.Random, cfg: AlchemyConfig) -> Graph:
  """Draws the hyper-parameters and the DAG from ``rng`` in the published generator's order (module docstring)."""
  num_tiers = rng.randint(cfg.min_num_tiers, cfg.max_num_tiers)
  base = rng.randint(cfg.min_base_elements, cfg.max_base_elements)
  shrink = rng.uniform(cfg.tier_shrink_min, cfg.tier_shrink_max)
  cross_prob = rng.uniform(cfg.min_cross_tier_prob, cfg.max_cross_tier_prob)
  noise_ratio = rng.uniform(cfg.min_noise_node_ratio, cfg.max_noise_node_ratio)
  sizes = [base]
  for _ in range(1, num_tiers):
    sizes.append(max(1, round(sizes[-1] * shrink)))
  taken: set[str] = set()
  tiers = [[_new_name(rng, taken) for _ in range(s)] for s in sizes]
  recipes: dict[tuple[str, str], str] = {}
  for t in range(1, num_tiers):
    for elem in tiers[t]:
      for _ in range(rng.randint(cfg.min_recipes_per_element, cfg.max_recipes_per_element)):
        key = _draw_recipe(rng, t, tiers, cfg.max_tier_gap, cross_prob, set(recipes))
        if key is not None:
          recipes[key] = elem
  noise: set[str] = set()
  if noise_ratio > 0:
    for depth in range(cfg.noise_chain_depth):
      added: dict[int, list[str]] = {}
      for t in range(1, num_tiers):
        n = max(0, round(sizes[t] * noise_ratio))
        if depth > 0:
          n = max(0, round(n * 0.5))
        for _ in range(n):
          name = _new_name(rng, taken)
          key = _draw_recipe(rng, t, tiers, cfg.max_tier_gap, cross_prob, set(recipes))
          if key is not None:
            recipes[key] = name
            added.setdefault(t, []).append(name)
            noise.add(name)
      for t, names in added.items():
        tiers[t].extend(names)
  return Graph(tiers=tuple(tuple(t) for t in tiers), recipes=recipes, noise=frozenset(noise))


def solution_recipes(graph: Graph) -> dict[str, tuple[str, str]]:
  """For every reachable crafted element, the first recipe whose inputs are reachable (tier order)."""
  reachable = set(graph.tiers[0])
  chosen: dict[str, tuple[str, str]] = {}
  by_result: dict[str, list[tuple[str, str]]] = {}
  for key, res in graph.recipes.items():
    by_result.setdefault(res, []).append(key)
  for tier in graph.tiers[1:]:
    for elem in tier:
      for a, b in by_result.get(elem, []):
        if a in reachable and b in reachable:
          chosen[elem] = (a, b)
          reachable.add(elem)
          break
  return chosen


def rounds_needed(target: str, chosen: dict[str, tuple[str, str]], limited: bool) -> int:
  """Rounds of the solution: distinct crafts (unlimited) or crafts of the expanded tree (limited)."""
  if limited:
    memo: dict[str, int] = {}

    def count(e: str) -> int:
      if e not in chosen:
        return 0
      if e not in memo:
        a, b = chosen[e]
        memo[e] = 1 + count(a) + count(b)
      return memo[e]

    return count(target)
  seen: set[str] = set()
  stack = [target]
  while stack:
    e = stack.pop()
    if e in chosen and e not in seen:
      seen.add(e)
      stack.extend(chosen[e])
  return len(seen)


def base_needs(target: str, chosen: dict[str, tuple[str, str]]) -> Counter:
  """Tier-0 copies consumed by the fully expanded solution tree."""
  need: Counter = Counter()
  stack = [target]
  while stack:
    e = stack.pop()
    if e in chosen:
      stack.extend(chosen[e])
    else:
      need[e] += 1
  return need


def valid_targets(graph: Graph, cfg: AlchemyConfig) -> dict[int, list[str]]:
  """Non-noise reachable elements of tiers >= 1 solvable within the round limit, by tier."""
  chosen = solution_recipes(graph)
  limited = cfg.material_mode == "limited"
  out: dict[int, list[str]] = {}
  for t, elems in enumerate(graph.tiers):
    if t < cfg.min_target_tier:
      continue
    ok = [e for e in elems if e not in graph.noise and e in chosen
          and rounds_needed(e, chosen, limited) <= cfg.max_rounds]
    if ok:
      out[t] = ok
  return out


def select_targets(rng: random.Random, groups: dict[int, list[str]], num_tasks: int) -> list[str]:
  """Tier-weighted (weight tier + 1) draws without replacement, then shuffled (the published order)."""
  avail = {t: list(v) for t, v in groups.items()}
  out: list[str] = []
  for _ in range(num_tasks):
    active = {t: v for t, v in avail.items() if v}
    if not active:
      break
    tiers = list(active)
    tier = rng.choices(tiers, weights=[t + 1 for t in tiers], k=1)[0]
    elem = rng.choice(active[tier])
    avail[tier].remove(elem)
    out.append(elem)
  rng.shuffle(out)
  return out


@dataclasses.dataclass(frozen=True)
class AlchemyInstance:
  graph: Graph
  target: str
  inventory: tuple[tuple[str, int], ...]  # starting (element, copies), insertion order


def build_instance(graph: Graph, target: str, task_seed: int, cfg: AlchemyConfig) -> AlchemyInstance:
  if cfg.material_mode == "unlimited":
    inv = tuple((e, 1) for e in graph.tiers[0])
  else:
    need = max(base_needs(target, solution_recipes(graph)).values(), default=1)
    mult = random.Random(task_seed).uniform(cfg.min_material_mult, cfg.max_material_mult)
    copies = max(need, int(need * mult + 0.5))
    inv = tuple((e, copies) for e in graph.tiers[0])
  return AlchemyInstance(graph=graph, target=target, inventory=inv)


# --------------------------------------------------------------------------------------------- text


def system_prompt(cfg: AlchemyConfig, inst: AlchemyInstance) -> str:
  t = inst.target
  if cfg.material_mode == "unlimited":
    materials = ("- **Nothing is used up**: combining never removes elements from your inventory, whether it "
                 "works or not, and every element you create stays in your inventory.")
    ending = "- **End**: the game stops when you succeed or when the round limit is reached."
  else:
    materials = ("- **Materials are used up**: every valid attempt removes its two inputs from your inventory "
                 "(one copy each, or two copies when both inputs are the same element), whether it works or not. "
                 "A created element adds one copy.")
    ending = ("- **End**: the game stops when you succeed, when the round limit is reached, or when you cannot "
              "form any pair any more.")
  parts = [
      f'You are in an Alchemy crafting world. Your goal is to create the target element "{t}" by combining '
      "elements from your inventory.",
      "## How it works\nThere is a fixed, hidden set of recipes. Each recipe takes exactly two input elements "
      "(the same element twice is allowed, and the inputs may come from different tiers) and produces one output "
      "element.\n\n"
      "- **Combining**: each round, pick two elements from your inventory. If the pair is a recipe, its output "
      "joins your inventory; otherwise nothing is created.\n"
      "- **Tiers**: every element has a tier, and a recipe's output always has a higher tier than both inputs.\n"
      f"{materials}\n"
      f'- **Win**: you win as soon as "{t}" is in your inventory.\n'
      f"{ending}\n"
      "- The element names are random and mean nothing; do not guess recipes from them.",
      "## Hidden clue\nThe recipes (which pairs combine and which do not) are unknown at first. Discover them by "
      "experimenting, or use any hints you are given.",
  ]
  if cfg.show_tiers:
    tier_of = inst.graph.tier_of()
    lines = [f"- tier {k}: {', '.join(elems)}" for k, elems in enumerate(inst.graph.tiers)]
    lines.append(f"\nThe target element '{t}' is at tier {tier_of[t]}.")
    parts.append("## Element tiers\n" + "\n".join(lines))
  parts.append(
      "## How to answer\nThink briefly about which pair to try this round, then end with your choice:\n\n"
      "[THINKING]\n<answer>Element1 + Element2</answer>\n\n"
      "where Element1 and Element2 are in your inventory (they may be the same element).\n\n"
      "Further requirements:\n- Keep the reasoning short.\n- Make exactly one combination per round.\n"
      "- Your rounds are limited: aim for a short route to the target, reuse recipes you know and skip pairs "
      "known to fail.\n- Trade off exploring and exploiting: what you learn here can help with later tasks in "
      "this environment.")
  return "\n\n".join(parts)


# --------------------------------------------------------------------------------------------- env


class AlchemyTask(TaskEnv):
  """One Alchemy-Random task (single use)."""

  def __init__(self, cfg: AlchemyConfig, inst: AlchemyInstance):
    self.cfg = cfg
    self.inst = inst
    self.max_turns = cfg.max_rounds
    self.inventory: dict[str, int] = dict(inst.inventory)
    self._round = 0
    self._done = False
    self._feedback_line: str | None = None
    self._last_feedback = ""

  @property
  def limited(self) -> bool:
    return self.cfg.material_mode == "limited"

  def reset(self) -> tuple[str, str]:
    return system_prompt(self.cfg, self.inst), self._observation()

  def _observation(self) -> str:
    parts = [f"Round {self._round + 1}/{self.cfg.max_rounds}"]
    if self._feedback_line:
      parts.append(self._feedback_line)
    if self.limited:
      inv = "\n".join(f"- {e} x{n}" for e, n in self.inventory.items())
      inv_block = f"Inventory ({sum(self.inventory.values())} total copies):\n{inv}"
    else:
      inv_block = "Available elements in your inventory:\n" + "\n".join(f"- {e}" for e in self.inventory)
    parts.append(f"Target: {self.inst.target}\n{inv_block}")
    parts.append("Choose two elements available in your inventory to combine.")
    return "\n\n".join(parts)

  def _feasible(self) -> bool:
    return sum(self.inventory.values()) >= 2

  def step(self, action_text: str) -> StepResult:
    if self._done:
      return StepResult("", 0.0, True, {"feedback": self._last_feedback, "format_error": False, "raw_reward": 0.0})
    self._round += 1
    pair = _parse_pair(action_text if isinstance(action_text, str) else "")
    if pair is None:
      return self._finish(PARSE_ERROR_FEEDBACK, raw=0.0, format_error=True)
    lower = {e.lower(): e for e in self.inventory}
    a, b = (lower.get(x.lower(), x) for x in pair)
    self._feedback_line = self._apply(a, b)
    target = self.inst.target
    if target in self.inventory:
      return self._finish(f"Success! Synthesized {target}.", raw=1.0)
    if self.limited and not self._feasible():
      return self._finish(f"Failed: Ran out of materials. Could not synthesize {target}. Used {self._round} rounds.",
                          raw=0.0)
    if self._round >= self.cfg.max_rounds:
      return self._finish(f"Failed: Ran out of rounds ({self._round}/{self.cfg.max_rounds}). Could not synthesize "
                          f"{target}.", raw=0.0)
    self._last_feedback = self._feedback_line
    return StepResult(self._observation(), 0.0, False,
                      {"feedback": self._feedback_line, "format_error": False, "raw_reward": 0.0})

  def _apply(self, a: str, b: str) -> str:
    """Executes one combination; returns its feedback line."""
    inv = self.inventory
    missing = [_clip(x) for x in dict.fromkeys((a, b)) if x not in inv]
    if len(missing) == 2:
      return f"'{missing[0]}' and '{missing[1]}' are not in your inventory."
    if missing:
      return f"'{missing[0]}' is not in your inventory."
    if self.limited and a == b and inv[a] < 2:
      return f"Not enough '{a}' (need 2, have {inv[a]})."
    if self.limited:
      for x in (a, b):
        inv[x] -= 1
        if inv[x] == 0:
          del inv[x]
    result = self.inst.graph.recipes.get(tuple(sorted((a.lower(), b.lower()))))
    if result is not None:
      inv[result] = inv.get(result, 0) + 1 if self.limited else 1
      return f"You combined {a} + {b} and created: {result}!"
    return f"{a} + {b} — nothing happened." + (" Materials consumed." if self.limited else "")

  def _finish(self, feedback: str, raw: float, format_error: bool = False) -> StepResult:
    self._done = True
    self._last_feedback = feedback
    reward = max(0.0, raw - self.cfg.length_penalty_coef * self._round / self.cfg.max_rounds) if raw > 0 else 0.0
    return StepResult(feedback, reward, True, {"feedback": feedback, "format_error": format_error,
                                               "raw_reward": raw, "rounds": self._round})


def _clip(name: str, limit: int = 40) -> str:
  """Echoed names are clipped so hostile answers cannot blow up the observation."""
  return name if len(name) <= limit else name[:limit] + "..."


def _parse_pair(text: str) -> tuple[str, str] | None:
  ans = extract_answer(text)
  if ans is None:
    return None
  parts = ans.strip().split("+")
  if len(parts) != 2:
    return None
  a, b = parts[0].strip(), parts[1].strip()
  return (a, b) if a and b else None


class AlchemyFamily(EnvFamily):
  """Alchemy-Random with fixed parameters; a pack shares its recipe graph and target list."""

  name = "alchemy_random"

  def __init__(self, cfg: AlchemyConfig):
    self.cfg = cfg

  def pack_graph(self, pack_seed: int, num_tasks: int) -> tuple[Graph, list[str]]:
    """The pack's hidden graph and its ordered target list (pure function of the seed)."""
    rng = random.Random(pack_seed)
    graph = generate_graph(rng, self.cfg)
    targets = select_targets(rng, valid_targets(graph, self.cfg), num_tasks)
    if not targets:
      raise ValueError(f"pack seed {pack_seed}: no reachable target at tier >= {self.cfg.min_target_tier} "
                       f"within {self.cfg.max_rounds} rounds")
    return graph, targets

  def _task_graph(self, task_seed: int) -> tuple[Graph, str]:
    """per_task scope: a graph per task, target drawn from the highest tier that has a valid target."""
    rng = random.Random(task_seed)
    graph = generate_graph(rng, self.cfg)
    groups = valid_targets(graph, self.cfg)
    if not groups:
      raise ValueError(f"task seed {task_seed}: no reachable target at tier >= {self.cfg.min_target_tier} "
                       f"within {self.cfg.max_rounds} rounds")
    return graph, rng.choice(groups[max(groups)])

  def sample_pack(self, pack_seed: int, num_tasks: int, task_seeds: Sequence[int] | None = None) -> list[TaskEnv]:
    pack_seed, seeds = pack_args(pack_seed, num_tasks, task_seeds)
    tasks: list[TaskEnv] = []
    if self.cfg.scope == "per_pack":
      graph, targets = self.pack_graph(pack_seed, num_tasks)
      for s, idx in zip(seeds, first_positions(seeds)):  # a repeated seed (Ralph) repeats its first target
        tasks.append(AlchemyTask(self.cfg, build_instance(graph, targets[idx % len(targets)], s, self.cfg)))
    else:
      for s in seeds:
        graph, target = self._task_graph(s)
        tasks.append(AlchemyTask(self.cfg, build_instance(graph, target, s, self.cfg)))
    return tasks


def build_config(preset: str = "easy", **overrides: Any) -> AlchemyConfig:
  """The named preset (presets.py) with field overrides."""
  return config_from_preset(AlchemyConfig, PRESETS, preset, overrides, env="alchemy_random")


@register("alchemy_random")
def make_alchemy(preset: str = "easy", **overrides: Any) -> AlchemyFamily:
  return AlchemyFamily(build_config(preset, **overrides))
