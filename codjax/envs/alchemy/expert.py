"""Scripted Alchemy-Random policies that act only through the conversation text.

Knowledge: recipes ``a+b=c`` and failed pairs, read from the hint (``- recipes: a+b=c; ...`` and
``- failed: a+b; ...``; Markdown variants such as ``**a + b** = c`` are read too) and from the feedback lines
of the episode (``You combined A + B and created: C!`` / ``A + B — nothing happened.``; a final ``Success!``
pins the last pair as the target's recipe). Names not in the tier list of the system prompt are ignored.

Solve turns: if the known recipes can build the target from the current inventory (counting consumed copies in
limited mode), take the first craft of that plan. Otherwise pick an untried pair of held or craftable elements
below the target's tier, preferring, in order: pairs whose tier could still yield an element not yet held,
same-tier pairs (outputs sit one tier above their inputs), pairs that could yield the target directly, fewer
preparatory crafts, (limited mode) pairs that leave a copy of each input, higher tiers; remaining ties go to the
caller's rng. A pair that needs crafts first starts with the first of them.

Text: ``know 3 recipes; make abc from de+fg`` or ``know 0 recipes; try de+fg`` then ``<answer>de + fg</answer>``;
update episodes answer ``know 3 recipes, 2 failed`` and a hint block with the recipe and failed-pair bullets.
"""

from __future__ import annotations

import random
import re
from collections import Counter

from codjax.envs import cod_protocol as proto
from codjax.envs.experts import TextPolicy
from codjax.envs.helpers import split_trajectory

_TARGET_RE = re.compile(r'create the target element "([^"]+)"')
_TIER_RE = re.compile(r"^- tier (\d+): (.*)$", re.MULTILINE)
# names are bounded and anchored at word starts so that no regex here can backtrack quadratically
_MADE_RE = re.compile(r"You combined (\S{1,40}) \+ (\S{1,40}) and created: (\S{1,40})!")
_FAILED_RE = re.compile(r"(?<!\S)(\S{1,40}) \+ (\S{1,40}) — nothing happened\.")
_HINT_RECIPE_RE = re.compile(r"\b([A-Za-z]{1,40})\**\s*\+\s*\**([A-Za-z]{1,40})\b\**\s*=\s*\**([A-Za-z]{1,40})\b")
_HINT_PAIR_RE = re.compile(r"\b([A-Za-z]{1,40})\s*\+\s*([A-Za-z]{1,40})\b(?!\s*\**\s*=)")
_INV_UNLIMITED_RE = re.compile(r"Available elements in your inventory:\n((?:- \S+\n?)*)")
_INV_LIMITED_RE = re.compile(r"Inventory \(\d+ total copies\):\n((?:- \S+ x\d+\n?)*)")

Pair = tuple[str, str]


def _key(a: str, b: str) -> Pair:
  return tuple(sorted((a.lower(), b.lower())))


class Knowledge:
  """Recipes and failed pairs of one environment (pack)."""

  def __init__(self, names: set[str] | None = None):
    self.names = names
    self.recipes: dict[Pair, str] = {}
    self.failed: set[Pair] = set()

  def _ok(self, *elems: str) -> bool:
    return self.names is None or all(e in self.names for e in elems)

  def add_recipe(self, a: str, b: str, c: str) -> None:
    a, b, c = a.lower(), b.lower(), c.lower()
    if self._ok(a, b, c):
      self.recipes[_key(a, b)] = c
      self.failed.discard(_key(a, b))

  def add_failed(self, a: str, b: str) -> None:
    a, b = a.lower(), b.lower()
    if self._ok(a, b) and _key(a, b) not in self.recipes:
      self.failed.add(_key(a, b))

  def read_hint(self, hint: str) -> None:
    for line in (hint or "").splitlines():
      if "fail" in line.lower():
        for a, b in _HINT_PAIR_RE.findall(line.split(":", 1)[-1]):
          self.add_failed(a, b)
      else:
        for a, b, c in _HINT_RECIPE_RE.findall(line):
          self.add_recipe(a, b, c)

  def read_feedback(self, text: str) -> None:
    for a, b, c in _MADE_RE.findall(text):
      self.add_recipe(a, b, c)
    for a, b in _FAILED_RE.findall(text):
      self.add_failed(a, b)

  def hint_bullets(self) -> list[str]:
    out = []
    if self.recipes:
      out.append("recipes: " + "; ".join(f"{a}+{b}={c}" for (a, b), c in sorted(self.recipes.items())))
    if self.failed:
      out.append("failed: " + "; ".join(f"{a}+{b}" for a, b in sorted(self.failed)))
    return out or ["recipes: none known"]


