"""Tier 1 of ``alfworld_synth``: a scene spec played by ALFWorld's own engine (docs/methods/evoharness.md).

A scene spec (the dict ``Problem.to_scene_spec()`` produces: room, receptacles, objects, goal, task_text)
becomes an ALFRED-style PDDL problem for the shipped ``alfred.pddl`` domain, and is played through
TextWorld 1.7's ``PddlEnv`` (fast-downward underneath) with the shipped ``alfred.twl2`` grammar, wrapped in
alfworld's ``AlfredDemangler`` -- the same pipeline ALFWorld's ``AlfredTWEnv`` runs on its ``game.tw-pddl``
files. The text and admissible commands are therefore ALFWorld's, which makes this module the differential
oracle for the pure-Python tier-2 environment.

Rules, stated once:

* Entity ids are mangled ALFRED object ids (``Apple|+99.98|+00.00|+00.00`` written with ``_bar_``,
  ``_plus_``, ``_dot_``), so the demangler prints ``apple 1``. The demangler numbers the instances of a
  name in sorted-id order from the top down, so instance n gets the coordinate 99.99 - n/100 (higher
  numbers sort first). ``...Basin`` types get ALFRED's ``Sink|...|SinkBasin`` form so they print
  ``sinkbasin 1``. After loading, every printed name is checked against the spec.
* Names must read ``<type in lower case> <n>``; the instances of one name are numbered 1..k without gaps.
* One location per receptacle (in spec order) plus the agent's start location, where no receptacle stands
  (so the intro reads "You are in the middle of a room"). Objects stand at their receptacle's location.
* Init facts: ``receptacleType``/``objectType``, ``canContain`` for every present (receptacle type, object
  type) pair that ``VAL_RECEPTACLE_OBJECTS`` allows, the spec's ``openable`` and object flags, all
  openable receptacles closed, ``inReceptacle``/``objectAtLocation``/``receptacleAtLocation``.
* Goals are ALFWorld's own goal formulas (``alfworld.gen.goal_library``) for the six families; pick_two
  asks for two distinct objects of the type in one receptacle.
* The grammar's ``UNKNOWN GOAL`` is replaced by ``task_text`` without its final period, as
  ``add_task_to_grammar`` does, so the intro ends with "Your task is to: <task_text>". TextWorld's grammar
  evaluates ``{...}`` and expands ``#...#`` and ``[...]``, so the task text is held to letters, digits,
  spaces and ``,'/-``. Commands are only ever matched against the engine's own admissible strings.
* A shared ``Tier1Engine`` plays many scenes one after another; each new engine maps another copy of
  fast-downward's library (about 1 MB that is never freed).
* Unknown commands give "Nothing happens." (the engine's own answer). A malformed spec is a ValueError;
  a missing textworld / fast-downward / alfworld install is ``Tier1Unavailable``.
* TextWorld re-parses the same short strings with its tatsu grammars over and over (every admissible
  command's template, every grammar expansion, every precondition query, the domain at each load): about
  half of tier 1's CPU time. ``memoize_textworld_parsers`` (installed by every ``Tier1Engine``) caches the
  three parse functions by their arguments and hands out a deep copy of the cached result, so callers still
  get fresh objects they may mutate; the differential sweep's problems then play about 1.7x faster with
  identical texts, admissible sets and outcomes (12 tiny problems: 25.8 s -> 14.8 s on a 2 GHz 2-core host).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.resources
import re
from typing import Any, Mapping, Sequence

FAMILIES = (
  "pick_and_place_simple",
  "look_at_obj_in_light",
  "pick_clean_then_place_in_recep",
  "pick_heat_then_place_in_recep",
  "pick_cool_then_place_in_recep",
  "pick_two_obj_and_place",
)
OBJECT_FLAGS = ("pickupable", "heatable", "coolable", "cleanable", "toggleable", "sliceable")
MAX_INSTANCES = 99
_NAME_RE = re.compile(r"([a-z]+) ([1-9][0-9]?)")
_TASK_RE = re.compile(r"[A-Za-z0-9 ,'/-]+")
_ROOM_RE = re.compile(r"[A-Za-z]{1,40}")
_MAX_TASK_CHARS = 300
_AGENT = "agent1"
_START = "loc_bar_0_bar_0_bar_0_bar_30"


class Tier1Unavailable(RuntimeError):
  """The textworld + fast-downward + alfworld pipeline is not installed (or cannot load)."""


@dataclasses.dataclass(frozen=True)
class Receptacle:
  name: str
  type: str
  openable: bool
  ident: str
  location: str


@dataclasses.dataclass(frozen=True)
class SceneObject:
  name: str
  type: str
  receptacle: str  # the receptacle's name
  flags: tuple[str, ...]  # the OBJECT_FLAGS that hold
  ident: str


@dataclasses.dataclass(frozen=True)
class Scene:
  """A validated scene spec with its PDDL ids."""

  room: str
  receptacles: tuple[Receptacle, ...]
  objects: tuple[SceneObject, ...]
  family: str
  object_type: str
  receptacle_type: str | None
  lamp_type: str | None
  task_text: str

  def names_by_id(self) -> dict[str, str]:
    """Lower-case PDDL id -> the name the demangler must print."""
    out = {r.ident.lower(): r.name for r in self.receptacles}
    out.update({o.ident.lower(): o.name for o in self.objects})
    return out


# ---------------------------------------------------------------------------------------------- vocabulary


def _constants() -> Any:
  try:
    from alfworld.gen import constants
  except ImportError as e:  # pragma: no cover - depends on the install
    raise Tier1Unavailable(f"tier-1 needs alfworld (pip install alfworld==0.4.2): {e}") from e
  return constants


def _vocabulary() -> tuple[frozenset[str], frozenset[str], Mapping[str, Any]]:
  """(receptacle types, object types, VAL_RECEPTACLE_OBJECTS) as ALFWorld's problem writer splits them."""
  c = _constants()
  rtypes = frozenset(c.RECEPTACLES) - frozenset(c.MOVABLE_RECEPTACLES)
  otypes = frozenset(c.OBJECTS) - rtypes
  return rtypes, otypes, c.VAL_RECEPTACLE_OBJECTS


