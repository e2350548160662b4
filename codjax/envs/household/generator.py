"""Procedural household problems: a house per pack, a goal per task (docs/methods/evoharness.md).

Every problem is a pure function of ``(config, pack_seed, task_seed)`` (``random.Random`` streams seeded with
``base.derive_seed``; no global state).

Layouts. A layout is one shipped THOR scene (``FloorPlan<N>``; vocab.py): its room type (``SCENE_TYPE``), the
receptacle classes present in it and their instance counts (``-openable.json``; one instance when unlisted).
The layout is cut to ``n`` receptacles, ``n`` drawn from ``[min_receptacles, max_receptacles]`` with the
scene's own seed (a scene smaller than that keeps its size, a smaller one than ``min_receptacles`` is grown
with extra cabinets/drawers/shelves/countertops/sidetables): the class with the most instances loses one
first, then whole classes go, never the essential ones (microwave, fridge, sinkbasin, and one surface -- a lamp
surface in a scene with lamps). Instances are numbered per class ("cabinet 1..k"); openable classes come from
``OPENABLE_CLASS_LIST``.

Houses (one per pack, from ``pack_seed`` and the split). A lead family is drawn among the configured ones,
then a scene of the split whose room allows it (``GOALS_VALID``; the appliance, or a lamp for look, present);
for each configured family the room allows an *anchor* object class with the
needed capability is placed (1-2 instances, 2-3 for pick_two), then ``[min_distractors, max_distractors]``
more instances of the scene's object classes (at most 3 per class, ``MAX_NUM_OF_OBJ_INSTANCES``) and one
lamp of each lamp class of the scene on a lamp surface. Each instance goes to a receptacle whose class may
hold it (``VAL_RECEPTACLE_OBJECTS``). Houses without a feasible goal are redrawn.

``rooms`` (default None: all four) restricts houses to scenes of those room types (environment evolution's
scenario-novelty direction, Environment Evolution paper (arXiv 2609.04128), Sec. 3, as codjax applies it to
generated environments: docs/methods/environment_evolution.md); a lead family no given room allows draws the
house again.

Goals (one per task, from ``task_seed``). A family is drawn among the configured ones feasible in the house,
with weight 1 / (number of room types that allow it): with the lead-family room draw this makes the six
families about equally frequent overall (each 1/6 when all are configured). Then a goal is drawn among the
family's feasible (object class, receptacle class) or (object class, lamp class) pairs: the receptacle class
is present and may hold the object class, no instance of the object class starts in a receptacle of that
class (the goal is not already met), heat/cool/clean need the object capability and a
microwave/fridge/sinkbasin, pick_two needs two instances, look a lamp. The sentence is one of ALFWorld's
templates for the family (``goal_library``), filled with lower-case class names, plus a period. The planner
(planner.py) then certifies the problem within ``max_turns``; a problem it cannot solve is resampled.

Splits (the held-out rule):

* scenes: in each room type's 30 scenes, the scenes whose index in the range is 5 mod 6 (e.g. FloorPlan6, 12,
  ..., 30, 206, ...) are *unseen*; ``train`` and ``valid_seen`` draw from the other scenes, ``valid_unseen``
  only from the unseen ones;
* goal pairs: a pair is *unseen* when the first 8 bytes of sha256("<Object>|<Receptacle or Lamp>") are
  0 mod 5 (about 20 %); ``train`` and ``valid_seen`` use only seen pairs, ``valid_unseen`` only unseen ones;
* ``valid_seen`` reuses train's scenes and pairs with fresh instances: houses are drawn with a split salt, so
  the same pack seed gives another house in each split.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
from typing import Any, Sequence

from codjax.envs.base import derive_seed
from codjax.envs.helpers import check_int
from codjax.envs.household.planner import plan as make_plan
from codjax.envs.household.problem import Goal, Item, Problem, Receptacle
from codjax.envs.household.vocab import APPLIANCE, FAMILIES, ROOMS, SceneInfo, display_name, list_key, vocabulary

SPLITS = ("train", "valid_seen", "valid_unseen")
_SPLIT_SALT = {"train": 0, "valid_seen": 1, "valid_unseen": 2}
_HOUSE_SALT, _LAYOUT_SALT, _TASK_SALT = 7331, 7411, 7507
MAX_INSTANCES = 3
SURFACES = ("CounterTop", "DiningTable", "Desk", "SideTable", "Dresser", "CoffeeTable", "Shelf", "Bed", "Sofa",
            "ArmChair", "Toilet", "Cart")
LAMP_SURFACES = ("Desk", "SideTable", "Dresser", "CoffeeTable", "DiningTable", "Shelf", "TVStand", "CounterTop")
GROWABLE = ("Cabinet", "Drawer", "Shelf", "CounterTop", "SideTable")
_ATTEMPTS = 200


@dataclasses.dataclass(frozen=True)
class HouseholdConfig:
  """Validated parameters of the household family (module docstring; presets in presets.py)."""

  split: str = "train"
  families: tuple[str, ...] = FAMILIES
  max_turns: int = 70
  min_receptacles: int = 8
  max_receptacles: int = 25
  min_distractors: int = 4
  max_distractors: int = 12
  rooms: tuple[str, ...] | None = None  # None: every room type (the reference); else houses only of these

  def __post_init__(self):
    if self.split not in SPLITS:
      raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")
    fams = self.families
    if isinstance(fams, str) or not isinstance(fams, (tuple, list)):
      raise ValueError(f"families must be a list of family names, got {fams!r}")
    fams = tuple(fams)
    bad = [f for f in fams if f not in FAMILIES]
    if bad or not fams or len(set(fams)) != len(fams):
      raise ValueError(f"families must be a non-empty subset of {FAMILIES} without repeats, got {list(fams)}")
    object.__setattr__(self, "families", fams)
    check_int("max_turns", self.max_turns, 1, 1000)
    check_int("min_receptacles", self.min_receptacles, 4, 60)
    check_int("max_receptacles", self.max_receptacles, self.min_receptacles, 60)
    check_int("min_distractors", self.min_distractors, 0, 60)
    check_int("max_distractors", self.max_distractors, self.min_distractors, 60)
    if self.rooms is not None:
      rooms = self.rooms
      if isinstance(rooms, str) or not isinstance(rooms, (tuple, list)):
        raise ValueError(f"rooms must be None or a list of room types, got {rooms!r}")
      rooms = tuple(rooms)
      if not rooms or any(r not in ROOMS for r in rooms) or len(set(rooms)) != len(rooms):
        raise ValueError(f"rooms must be a non-empty subset of {ROOMS} without repeats, got {list(rooms)}")
      object.__setattr__(self, "rooms", rooms)
      voc = vocabulary()
      if not any(set(rooms) & voc.rooms_for(f) for f in self.families):
        raise ValueError(f"no configured family {list(self.families)} is possible in rooms {list(rooms)}")


@dataclasses.dataclass(frozen=True)
class House:
  """A pack's house: one layout with its objects placed (shared by every task of the pack)."""

  room: str
  scene: int
  receptacles: tuple[Receptacle, ...]
  objects: tuple[Item, ...]


