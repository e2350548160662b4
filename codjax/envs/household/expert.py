"""Scripted household policies that act only through the conversation text (the ``TextPolicy``
interface of codjax/envs/experts.py).

``HouseholdExpert`` rebuilds what the episode's text says -- the receptacles of the intro, where the agent is,
what each receptacle was seen to hold, which are open, what it holds and what it did to it -- from ALFWorld's
feedback sentences ("You arrive at ...", "On the ..., you see ...", "You pick up the ...", "You heat the ...",
...), reads the goal from "Your task is to: ..." with ALFWorld's sentence templates, and the admissible
commands from the last observation. Then, each turn:

1. holding a goal object: clean/heat/cool it at the first sinkbasin/microwave/fridge when the goal asks and it
   is not done yet; for a look goal carry it to the receptacle where the lamp was seen and ``use`` the lamp
   (searching on for the lamp if it was not seen); otherwise carry it to the target receptacle (pick_two: the
   one that already holds the first), open it when closed, ``move`` it there;
2. empty-handed: take a goal object it has seen (not one it already placed), opening its receptacle first;
3. otherwise search: go to the next receptacle whose contents it has not seen, in a prior order -- receptacles
   whose class may hold the object class (``VAL_RECEPTACLE_OBJECTS``) first, and among them the open surfaces
   before the openable ones (a look costs one turn there, two here), the goal's own receptacle class last --
   and open a closed one on arrival.

Every reply is ``<think>short reasoning</think><action>command</action>`` with a command from the admissible
list (the first admissible ``go to`` or ``look`` when its choice is not admissible). ``HouseholdRandom`` picks
uniformly among the admissible commands of the last observation. Update-context prompts (cod_protocol) get a
fixed hint block from both.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re

from codjax.envs import cod_protocol as proto
from codjax.envs.experts import TextPolicy
from codjax.envs.household.vocab import APPLIANCE, FAMILIES, display_name, vocabulary
from codjax.envs.household.world import INTRO_HEADER

_NAME = r"[a-z]+ \d+"
_ITEM_RE = re.compile(r"\ba (" + _NAME + r")")
_ROOM_RE = re.compile(r"Looking quickly around you, you see (.+?)\.(?:\n|$)")
_TASK_RE = re.compile(r"Your task is to: ([^\n]+)")
_EVENT_RE = re.compile(
    r"You arrive at (?P<arrive>" + _NAME + r")\."
    r"|On the (?P<on>" + _NAME + r"), you see (?P<on_list>[^.]*)\."
    r"|The (?P<open_r>" + _NAME + r") is open\. In it, you see (?P<in_list>[^.]*)\."
    r"|The (?P<closed>" + _NAME + r") is closed\."
    r"|You close the (?P<close>" + _NAME + r")\."
    r"|You pick up the (?P<take>" + _NAME + r") from the (?P<take_from>" + _NAME + r")\."
    r"|You move the (?P<move>" + _NAME + r") to the (?P<move_to>" + _NAME + r")\."
    r"|You (?P<verb>heat|cool|clean) the (?P<done>" + _NAME + r") using the")
_HINT = ("search the receptacles that can hold the object, open surfaces before closed ones; open closed "
         "receptacles; heat with the microwave, cool with the fridge, clean with the sinkbasin; place with move")


def _cls(name: str) -> str:
  return name.rsplit(" ", 1)[0]


@functools.lru_cache(maxsize=1)
def _templates() -> tuple[tuple[str, re.Pattern], ...]:
  out = []
  for fam in FAMILIES:
    for t in vocabulary().templates[fam]:
      pat = re.escape(t).replace(r"\{obj\}", r"(?P<obj>[a-z]+)").replace(r"\{recep\}", r"(?P<recep>[a-z]+)")
      out.append((fam, re.compile(pat.replace(r"\{toggle\}", r"(?P<toggle>[a-z]+)"))))
  return tuple(out)


@functools.lru_cache(maxsize=1)
def _class_of_word() -> dict[str, str]:
  voc = vocabulary()
  return {display_name(t): t for t in voc.object_types | voc.receptacle_types | voc.lamp_types}


@dataclasses.dataclass(frozen=True)
class GoalText:
  family: str
  obj: str  # lower-case class word, e.g. "apple"
  recep: str | None
  lamp: str | None


def parse_goal(objective: str) -> GoalText | None:
  """The goal an ALFWorld task sentence states (None when it matches no template)."""
  text = " ".join(objective.strip().rstrip(".").split())
  for fam, pat in _templates():
    m = pat.fullmatch(text)
    if m:
      d = m.groupdict()
      return GoalText(fam, d["obj"], d.get("recep"), d.get("toggle"))
  return None


@dataclasses.dataclass
class Knowledge:
  """What the episode's text says so far."""

  receptacles: list[str] = dataclasses.field(default_factory=list)
  loc: str | None = None
  held: str | None = None
  contents: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # only receptacles seen inside
  openable: set[str] = dataclasses.field(default_factory=set)
  opened: set[str] = dataclasses.field(default_factory=set)
  placed: dict[str, str] = dataclasses.field(default_factory=dict)  # object -> receptacle we moved it to
  done: dict[str, set[str]] = dataclasses.field(default_factory=dict)  # object -> {"heat", "cool", "clean"}

  def observe(self, text: str) -> None:
    if not self.receptacles:
      m = _ROOM_RE.search(text)
      if m:
        self.receptacles = _ITEM_RE.findall(m.group(1))
    for m in _EVENT_RE.finditer(text):
      g = m.groupdict()
      if g["arrive"]:
        self.loc = g["arrive"]
      elif g["on"]:
        self.contents[g["on"]] = _ITEM_RE.findall(g["on_list"])
      elif g["open_r"]:
        self.openable.add(g["open_r"])
        self.opened.add(g["open_r"])
        self.contents[g["open_r"]] = _ITEM_RE.findall(g["in_list"])
      elif g["closed"]:
        self.openable.add(g["closed"])
        self.opened.discard(g["closed"])
      elif g["close"]:
        self.opened.discard(g["close"])
      elif g["take"]:
        self.held = g["take"]
        if g["take_from"] in self.contents and g["take"] in self.contents[g["take_from"]]:
          self.contents[g["take_from"]].remove(g["take"])
        self.placed.pop(g["take"], None)
      elif g["move"]:
        self.held = None
        self.contents.setdefault(g["move_to"], []).append(g["move"])
        self.placed[g["move"]] = g["move_to"]
      elif g["verb"]:
        flags = self.done.setdefault(g["done"], set())
        flags.add(g["verb"])
        flags.discard({"heat": "cool", "cool": "heat"}.get(g["verb"], ""))


