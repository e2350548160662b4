"""The household state machine: what TextWorld's PDDL engine does with ALFWorld's domain and grammar, in plain
Python (tier 2 of docs/methods/evoharness.md).

Every rule below was read off ``alfred.pddl`` (preconditions, effects), ``alfred.twl2`` (texts) and TextWorld
1.7's ``PddlEnv`` (command lists, list joining, "Nothing happens."), and checked by playing hand-written
problems through that engine. The state: the agent's location (the start, or a receptacle), the held object,
the opened receptacles, each object's receptacle, and the object flags hot/cool/clean/sliced/toggled.

Admissible commands (``sorted``, as TextWorld sorts them):

* always ``look``, ``inventory``, ``help``, and ``go to R`` for every receptacle R but the current one;
* at a receptacle R: ``examine R``; ``open R`` / ``close R`` when R is openable (closed / open);
  ``use L`` for every toggleable L in R (open or not); when R is not openable or open: ``take O from R`` for
  every pickupable O in R with empty hands, ``move H to R`` for the held H when R's class may hold H's class;
  with H held: ``clean H with R`` (R a sinkbasin, H cleanable), ``heat H with R`` (a microwave, H heatable),
  ``cool H with R`` (a fridge, H coolable), whether R is open or not; with a knife or butterknife K held,
  ``slice O with K`` for every sliceable O in R (open or not);
* ``examine H`` for the held object (objects in receptacles cannot be examined: the domain's first
  ``examineObject`` case never grounds).

Effects and feedback (names are ``apple 1``; a list is "a x 1, a y 2, and a z 3", "a x 1, and a y 2", "a x 1"
or "nothing", in TextWorld's order, vocab.list_key):

* go to: "You arrive at R. " + R's description; open: "You open the R. " + R's description; close: "You close
  the R."; take: "You pick up the O from the R."; move: "You move the O to the R."; heat/cool/clean: "You heat
  the O using the R." (heating clears cool, cooling clears hot); use: "You turn on the L." (every time: the
  domain never clears ``isToggled``); slice: "You sliced the O with the K.";
* R's description: "The R is open. In it, you see LIST." / "The R is closed." (openable) or "On the R, you see
  LIST.";
* the intro: "-= Welcome to TextWorld, ALFRED! =-", "You are in the middle of a room. Looking quickly around
  you, you see LIST-OF-ALL-RECEPTACLES." and "Your task is to: TASK", separated by blank lines;
* look: at the start "You are in the middle of a room. Looking quickly around you, you see nothing." (the
  command binds the start location, where no receptacle stands; the intro binds none), at R "You are facing
  the R. Next to it, you see nothing." (objects "next to" R would have to be at R's location outside R);
* inventory: "You are carrying: a O." / "You are not carrying anything."; examine H: the grammar's first
  matching line (hot and clean sliced ... cold ... "There's nothing special about H."); help: the help text;
* anything else: "Nothing happens." and no change.

``won`` is ALFWorld's goal formula (alfworld.gen.goal_library) of the problem's family, evaluated on the state.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

from codjax.envs.household.problem import Problem
from codjax.envs.household.vocab import KNIFE_TYPES, list_key, vocabulary

START = -1
NOTHING = "Nothing happens."
INTRO_HEADER = "-= Welcome to TextWorld, ALFRED! =-"
HELP_TEXT = (
    "Available commands:\n"
    "  look:                             look around your current location\n"
    "  inventory:                        check your current inventory\n"
    "  go to (receptacle):               move to a receptacle\n"
    "  open (receptacle):                open a receptacle\n"
    "  close (receptacle):               close a receptacle\n"
    "  take (object) from (receptacle):  take an object from a receptacle\n"
    "  move (object) to (receptacle):  place an object in or on a receptacle\n"
    "  examine (something):              examine a receptacle or an object\n"
    "  use (object):                     use an object\n"
    "  heat (object) with (receptacle):  heat an object using a receptacle\n"
    "  clean (object) with (receptacle): clean an object using a receptacle\n"
    "  cool (object) with (receptacle):  cool an object using a receptacle\n"
    "  slice (object) with (object):     slice an object using a sharp object\n")
_APPLIANCE_VERB = {"SinkBasin": ("clean", "cleanable"), "Microwave": ("heat", "heatable"),
                   "Fridge": ("cool", "coolable")}


def see_list(names: list[str]) -> str:
  """TextWorld's list: "a x 1, a y 2, and a z 3", "a x 1, and a y 2", "a x 1" or "nothing"."""
  items = [f"a {n}" for n in names]
  if not items:
    return "nothing"
  if len(items) == 1:
    return items[0]
  return ", ".join(items[:-1]) + ", and " + items[-1]