# --------------------------------------------------------------------------------------------- splits


@functools.lru_cache(maxsize=None)
def _room_start(room: str) -> int:
  return min(n for n, s in vocabulary().scenes.items() if s.room == room)


def scene_is_unseen(scene: int) -> bool:
  """The held-out scene rule (module docstring)."""
  return (scene - _room_start(vocabulary().scenes[scene].room)) % 6 == 5


@functools.lru_cache(maxsize=None)
def combo_is_unseen(object_type: str, target_type: str) -> bool:
  """The held-out goal-pair rule (module docstring)."""
  digest = hashlib.sha256(f"{object_type}|{target_type}".encode()).digest()
  return int.from_bytes(digest[:8], "big") % 5 == 0


@functools.lru_cache(maxsize=None)
def split_scenes(split: str) -> tuple[int, ...]:
  """The scenes a split draws its houses from."""
  unseen = split == "valid_unseen"
  return tuple(sorted(n for n in vocabulary().scenes if scene_is_unseen(n) == unseen))


# --------------------------------------------------------------------------------------------- layouts


@functools.lru_cache(maxsize=1024)
def layout(scene: int, min_receptacles: int, max_receptacles: int) -> tuple[tuple[str, int], ...]:
  """(receptacle class, instance count) of a scene cut to the receptacle range (module docstring)."""
  info: SceneInfo = vocabulary().scenes[scene]
  rng = random.Random(derive_seed(_LAYOUT_SALT, scene, min_receptacles, max_receptacles))
  counts = dict(info.instance_counts)
  counts = {t: counts.get(t, 1) for t in info.receptacle_types}
  essential = {t for t in ("Microwave", "Fridge", "SinkBasin") if t in counts}
  surfaces = LAMP_SURFACES if info.lamp_types else SURFACES
  surface = next((t for t in surfaces if t in counts), None) or next((t for t in SURFACES if t in counts), None)
  if surface is not None:
    essential.add(surface)
  natural = sum(counts.values())
  target = max(min_receptacles, min(natural, rng.randint(min_receptacles, max_receptacles)))
  while sum(counts.values()) > target:
    most = max(counts.values())
    if most > 1:
      t = rng.choice(sorted(t for t, k in counts.items() if k == most))
      counts[t] -= 1
    else:
      optional = sorted(set(counts) - essential)
      if not optional:
        break
      del counts[rng.choice(optional)]
  grow = [t for t in GROWABLE if t in counts] or sorted(counts)
  while sum(counts.values()) < target:
    counts[rng.choice(grow)] += 1
  return tuple(sorted(counts.items()))