def parse_tiers(system: str) -> dict[str, int]:
  return {e.strip(): int(t) for t, elems in _TIER_RE.findall(system) for e in elems.split(",") if e.strip()}


def parse_inventory(obs: str) -> Counter | None:
  m = _INV_LIMITED_RE.search(obs)
  if m:
    inv = Counter()
    for line in m.group(1).splitlines():
      name, _, n = line[2:].rpartition(" x")
      inv[name] = int(n)
    return inv
  m = _INV_UNLIMITED_RE.search(obs)
  if m:
    return Counter({line[2:]: 1 for line in m.group(1).splitlines() if line.startswith("- ")})
  return None


def crafts_for(elems: list[str], inv: Counter, know: Knowledge, limited: bool) -> list[Pair] | None:
  """Crafts that make every element of ``elems`` available at once from ``inv`` with known recipes (each
  reserved copy is consumed in limited mode); None when the known recipes do not suffice."""
  by_result: dict[str, list[Pair]] = {}
  for pair, res in sorted(know.recipes.items()):
    by_result.setdefault(res, []).append(pair)

  def acquire(e: str, stock: Counter, visiting: frozenset) -> list[Pair] | None:
    if stock[e] > 0:
      if limited:
        stock[e] -= 1
      return []
    if e in visiting:
      return None
    for a, b in by_result.get(e, []):
      trial = stock.copy()
      pa = acquire(a, trial, visiting | {e})
      pb = acquire(b, trial, visiting | {e}) if pa is not None else None
      if pb is not None:
        if not limited:
          trial[e] = 1
        stock.clear()
        stock.update(trial)
        return pa + pb + [(a, b)]
    return None

  stock = inv.copy()
  out: list[Pair] = []
  for e in elems:
    got = acquire(e, stock, frozenset())
    if got is None:
      return None
    out += got
  return out


def choose_exploration(inv: Counter, tiers: dict[str, int], target: str, know: Knowledge, limited: bool,
                       rng: random.Random | None) -> tuple[Pair, list[Pair]] | None:
  """The most promising untried pair of held or craftable elements and the crafts it needs first (module
  docstring); None when every such pair was tried."""
  k = tiers.get(target, max(tiers.values(), default=1))
  reachable = sorted({e for e, n in inv.items() if n > 0} | {c for c in know.recipes.values() if tiers.get(c, k) < k})
  by_tier: dict[int, set[str]] = {}
  for e, t in tiers.items():
    by_tier.setdefault(t, set()).add(e)
  best, cands = None, []
  for i, a in enumerate(reachable):
    for b in reachable[i:]:
      key = _key(a, b)
      if key in know.recipes or key in know.failed:
        continue
      ta, tb = tiers.get(a, 0), tiers.get(b, 0)
      t = max(ta, tb)
      if t >= k:
        continue
      new_possible = limited or any(e not in inv for e in by_tier.get(t + 1, ()))
      pre = crafts_for([a, b], inv, know, limited)
      if pre is None:
        continue
      left = inv.copy()
      left.subtract([a, b])
      alive = not limited or (left[a] > 0 and left[b] > 0)
      score = (new_possible, ta == tb, t + 1 == k, -len(pre), alive, t)
      if best is None or score > best:
        best, cands = score, [((a, b), pre)]
      elif score == best:
        cands.append(((a, b), pre))
  if not cands:
    return None
  return rng.choice(cands) if rng is not None and len(cands) > 1 else cands[0]


