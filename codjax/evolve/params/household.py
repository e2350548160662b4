"""The household environment alfworld_synth as an evolvable environment; the parameterisation is codjax's
choice (docs/methods/environment_evolution.md).

A point's pairs are the house's subgoal slots: pair t is a room type (scenario) and one of ALFWorld's six task
families (skill) that room hosts. The pairs set the constructor of ``codjax.envs.make("alfworld_synth", ...)``:

* scenario novelty: ``rooms`` = the room types of the pairs (the house is a scene of one of them; a rarer room
  brings another receptacle set and other objects);
* skill rarity: ``families`` = the families of the pairs (each task's goal is drawn among them): rarer
  procedures (look at an object under a lamp, heat, cool, clean) replace the plain pick-and-place;
* length: L = number of pairs; the house has ``4 + 2L`` to ``6 + 2L`` receptacles and ``L // 2`` to ``L``
  distractor objects, so the searching expert opens more receptacles before it finds the goal object;
  ``max_turns`` stays at the reference 70.

Reference frequencies: p(family) from ALFWorld's training games per family (pick_and_place 790, look 308,
clean 650, heat 459, cool 533, pick_two 813); p(family | room) is that count renormalised over the families
the room allows (``GOALS_VALID``; zero elsewhere: such pairs are incompatible), so in a kitchen heating is the
rarest procedure; p(room) sums each family's count split evenly over the rooms it is valid in, so kitchens
are common and living rooms and bedrooms rare. The answer that must not leak is where the goal objects are
(the certified plan's ``take`` commands). Seeds are four slots: a room (cycling over the four) with
pick-and-place twice and two more families that room hosts, an ALFWorld-sized house (12-14 receptacles).
"""

from __future__ import annotations

from typing import Sequence

from codjax.envs.base import TaskEnv
from codjax.evolve.base import EnvPoint, Pair, Parameterisation
from codjax.evolve.registry import register

FAMILY_GAMES = {"pick_and_place_simple": 790, "look_at_obj_in_light": 308, "pick_clean_then_place_in_recep": 650,
                "pick_heat_then_place_in_recep": 459, "pick_cool_then_place_in_recep": 533,
                "pick_two_obj_and_place": 813}
# rooms each family is valid in (ALFWorld's GOALS_VALID, as codjax.envs.household.vocab reads it)
FAMILY_ROOMS = {"pick_and_place_simple": ("Kitchen", "LivingRoom", "Bedroom", "Bathroom"),
                "look_at_obj_in_light": ("LivingRoom", "Bedroom"),
                "pick_clean_then_place_in_recep": ("Kitchen", "Bathroom"),
                "pick_heat_then_place_in_recep": ("Kitchen",),
                "pick_cool_then_place_in_recep": ("Kitchen",),
                "pick_two_obj_and_place": ("Kitchen", "LivingRoom", "Bedroom", "Bathroom")}
ROOMS = ("Kitchen", "LivingRoom", "Bedroom", "Bathroom")


def _share(family: str, room: str) -> float:
  return FAMILY_GAMES[family] / len(FAMILY_ROOMS[family]) if room in FAMILY_ROOMS[family] else 0.0


@register
class HouseholdParams(Parameterisation):
  """Pairs = (room type, task family) subgoal slots (module docstring)."""

  name = "alfworld_synth"
  env_name = "alfworld_synth"
  scenario_freq = {room: sum(_share(f, room) for f in FAMILY_GAMES) for room in ROOMS}
  skill_freq = dict(FAMILY_GAMES)
  min_pairs = 1
  max_pairs = 12
  oracle_episodes = 1

  def skill_prob(self, skill: str, scenario: str) -> float:
    if skill not in FAMILY_GAMES:
      raise ValueError(f"unknown skill {skill!r}; known: {sorted(FAMILY_GAMES)}")
    if scenario not in self.scenario_freq:
      raise ValueError(f"unknown scenario {scenario!r}; known: {sorted(self.scenario_freq)}")
    allowed = [f for f in FAMILY_GAMES if scenario in FAMILY_ROOMS[f]]
    if skill not in allowed:
      return 0.0
    return FAMILY_GAMES[skill] / sum(FAMILY_GAMES[f] for f in allowed)

  def compatible(self, pairs: Sequence[Pair]) -> bool:
    return super().compatible(pairs) and all(_share(p.skill, p.scenario) > 0 for p in pairs)

  def env_params(self, point: EnvPoint) -> dict:
    pairs = self.checked_pairs(point)
    n = len(pairs)
    rooms = {p.scenario for p in pairs}
    fams = {p.skill for p in pairs}
    return dict(
        preset="train",
        rooms=tuple(r for r in ROOMS if r in rooms),
        families=tuple(f for f in FAMILY_GAMES if f in fams),
        min_receptacles=4 + 2 * n, max_receptacles=6 + 2 * n,
        min_distractors=n // 2, max_distractors=n,
        max_turns=70,
    )

  def tasks(self, point: EnvPoint, num_tasks: int = 1) -> list[TaskEnv]:
    try:
      return super().tasks(point, num_tasks)
    except RuntimeError as e:  # the generator found no feasible house or goal: a bad point, not a crash
      raise ValueError(str(e)) from e

  def seed_pairs(self, index: int) -> tuple[Pair, ...]:
    room = ROOMS[int(index) % len(ROOMS)]
    others = [f for f in FAMILY_GAMES if f != "pick_and_place_simple" and room in FAMILY_ROOMS[f]]
    k = int(index) // len(ROOMS)
    extra = (others[k % len(others)], others[(k + 1) % len(others)])
    return tuple(Pair(room, f) for f in ("pick_and_place_simple", extra[0], "pick_and_place_simple", extra[1]))

  def constant_action(self) -> str:
    return "<action>look</action>"

  def answer_strings(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    del point
    return [cmd for task in tasks for cmd in task.plan() if cmd.startswith("take ")]

  def quality_problems(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    params = self.env_params(point)
    problems = []
    for i, task in enumerate(tasks):
      prob = task.problem
      plan = task.plan()
      if not plan or len(plan) > task.max_turns:
        problems.append(f"task {i}: no certified plan within {task.max_turns} turns")
      if prob.room not in params["rooms"]:
        problems.append(f"task {i}: house is a {prob.room}, not one of the pairs' rooms {list(params['rooms'])}")
      if prob.goal.family not in params["families"]:
        problems.append(f"task {i}: goal family {prob.goal.family} is not one of the pairs' families")
      if not params["min_receptacles"] <= len(prob.receptacles) <= params["max_receptacles"]:
        problems.append(f"task {i}: {len(prob.receptacles)} receptacles, expected "
                        f"{params['min_receptacles']}..{params['max_receptacles']}")
    return problems
