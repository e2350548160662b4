"""Belief B_t: the per-episode scene graph read from ALFWorld's feedback text (EvoHarness-RL, arXiv 2608.05446;
public code EvoHarnessRL/EvoHarness-RL ``evoharness/envs/alfworld/belief.py``).

The graph is rule-based and updated silently after every environment step from the (command, feedback) pair;
the policy sees it only through ``track [q]`` (or the always-on world panel). Rules, stated once:

* Nodes are objects and receptacles (``"apple 1"``, ``"fridge 1"``), each with boolean attributes among
  ``ATTRIBUTES`` (isOpen, isHeated, isCooled, isCleaned, isSliced, isToggled, isPickedUp, visited). An attribute
  is absent until the feedback tells it.
* Edges are location relations ``in``, ``on`` and ``held_by`` (held_by points at ``AGENT``). They are
  functional: an object has at most one location edge, and a new one replaces the old. The edge list is kept
  newest first and capped at ``MAX_EDGES`` = 48 (the oldest edge falls off). Re-observing an object puts its
  edge at the front again.
* Feedback sentences read (the ALFWorld grammar ``alfred.twl2``):
  "You arrive at R." (agent at R, R visited); "On the R, you see L." (every item of L on R); "The R is open. In
  it, you see L." (R open, items in R); "The R is closed."; "You open/close the R."; "You pick up the O from the
  R." (O held); "You move the O to the R." (O in R when R is openable, else on R); "You put the O in the R.";
  "You heat/cool/clean the O using the R." (heat clears cooled and cool clears heated, as the PDDL domain
  does); "You sliced the O with the K."; "You turn on/off the O."; "You are carrying: L." / "You are not
  carrying anything."; "This is a hot and clean sliced O." and the other examine lines; "You are facing the R.";
  "You are in the middle of a room. Looking quickly around you, you see L." (receptacles, not visited).
  A listing of R's contents is complete: an object the graph had in/on R but missing from the listing loses
  its edge. A listing is inserted so that its first item ends up newest.
* "Nothing happens." means the action failed: nothing changes.
* ``track [q]``: every node whose name contains q (substring), with its relations and attributes, or
  "not found yet" plus the locations visited so far; ``track [world]``: a compact global summary.
* Progress estimate (for Progress): the objective is read into a ``Goal`` (family, object type, target type)
  and scored by milestones (found, held, transformed for clean/heat/cool, placed by the agent in a target-type
  receptacle; for pick_two one then two placed; for look the lamp switched on while holding the object). A
  milestone counts when it or any later one holds; the estimate is reached/total, 1.0 once won. A step
  *advanced* the objective when the estimate rose above its best so far. An objective the templates cannot
  read falls back to "the graph changed".
"""

from __future__ import annotations

import dataclasses
import re

ATTRIBUTES: tuple[str, ...] = ("isOpen", "isHeated", "isCooled", "isCleaned", "isSliced", "isToggled", "isPickedUp",
                               "visited")
RELATIONS: tuple[str, ...] = ("in", "on", "held_by")
MAX_EDGES = 48
AGENT = "agent"
TRACK_MAX_LINES = 12
# receptacle types the ALFRED domain makes openable (alfworld.gen.constants.OPENABLE_CLASS_LIST, lowercased)
OPENABLE_TYPES = frozenset({"fridge", "cabinet", "microwave", "drawer", "safe", "box"})