def _solve_view(messages: list[dict]) -> tuple[str, list[str], list[str]]:
  system = next((m["content"] for m in messages if m.get("role") == "system"), "")
  obs = [m["content"] for m in messages if m.get("role") == "user"]
  acts = [m["content"] for m in messages if m.get("role") == "assistant"]
  return system, obs, acts


class AlchemyExpert(TextPolicy):
  """Careful Alchemy-Random agent (module docstring)."""

  def __init__(self, tie_break: str = "random"):
    if tie_break not in ("random", "first"):
      raise ValueError(f"tie_break must be 'random' or 'first', got {tie_break!r}")
    self.tie_break = tie_break

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    if proto.is_update_prompt(messages):
      return self._update(messages)
    system, obs, _ = _solve_view(messages)
    tiers = parse_tiers(system)
    m = _TARGET_RE.search(system)
    inv = parse_inventory(obs[-1]) if obs else None
    if m is None or not inv:
      return "cannot read the task\n<answer>unknown + unknown</answer>"
    target = m.group(1).lower()
    limited = "Materials are used up" in system
    know = Knowledge(set(tiers) or None)
    know.read_hint(proto.hint_from_system_prompt(system))
    for o in obs[1:]:
      know.read_feedback(o)
    head = f"know {len(know.recipes)} recipes"
    plan = crafts_for([target], inv, know, limited)
    if plan:
      return self._make(head, plan[0], know)
    choice = choose_exploration(inv, tiers, target, know, limited, rng if self.tie_break == "random" else None)
    if choice is None:
      held = sorted(e for e, n in inv.items() if n > 0)
      a, b = held[0], (held[-1] if len(held) > 1 or inv[held[0]] > 1 else held[0])
      return f"{head}; nothing untried\n<answer>{a} + {b}</answer>"
    (a, b), pre = choice
    if pre:
      return self._make(head, pre[0], know)
    return f"{head}; try {a}+{b}\n<answer>{a} + {b}</answer>"

  @staticmethod
  def _make(head: str, pair: Pair, know: Knowledge) -> str:
    a, b = pair
    return f"{head}; make {know.recipes[_key(a, b)]} from {a}+{b}\n<answer>{a} + {b}</answer>"

  def _update(self, messages: list[dict[str, str]]) -> str:
    user = next(m["content"] for m in messages if m.get("role") == "user"
                and m.get("content", "").startswith(proto.PREV_HINTS_HEADER))
    parsed = proto.parse_update_user_prompt(user)
    tiers = parse_tiers(parsed.trajectory)
    know = Knowledge(set(tiers) or None)
    know.read_hint(parsed.prev_hint)
    obs, acts = split_trajectory(parsed.trajectory)
    for o in obs[1:]:
      know.read_feedback(o)
    m = re.match(r"Success! Synthesized (\S+)\.", parsed.feedback)
    if m and acts:
      ans = proto.extract_answer(acts[-1])
      parts = ans.split("+") if ans is not None else []
      if len(parts) == 2:
        know.add_recipe(parts[0].strip(), parts[1].strip(), m.group(1))
    return proto.format_hint_block(know.hint_bullets(),
                                   reasoning=f"know {len(know.recipes)} recipes, {len(know.failed)} failed")


class AlchemyRandom(TextPolicy):
  """Uniformly random legal pair of held elements; update episodes return an empty-handed hint."""

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    if proto.is_update_prompt(messages):
      return proto.format_hint_block(["recipes: none known"], reasoning="random policy")
    system, obs, _ = _solve_view(messages)
    inv = parse_inventory(obs[-1]) if obs else None
    if not inv:
      return "random\n<answer>unknown + unknown</answer>"
    limited = "Materials are used up" in system
    held = sorted(inv)
    pairs = [(a, b) for i, a in enumerate(held) for b in held[i:] if a != b or not limited or inv[a] >= 2]
    a, b = rng.choice(pairs) if pairs else (held[0], held[0])
    return f"random\n<answer>{a} + {b}</answer>"
