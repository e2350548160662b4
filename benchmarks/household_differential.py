"""The household differential run: tier-2 ``world.py`` against the tier-1 ALFWorld engine.

What the two tiers are and why they are compared: docs/methods/evoharness.md.

Generates ``--num_problems`` certified problems of ``alfworld_synth`` (``--preset`` sets the room sizes; the
problems cycle through the splits train, valid_seen, valid_unseen; problem k of split s comes from pack seed
``derive_seed(seed, split index, k)`` and task seed k) and plays each one through both engines in lockstep,
with one shared ``tier1.Tier1Engine``:

* the planner's certified plan from a reset (it must win on both engines at its last command);
* from a second reset, a seeded random walk of ``--walk_steps`` admissible commands: a verb drawn by
  ``VERB_WEIGHTS`` among the admissible ones (the object and receptacle verbs outweigh "go to", look, inventory
  and help), then one of its commands; ``--bad_commands`` non-admissible commands are slipped in at random
  positions (both engines must answer "Nothing happens." and keep their state: tier-2's state key, tier-1's PDDL
  facts, admissible commands and won);
* from a third reset, when the scene holds a knife and a sliceable object (unless ``--no_probe``), a scripted
  slice probe: take the knife, slice, take the slice, heat, clean and cool it, examining it after each.

After the reset and after every command the two must agree exactly on the observation text (the intro, every
feedback string), ``won`` and the sorted admissible commands. The script prints a table (problems, commands,
differences, per-family and per-split counts, wall time) and the first few differences; it exits with status 1
when there is any difference. tests/envs/test_household_differential.py runs the same comparison in the test
suite (the ``tiny`` preset plus a few full-size problems).

  python benchmarks/household_differential.py --preset=train --num_problems=200 --seed=0
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import random
import sys
import time
from typing import Any, Sequence

from codjax.envs import derive_seed, make
from codjax.envs.household import tier1
from codjax.envs.household import world as W
from codjax.envs.household.generator import SPLITS
from codjax.envs.household.presets import PRESETS
from codjax.envs.household.problem import Problem
from codjax.envs.household.vocab import FAMILIES

NOTHING = "Nothing happens."
KNIVES = ("Knife", "ButterKnife")
# the walk's bias: the verbs that need the right object at the right receptacle weigh most; "go to" weighs as
# much as one plain action verb
VERB_WEIGHTS = {"heat": 3.0, "cool": 3.0, "clean": 3.0, "slice": 3.0, "use": 3.0, "open": 2.0, "close": 2.0,
                "take": 2.0, "move": 2.0, "go to": 2.0, "examine": 1.0, "look": 0.5, "inventory": 0.5, "help": 0.25}
NONSENSE = ("xyzzy", "LOOK", "take", "go to", "go to moon 1", "examine nothing 1", "put apple 1 in fridge 1")


def verb_of(command: str) -> str:
  return "go to" if command.startswith("go to ") else command.split(" ", 1)[0]


def walk_command(rng: random.Random, admissible: Sequence[str]) -> str:
  """A verb drawn by VERB_WEIGHTS among the admissible ones, then one of its commands uniformly."""
  by_verb: dict[str, list[str]] = {}
  for c in admissible:
    by_verb.setdefault(verb_of(c), []).append(c)
  verbs = sorted(by_verb)
  verb = rng.choices(verbs, [VERB_WEIGHTS.get(v, 1.0) for v in verbs])[0]
  return rng.choice(by_verb[verb])


def bad_command(rng: random.Random, problem: Problem, admissible: Sequence[str]) -> str:
  """A command that is not admissible here: a well-formed command on the scene's names, or nonsense."""
  recs = [r.name for r in problem.receptacles]
  objs = [o.name for o in problem.objects]
  cands = [f"{v} {r}" for v in ("go to", "open", "close", "examine") for r in recs]
  cands += [f"take {o} from {r}" for o in objs for r in recs] + [f"move {o} to {r}" for o in objs for r in recs]
  cands += [f"{v} {o} with {r}" for v in ("heat", "cool", "clean") for o in objs for r in recs]
  cands += [f"{v} {o}" for v in ("use", "examine") for o in objs]
  cands += [f"slice {o} with {k}" for o in objs for k in objs]
  allowed = set(admissible)
  cands = [c for c in cands if c not in allowed]
  if rng.random() < 0.25 or not cands:
    return rng.choice(NONSENSE)
  return rng.choice(cands)