def _data_text(name: str) -> str:
  try:
    return importlib.resources.files("alfworld").joinpath("data", name).read_text()
  except (ImportError, OSError) as e:
    raise Tier1Unavailable(f"tier-1 cannot read alfworld's {name}: {e}") from e


# ---------------------------------------------------------------------------------------------- ids


def mangle_id(type_name: str, number: int) -> str:
  """The ALFRED-style PDDL id that ``AlfredDemangler`` prints as ``<type lower> <number>``."""
  if not 1 <= number <= MAX_INSTANCES:
    raise ValueError(f"instance number {number} outside 1..{MAX_INSTANCES}")
  v = 9999 - number
  coords = f"+{v // 100:02d}.{v % 100:02d}|+00.00|+00.00"
  if type_name.lower().endswith("basin"):
    raw = f"{type_name[:-5]}|{coords}|{type_name}"
  else:
    raw = f"{type_name}|{coords}"
  return raw.replace("|", "_bar_").replace("+", "_plus_").replace(".", "_dot_")


def _location_id(index: int) -> str:
  return f"loc_bar_{index}_bar_0_bar_0_bar_30"


# ---------------------------------------------------------------------------------------------- validation


def _req(d: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
  if key not in d:
    raise ValueError(f"{where}: missing {key!r}")
  v = d[key]
  if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
    raise ValueError(f"{where}: {key!r} must be {kind.__name__}, got {type(v).__name__}")
  return v


def _flag(d: Mapping[str, Any], key: str, where: str) -> bool:
  v = d.get(key, False)
  if v is None:
    return False
  if not isinstance(v, bool):
    raise ValueError(f"{where}: {key!r} must be a bool, got {type(v).__name__}")
  return v


def _parse_name(name: str, type_name: str, where: str) -> int:
  m = _NAME_RE.fullmatch(name)
  if m is None or m.group(1) != type_name.lower():
    raise ValueError(f"{where}: name {name!r} must read '{type_name.lower()} <n>' with 1 <= n <= {MAX_INSTANCES}")
  return int(m.group(2))


def parse_scene(spec: Mapping[str, Any]) -> Scene:
  """Validates a scene spec (ValueError on anything malformed) and assigns PDDL ids and locations."""
  if not isinstance(spec, Mapping):
    raise ValueError(f"scene spec must be a mapping, got {type(spec).__name__}")
  rtypes, otypes, _ = _vocabulary()
  room = _req(spec, "room", str, "scene")
  if not _ROOM_RE.fullmatch(room):
    raise ValueError(f"scene: room {room!r} must be letters only")
  recs_in = _req(spec, "receptacles", list, "scene")
  objs_in = _req(spec, "objects", list, "scene")
  if not recs_in:
    raise ValueError("scene: no receptacles")
  numbers: dict[str, set[int]] = {}

  def claim(name: str, type_name: str, where: str) -> int:
    n = _parse_name(name, type_name, where)
    seen = numbers.setdefault(name.split(" ")[0], set())
    if n in seen:
      raise ValueError(f"{where}: duplicate name {name!r}")
    seen.add(n)
    return n

  receptacles = []
  for i, r in enumerate(recs_in):
    where = f"receptacles[{i}]"
    if not isinstance(r, Mapping):
      raise ValueError(f"{where}: must be a mapping")
    name, rtype = _req(r, "name", str, where), _req(r, "type", str, where)
    if rtype not in rtypes:
      raise ValueError(f"{where}: {rtype!r} is not an ALFRED receptacle type")
    n = claim(name, rtype, where)
    receptacles.append(Receptacle(name, rtype, _flag(r, "openable", where), mangle_id(rtype, n), _location_id(i + 1)))
  by_name = {r.name: r for r in receptacles}
  objects = []
  for i, o in enumerate(objs_in):
    where = f"objects[{i}]"
    if not isinstance(o, Mapping):
      raise ValueError(f"{where}: must be a mapping")
    name, otype = _req(o, "name", str, where), _req(o, "type", str, where)
    loc = _req(o, "location", str, where)
    if otype not in otypes:
      raise ValueError(f"{where}: {otype!r} is not an ALFRED object type")
    if loc not in by_name:
      raise ValueError(f"{where}: location {loc!r} is not a receptacle of the scene")
    n = claim(name, otype, where)
    flags = tuple(f for f in OBJECT_FLAGS if _flag(o, f, where))
    objects.append(SceneObject(name, otype, loc, flags, mangle_id(otype, n)))
  for base, seen in numbers.items():
    if seen != set(range(1, len(seen) + 1)):
      raise ValueError(f"scene: the {base!r} instances are numbered {sorted(seen)}, not 1..{len(seen)}")

  goal = _req(spec, "goal", Mapping, "scene")
  family = _req(goal, "family", str, "goal")
  if family not in FAMILIES:
    raise ValueError(f"goal: unknown family {family!r}")
  object_type = _req(goal, "object_type", str, "goal")
  if object_type not in otypes:
    raise ValueError(f"goal: {object_type!r} is not an ALFRED object type")
  receptacle_type = goal.get("receptacle_type")
  lamp_type = goal.get("lamp_type")
  if family == "look_at_obj_in_light":
    if not isinstance(lamp_type, str) or lamp_type not in otypes:
      raise ValueError(f"goal: look_at_obj_in_light needs an ALFRED object type as lamp_type, got {lamp_type!r}")
    receptacle_type = receptacle_type if isinstance(receptacle_type, str) else None
  else:
    if not isinstance(receptacle_type, str) or receptacle_type not in rtypes:
      raise ValueError(f"goal: {family} needs an ALFRED receptacle type, got {receptacle_type!r}")
    lamp_type = lamp_type if isinstance(lamp_type, str) else None
  task_text = _req(spec, "task_text", str, "scene").strip()
  if task_text.endswith("."):
    task_text = task_text[:-1].rstrip()
  if not task_text or len(task_text) > _MAX_TASK_CHARS or not _TASK_RE.fullmatch(task_text):
    raise ValueError(f"scene: task_text {spec['task_text']!r} must be 1..{_MAX_TASK_CHARS} letters, digits, spaces or ,'/-")
  return Scene(room, tuple(receptacles), tuple(objects), family, object_type, receptacle_type, lamp_type, task_text)


# ---------------------------------------------------------------------------------------------- PDDL


def _goal_pddl(scene: Scene) -> str:
  """ALFWorld's goal formula for the family, with the define's closing parenthesis."""
  try:
    from alfworld.gen import goal_library
  except ImportError as e:  # pragma: no cover - depends on the install
    raise Tier1Unavailable(f"tier-1 needs alfworld's goal library: {e}") from e
  template = goal_library.gdict[scene.family]["pddl"]
  text = template.format(obj=scene.object_type, recep=scene.receptacle_type or "", toggle=scene.lamp_type or "",
                         mrecep="")
  return text.replace("#", "-")


def scene_pddl(scene: Scene) -> str:
  """The PDDL problem text of a validated scene."""
  rtypes, otypes, allowed = _vocabulary()
  objs = [f"{_AGENT} - agent"]
  objs += [f"{t}Type - otype" for t in sorted(otypes)]
  objs += [f"{t}Type - rtype" for t in sorted(rtypes)]
  objs += [f"{o.ident} - object" for o in scene.objects]
  objs += [f"{r.ident} - receptacle" for r in scene.receptacles]
  objs += [f"{r.location} - location" for r in scene.receptacles] + [f"{_START} - location"]
  rec = {r.name: r for r in scene.receptacles}
  init = [f"(receptacleType {r.ident} {r.type}Type)" for r in scene.receptacles]
  init += [f"(objectType {o.ident} {o.type}Type)" for o in scene.objects]
  present_r = sorted({r.type for r in scene.receptacles})
  present_o = sorted({o.type for o in scene.objects})
  init += [f"(canContain {rt}Type {ot}Type)" for rt in present_r for ot in present_o if ot in allowed.get(rt, ())]
  init += [f"(openable {r.ident})" for r in scene.receptacles if r.openable]
  init.append(f"(atLocation {_AGENT} {_START})")
  init += [f"({flag} {o.ident})" for o in scene.objects for flag in o.flags]
  init += [f"(inReceptacle {o.ident} {rec[o.receptacle].ident})" for o in scene.objects]
  init += [f"(receptacleAtLocation {r.ident} {r.location})" for r in scene.receptacles]
  init += [f"(objectAtLocation {o.ident} {rec[o.receptacle].location})" for o in scene.objects]
  sep = "\n        "
  return (f"(define (problem alfsynth_{scene.room.lower()})\n(:domain alfred)\n(:objects\n        "
          f"{sep.join(objs)}\n        )\n(:init\n        {sep.join(init)}\n        )\n{_goal_pddl(scene)}")


def scene_to_pddl(spec: Mapping[str, Any]) -> str:
  """An ALFRED-style PDDL problem for ``alfred.pddl`` from a scene spec (ValueError if malformed)."""
  return scene_pddl(parse_scene(spec))


def scene_grammar(scene: Scene) -> str:
  """The shipped ``alfred.twl2`` with the task line set, as ALFWorld's ``add_task_to_grammar`` does."""
  grammar = _data_text("alfred.twl2")
  if grammar.count("UNKNOWN GOAL") != 1:
    raise Tier1Unavailable("alfworld's alfred.twl2 has no single 'UNKNOWN GOAL' task line to fill")
  return grammar.replace("UNKNOWN GOAL", scene.task_text)


def scene_to_game_data(spec: Mapping[str, Any]) -> dict[str, str]:
  """The ``game.tw-pddl`` content for a scene spec: ``pddl_domain``, ``grammar``, ``pddl_problem``."""
  scene = parse_scene(spec)
  return {"pddl_domain": _data_text("alfred.pddl"), "grammar": scene_grammar(scene), "pddl_problem": scene_pddl(scene)}


# ---------------------------------------------------------------------------------------------- engine


PARSE_MODULES = ("textworld.logic", "textworld.envs.pddl.logic", "textworld.envs.pddl.textgen")


def memoized_parse(parse):
  """``parse`` (a pure function of its string and keyword arguments) behind an unbounded cache; every call
  returns a deep copy of the cached result (the parsed symbols are mutated by TextWorld's callers)."""
  if getattr(parse, "__wrapped_parse__", None) is not None:
    return parse
  cached = functools.lru_cache(maxsize=None)(parse)

  def parse_copy(*args, **kwargs):
    return copy.deepcopy(cached(*args, **kwargs))

  parse_copy.__wrapped_parse__ = parse
  parse_copy.cache_info = cached.cache_info
  return parse_copy


def memoize_textworld_parsers() -> None:
  """Installs ``memoized_parse`` over TextWorld's ``_parse_and_convert`` in ``PARSE_MODULES`` (module
  docstring; idempotent)."""
  import importlib

  for name in PARSE_MODULES:
    module = importlib.import_module(name)
    module._parse_and_convert = memoized_parse(module._parse_and_convert)


def _make_env() -> Any:
  """A demangled TextWorld PddlEnv that reports won and admissible commands, or Tier1Unavailable."""
  try:
    import textworld
    from textworld.envs.pddl import PddlEnv
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
  except ImportError as e:
    raise Tier1Unavailable(f"tier-1 needs textworld==1.7.0 and alfworld==0.4.2: {e}") from e
  memoize_textworld_parsers()
  try:
    env = PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True))
  except (ImportError, OSError, RuntimeError) as e:
    raise Tier1Unavailable(
      f"tier-1 needs fast-downward-textworld (pip install fast-downward-textworld; builds with cmake and g++): {e}"
    ) from e
  return AlfredDemangler(env)


