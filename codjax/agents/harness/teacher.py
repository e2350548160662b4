"""The scripted teacher that uses the harness: SFT transcripts for EvoHarness-RL (arXiv 2608.05446, training
stage 1; docs/methods/evoharness.md).

The paper's teacher is Claude Opus acting through the same BPE interface; this one is a rule-based player that
reads ONLY the per-turn prompt (``codjax.agents.harness.render``: OBJECTIVE, OBSERVATION, ADMISSIBLE COMMANDS,
PREVIOUS ACTION(S), the PLAN / RECALLED HINTS / LAST RESULT panels) and the system prompt (which tells it the
mode and which harness verbs exist). It keeps no state between calls, exactly like a model.

What it reads off the prompt:

* where it is and what it holds, from the admissible commands alone: ``go to R`` is listed for every
  receptacle but the current one, ``examine X`` for the current receptacle and for the held object;
* its phase (search the object, process it, find the lamp, place it, second object) from what it holds and
  the environment commands of PREVIOUS ACTION(S) since its last ``take``;
* where to search: receptacles in a cyclic order: first those the RECALLED HINTS name for the object (the
  bank's search priorities), then all receptacles in name order; the next one is the one after the last
  ``go to`` in its history, so no memory beyond the 10-entry window is needed.

Harness use in ``inline`` mode (every call costs a turn, so it is sparing, as the paper's teacher):
``commit [...]`` when a phase starts (the PLAN panel shows what it committed), ``recall [where to find X]``
once at the start, ``track [X]`` when it needs something it may already have passed (the lamp of a look task,
the second object of a two-object task), and ``note [...]`` right after taking the object when the hints
were missing or wrong (the rule of the paper's system prompt). In ``always_on`` and ``env_only`` it plays the
same way with environment commands only. With ``extra_calls=p`` (default 0) a turn is, with probability p, a
redundant but well-formed ``track`` / ``recall`` call instead (about p / (1 - p) extra calls per command): an
SFT teacher that over-uses the harness, like the paper's SFT policy, for the cost-aware reward to prune.

Replies are ``<think>short reason</think><action>command</action>``.
"""

from __future__ import annotations

import random
import re

from codjax.agents.harness.belief import parse_goal, type_of
from codjax.envs.experts import MixedPolicy, TextPolicy

_QUOTED = re.compile(r"'([^']*)'")
_HINT = re.compile(r"^- \[where\] (?P<o>[^:]+): check (?P<r>.+)$")
_APPLIANCE = {"pick_heat_then_place_in_recep": ("heat", "microwave"),
              "pick_cool_then_place_in_recep": ("cool", "fridge"),
              "pick_clean_then_place_in_recep": ("clean", "sinkbasin")}


def _block(text: str, head: str) -> str:
  """The panel starting with the line ``head`` (up to the next blank line), without the head."""
  i = text.find("\n\n" + head)
  if i < 0:
    return ""
  body = text[i + 2 + len(head):]
  return body.split("\n\n", 1)[0].strip()