def slice_probe(problem: Problem) -> list[str] | None:
  """Take the first knife, slice the first sliceable object, put the knife back, take the slice, then heat, clean
  and cool it at the scene's first microwave / sinkbasin / fridge, examining it each time (None without a knife
  or a sliceable object). A command the state does not allow is kept: both engines must say "Nothing happens."."""
  knife = next((o for o in problem.objects if o.type in KNIVES), None)
  food = next((o for o in problem.objects if o.sliceable), None)
  if knife is None or food is None:
    return None
  openable = {r.name: r.openable for r in problem.receptacles}

  def visit(rec: str) -> list[str]:
    return [f"go to {rec}"] + ([f"open {rec}"] if openable[rec] else [])

  cmds = visit(knife.location) + [f"take {knife.name} from {knife.location}", f"examine {knife.name}"]
  if food.location != knife.location:
    cmds += visit(food.location)
  cmds.append(f"slice {food.name} with {knife.name}")
  if food.location != knife.location:
    cmds += [f"go to {knife.location}", f"move {knife.name} to {knife.location}", f"go to {food.location}"]
  else:
    cmds.append(f"move {knife.name} to {knife.location}")
  cmds += [f"take {food.name} from {food.location}", f"examine {food.name}"]
  for rtype, verb in (("Microwave", "heat"), ("SinkBasin", "clean"), ("Fridge", "cool")):
    rec = next((r.name for r in problem.receptacles if r.type == rtype), None)
    if rec is not None:
      cmds += [f"go to {rec}", f"{verb} {food.name} with {rec}", f"examine {food.name}"]
  return cmds + ["inventory", "look"]


def tier1_facts(engine: tier1.Tier1Engine) -> frozenset[str]:
  """The tier-1 engine's current PDDL facts (its whole state)."""
  return frozenset(map(str, engine.env.unwrapped._pddl_state.facts))


@dataclasses.dataclass
class Outcome:
  """What playing one problem through both engines gave."""

  commands: int = 0
  plan_won: bool = False  # the plan's last command won on both engines
  bad_checked: int = 0  # non-admissible commands checked
  probed: bool = False  # the slice probe ran
  verbs: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # of the walk's commands
  differences: list[str] = dataclasses.field(default_factory=list)


def play_problem(problem: Problem, engine: tier1.Tier1Engine, rng: random.Random, walk_steps: int,
                 bad_commands: int, probe: bool = True) -> Outcome:
  """The plan, walk and (``probe``, when the scene has a knife and a sliceable object) slice-probe episodes,
  each from a reset, both engines in lockstep (module docstring)."""
  out = Outcome()
  game = tier1.Tier1Game(problem.to_scene_spec(), engine)

  def compare(where: str, t1: tuple, t2: tuple) -> None:
    for field, a, b in zip(("text", "won", "admissible"), t1, t2):
      if a != b:
        if field == "admissible":
          a, b = f"only tier-1 {sorted(set(a) - set(b))}", f"only tier-2 {sorted(set(b) - set(a))}"
        out.differences.append(f"{where}: {field} differs: tier-1 {a!r} / tier-2 {b!r}")

  bad_at = set(rng.sample(range(walk_steps + bad_commands), bad_commands))
  episodes: list[tuple[str, list[Any]]] = [
    ("plan", list(problem.plan)),
    ("walk", ["<bad>" if i in bad_at else None for i in range(walk_steps + bad_commands)]),
  ]
  probe_cmds = slice_probe(problem) if probe else None
  if probe_cmds:
    episodes.append(("probe", list(probe_cmds)))
    out.probed = True
  for episode, script in episodes:
    intro1, adm1 = game.reset()
    won1 = game.won
    state = W.initial_state(problem)
    compare(f"{episode} reset", (intro1, won1, adm1), (W.intro(state), W.won(problem, state), W.admissible(state)))
    won2 = False
    for i, entry in enumerate(script, 1):
      adm2 = W.admissible(state)
      bad = entry == "<bad>"
      if bad:
        cmd = bad_command(rng, problem, adm2)
        before = (state.key, tier1_facts(engine), adm1, won1)
      else:
        cmd = entry if entry is not None else walk_command(rng, adm2)
      fb1, won1, adm1 = game.step(cmd)
      state, fb2 = W.apply(state, cmd)
      won2 = W.won(problem, state)
      out.commands += 1
      if episode == "walk":
        out.verbs["non-admissible" if bad else verb_of(cmd)] += 1
      where = f"{episode} step {i} {cmd!r}"
      compare(where, (fb1, won1, adm1), (fb2, won2, W.admissible(state)))
      if bad:
        out.bad_checked += 1
        if fb1 != NOTHING or fb2 != NOTHING:
          out.differences.append(f"{where}: not 'Nothing happens.': {fb1!r} / {fb2!r}")
        if state.key != before[0]:
          out.differences.append(f"{where}: tier-2 state changed")
        if (tier1_facts(engine), adm1, won1) != before[1:]:
          out.differences.append(f"{where}: tier-1 state changed")
    if episode == "plan":
      out.plan_won = bool(script) and won1 and won2
      if not out.plan_won:
        out.differences.append(f"plan did not win on both engines: tier-1 {won1}, tier-2 {won2}")
  return out