def _receptacles(scene: int, cfg: HouseholdConfig) -> tuple[Receptacle, ...]:
  voc = vocabulary()
  out = []
  for t, k in layout(scene, cfg.min_receptacles, cfg.max_receptacles):
    out += [Receptacle(name=f"{display_name(t)} {i}", type=t, openable=t in voc.openable) for i in range(1, k + 1)]
  return tuple(sorted(out, key=lambda r: list_key(r.type, r.name)))


# --------------------------------------------------------------------------------------------- houses


def _family_ok_in_room(family: str, scene: SceneInfo, rtypes: set[str]) -> bool:
  voc = vocabulary()
  if scene.room not in voc.rooms_for(family):
    return False
  if family in APPLIANCE:
    return APPLIANCE[family][0] in rtypes
  if family == "look_at_obj_in_light":
    return bool(scene.lamp_types) and any(t in rtypes for t in LAMP_SURFACES)
  return True


def _place(rng: random.Random, types: list[str], recs: tuple[Receptacle, ...], lamp_types: Sequence[str]
           ) -> tuple[Item, ...]:
  """Objects of the given classes (one entry per instance) and one lamp per lamp class, numbered per class."""
  voc = vocabulary()
  placed: list[tuple[str, str]] = []
  for t in types:
    options = [r.name for r in recs if t in voc.can_contain.get(r.type, ())]
    if options:
      placed.append((t, rng.choice(options)))
  for t in lamp_types:
    options = [r.name for r in recs if r.type in LAMP_SURFACES]
    if options:
      placed.append((t, rng.choice(options)))
  by_type: dict[str, list[str]] = {}
  for t, where in placed:
    by_type.setdefault(t, []).append(where)
  items = []
  for t in sorted(by_type):
    spots = by_type[t]
    rng.shuffle(spots)
    flags = voc.flags(t)
    if t in voc.lamp_types:
      flags["pickupable"] = False
    items += [Item(name=f"{display_name(t)} {i}", type=t, location=w, **flags) for i, w in enumerate(spots, 1)]
  return tuple(sorted(items, key=lambda o: list_key(o.type, o.name)))


@functools.lru_cache(maxsize=4096)
def _scene_allows(scene: int, family: str, min_receptacles: int, max_receptacles: int) -> bool:
  rtypes = {t for t, _ in layout(scene, min_receptacles, max_receptacles)}
  return _family_ok_in_room(family, vocabulary().scenes[scene], rtypes)


def _draw_house(cfg: HouseholdConfig, rng: random.Random) -> House | None:
  voc = vocabulary()
  lead = rng.choice(cfg.families)
  scenes = [n for n in split_scenes(cfg.split) if _scene_allows(n, lead, cfg.min_receptacles, cfg.max_receptacles)
            and (cfg.rooms is None or voc.scenes[n].room in cfg.rooms)]
  if not scenes:
    return None
  info = voc.scenes[rng.choice(scenes)]
  recs = _receptacles(info.number, cfg)
  rtypes = {r.type for r in recs}
  holdable = sorted(t for t in (info.object_types or sorted(voc.object_types))
                    if any(t in voc.can_contain.get(r, ()) for r in rtypes))
  if not holdable:
    return None
  types: list[str] = []
  for fam in cfg.families:
    if not _family_ok_in_room(fam, info, rtypes):
      continue
    cap = APPLIANCE[fam][1] if fam in APPLIANCE else None
    pool = [t for t in holdable if cap is None or t in voc.capabilities[cap]]
    if not pool:
      continue
    anchor = rng.choice(pool)
    low, high = (2, 3) if fam == "pick_two_obj_and_place" else (1, 2)
    have = types.count(anchor)
    types += [anchor] * max(0, min(MAX_INSTANCES, rng.randint(low, high)) - have)
  for _ in range(rng.randint(cfg.min_distractors, cfg.max_distractors)):
    room_left = [t for t in holdable if types.count(t) < MAX_INSTANCES]
    if not room_left:
      break
    types.append(rng.choice(room_left))
  objects = _place(rng, types, recs, info.lamp_types)
  return House(room=info.room, scene=info.number, receptacles=recs, objects=objects)


