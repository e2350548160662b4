"""ALFWorld's household vocabulary, read from the installed ``alfworld`` package (docs/methods/evoharness.md).

Nothing here copies ALFWorld's lists: object and receptacle classes, which receptacle class may hold which object
class (``VAL_RECEPTACLE_OBJECTS``), the capability classes (``VAL_ACTION_OBJECTS``: heatable, coolable,
cleanable, toggleable, sliceable), the openable classes (``OPENABLE_CLASS_LIST``), the rooms a goal family may
use (``GOALS_VALID``), the scene numbers of each room type (``SCENE_TYPE``), the classes present in each shipped
THOR scene (``gen/layouts/FloorPlan<N>-objects.json``, with the receptacle instances ``-openable.json`` lists)
and the task sentences (``gen/goal_library.gdict``) all come from ``alfworld``, read once on first use
(``vocabulary()``; an ImportError naming ``pip install alfworld==0.4.2`` without it).

Conventions fixed here, shared by the generator, the world and the scene spec:

* Receptacle classes are ALFRED's static receptacles (``RECEPTACLES`` minus ``MOVABLE_RECEPTACLES``) that
  ``VAL_RECEPTACLE_OBJECTS`` describes; THOR's ``Sink``/``Bathtub`` appear as ``SinkBasin``/``BathtubBasin``.
* Object classes are the non-receptacle ALFRED classes some receptacle may hold (movable receptacles such as
  ``Mug`` or ``Bowl`` are plain objects: they never hold anything here). Lamps are the ``Toggleable`` classes.
* The printed name of an instance is its class in lower case and its number (``sinkbasin 1``), as
  ``AlfredDemangler`` prints ALFRED ids. Lists in the text follow TextWorld's order, the sorted mangled ids:
  by the id prefix (the class in lower case; ``sink``/``bathtub`` for the basins), then by *decreasing*
  instance number (the demangler numbers sorted ids from the top down): "a cabinet 2, a cabinet 1, ...".
* Slicing takes a ``Knife`` or a ``ButterKnife`` (the ``SliceObject`` precondition of ``alfred.pddl``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Any, Mapping

FAMILIES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)  # ALFWorld's task types 1..6
ROOMS = ("Kitchen", "LivingRoom", "Bedroom", "Bathroom")
# family -> (receptacle class that does the work, the object capability it needs); from alfred.pddl's actions
APPLIANCE = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "coolable"),
}
KNIFE_TYPES = frozenset({"Knife", "ButterKnife"})
OBJECT_FLAGS = ("pickupable", "heatable", "coolable", "cleanable", "toggleable", "sliceable")
_THOR_BASINS = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}
_INSTALL_HINT = ("the household environment needs ALFWorld's vocabulary: pip install alfworld==0.4.2 "
                 "(or the project's .[household] extra)")


@dataclasses.dataclass(frozen=True)
class SceneInfo:
  """One shipped THOR scene: its room type, the receptacle/object/lamp classes in it, instance counts."""

  number: int
  room: str
  receptacle_types: tuple[str, ...]
  object_types: tuple[str, ...]
  lamp_types: tuple[str, ...]
  instance_counts: tuple[tuple[str, int], ...]


@dataclasses.dataclass(frozen=True)
class Vocabulary:
  """Everything the environment takes from ``alfworld`` (module docstring)."""

  receptacle_types: frozenset[str]
  object_types: frozenset[str]
  lamp_types: frozenset[str]
  openable: frozenset[str]
  can_contain: Mapping[str, frozenset[str]]  # receptacle class -> object classes it may hold
  capabilities: Mapping[str, frozenset[str]]  # heatable/coolable/cleanable/toggleable/sliceable -> classes
  family_rooms: Mapping[str, frozenset[str]]
  templates: Mapping[str, tuple[str, ...]]
  scenes: Mapping[int, SceneInfo]

  def flags(self, type_name: str) -> dict[str, bool]:
    """The capability flags of an object class."""
    out = {"pickupable": type_name in self.object_types}
    for cap in OBJECT_FLAGS[1:]:
      out[cap] = type_name in self.capabilities[cap]
    return out

  def rooms_for(self, family: str) -> frozenset[str]:
    return self.family_rooms[family]


def _modules() -> tuple[Any, Any]:
  try:
    from alfworld.gen import constants
    from alfworld.gen import goal_library
  except ImportError as e:
    raise ImportError(f"{_INSTALL_HINT} ({e})") from e
  return constants, goal_library


def display_name(type_name: str) -> str:
  """The printed class word: ``SinkBasin`` -> ``sinkbasin``."""
  return type_name.lower()


def id_prefix(type_name: str) -> str:
  """The lower-case prefix of the class's mangled ALFRED id (what TextWorld's sorted lists order by)."""
  low = type_name.lower()
  for thor, basin in _THOR_BASINS.items():
    if type_name == basin:
      return thor.lower()
  return low


def instance_number(name: str) -> int:
  return int(name.rsplit(" ", 1)[1])


def list_key(type_name: str, name: str) -> tuple[str, int]:
  """Sort key of an instance in TextWorld's lists: id prefix, then decreasing number."""
  return (id_prefix(type_name), -instance_number(name))