class Tier1Engine:
  """One demangled TextWorld ``PddlEnv`` (one loaded copy of fast-downward's library) that plays one scene at
  a time. Every ``Tier1Game`` without an engine makes its own, and each copy of the library stays mapped until
  the process ends (about 1 MB); share one engine to play many scenes one after another."""

  def __init__(self) -> None:
    self.env = _make_env()
    self.loaded: object | None = None  # the Tier1Game whose problem the engine holds


class Tier1Game:
  """One scene played by the ALFWorld engine. ``reset()`` starts (or restarts) the episode.

  Games that share an engine may alternate, but only at ``reset()``: resetting one game unloads the other,
  whose next ``step`` then asks for a reset."""

  def __init__(self, spec: Mapping[str, Any], engine: Tier1Engine | None = None) -> None:
    self.scene = parse_scene(spec)
    self.game_data = {
      "pddl_domain": _data_text("alfred.pddl"),
      "grammar": scene_grammar(self.scene),
      "pddl_problem": scene_pddl(self.scene),
    }
    self._engine = engine if engine is not None else Tier1Engine()
    self._started = False
    self._checked_names = False
    self.won = False

  def _check_names(self, state: Any) -> None:
    printed = {k.lower(): info.name for k, info in state["_entity_infos"].items()}
    for ident, name in self.scene.names_by_id().items():
      if printed.get(ident) != name:
        raise RuntimeError(f"tier-1 demangler printed {printed.get(ident)!r} for {name!r} (id {ident})")
    self._checked_names = True

  def reset(self) -> tuple[str, list[str]]:
    """Returns (the intro observation, the sorted admissible commands)."""
    engine = self._engine
    self._started = False
    if engine.loaded is not self:
      engine.loaded = None
      try:
        engine.env.load(self.game_data)
      except Exception as e:  # the engine's own parse/translate errors, surfaced at the boundary
        raise RuntimeError(f"tier-1 engine could not load the scene: {type(e).__name__}: {e}") from e
      engine.loaded = self
    state = engine.env.reset()
    if not self._checked_names:
      self._check_names(state)
    self._started = True
    self.won = bool(state["won"])
    return str(state.feedback), sorted(state["admissible_commands"])

  def step(self, command: str) -> tuple[str, bool, list[str]]:
    """Returns (feedback, won, sorted admissible commands); a non-admissible command: "Nothing happens."."""
    if not isinstance(command, str):
      raise ValueError(f"command must be a str, got {type(command).__name__}")
    if not self._started or self._engine.loaded is not self:
      raise RuntimeError("Tier1Game.step needs reset() first (or again, after another game used the engine)")
    state, _, _ = self._engine.env.step(command)
    self.won = bool(state["won"])
    return str(state.feedback), self.won, sorted(state["admissible_commands"])


def play(spec: Mapping[str, Any], commands: Sequence[str], engine: Tier1Engine | None = None) -> list[dict[str, Any]]:
  """Plays ``commands`` from a fresh reset. Entry 0 is the reset (``command`` None, ``feedback`` the intro);
  entry i is the i-th command: {step, command, feedback, won, admissible (sorted)}. Pass one ``engine`` to
  play many scenes in a row without loading a library copy per scene."""
  if isinstance(commands, (str, bytes)) or not isinstance(commands, Sequence):
    raise ValueError("commands must be a sequence of str")
  if not all(isinstance(c, str) for c in commands):
    raise ValueError("every command must be a str")
  game = Tier1Game(spec, engine)
  obs, adm = game.reset()
  records = [{"step": 0, "command": None, "feedback": obs, "won": game.won, "admissible": adm}]
  for i, command in enumerate(commands, 1):
    feedback, won, adm = game.step(command)
    records.append({"step": i, "command": command, "feedback": feedback, "won": won, "admissible": adm})
  return records