class TurnView:
  """What one per-turn prompt says (module docstring)."""

  def __init__(self, system: str, user: str):
    self.system, self.user = system, user
    self.objective = self._line("OBJECTIVE: ")
    obs = user.split("OBSERVATION: ", 1)[-1]
    self.observation = obs.split("\nADMISSIBLE COMMANDS: ", 1)[0].strip()
    self.admissible = _QUOTED.findall(self._line("ADMISSIBLE COMMANDS: "))
    self.history = []
    part = user.split("PREVIOUS ACTION(S):", 1)[-1].split("\n\n", 1)[0]
    for line in part.splitlines():
      m = re.match(r"^\d+\. (.*)$", line.strip())
      if m:
        self.history.append(m.group(1).split(" -> (", 1)[0].strip())
    self.plan = _block(user, "PLAN:")
    self.hints = _block(user, "RECALLED HINTS:")
    self.last_result = user.split("\n\nLAST RESULT:\n", 1)[1].strip() if "\n\nLAST RESULT:\n" in user else ""
    # the harness verbs the system prompt offers (full prompt: "## Harness actions ..."; compact: "Harness
    # actions (each costs a step): commit [subgoal], ...")
    self.verbs = {v for v in ("commit", "track", "recall", "note") if f"{v} [" in system} \
        if "Harness actions" in system else set()
    gotos = [c[6:] for c in self.admissible if c.startswith("go to ")]
    self.elsewhere = gotos
    exams = [c[8:] for c in self.admissible if c.startswith("examine ")]
    # ``examine X`` is admissible for the current receptacle and for the held object, ``go to R`` for every
    # receptacle but the current one: the examined name that is no go-to target is where we are (a receptacle
    # class) or what we hold (an object class)
    rtypes = _receptacle_words()
    self.held, self.location = "", ""
    for name in exams:
      if name in gotos:
        continue
      if type_of(name).replace(" ", "") in rtypes:
        self.location = name
      else:
        self.held = name
    self.receptacles = sorted(set(gotos) | ({self.location} if self.location else set()), key=_name_key)

  def _line(self, prefix: str) -> str:
    for line in self.user.splitlines():
      if line.startswith(prefix):
        return line[len(prefix):].strip()
    return ""

  def hinted_types(self, obj: str) -> list[str]:
    """Receptacle types the RECALLED HINTS name for ``obj`` (in their order)."""
    out = []
    for line in self.hints.splitlines():
      m = _HINT.match(line.strip())
      if m and type_of(m.group("o")) == type_of(obj):
        out += [type_of(r) for r in re.split(r", then |, ", m.group("r").strip().rstrip("."))]
    return out


def _receptacle_words() -> frozenset[str]:
  """The printed words of the household's receptacle classes (``sinkbasin``, ``countertop``, ...)."""
  from codjax.envs.household.vocab import display_name, vocabulary

  return frozenset(display_name(t) for t in vocabulary().receptacle_types)


def _name_key(name: str):
  m = re.match(r"^(.*?)\s*(\d+)$", name)
  return (m.group(1), int(m.group(2))) if m else (name, 0)