@functools.lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
  """The vocabulary, built once from the installed ``alfworld`` (ImportError with the install hint without it)."""
  c, glib = _modules()
  vro = c.VAL_RECEPTACLE_OBJECTS
  objects = set(c.OBJECTS)
  rtypes = frozenset((set(c.RECEPTACLES) - set(c.MOVABLE_RECEPTACLES)) & set(vro))
  held = set().union(*vro.values())
  otypes = frozenset((held & objects) - rtypes)
  can_contain = {r: frozenset(set(vro[r]) & otypes) for r in rtypes}
  act = c.VAL_ACTION_OBJECTS
  caps = {name.lower(): frozenset(set(act[name]) & objects) for name in
          ("Heatable", "Coolable", "Cleanable", "Toggleable", "Sliceable")}
  lamp_types = caps["toggleable"] - otypes
  rooms = {f: frozenset(c.GOALS_VALID[f]) for f in FAMILIES}
  templates = {f: tuple(glib.gdict[f]["templates"]) for f in FAMILIES}
  layouts = os.path.join(os.path.dirname(c.__file__), "layouts")
  scenes = {}
  for room, numbers in c.SCENE_TYPE.items():
    if room not in ROOMS:
      continue
    for n in numbers:
      path = os.path.join(layouts, f"FloorPlan{n}-objects.json")
      if not os.path.exists(path):
        continue
      with open(path) as f:
        present = {_THOR_BASINS.get(t, t) for t in json.load(f)}
      counts: dict[str, int] = {}
      op_path = os.path.join(layouts, f"FloorPlan{n}-openable.json")
      if os.path.exists(op_path):
        with open(op_path) as f:
          for key in json.load(f):
            t = _THOR_BASINS.get(key.split("|", 1)[0], key.split("|", 1)[0])
            counts[t] = counts.get(t, 0) + 1
      scenes[n] = SceneInfo(
          number=n, room=room,
          receptacle_types=tuple(sorted(present & rtypes)),
          object_types=tuple(sorted(present & otypes)),
          lamp_types=tuple(sorted(present & lamp_types)),
          instance_counts=tuple(sorted((t, k) for t, k in counts.items() if t in rtypes)))
  if not scenes:
    raise ImportError(f"{_INSTALL_HINT} (no scene layouts found under {layouts})")
  return Vocabulary(receptacle_types=rtypes, object_types=otypes, lamp_types=lamp_types,
                    openable=frozenset(c.OPENABLE_CLASS_LIST) & rtypes, can_contain=can_contain,
                    capabilities=caps, family_rooms=rooms, templates=templates, scenes=scenes)