def _observation_part(text: str) -> str:
  return text.split("\n\nAdmissible commands:", 1)[0]


def admissible_from(text: str) -> list[str]:
  """The commands listed under "Admissible commands:" (one ``- command`` per line)."""
  if "Admissible commands:" not in text:
    return []
  body = text.split("Admissible commands:", 1)[1]
  out = []
  for line in body.split("\n")[1:]:
    if not line.startswith("- "):
      if out:
        break
      continue
    out.append(line[2:].strip())
  return out


def _episode_users(messages: list[dict]) -> list[str]:
  """The user turns of the conversation's last episode (it starts at the last intro)."""
  users = [m["content"] for m in messages if m["role"] == "user"]
  starts = [i for i, u in enumerate(users) if INTRO_HEADER in u or "Your task is to:" in u]
  return users[starts[-1]:] if starts else users


def _clean(messages) -> list[dict[str, str]]:
  """The well-formed messages (a dict with a string role and string content); anything else is dropped."""
  if not isinstance(messages, (list, tuple)):
    return []
  return [m for m in messages if isinstance(m, dict) and isinstance(m.get("role"), str)
          and isinstance(m.get("content"), str)]


def _reply(think: str, command: str) -> str:
  return f"<think>{think}</think><action>{command}</action>"


class HouseholdExpert(TextPolicy):
  """Searches, fetches, processes and places as the goal asks (module docstring)."""

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    del rng
    messages = _clean(messages)
    if proto.is_update_prompt(messages):
      return proto.format_hint_block([_HINT], reasoning="household procedure")
    users = _episode_users(messages)
    if not users:
      return _reply("nothing to read", "look")
    admissible = admissible_from(users[-1])
    m = _TASK_RE.search(users[0])
    goal = parse_goal(m.group(1)) if m else None
    k = Knowledge()
    for u in users:
      k.observe(_observation_part(u))
    think, cmd = self.decide(k, goal, admissible) if goal else ("cannot read the task", "look")
    if cmd not in admissible and admissible:
      fallback = next((c for c in admissible if c.startswith("go to")), admissible[0])
      think, cmd = f"{think}; '{cmd}' is not admissible", fallback
    return _reply(think, cmd)

  # -- policy ---------------------------------------------------------------------------------------------
  def decide(self, k: Knowledge, goal: GoalText, admissible: list[str]) -> tuple[str, str]:
    held = k.held
    if held is not None and _cls(held) == goal.obj:
      return self._carry(k, goal, held, admissible)
    if held is not None:  # something else in hand: put it down here if we can, else move on
      here = f"move {held} to {k.loc}"
      if here in admissible:
        return (f"put down the {held} first", here)
      return self._search_step(k, goal, admissible)
    target = self._target(k, goal)
    for r in self._order(k, goal):
      for o in k.contents.get(r, []):
        if _cls(o) == goal.obj and not (target is not None and k.placed.get(o) == target):
          if k.loc == r:
            take = f"take {o} from {r}"
            return (f"{o} is here: take it", take if take in admissible else f"open {r}")
          return (f"{o} is in {r}: go there", f"go to {r}")
    return self._search_step(k, goal, admissible)

  def _carry(self, k: Knowledge, goal: GoalText, held: str, admissible: list[str]) -> tuple[str, str]:
    app = APPLIANCE.get(goal.family)
    if app is not None:
      verb = {"SinkBasin": "clean", "Microwave": "heat", "Fridge": "cool"}[app[0]]
      if verb not in k.done.get(held, set()):
        where = next((r for r in k.receptacles if _cls(r) == display_name(app[0])), None)
        if where is None:
          return ("no appliance in sight", "look")
        if k.loc == where:
          return (f"{verb} the {held} with the {where}", f"{verb} {held} with {where}")
        return (f"{held} must be {verb}ed first: go to {where}", f"go to {where}")
    if goal.family == "look_at_obj_in_light":
      lamp_at = next(((r, o) for r in k.receptacles for o in k.contents.get(r, []) if _cls(o) == goal.lamp), None)
      if lamp_at is None:
        return self._search_step(k, goal, admissible, looking_for=goal.lamp)
      r, lamp = lamp_at
      if k.loc == r:
        return (f"holding {held} at the {lamp}: turn it on", f"use {lamp}")
      return (f"carry {held} to the {lamp} on {r}", f"go to {r}")
    target = self._target(k, goal)
    if target is None:
      return ("no target receptacle in sight", "look")
    if k.loc != target:
      return (f"carry {held} to {target}", f"go to {target}")
    move = f"move {held} to {target}"
    if move in admissible:
      return (f"put {held} in {target}", move)
    return (f"{target} is closed: open it", f"open {target}")

  def _target(self, k: Knowledge, goal: GoalText) -> str | None:
    """Where the goal object goes: where we already put one (pick_two), else the first open surface of the
    goal class, else the first of its class."""
    if goal.recep is None:
      return None
    mine = [r for r in k.placed.values() if _cls(r) == goal.recep]
    if mine:
      return mine[0]
    options = [r for r in k.receptacles if _cls(r) == goal.recep]
    return min(options, key=lambda r: self._closable(k, r)) if options else None

  @staticmethod
  def _closable(k: Knowledge, r: str) -> bool:
    cls = _class_of_word().get(_cls(r), "")
    return r in k.openable or cls in vocabulary().openable

  def _order(self, k: Knowledge, goal: GoalText, looking_for: str | None = None) -> list[str]:
    """The search order (module docstring); ``looking_for`` a lamp: every receptacle, surfaces first."""
    classes = _class_of_word()
    can = vocabulary().can_contain
    want = classes.get(looking_for or goal.obj)
    likely, last, unlikely = [], [], []
    for r in k.receptacles:
      word = _cls(r)
      if word == goal.recep:
        last.append(r)
      elif looking_for is not None or want in can.get(classes.get(word, ""), ()):
        likely.append(r)
      else:
        unlikely.append(r)
    likely = sorted(likely, key=lambda r: self._closable(k, r))  # stable: intro order within each group
    return likely + last + unlikely

  def _search_step(self, k: Knowledge, goal: GoalText, admissible: list[str], looking_for: str | None = None
                   ) -> tuple[str, str]:
    what = looking_for or goal.obj
    here = k.loc
    if here is not None and here not in k.contents and f"open {here}" in admissible:
      return (f"looking for a {what}: open {here}", f"open {here}")
    for r in self._order(k, goal, looking_for=looking_for):
      if r not in k.contents and r != here:
        return (f"looking for a {what}: try {r}", f"go to {r}")
    return (f"no {what} found yet: look around", "look")


class HouseholdRandom(TextPolicy):
  """A uniformly random admissible command of the last observation."""

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    messages = _clean(messages)
    if proto.is_update_prompt(messages):
      return proto.format_hint_block(["no hint"], reasoning="random policy")
    users = _episode_users(messages)
    admissible = admissible_from(users[-1]) if users else []
    return _reply("random choice", rng.choice(admissible) if admissible else "look")