class HarnessTeacher(TextPolicy):
  """The rule-based harness teacher (module docstring)."""

  def __init__(self, use_recall: bool = True, use_track: bool = True, use_commit: bool = True,
               use_note: bool = True, think: bool = True, extra_calls: float = 0.0):
    if not 0.0 <= float(extra_calls) < 1.0:
      raise ValueError(f"extra_calls must be in [0, 1), got {extra_calls}")
    self.use = {"recall": use_recall, "track": use_track, "commit": use_commit, "note": use_note}
    self.think = think
    self.extra_calls = float(extra_calls)

  def respond(self, messages, rng: random.Random) -> str:
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    user = messages[-1]["content"] if messages else ""
    view = TurnView(system, user)
    reason, action = self.decide(view)
    # the rng is drawn only when extra calls are on, so the default teacher's transcripts stay as they were
    if self.extra_calls > 0 and rng.random() < self.extra_calls:
      extra = self._extra_call(view, rng)
      if extra is not None:
        reason, action = extra
    return f"<think>{reason if self.think else ''}</think><action>{action}</action>"

  def _extra_call(self, view: TurnView, rng: random.Random) -> tuple[str, str] | None:
    """A well-formed but redundant harness call (``extra_calls``): a ``track`` or ``recall`` about the
    objective's object or target, never the previous action again (no spam); None when no verb is offered.
    An SFT teacher that over-uses the harness, as the paper's SFT policy does (9.03 calls per ALFWorld episode
    before RL, 2.98 after), leaves the cost-aware reward something to prune."""
    goal = parse_goal(view.objective)
    if not goal.obj:
      return None
    words = [type_of(goal.obj)] + ([type_of(goal.target)] if goal.target else [])
    options = []
    if self._can(view, "track"):
      options += [(f"check the {w} again", f"track [{w}]") for w in words]
    if self._can(view, "recall"):
      options += [(f"what do I know about the {w}", f"recall [where to find {w}]") for w in words]
    last = view.history[-1] if view.history else ""
    options = [o for o in options if o[1] != last]
    return rng.choice(options) if options else None

  # -- decision ---------------------------------------------------------------------------------------------
  def _can(self, view: TurnView, verb: str) -> bool:
    return self.use[verb] and verb in view.verbs

  def decide(self, view: TurnView) -> tuple[str, str]:
    goal = parse_goal(view.objective)
    obj, target, fam = goal.obj, goal.target, goal.family
    adm = view.admissible
    if not obj or not adm:
      return "look around", adm[0] if adm else "look"
    held = view.held
    held_goal = bool(held) and type_of(held) == type_of(obj)
    plan = view.plan
    history = view.history

    def commit(text: str):
      if self._can(view, "commit") and f"] {text} (" not in plan:
        return text, f"commit [{text}]"
      return None

    # -- holding the goal object: process it, then find the lamp or place it --------------------------------
    if held_goal:
      just_taken = bool(history) and history[-1].startswith(f"take {held} from ")
      if just_taken and self._can(view, "note"):
        where = type_of(history[-1].split(" from ", 1)[1])
        hinted = view.hinted_types(obj)
        if where not in hinted and not any(h.startswith("note [") for h in history):
          return "remember where it was", f"note [{type_of(obj)} found in {where}]"
      if fam in _APPLIANCE:
        verb, appliance = _APPLIANCE[fam]
        done = any(h.startswith(f"{verb} {held} with ") for h in history) or f"] {verb} {type_of(obj)} (" in plan \
            and not plan.split(f"] {verb} {type_of(obj)} (", 1)[1].startswith("open")
        if not done:
          c = commit(f"{verb} {type_of(obj)}")
          if c:
            return c
          cmd = next((a for a in adm if a.startswith(f"{verb} {held} with ")), None)
          if cmd:
            return f"{verb} it here", cmd
          return self._goto_type(view, appliance, f"go to the {appliance}")
      if fam == "look_at_obj_in_light":
        c = commit(f"find {target}")
        if c:
          return c
        use = next((a for a in adm if a.startswith("use ") and type_of(a[4:]) == type_of(target)), None)
        if use:
          return "turn on the lamp", use
        if self._can(view, "track") and not self._since_commit(view, "track [") and \
           f"TRACK [{type_of(target)}]" not in view.last_result:
          return f"where is the {target}", f"track [{type_of(target)}]"
        known = self._tracked_location(view, target)
        if known and known != view.location:
          return f"the {target} is at {known}", f"go to {known}"
        return self._search(view, target, skip=())
      c = commit(f"put {type_of(obj)} in {target}")
      if c:
        return c
      return self._place(view, held, target)

    # -- holding something else (a wrong pick): put it back where we are ---------------------------------------
    if held and not held_goal:
      put = next((a for a in adm if a.startswith(f"move {held} to ")), None)
      if put:
        return "not what I need", put
      return self._search(view, obj, skip=())

    # -- empty hands: find the (next) object --------------------------------------------------------------------
    placed = sum(h.startswith("move ") and type_of(h[5:].split(" to ", 1)[0]) == type_of(obj) for h in history)
    second = fam == "pick_two_obj_and_place" and (placed > 0 or f"] find second {type_of(obj)} (" in plan)
    what = f"find second {type_of(obj)}" if second else f"find {type_of(obj)}"
    c = commit(what)
    if c:
      return c
    if not second and self._can(view, "recall") and not view.hints and \
       not any(h.startswith("recall [") for h in history):
      return "where does it usually go", f"recall [where to find {type_of(obj)}]"
    if second and self._can(view, "track") and not self._since_commit(view, "track [") and \
       f"TRACK [{type_of(obj)}]" not in view.last_result:
      return "another one seen before?", f"track [{type_of(obj)}]"
    skip = tuple(r for r in view.receptacles if type_of(r) == type_of(target)) \
        if fam != "look_at_obj_in_light" else ()
    here = view.location
    if here and here not in skip:
      take = next((a for a in adm if a.startswith("take ") and type_of(a[5:].split(" from ", 1)[0]) == type_of(obj)),
                  None)
      if take:
        return f"take the {type_of(obj)}", take
      if f"open {here}" in adm and view.observation.endswith(f"The {here} is closed.") or \
         (f"open {here}" in adm and f"You arrive at {here}." in view.observation and "is closed" in view.observation):
        return "look inside", f"open {here}"
    if second:
      known = self._tracked_location(view, obj, skip=skip)
      if known and known != here:
        return "go get the other one", f"go to {known}"
    return self._search(view, obj, skip=skip)

  # -- helpers --------------------------------------------------------------------------------------------------
  @staticmethod
  def _since_commit(view: TurnView, prefix: str) -> bool:
    """Whether an action starting with ``prefix`` was taken since the last ``commit`` of the history."""
    for h in reversed(view.history):
      if h.startswith(prefix):
        return True
      if h.startswith("commit ["):
        return False
    return False

  def _tracked_location(self, view: TurnView, name: str, skip=()) -> str:
    """A receptacle the last ``track`` result places an instance of ``name`` in (not in ``skip``)."""
    if not view.last_result.startswith("TRACK ["):
      return ""
    for line in view.last_result.splitlines()[1:]:
      m = re.match(r"^- (?P<n>[a-z ]+ \d+)\b.*?\b(?:in|on) (?P<r>[a-z ]+ \d+)", line.strip())
      if m and type_of(m.group("n")) == type_of(name) and m.group("r") in view.receptacles \
         and m.group("r") not in skip:
        return m.group("r")
    return ""

  def _order(self, view: TurnView, obj: str) -> list[str]:
    hinted = view.hinted_types(obj)
    first = [r for t in hinted for r in view.receptacles if type_of(r) == t]
    return first + [r for r in view.receptacles if r not in first]

  def _search(self, view: TurnView, obj: str, skip) -> tuple[str, str]:
    """Go to the receptacle after the last visited one in the cyclic search order (module docstring)."""
    order = [r for r in self._order(view, obj) if r not in skip] or self._order(view, obj)
    gotos = [h[6:] for h in view.history if h.startswith("go to ")]
    last = next((g for g in reversed(gotos) if g in order), None)
    k = (order.index(last) + 1) % len(order) if last is not None else 0
    for step in range(len(order)):
      r = order[(k + step) % len(order)]
      if r != view.location:
        return f"search {r}", f"go to {r}"
    return "look around", "look"

  def _goto_type(self, view: TurnView, rtype: str, reason: str) -> tuple[str, str]:
    dest = next((r for r in view.receptacles if type_of(r) == rtype), None)
    if dest is None:
      return "look around", "look"
    if view.location == dest:
      if f"open {dest}" in view.admissible:
        return "open it", f"open {dest}"
      return "look around", "look"
    return reason, f"go to {dest}"

  def _place(self, view: TurnView, held: str, target: str) -> tuple[str, str]:
    move = next((a for a in view.admissible if a.startswith(f"move {held} to ") and type_of(a.split(" to ", 1)[1])
                 == type_of(target)), None)
    if move:
      return "put it there", move
    here = view.location
    if here and type_of(here) == type_of(target) and f"open {here}" in view.admissible:
      return "open it first", f"open {here}"
    return self._goto_type(view, type_of(target), f"go to the {target}")


class HarnessRandom(TextPolicy):
  """Uniform over the admissible environment commands of the per-turn prompt (``look`` if none)."""

  def respond(self, messages, rng: random.Random) -> str:
    view = TurnView("", messages[-1]["content"] if messages else "")
    return f"<think></think><action>{rng.choice(view.admissible) if view.admissible else 'look'}</action>"


def make_harness_teacher(random_frac: float = 0.0, **params) -> TextPolicy:
  """The harness teacher with ``random_frac`` of its turns uniformly random admissible commands (the SFT
  teacher of ``sft.expert_random_frac``); ``params`` go to ``HarnessTeacher`` (``sft.teacher_params``, e.g.
  ``extra_calls``)."""
  teacher = HarnessTeacher(**params)
  return MixedPolicy(teacher, HarnessRandom(), float(random_frac)) if random_frac > 0 else teacher
