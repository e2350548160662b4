"""One household problem: a room's receptacles and objects plus one ALFWorld goal (docs/methods/evoharness.md).

A ``Problem`` is frozen and self-contained: the world (world.py) plays it, the planner (planner.py) certifies it
and ``to_scene_spec()`` hands it, as JSON-ready data, to the tier-1 engine (tier1.py: TextWorld's PDDL engine
with ALFWorld's ``alfred.pddl``/``alfred.twl2``), which must then print the same text.

The domain subset (what the scene spec can express and the world implements exactly):

* one location per receptacle plus the agent's start location, where no receptacle stands;
* every openable receptacle starts closed; every object starts inside one receptacle (``inReceptacle`` and
  ``objectAtLocation`` at that receptacle's location), with no hot/cool/clean/sliced/toggled flag set;
* no receptacle objects: a ``Mug`` or a ``Bowl`` is a plain object that never holds anything;
* ``canContain`` holds for exactly the (receptacle class, object class) pairs ``VAL_RECEPTACLE_OBJECTS`` allows;
* names read ``<class in lower case> <n>``, the instances of a class numbered 1..k without gaps.

Goals are ALFWorld's six families (``vocab.FAMILIES``) with the object class, the receptacle class (None for
``look_at_obj_in_light``) and the lamp class (only for it); ``task_text`` is the sentence after "Your task is
to: ", ending with a period ("put a hot apple in fridge."). ``plan`` is the planner's certified command list
(empty for hand-built problems) and is not part of the scene spec.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

from codjax.envs.household.vocab import FAMILIES, OBJECT_FLAGS, display_name

_NAME_RE = re.compile(r"([a-z]+) ([1-9][0-9]?)")
_TYPE_RE = re.compile(r"[A-Z][A-Za-z]{0,39}")
_TASK_RE = re.compile(r"[a-z0-9 ,'/-]{1,200}\.")
MAX_RECEPTACLES = 99
MAX_OBJECTS = 200


@dataclasses.dataclass(frozen=True)
class Receptacle:
  name: str
  type: str
  openable: bool


@dataclasses.dataclass(frozen=True)
class Item:
  """An object instance, where it starts and its capability flags."""

  name: str
  type: str
  location: str  # the name of the receptacle it starts in
  pickupable: bool = True
  heatable: bool = False
  coolable: bool = False
  cleanable: bool = False
  toggleable: bool = False
  sliceable: bool = False


@dataclasses.dataclass(frozen=True)
class Goal:
  family: str
  object_type: str
  receptacle_type: str | None = None  # None for look_at_obj_in_light
  lamp_type: str | None = None  # only for look_at_obj_in_light

  @property
  def combo(self) -> tuple[str, str]:
    """(object class, receptacle or lamp class): the pair the splits hold out."""
    return (self.object_type, self.lamp_type if self.family == "look_at_obj_in_light" else self.receptacle_type)


@dataclasses.dataclass(frozen=True)
class Problem:
  """A validated household problem (module docstring); ValueError on anything malformed."""

  room: str
  receptacles: tuple[Receptacle, ...]
  objects: tuple[Item, ...]
  goal: Goal
  task_text: str
  scene: int | None = None  # the THOR scene the layout came from (None for hand-built problems)
  plan: tuple[str, ...] = ()

  def __post_init__(self):
    object.__setattr__(self, "receptacles", tuple(self.receptacles))
    object.__setattr__(self, "objects", tuple(self.objects))
    object.__setattr__(self, "plan", tuple(self.plan))
    _validate(self)

  @property
  def family(self) -> str:
    return self.goal.family

  def to_scene_spec(self) -> dict[str, Any]:
    """The JSON-ready scene spec the tier-1 engine consumes (keys fixed by the differential test)."""
    return {
        "room": self.room,
        "receptacles": [{"name": r.name, "type": r.type, "openable": r.openable} for r in self.receptacles],
        "objects": [{"name": o.name, "type": o.type, "location": o.location,
                     **{f: getattr(o, f) for f in OBJECT_FLAGS}} for o in self.objects],
        "goal": {"family": self.goal.family, "object_type": self.goal.object_type,
                 "receptacle_type": self.goal.receptacle_type, "lamp_type": self.goal.lamp_type},
        "task_text": self.task_text,
    }

  @classmethod
  def from_scene_spec(cls, spec: Any) -> "Problem":
    """The inverse of ``to_scene_spec`` for hand-written or stored specs; ValueError on malformed input."""
    if not isinstance(spec, Mapping):
      raise ValueError(f"scene spec must be a mapping, got {type(spec).__name__}")
    try:
      recs = [Receptacle(name=_s(r, "name"), type=_s(r, "type"), openable=_b(r, "openable"))
              for r in _lst(spec, "receptacles")]
      objs = [Item(name=_s(o, "name"), type=_s(o, "type"), location=_s(o, "location"),
                   **{f: _b(o, f) for f in OBJECT_FLAGS}) for o in _lst(spec, "objects")]
      g = spec.get("goal")
      if not isinstance(g, Mapping):
        raise ValueError("scene spec: 'goal' must be a mapping")
      goal = Goal(family=_s(g, "family"), object_type=_s(g, "object_type"),
                  receptacle_type=_opt(g, "receptacle_type"), lamp_type=_opt(g, "lamp_type"))
      return cls(room=_s(spec, "room"), receptacles=tuple(recs), objects=tuple(objs), goal=goal,
                 task_text=_s(spec, "task_text"))
    except (TypeError, AttributeError) as e:
      raise ValueError(f"malformed scene spec: {e}") from e


def _s(d: Any, key: str) -> str:
  if not isinstance(d, Mapping) or not isinstance(d.get(key), str):
    raise ValueError(f"scene spec: {key!r} must be a string")
  return d[key]


def _opt(d: Mapping, key: str) -> str | None:
  v = d.get(key)
  if v is not None and not isinstance(v, str):
    raise ValueError(f"scene spec: {key!r} must be a string or null")
  return v


def _b(d: Any, key: str) -> bool:
  if not isinstance(d, Mapping) or not isinstance(d.get(key), bool):
    raise ValueError(f"scene spec: {key!r} must be a bool")
  return d[key]


def _lst(d: Mapping, key: str) -> list:
  v = d.get(key)
  if not isinstance(v, list):
    raise ValueError(f"scene spec: {key!r} must be a list")
  return v


def _check_names(kind: str, entries: tuple, numbers: dict[str, set[int]]) -> None:
  for e in entries:
    if not isinstance(e.type, str) or not _TYPE_RE.fullmatch(e.type):
      raise ValueError(f"{kind} {e.name!r}: type {e.type!r} must be an ALFRED class name")
    m = _NAME_RE.fullmatch(e.name) if isinstance(e.name, str) else None
    if m is None or m.group(1) != display_name(e.type):
      raise ValueError(f"{kind} name {e.name!r} must read '{display_name(e.type)} <n>'")
    seen = numbers.setdefault(m.group(1), set())
    if int(m.group(2)) in seen:
      raise ValueError(f"duplicate name {e.name!r}")
    seen.add(int(m.group(2)))


def _validate(p: Problem) -> None:
  if not isinstance(p.room, str) or not re.fullmatch(r"[A-Za-z]{1,40}", p.room):
    raise ValueError(f"room must be a word, got {p.room!r}")
  if not 1 <= len(p.receptacles) <= MAX_RECEPTACLES:
    raise ValueError(f"a problem needs 1..{MAX_RECEPTACLES} receptacles, got {len(p.receptacles)}")
  if len(p.objects) > MAX_OBJECTS:
    raise ValueError(f"a problem holds at most {MAX_OBJECTS} objects, got {len(p.objects)}")
  if not all(isinstance(r, Receptacle) for r in p.receptacles) or not all(isinstance(o, Item) for o in p.objects):
    raise ValueError("receptacles must be Receptacle and objects Item instances")
  numbers: dict[str, set[int]] = {}
  _check_names("receptacle", p.receptacles, numbers)
  _check_names("object", p.objects, numbers)
  for word, nums in numbers.items():
    if nums != set(range(1, len(nums) + 1)):
      raise ValueError(f"instances of {word!r} must be numbered 1..{len(nums)} without gaps, got {sorted(nums)}")
  for r in p.receptacles:
    if not isinstance(r.openable, bool):
      raise ValueError(f"receptacle {r.name!r}: openable must be a bool")
  rec_names = {r.name for r in p.receptacles}
  for o in p.objects:
    if o.location not in rec_names:
      raise ValueError(f"object {o.name!r} starts in unknown receptacle {o.location!r}")
    if not all(isinstance(getattr(o, f), bool) for f in OBJECT_FLAGS):
      raise ValueError(f"object {o.name!r}: flags must be bools")
  g = p.goal
  if not isinstance(g, Goal) or g.family not in FAMILIES:
    raise ValueError(f"goal family must be one of {FAMILIES}, got {getattr(g, 'family', g)!r}")
  for name in ("object_type", "receptacle_type", "lamp_type"):
    v = getattr(g, name)
    if v is not None and (not isinstance(v, str) or not _TYPE_RE.fullmatch(v)):
      raise ValueError(f"goal {name} must be an ALFRED class name or None, got {v!r}")
  if not isinstance(g.object_type, str):
    raise ValueError("goal object_type is required")
  look = g.family == "look_at_obj_in_light"
  if look and (g.lamp_type is None or g.receptacle_type is not None):
    raise ValueError("look_at_obj_in_light needs lamp_type and no receptacle_type")
  if not look and (g.receptacle_type is None or g.lamp_type is not None):
    raise ValueError(f"{g.family} needs receptacle_type and no lamp_type")
  if not isinstance(p.task_text, str) or not _TASK_RE.fullmatch(p.task_text):
    raise ValueError(f"task_text must be a lower-case sentence ending with '.', got {p.task_text!r}")
  if p.scene is not None and (isinstance(p.scene, bool) or not isinstance(p.scene, int)):
    raise ValueError(f"scene must be an int or None, got {p.scene!r}")
  if not all(isinstance(c, str) for c in p.plan):
    raise ValueError("plan must hold command strings")
