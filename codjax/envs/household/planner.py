"""The full-knowledge planner that certifies household problems (docs/methods/evoharness.md).

It sees the hidden state (where every object is) and builds the canonical plans of the goal's family, for
every choice of goal object(s), appliance, lamp and target receptacle:

* fetch O: ``go to`` O's receptacle (unless there), ``open`` it when closed, ``take O from R``;
* process O (clean/heat/cool): ``go to`` a sinkbasin/microwave/fridge, ``clean|heat|cool O with A``;
* place O: ``go to`` the target (unless there), ``open`` it when closed, ``move O to T``;
* look: fetch O, ``go to`` the lamp's receptacle (unless there), ``use`` the lamp;
* pick_two: fetch, place, fetch the second, place in the same target.

Every candidate is replayed command by command through ``World.apply`` (each command must be admissible) and
kept only when ``won`` holds at its end; the shortest one within the step budget is the certified plan (the
teacher plan), None when there is none (the generator then resamples). Milliseconds per problem.
"""

from __future__ import annotations

import itertools
from typing import Sequence

from codjax.envs.household.problem import Problem
from codjax.envs.household.vocab import APPLIANCE
from codjax.envs.household.world import START, State, World, initial_state


class _Run:
  """A plan under construction, replayed as it grows; ``ok`` turns False at the first inadmissible command."""

  def __init__(self, world: World, state: State):
    self.world, self.state, self.cmds, self.ok = world, state, [], True

  def do(self, cmd: str) -> "_Run":
    if self.ok:
      if cmd not in self.world.actions(self.state):
        self.ok = False
      else:
        self.state, _ = self.world.apply(self.state, cmd)
        self.cmds.append(cmd)
    return self

  def goto(self, r: int) -> "_Run":
    return self if self.state.loc == r else self.do(f"go to {self.world.rnames[r]}")

  def open_here(self) -> "_Run":
    r = self.state.loc
    if r != START and self.world.ropen[r] and not self.state.opened >> r & 1:
      self.do(f"open {self.world.rnames[r]}")
    return self

  def fetch(self, j: int) -> "_Run":
    r = self.state.where[j]
    if r < 0:
      self.ok = False
      return self
    self.goto(r).open_here()
    return self.do(f"take {self.world.onames[j]} from {self.world.rnames[r]}")

  def place(self, j: int, t: int) -> "_Run":
    self.goto(t).open_here()
    return self.do(f"move {self.world.onames[j]} to {self.world.rnames[t]}")


def _candidates(world: World, state: State) -> Sequence[_Run]:
  g = world.problem.goal
  fam = g.family
  objs = [j for j in range(len(world.onames)) if world.goal_objects >> j & 1 and world.pickupable >> j & 1]
  runs = []
  if fam == "look_at_obj_in_light":
    for j in objs:
      for lamp in range(len(world.onames)):
        if world.lamps >> lamp & 1 and state.where[lamp] >= 0:
          run = _Run(world, state).fetch(j).goto(state.where[lamp])
          runs.append(run.do(f"use {world.onames[lamp]}"))
    return runs
  targets = world.goal_recs
  if fam == "pick_two_obj_and_place":
    for j1, j2 in itertools.permutations(objs, 2):
      for t in targets:
        runs.append(_Run(world, state).fetch(j1).place(j1, t).fetch(j2).place(j2, t))
    return runs
  appliances: list[int | None] = [None]
  if fam in APPLIANCE:
    app_type, cap = APPLIANCE[fam]
    appliances = [i for i, t in enumerate(world.rtypes) if t == app_type]
    objs = [j for j in objs if getattr(world, cap) >> j & 1]
  verb = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "heat",
          "pick_cool_then_place_in_recep": "cool"}.get(fam)
  for j in objs:
    for a in appliances:
      for t in targets:
        run = _Run(world, state).fetch(j)
        if a is not None:
          run.goto(a).do(f"{verb} {world.onames[j]} with {world.rnames[a]}")
        runs.append(run.place(j, t))
  return runs


def plan(problem: Problem, max_steps: int = 70) -> list[str] | None:
  """The shortest canonical plan that wins within ``max_steps`` commands (module docstring), or None."""
  world = World.of(problem)
  state = initial_state(problem)
  if world.won(state):
    return []
  best = None
  for run in _candidates(world, state):
    if run.ok and len(run.cmds) <= max_steps and world.won(run.state):
      if best is None or len(run.cmds) < len(best):
        best = run.cmds
  return best


def replay(problem: Problem, commands: Sequence[str]) -> tuple[bool, list[str]]:
  """Plays ``commands`` from the initial state: (won at the end, feedback per command)."""
  world = World.of(problem)
  state = initial_state(problem)
  feedback = []
  for cmd in commands:
    state, fb = world.apply(state, cmd)
    feedback.append(fb)
  return world.won(state), feedback