class World:
  """A problem compiled into index tables (one per problem; ``World.of`` caches them)."""

  def __init__(self, problem: Problem):
    self.problem = problem
    recs, objs = problem.receptacles, problem.objects
    self.rnames = [r.name for r in recs]
    self.rtypes = [r.type for r in recs]
    self.ropen = [r.openable for r in recs]
    self.onames = [o.name for o in objs]
    self.otypes = [o.type for o in objs]
    ridx = {n: i for i, n in enumerate(self.rnames)}
    self.rindex = ridx
    self.oindex = {n: i for i, n in enumerate(self.onames)}

    def mask(pred: Callable) -> int:
      return sum(1 << j for j, o in enumerate(objs) if pred(o))

    self.pickupable = mask(lambda o: o.pickupable)
    self.heatable = mask(lambda o: o.heatable)
    self.coolable = mask(lambda o: o.coolable)
    self.cleanable = mask(lambda o: o.cleanable)
    self.toggleable = mask(lambda o: o.toggleable)
    self.sliceable = mask(lambda o: o.sliceable)
    self.knives = mask(lambda o: o.type in KNIFE_TYPES)
    cc = vocabulary().can_contain
    self.holds = [mask(lambda o, t=t: o.type in cc.get(t, ())) for t in self.rtypes]
    self.obj_order = sorted(range(len(objs)), key=lambda j: list_key(self.otypes[j], self.onames[j]))
    self.rec_order = sorted(range(len(recs)), key=lambda i: list_key(self.rtypes[i], self.rnames[i]))
    self.start_where = tuple(ridx[o.location] for o in objs)
    g = problem.goal
    self.goal_objects = mask(lambda o: o.type == g.object_type)
    self.goal_recs = [i for i, t in enumerate(self.rtypes) if t == g.receptacle_type]
    self.lamps = mask(lambda o: o.type == g.lamp_type and o.toggleable) if g.lamp_type else 0
    need = {"pick_clean_then_place_in_recep": ("cleanable", "clean"),
            "pick_heat_then_place_in_recep": ("heatable", "hot"),
            "pick_cool_then_place_in_recep": ("coolable", "cool")}.get(g.family)
    self.need = need

  @staticmethod
  @functools.lru_cache(maxsize=512)
  def of(problem: Problem) -> "World":
    return World(problem)

  # -- text -----------------------------------------------------------------------------------------------
  def contents(self, state: "State", r: int) -> list[int]:
    return [j for j in self.obj_order if state.where[j] == r]

  def describe(self, state: "State", r: int) -> str:
    name = self.rnames[r]
    if self.ropen[r]:
      if not state.opened >> r & 1:
        return f"The {name} is closed."
      return f"The {name} is open. In it, you see {see_list([self.onames[j] for j in self.contents(state, r)])}."
    return f"On the {name}, you see {see_list([self.onames[j] for j in self.contents(state, r)])}."

  def look(self, state: "State") -> str:
    """The ``look`` command: at the start no receptacle stands at the agent's location, so its list is empty."""
    if state.loc == START:
      return "You are in the middle of a room. Looking quickly around you, you see nothing."
    return f"You are facing the {self.rnames[state.loc]}. Next to it, you see nothing."

  def examine_object(self, state: "State", j: int) -> str:
    bit = 1 << j
    name = self.onames[j]
    clean, hot, cool, sliced = state.clean & bit, state.hot & bit, state.cool & bit, state.sliced & bit
    if clean and hot and sliced:
      return f"This is a hot and clean sliced {name}."
    if clean and cool and sliced:
      return f"This is a cool and clean sliced {name}."
    if clean and sliced:
      return f"This is a clean sliced {name}."
    if hot and sliced:
      return f"This is a hot sliced {name}."
    if cool and sliced:
      return f"This is a cool sliced {name}."
    if clean and hot:
      return f"This is a hot and clean {name}."
    if clean and cool:
      return f"This is a cool and clean {name}."
    if hot:
      return f"This is a hot {name}."
    if clean:
      return f"This is a clean {name}."
    if cool:
      return f"This is a cold {name}."
    if self.toggleable & bit and state.toggled & bit:
      return f"This {name} is on."
    if self.sliceable & bit and sliced:
      return f"This is a sliced {name}."
    return f"There's nothing special about {name}."

  def intro(self, state: "State") -> str:
    """The intro derives the look text without binding a location, so it lists every receptacle."""
    rec_list = see_list([self.rnames[i] for i in self.rec_order])
    room = f"You are in the middle of a room. Looking quickly around you, you see {rec_list}."
    return f"{INTRO_HEADER}\n\n{room}\n\nYour task is to: {self.problem.task_text}"

  # -- rules ----------------------------------------------------------------------------------------------
  def actions(self, state: "State") -> dict[str, tuple]:
    """Every admissible command with its operator (module docstring)."""
    acts: dict[str, tuple] = {"look": ("look",), "inventory": ("inventory",), "help": ("help",)}
    for i, name in enumerate(self.rnames):
      if i != state.loc:
        acts[f"go to {name}"] = ("goto", i)
    held = state.held
    if held >= 0:
      acts[f"examine {self.onames[held]}"] = ("examine_o", held)
    r = state.loc
    if r == START:
      return acts
    rname = self.rnames[r]
    acts[f"examine {rname}"] = ("examine_r", r)
    is_open = bool(state.opened >> r & 1)
    if self.ropen[r]:
      if is_open:
        acts[f"close {rname}"] = ("close", r)
      else:
        acts[f"open {rname}"] = ("open", r)
    reachable = not self.ropen[r] or is_open
    inside = [j for j, w in enumerate(state.where) if w == r]
    for j in inside:
      bit = 1 << j
      if self.toggleable & bit:
        acts[f"use {self.onames[j]}"] = ("use", j)
      if reachable and held < 0 and self.pickupable & bit:
        acts[f"take {self.onames[j]} from {rname}"] = ("take", j, r)
      if held >= 0 and self.knives >> held & 1 and self.sliceable & bit:
        acts[f"slice {self.onames[j]} with {self.onames[held]}"] = ("slice", j, held)
    if held >= 0:
      hbit = 1 << held
      if reachable and self.holds[r] & hbit:
        acts[f"move {self.onames[held]} to {rname}"] = ("move", held, r)
      verb = _APPLIANCE_VERB.get(self.rtypes[r])
      if verb is not None and getattr(self, verb[1]) & hbit:
        acts[f"{verb[0]} {self.onames[held]} with {rname}"] = (verb[0], held, r)
    return acts

  def apply(self, state: "State", command: str) -> tuple["State", str]:
    op = self.actions(state).get(command.strip()) if isinstance(command, str) else None
    if op is None:
      return state, NOTHING
    kind = op[0]
    rep = dataclasses.replace
    if kind == "look":
      return state, self.look(state)
    if kind == "inventory":
      if state.held < 0:
        return state, "You are not carrying anything."
      return state, f"You are carrying: a {self.onames[state.held]}."
    if kind == "help":
      return state, HELP_TEXT
    if kind == "examine_o":
      return state, self.examine_object(state, op[1])
    if kind == "examine_r":
      return state, self.describe(state, op[1])
    if kind == "goto":
      new = rep(state, loc=op[1])
      return new, f"You arrive at {self.rnames[op[1]]}. {self.describe(new, op[1])}"
    if kind == "open":
      new = rep(state, opened=state.opened | 1 << op[1])
      return new, f"You open the {self.rnames[op[1]]}. {self.describe(new, op[1])}"
    if kind == "close":
      return rep(state, opened=state.opened & ~(1 << op[1])), f"You close the {self.rnames[op[1]]}."
    if kind == "take":
      j, r = op[1], op[2]
      where = state.where[:j] + (-1,) + state.where[j + 1:]
      return rep(state, held=j, where=where), f"You pick up the {self.onames[j]} from the {self.rnames[r]}."
    if kind == "move":
      j, r = op[1], op[2]
      where = state.where[:j] + (r,) + state.where[j + 1:]
      return rep(state, held=-1, where=where), f"You move the {self.onames[j]} to the {self.rnames[r]}."
    if kind == "use":
      j = op[1]
      return rep(state, toggled=state.toggled | 1 << j), f"You turn on the {self.onames[j]}."
    if kind == "slice":
      return (rep(state, sliced=state.sliced | 1 << op[1]),
              f"You sliced the {self.onames[op[1]]} with the {self.onames[op[2]]}.")
    j, r = op[1], op[2]
    bit = 1 << j
    text = f"You {kind} the {self.onames[j]} using the {self.rnames[r]}."
    if kind == "heat":
      return rep(state, hot=state.hot | bit, cool=state.cool & ~bit), text
    if kind == "cool":
      return rep(state, cool=state.cool | bit, hot=state.hot & ~bit), text
    return rep(state, clean=state.clean | bit), text

  def won(self, state: "State") -> bool:
    g = self.problem.goal
    fam = g.family
    if fam == "look_at_obj_in_light":
      if state.held < 0 or not self.goal_objects >> state.held & 1 or state.loc == START:
        return False
      return any(self.lamps >> j & 1 and state.toggled >> j & 1 for j, w in enumerate(state.where)
                 if w == state.loc)
    goal_recs = set(self.goal_recs)
    flag = getattr(state, self.need[1]) if self.need else -1
    able = getattr(self, self.need[0]) if self.need else -1
    count: dict[int, int] = {}
    for j, w in enumerate(state.where):
      if w in goal_recs and self.goal_objects >> j & 1 and flag >> j & 1 and able >> j & 1:
        count[w] = count.get(w, 0) + 1
    need_n = 2 if fam == "pick_two_obj_and_place" else 1
    return any(c >= need_n for c in count.values())