def feasible_goals(house: House, cfg: HouseholdConfig) -> dict[str, list[Goal]]:
  """The goals of each configured family a task of this house may get (module docstring)."""
  return {fam: list(goals) for fam, goals in _feasible(house, cfg)}


@functools.lru_cache(maxsize=256)
def _feasible(house: House, cfg: HouseholdConfig) -> tuple[tuple[str, tuple[Goal, ...]], ...]:
  voc = vocabulary()
  info = voc.scenes[house.scene]
  rtypes = sorted({r.type for r in house.receptacles})
  rec_type = {r.name: r.type for r in house.receptacles}
  count: dict[str, int] = {}
  starts_in: dict[str, set[str]] = {}
  lamps = sorted({o.type for o in house.objects if o.toggleable and o.type in voc.lamp_types})
  for o in house.objects:
    if o.pickupable:
      count[o.type] = count.get(o.type, 0) + 1
      starts_in.setdefault(o.type, set()).add(rec_type[o.location])
  unseen = cfg.split == "valid_unseen"
  out = []
  for fam in cfg.families:
    goals: list[Goal] = []
    if _family_ok_in_room(fam, info, set(rtypes)):
      if fam == "look_at_obj_in_light":
        goals = [Goal(fam, o, None, lamp) for o in sorted(count) for lamp in lamps
                 if combo_is_unseen(o, lamp) == unseen]
      else:
        cap = APPLIANCE[fam][1] if fam in APPLIANCE else None
        need = 2 if fam == "pick_two_obj_and_place" else 1
        goals = [Goal(fam, o, r) for o in sorted(count) for r in rtypes
                 if count[o] >= need and (cap is None or o in voc.capabilities[cap])
                 and o in voc.can_contain.get(r, ()) and r not in starts_in[o] and combo_is_unseen(o, r) == unseen]
    if goals:
      out.append((fam, tuple(goals)))
  return tuple(out)


@functools.lru_cache(maxsize=256)
def sample_house(cfg: HouseholdConfig, pack_seed: int) -> House:
  """The pack's house (module docstring); redrawn (with a counter in the seed) until some goal is feasible."""
  for attempt in range(_ATTEMPTS):
    rng = random.Random(derive_seed(_HOUSE_SALT, _SPLIT_SALT[cfg.split], pack_seed, attempt))
    house = _draw_house(cfg, rng)
    if house is not None and _feasible(house, cfg):
      return house
  raise RuntimeError(f"no feasible household for families {list(cfg.families)} in split {cfg.split!r}")


def task_text(goal: Goal, template: str) -> str:
  """One of ALFWorld's sentences for the goal, with lower-case class names and a final period."""
  return template.format(obj=display_name(goal.object_type),
                         recep=display_name(goal.receptacle_type or ""),
                         toggle=display_name(goal.lamp_type or "")) + "."


def sample_problem(cfg: HouseholdConfig, house: House, task_seed: int) -> Problem:
  """A certified problem for this task seed in the house: goal, sentence and the planner's plan."""
  voc = vocabulary()
  goals = dict(_feasible(house, cfg))
  families = [f for f in cfg.families if f in goals]
  weights = [1.0 / len(voc.rooms_for(f)) for f in families]
  for attempt in range(_ATTEMPTS):
    rng = random.Random(derive_seed(_TASK_SALT, task_seed, attempt))
    fam = rng.choices(families, weights)[0]
    goal = rng.choice(goals[fam])
    text = task_text(goal, rng.choice(voc.templates[fam]))
    problem = Problem(room=house.room, receptacles=house.receptacles, objects=house.objects, goal=goal,
                      task_text=text, scene=house.scene)
    steps = make_plan(problem, cfg.max_turns)
    if steps:
      return dataclasses.replace(problem, plan=tuple(steps))
  raise RuntimeError(f"no certified problem for task seed {task_seed} in scene {house.scene}")


def generate(cfg: HouseholdConfig, pack_seed: int, task_seed: int) -> Problem:
  """``sample_problem(cfg, sample_house(cfg, pack_seed), task_seed)``."""
  return sample_problem(cfg, sample_house(cfg, pack_seed), task_seed)


def describe_split(cfg: HouseholdConfig) -> dict[str, Any]:
  """The scenes a split draws from, per room (for documentation and tests)."""
  scenes = split_scenes(cfg.split)
  voc = vocabulary()
  return {room: [n for n in scenes if voc.scenes[n].room == room] for room in ROOMS}