TASK_TYPES: tuple[str, ...] = ("look_at_obj_in_light", "pick_clean_then_place_in_recep",
                               "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                               "pick_two_obj_and_place", "pick_and_place_simple")
_TRANSFORM = {"pick_clean_then_place_in_recep": "isCleaned", "pick_heat_then_place_in_recep": "isHeated",
              "pick_cool_then_place_in_recep": "isCooled"}
_WORDS = {("isOpen", True): "open", ("isOpen", False): "closed", ("isHeated", True): "heated",
          ("isCooled", True): "cooled", ("isCleaned", True): "cleaned", ("isSliced", True): "sliced",
          ("isToggled", True): "on", ("isToggled", False): "off", ("isPickedUp", True): "picked up",
          ("visited", True): "visited"}


def _norm(text: str) -> str:
  return " ".join(str(text).split()).lower()


def type_of(name: str) -> str:
  """``"apple 1"`` -> ``"apple"`` (a trailing instance number is dropped)."""
  return re.sub(r"\s+\d+$", "", _norm(name))


def task_type_of(objective: str) -> str:
  """ALFWorld task family from the objective's words, first match in this order: look/examine/*lamp*,
  clean, heat/hot, cool/cold, two; otherwise pick_and_place_simple (the public code's order,
  ``evoharness/envs/alfworld/domain.py``)."""
  words = re.findall(r"[a-z]+", _norm(objective))
  if any(w in ("look", "examine") or "lamp" in w for w in words):
    return "look_at_obj_in_light"
  for family, keys in (("pick_clean_then_place_in_recep", ("clean",)), ("pick_heat_then_place_in_recep",
                                                                         ("heat", "hot")),
                       ("pick_cool_then_place_in_recep", ("cool", "cold")), ("pick_two_obj_and_place", ("two",))):
    if any(w in keys for w in words):
      return family
  return "pick_and_place_simple"


@dataclasses.dataclass(frozen=True)
class Goal:
  """The objective read by ALFWorld's templates: family, object type, target receptacle (or lamp) type."""

  family: str
  obj: str = ""
  target: str = ""

  @property
  def parsed(self) -> bool:
    return bool(self.obj and self.target)


_ART = r"(?:(?:a|an|some|the) )?"
_IN = r"(?:in|on|into|onto)"
_GOAL_PATTERNS = (
    re.compile(rf"^(?:look at|examine) {_ART}(?P<o>.+?) (?:under|with) {_ART}(?P<t>.+)$"),
    re.compile(rf"^(?:put|find) two (?P<o>.+?) (?:and put them )?{_IN} {_ART}(?P<t>.+)$"),
    re.compile(rf"^(?:clean|heat|cool) {_ART}(?P<o>.+?) and put (?:it|them) {_IN} {_ART}(?P<t>.+)$"),
    re.compile(rf"^put {_ART}(?:(?:clean|hot|cool|cold) )?(?P<o>.+?) {_IN} {_ART}(?P<t>.+)$"),
)


def parse_goal(objective: str) -> Goal:
  """``"Your task is to: put a hot apple in fridge."`` -> Goal(pick_heat_then_place_in_recep, apple, fridge)."""
  text = _norm(objective)
  text = text.split("your task is to:", 1)[-1].strip().rstrip(".").strip()
  family = task_type_of(text)
  for pattern in _GOAL_PATTERNS:
    m = pattern.match(text)
    if m:
      return Goal(family, m.group("o").strip(), m.group("t").strip())
  return Goal(family)


def _same_type(node_type: str, wanted: str) -> bool:
  a, b = node_type.replace(" ", ""), wanted.replace(" ", "")
  return bool(b) and (a == b or (b.endswith("s") and a == b[:-1]))


@dataclasses.dataclass
class Node:
  name: str
  kind: str  # object | receptacle
  attrs: dict[str, bool] = dataclasses.field(default_factory=dict)
  contents_known: bool = False  # a receptacle whose contents were listed at least once


@dataclasses.dataclass(frozen=True)
class Edge:
  subject: str
  relation: str  # in | on | held_by
  target: str


@dataclasses.dataclass(frozen=True)
class StepUpdate:
  """What one environment step did to the belief."""

  changed: bool  # the graph (nodes, edges, attributes, agent location) changed
  failed: bool  # "Nothing happens.": the action failed
  estimate: float  # the progress estimate after the step
  advanced: bool  # the step did something relevant to the objective (estimate above its best so far)
  won: bool


def _items(listing: str) -> list[str]:
  """``"a apple 1, a bread 1, and a knife 1"`` -> ``["apple 1", "bread 1", "knife 1"]``; "nothing" -> []."""
  out = []
  for part in listing.split(","):
    part = _norm(part)
    part = re.sub(r"^and ", "", part)
    part = re.sub(r"^(?:a|an|some|the) ", "", part)
    if part and part != "nothing" and part not in out:
      out.append(part)
  return out


_N = r"([^.,]+?)"  # a name: no period or comma inside
_SENTENCES = (
    ("middle", re.compile(r"you are in the middle of a room\. looking quickly around you, you see ([^.]*)\.")),
    ("facing", re.compile(r"you are facing the ([^.]+?)\. next to it, you see ([^.]*)\.")),
    ("arrive", re.compile(rf"you arrive at {_N}\.")),
    ("open", re.compile(rf"you open the {_N}\.")),
    ("close", re.compile(rf"you close the {_N}\.")),
    ("on_list", re.compile(rf"on the {_N}, you see ([^.]*)\.")),
    ("in_list", re.compile(rf"the {_N} is open\. in it, you see ([^.]*)\.")),
    ("closed", re.compile(rf"the {_N} is closed\.")),
    ("normal", re.compile(rf"this is a normal {_N}\. in it, you see ([^.]*)\.")),
    ("pick_from", re.compile(rf"you pick up the {_N} from the {_N}\.")),
    ("pick", re.compile(r"you pick up the (?![^.]* from the )([^.,]+?)\.")),
    ("move", re.compile(rf"you move the {_N} to the {_N}\.")),
    ("put", re.compile(rf"you put the {_N} in the {_N}\.")),
    ("heat", re.compile(rf"you heat the {_N} using the {_N}\.")),
    ("cool", re.compile(rf"you cool the {_N} using the {_N}\.")),
    ("clean", re.compile(rf"you clean the {_N} using the {_N}\.")),
    ("slice", re.compile(rf"you sliced the {_N} with the {_N}\.")),
    ("turn", re.compile(rf"you turn (on|off) the {_N}\.")),
    ("carrying", re.compile(r"you are carrying: ([^.]*)\.")),
    ("empty_handed", re.compile(r"you are not carrying anything\.")),
    ("describe", re.compile(rf"this is a (?!normal ){_N}\.")),
    ("switch", re.compile(rf"this {_N} is (on|off)\.")),
    ("plain", re.compile(rf"there's nothing special about {_N}\.")),
)
_ADJECTIVES = {"hot": "isHeated", "cool": "isCooled", "cold": "isCooled", "clean": "isCleaned", "sliced": "isSliced"}


class Belief:
  """The scene graph of one episode (module docstring)."""

  def __init__(self, objective: str = ""):
    self.goal = parse_goal(objective)
    self.nodes: dict[str, Node] = {}
    self.edges: list[Edge] = []  # newest first
    self.location: str | None = None
    self.visited: list[str] = []  # receptacles in order of first visit
    self.receptacles: list[str] = []  # receptacles in order of first mention
    self.placed: dict[str, str] = {}  # object -> receptacle the agent moved it to (while it stays there)
    self.steps = 0
    self.best_estimate = 0.0

  # -- graph primitives -------------------------------------------------------------------------------
  def _node(self, name: str, kind: str) -> Node:
    node = self.nodes.get(name)
    if node is None:
      node = self.nodes[name] = Node(name, kind)
    if kind == "receptacle" and name not in self.receptacles:
      self.receptacles.append(name)
    return node

  def _set(self, name: str, kind: str, **attrs: bool) -> None:
    self._node(name, kind).attrs.update(attrs)

  def _remove_edge(self, subject: str) -> None:
    self.edges = [e for e in self.edges if e.subject != subject]

  def _relate(self, subject: str, relation: str, target: str) -> None:
    if subject == target:
      return
    self._node(subject, "object")
    if target != AGENT:
      self._node(target, "receptacle")
    self._remove_edge(subject)
    self.edges.insert(0, Edge(subject, relation, target))
    del self.edges[MAX_EDGES:]
    if relation == "held_by" or self.placed.get(subject) != target:
      self.placed.pop(subject, None)

  def _containment(self, receptacle: str) -> str:
    node = self.nodes.get(receptacle)
    if node is not None and ("isOpen" in node.attrs or node.kind == "object"):
      return "in"
    return "in" if type_of(receptacle) in OPENABLE_TYPES else "on"

  def _listing(self, receptacle: str, relation: str, listing: str) -> None:
    items = _items(listing)
    node = self._node(receptacle, "receptacle")
    node.contents_known = True
    for e in [e for e in self.edges if e.target == receptacle and e.relation in ("in", "on")]:
      if e.subject not in items:
        self._remove_edge(e.subject)
        self.placed.pop(e.subject, None)
    for item in reversed(items):
      self._relate(item, relation, receptacle)

  def _hold(self, obj: str) -> None:
    self._relate(obj, "held_by", AGENT)
    self._set(obj, "object", isPickedUp=True)

  def _release(self, obj: str) -> None:
    self._set(obj, "object", isPickedUp=False)

  def _arrive(self, receptacle: str) -> None:
    self.location = receptacle
    self._set(receptacle, "receptacle", visited=True)
    if receptacle not in self.visited:
      self.visited.append(receptacle)

  # -- updates -----------------------------------------------------------------------------------------
  def _signature(self) -> tuple:
    return (tuple(self.edges), self.location, tuple(self.receptacles),
            tuple((n.name, tuple(sorted(n.attrs.items())), n.contents_known) for n in self.nodes.values()))

  def observe_intro(self, text: str) -> None:
    """Reads the episode's first observation (the room overview); changes no progress."""
    self._apply(_norm(text))
    self.best_estimate = max(self.best_estimate, self.estimate())

  def observe(self, command: str, feedback: str, won: bool = False) -> StepUpdate:
    """Updates the graph from one environment step and scores it against the objective."""
    self.steps += 1
    text = _norm(feedback)
    if text.startswith("nothing happens"):
      return StepUpdate(False, True, self.estimate(won), False, bool(won))
    before = self._signature()
    self._apply(text, _norm(command))
    changed = self._signature() != before
    est = self.estimate(won)
    if self.goal.parsed:
      advanced = est > self.best_estimate
    else:
      advanced = changed or bool(won)
    self.best_estimate = max(self.best_estimate, est)
    return StepUpdate(changed, False, est, advanced, bool(won))

  def _apply(self, text: str, command: str = "") -> None:
    for kind, pattern in _SENTENCES:
      for m in pattern.finditer(text):
        self._sentence(kind, m.groups(), command)

  def _sentence(self, kind: str, g: tuple[str, ...], command: str) -> None:
    if kind == "middle":
      self.location = None
      for r in _items(g[0]):
        self._node(r, "receptacle")
    elif kind == "facing":
      self.location = _items(g[0])[0] if _items(g[0]) else None
      for r in _items(g[0]):
        self._node(r, "receptacle")
    elif kind == "arrive":
      self._arrive(g[0])
    elif kind == "open":
      self._set(g[0], "receptacle", isOpen=True)
    elif kind == "close":
      self._set(g[0], "receptacle", isOpen=False)
    elif kind == "on_list":
      self._listing(g[0], "on", g[1])
    elif kind == "in_list":
      self._set(g[0], "receptacle", isOpen=True)
      self._listing(g[0], "in", g[1])
    elif kind == "closed":
      self._set(g[0], "receptacle", isOpen=False)
    elif kind == "normal":
      self._node(g[0], "object")
      self._listing(g[0], "in", g[1])
    elif kind == "pick_from":
      self._node(g[1], "receptacle")
      self._hold(g[0])
    elif kind == "pick":
      self._hold(g[0])
    elif kind in ("move", "put"):
      obj, rec = g
      self._relate(obj, self._containment(rec), rec)
      self._release(obj)
      self.placed[obj] = rec
    elif kind == "heat":
      self._set(g[0], "object", isHeated=True, isCooled=False)
      self._node(g[1], "receptacle")
    elif kind == "cool":
      self._set(g[0], "object", isCooled=True, isHeated=False)
      self._node(g[1], "receptacle")
    elif kind == "clean":
      self._set(g[0], "object", isCleaned=True)
      self._node(g[1], "receptacle")
    elif kind == "slice":
      self._set(g[0], "object", isSliced=True)
      self._node(g[1], "object")
    elif kind == "turn":
      self._set(g[1], "object", isToggled=(g[0] == "on"))
    elif kind in ("carrying", "empty_handed"):
      held = _items(g[0]) if kind == "carrying" else []
      for e in [e for e in self.edges if e.relation == "held_by"]:
        if e.subject not in held:
          self._remove_edge(e.subject)
          self._release(e.subject)
      for obj in reversed(held):
        self._hold(obj)
    elif kind == "describe":
      words = g[0].split()
      attrs = {}
      while words and (words[0] in _ADJECTIVES or words[0] == "and"):
        w = words.pop(0)
        if w in _ADJECTIVES:
          attrs[_ADJECTIVES[w]] = True
      if words and attrs:
        self._set(" ".join(words), "object", **attrs)
    elif kind == "switch":
      self._set(g[0], "object", isToggled=(g[1] == "on"))
    elif kind == "plain":
      self._node(g[0], "object")

  # -- queries -----------------------------------------------------------------------------------------
  def location_of(self, name: str) -> Edge | None:
    return next((e for e in self.edges if e.subject == name), None)

  def holding(self) -> list[str]:
    return [e.subject for e in self.edges if e.relation == "held_by"]

  def contents(self, receptacle: str) -> list[str]:
    return [e.subject for e in self.edges if e.target == receptacle and e.relation in ("in", "on")]

  def _words(self, node: Node) -> list[str]:
    out = [_WORDS[(k, node.attrs[k])] for k in ATTRIBUTES if (k, node.attrs.get(k)) in _WORDS]
    if node.kind == "receptacle" and not node.attrs.get("visited"):
      out.insert(0, "not visited")
    return out

  def _describe(self, node: Node) -> str:
    if node.kind == "receptacle":
      inside = self.contents(node.name)
      rel = ("contains " + ", ".join(inside) if inside else "contains nothing" if node.contents_known
             else "contents unknown")
    else:
      e = self.location_of(node.name)
      rel = ("held by you" if e is not None and e.relation == "held_by" else f"{e.relation} {e.target}"
             if e is not None else "location unknown")
    words = self._words(node)
    return f"- {node.name}: {rel}" + (f"; {', '.join(words)}" if words else "")

  def track(self, query: str) -> str:
    """``track [q]`` (module docstring)."""
    q = _norm(query)
    if q == "world":
      return self.world_summary()
    hits = sorted((n for n in self.nodes.values() if q and q in n.name), key=lambda n: _sort_key(n.name))
    if not hits:
      where = ", ".join(self.visited) if self.visited else "none"
      return f"TRACK [{q}]: not found yet. Locations visited so far: {where}."
    lines = [f"TRACK [{q}]:"] + [self._describe(n) for n in hits[:TRACK_MAX_LINES]]
    if len(hits) > TRACK_MAX_LINES:
      lines.append(f"- ... and {len(hits) - TRACK_MAX_LINES} more")
    return "\n".join(lines)

  def world_summary(self) -> str:
    """``track [world]``: where you are, what you hold, visited and unvisited places, and the known objects."""
    held = self.holding()
    where = f"you are at {self.location}" if self.location else "you are in the middle of the room"
    lines = ["WORLD:", f"- {where}; holding {', '.join(held) if held else 'nothing'}"]
    visited = []
    for r in self.visited:
      state = self.nodes[r].attrs.get("isOpen")
      visited.append(r + ("" if state is None else " (open)" if state else " (closed)"))
    lines.append(f"- visited: {', '.join(visited) if visited else 'none'}")
    unvisited = [r for r in self.receptacles if r not in self.visited]
    if unvisited:
      lines.append(f"- not visited yet: {', '.join(unvisited)}")
    objs = []
    for e in self.edges:
      if e.relation == "held_by":
        continue
      words = [w for w in self._words(self.nodes[e.subject]) if w != "picked up"]
      objs.append(f"{e.subject} {e.relation} {e.target}" + (f" ({', '.join(words)})" if words else ""))
    for name in held:
      words = [w for w in self._words(self.nodes[name]) if w != "picked up"]
      if words:
        objs.insert(0, f"{name} held ({', '.join(words)})")
    lines.append(f"- objects: {'; '.join(objs) if objs else 'none seen yet'}")
    return "\n".join(lines)

  # -- progress estimate ---------------------------------------------------------------------------------
  def _of_type(self, wanted: str) -> list[Node]:
    return [n for n in self.nodes.values() if n.kind == "object" and _same_type(type_of(n.name), wanted)]

  def milestones(self) -> list[bool]:
    """The objective's milestones in order, each as currently reached (before the 'or a later one' rule)."""
    g = self.goal
    objs = self._of_type(g.obj)
    held = set(self.holding())
    found = bool(objs)
    holding = any(n.name in held for n in objs)
    if g.family == "look_at_obj_in_light":
      lamp_on = any(n.attrs.get("isToggled") for n in self._of_type(g.target))
      return [found, holding, holding and lamp_on]
    need = _TRANSFORM.get(g.family)
    ok = [n for n in objs if need is None or n.attrs.get(need)]
    placed = sum(1 for n in ok if n.name in self.placed and _same_type(type_of(self.placed[n.name]), g.target))
    if g.family == "pick_two_obj_and_place":
      return [found, holding, placed >= 1, placed >= 2]
    if need is not None:
      return [found, holding, bool(ok), placed >= 1]
    return [found, holding, placed >= 1]

  def estimate(self, won: bool = False) -> float:
    """The progress estimate in [0, 1] (module docstring)."""
    if won:
      return 1.0
    if not self.goal.parsed:
      return 0.0
    marks = self.milestones()
    deepest = max((i + 1 for i, m in enumerate(marks) if m), default=0)
    return deepest / len(marks)


def _sort_key(name: str) -> tuple:
  m = re.match(r"^(.*?)\s*(\d+)$", name)
  return (m.group(1), int(m.group(2))) if m else (name, 0)