@dataclasses.dataclass(frozen=True)
class State:
  """The hidden state (module docstring); ``world`` is the compiled problem it belongs to."""

  world: World = dataclasses.field(compare=False, repr=False)
  loc: int = START  # START or a receptacle index
  held: int = -1  # an object index or -1
  opened: int = 0  # bit i: receptacle i is open
  where: tuple[int, ...] = ()  # receptacle index per object, -1 while held
  hot: int = 0  # bit j: object j is hot (likewise cool/clean/sliced/toggled)
  cool: int = 0
  clean: int = 0
  sliced: int = 0
  toggled: int = 0

  @property
  def key(self) -> tuple:
    """A hashable summary of the state (without the problem)."""
    return (self.loc, self.held, self.opened, self.where, self.hot, self.cool, self.clean, self.sliced,
            self.toggled)


def initial_state(problem: Problem) -> State:
  world = World.of(problem)
  return State(world=world, where=world.start_where)


def admissible(state: State) -> list[str]:
  """The admissible commands, sorted as TextWorld sorts them."""
  return sorted(state.world.actions(state))


def apply(state: State, command: str) -> tuple[State, str]:
  """``(new state, feedback)``; "Nothing happens." and the same state for a command that is not admissible."""
  return state.world.apply(state, command)


def won(problem: Problem, state: State) -> bool:
  """ALFWorld's goal of ``problem`` holds in ``state``."""
  world = state.world if state.world.problem is problem else World.of(problem)
  return world.won(state)


def intro(state: State) -> str:
  """The first observation: "-= Welcome to TextWorld, ALFRED! =-", the look text and the task line."""
  return state.world.intro(state)
