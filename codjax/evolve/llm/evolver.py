"""The LLM evolver: one generation of a TerminalSimulator lineage (Environment Evolution paper,
arXiv 2609.04128, Sec. 4.1 and Figure 2; docs/methods/environment_evolution.md).

``LLMEvolver(generate, ...).evolve(parent, effort)`` tries the three directions in a seeded random order
(cross-direction fallback) and returns the first accepted child:

1. **Plan refinement** (up to ``review_rounds`` rounds): the proposer extracts the parent's sequence and edits
   it (``proposer.parse_proposal``); the reviewer accepts or rejects the plan against the rubric bank. A
   rejected or malformed round feeds its reason into the next round.
2. **Environment refinement** (one try plus ``repair_budget`` repairs): the modifier's structured edit
   (``modifier.apply_edit``) gives the child's task data; the child ``EnvPoint`` (the proposal's pairs, the
   parent's seed, the data) runs the three verifiers **in the simulator** (``codjax.evolve.verifiers.verify``:
   the oracle lines solve it within the budget; a constant action, the seeded random policy and a replay of
   the parent's oracle actions fail; quality: data rules and ``TerminalParams.quality_problems``) and must
   score at least the parent's difficulty (``Parameterisation.score``). A failure's reason goes back to the
   modifier as repair feedback.

Every model call, parse, review and verification is an ``Attempt`` (direction, stage, round, ok, reason);
every failure reason also goes into the rubric bank (``RubricBank.add_failure``), so the next plan review
sees it. A failing engine call, malformed JSON or hostile content is an attempt rejected with its reason:
``evolve`` never raises on model output. The result holds the child (None when all directions failed), its
verdict and score, and the attempts.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable, Sequence

from codjax.evolve.base import DIRECTIONS, EFFORTS, EnvPoint
from codjax.evolve.llm import prompts
from codjax.evolve.llm.jsonout import parse_object
from codjax.evolve.llm.modifier import apply_edit
from codjax.evolve.llm.proposer import Proposal, parse_proposal
from codjax.evolve.llm.reviewer import parse_review
from codjax.evolve.llm.rubrics import RubricBank
from codjax.evolve.verifiers import Verdict, verify

Generate = Callable[[list[str]], list[str]]


@dataclasses.dataclass
class Attempt:
  direction: str
  stage: str  # propose | review | modify
  round: int
  ok: bool
  reason: str = ""

  def to_json(self) -> dict:
    return dataclasses.asdict(self)


@dataclasses.dataclass
class EvolveResult:
  child: EnvPoint | None
  direction: str | None
  effort: str
  attempts: list[Attempt]
  verdict: Verdict | None = None
  score: float | None = None
  parent_score: float | None = None

  @property
  def accepted(self) -> bool:
    return self.child is not None


class LLMEvolver:
  """One generation of a TerminalSimulator lineage through a text engine (module docstring)."""

  def __init__(self, generate: Generate, bank: RubricBank | None = None, *, review_rounds: int = 2,
               repair_budget: int = 2, seed: int = 0, param=None):
    from codjax.evolve import registry

    self.generate = generate
    self.bank = bank if bank is not None else RubricBank()
    self.review_rounds = max(1, int(review_rounds))
    self.repair_budget = max(0, int(repair_budget))
    self.seed = int(seed)
    self.param = param if param is not None else registry.get("terminal_simulator")

  # -- engine ------------------------------------------------------------------------------------------
  def _ask(self, prompt: str) -> dict:
    """One model call -> its JSON object; ValueError (with the reason) on any engine or parse failure."""
    try:
      replies = self.generate([prompt])
    except Exception as e:  # noqa: BLE001 - an engine failure is a rejected attempt, not a crash
      raise ValueError(f"generate failed: {type(e).__name__}: {str(e)[:200]}") from None
    if not isinstance(replies, (list, tuple)) or len(replies) != 1:
      raise ValueError("generate returned no single reply")
    return parse_object(replies[0])

  def _fail(self, attempts: list[Attempt], direction: str, stage: str, rnd: int, reason: str) -> str:
    attempts.append(Attempt(direction, stage, rnd, False, reason))
    self.bank.add_failure(reason)
    return reason

  # -- the two loops -----------------------------------------------------------------------------------
  def _plan(self, data: dict, parent: EnvPoint, direction: str, effort: str,
            attempts: list[Attempt]) -> Proposal | None:
    feedback = ""
    for rnd in range(self.review_rounds):
      try:
        prop = parse_proposal(self._ask(prompts.proposer_prompt(data, direction, effort, feedback)), self.param,
                              parent.pairs, direction, effort)
      except ValueError as e:
        feedback = self._fail(attempts, direction, "propose", rnd, str(e))
        continue
      attempts.append(Attempt(direction, "propose", rnd, True))
      try:
        ok, reason = parse_review(self._ask(prompts.reviewer_prompt(data, prop.old, prop.new, prop.plan,
                                                                    self.bank.texts())))
      except ValueError as e:
        ok, reason = False, f"review: {e}"
      if not ok:
        feedback = self._fail(attempts, direction, "review", rnd, reason)
        continue
      attempts.append(Attempt(direction, "review", rnd, True))
      return prop
    return None

  def _build(self, data: dict, parent: EnvPoint, prop: Proposal, parent_actions: Sequence[str],
             parent_score: float, direction: str, attempts: list[Attempt]):
    feedback = ""
    for rnd in range(1 + self.repair_budget):
      try:
        child_data = apply_edit(data, self._ask(prompts.modifier_prompt(data, prop.old, prop.new, prop.plan,
                                                                        self.bank.texts(), feedback)))
        child = EnvPoint(self.param.name, prop.new, parent.seed, child_data)
        verdict = verify(self.param, child, parent_actions, seed=self.seed)
        if not verdict.accepted:
          raise ValueError(verdict.reason)
        score = self.param.score(child, verdict.oracle_turns)
        if score < parent_score:
          raise ValueError(f"not harder than the parent: difficulty {score:.2f} < {parent_score:.2f}")
      except ValueError as e:
        feedback = self._fail(attempts, direction, "modify", rnd, str(e))
        continue
      except Exception as e:  # noqa: BLE001 - defensive: hostile data must never crash the evolution
        feedback = self._fail(attempts, direction, "modify", rnd, f"verification error: {type(e).__name__}: {e}")
        continue
      attempts.append(Attempt(direction, "modify", rnd, True))
      return child, verdict, score
    return None

  def evolve(self, parent: EnvPoint, effort: str = "high", parent_actions: Sequence[str] | None = None,
             directions: Sequence[str] | None = None) -> EvolveResult:
    """One generation from ``parent`` (module docstring). ``parent_actions`` defaults to the parent's oracle
    actions (verified here); ``directions`` to the three in a random order drawn from ``seed``."""
    if effort not in EFFORTS:
      raise ValueError(f"effort must be one of {EFFORTS}, got {effort!r}")
    parent_verdict = verify(self.param, parent, seed=self.seed)
    if not parent_verdict.accepted:
      raise ValueError(f"the parent does not pass the verifiers: {parent_verdict.reason}")
    if parent_actions is None:
      parent_actions = parent_verdict.oracle_actions
    parent_score = self.param.score(parent, parent_verdict.oracle_turns)
    order = list(directions) if directions is not None else random.Random(self.seed).sample(DIRECTIONS, 3)
    data: Any = self.param.data(parent)
    attempts: list[Attempt] = []
    for direction in order:
      prop = self._plan(data, parent, direction, effort, attempts)
      if prop is None:
        continue
      built = self._build(data, parent, prop, parent_actions, parent_score, direction, attempts)
      if built is not None:
        child, verdict, score = built
        return EvolveResult(child, direction, effort, attempts, verdict, score, parent_score)
    return EvolveResult(None, None, effort, attempts, None, None, parent_score)


class LineageEvolver:
  """The LLM evolver as a ``codjax.evolve.evolution.Evolver`` (``propose(param, parent, direction, effort, rng,
  attempt)``): one ``LLMEvolver.evolve`` along the given direction (its own review rounds and repair budget);
  the growth loop verifies the candidate again and records it. The last result is kept in ``last``."""

  def __init__(self, evolver: LLMEvolver):
    self.evolver = evolver
    self.last: EvolveResult | None = None

  def propose(self, param, parent, direction, effort, rng, attempt):
    from codjax.evolve.evolution import Proposal as Candidate

    del param, rng
    if attempt > 0:  # the repairs already ran inside evolve()
      return Candidate(None, f"{direction}: the LLM evolver's repair budget is spent")
    self.last = self.evolver.evolve(parent.point, effort, parent.oracle_actions, directions=[direction])
    if self.last.child is None:
      reasons = [a.reason for a in self.last.attempts if not a.ok]
      return Candidate(None, reasons[-1] if reasons else f"no {direction} edit")
    return Candidate(self.last.child)