def problems(preset: str, num_problems: int, seed: int, splits: Sequence[str] = SPLITS) -> list[tuple[str, Problem]]:
  """(split, problem) for k = 0..num_problems-1, cycling through the splits (module docstring)."""
  families = {s: make("alfworld_synth", preset=preset, split=s) for s in splits}
  out = []
  for k in range(num_problems):
    s = splits[k % len(splits)]
    out.append((s, families[s].problem(derive_seed(seed, SPLITS.index(s), k), k)))
  return out


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", default="train", choices=sorted(PRESETS))
  parser.add_argument("--num_problems", type=int, default=200)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--walk_steps", type=int, default=20)
  parser.add_argument("--bad_commands", type=int, default=2)
  parser.add_argument("--no_probe", action="store_true", help="skip the slice probe")
  parser.add_argument("--show", type=int, default=20, help="differences to print")
  args = parser.parse_args(argv)
  if args.num_problems < 1 or args.walk_steps < 0 or args.bad_commands < 0:
    parser.error("--num_problems must be >= 1, --walk_steps and --bad_commands >= 0")

  t0 = time.perf_counter()
  engine = tier1.Tier1Engine()
  todo = problems(args.preset, args.num_problems, args.seed)
  t_gen = time.perf_counter() - t0
  per_family: dict[str, collections.Counter] = {f: collections.Counter() for f in FAMILIES}
  per_split: dict[str, collections.Counter] = {s: collections.Counter() for s in SPLITS}
  verbs: collections.Counter = collections.Counter()
  shown: list[str] = []
  total = collections.Counter()
  sizes = []
  for k, (split, problem) in enumerate(todo):
    res = play_problem(problem, engine, random.Random(derive_seed(args.seed, 99, k)), args.walk_steps,
                       args.bad_commands, probe=not args.no_probe)
    sizes.append((len(problem.receptacles), len(problem.objects)))
    row = collections.Counter(problems=1, commands=res.commands, differences=len(res.differences),
                              plan_wins=int(res.plan_won), bad_checked=res.bad_checked, probed=int(res.probed),
                              failing=int(bool(res.differences)))
    per_family[problem.family].update(row)
    per_split[split].update(row)
    total.update(row)
    verbs.update(res.verbs)
    for d in res.differences:
      if len(shown) < args.show:
        shown.append(f"problem {k} ({split}, {problem.family}): {d}")
    if (k + 1) % 25 == 0:
      print(f"  ... {k + 1} problems, {total['differences']} differences, {time.perf_counter() - t0:.0f} s",
            flush=True)
  wall = time.perf_counter() - t0

  cols = ("problems", "commands", "plan_wins", "bad_checked", "probed", "differences", "failing")
  print(f"household differential: preset={args.preset} seed={args.seed} walk_steps={args.walk_steps} "
        f"bad_commands={args.bad_commands}")
  recs = [r for r, _ in sizes]
  objs = [o for _, o in sizes]
  print(f"rooms: {min(recs)}-{max(recs)} receptacles (mean {sum(recs) / len(recs):.1f}), "
        f"{min(objs)}-{max(objs)} objects (mean {sum(objs) / len(objs):.1f})")
  print(f"{'':<32}" + "".join(f"{c:>13}" for c in cols))
  for name, counter in [*per_family.items(), *per_split.items(), ("total", total)]:
    print(f"{name:<32}" + "".join(f"{counter[c]:>13}" for c in cols))
  print("walk commands by verb: " + ", ".join(f"{v} {n}" for v, n in sorted(verbs.items())))
  print(f"wall time {wall:.1f} s (problem generation {t_gen:.1f} s; {wall / len(todo):.2f} s per problem)")
  for line in shown:
    print("DIFF " + line)
  return 1 if total["differences"] else 0


if __name__ == "__main__":
  sys.exit(main())
