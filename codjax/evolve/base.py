"""What an evolvable environment is: an ordered (scenario, skill) pair sequence over a codjax environment.

Environment Evolution paper (arXiv 2609.04128), Sec. 3 and Sec. 4.1; docs/methods/environment_evolution.md.
The high-level trajectory of a task is its execution sequence xi = ((sigma_1, kappa_1), ..., (sigma_L,
kappa_L)) (paper Eq. 1), scenarios sigma interleaved with skills kappa, and its policy-independent difficulty
is (paper Sec. 3, an unnumbered equation; the paper indexes the scenario sigma_{t-1})

    D_T(xi) = sum_t [ -log p_T(sigma_t | g) - log p_T(kappa_t | sigma_t, g) ]

with p_T a fixed reference distribution. codjax scores a concrete environment off-policy as

    d = L_oracle + sum_t novelty(sigma_t) + sum_t rarity(kappa_t | sigma_t),
    novelty(sigma) = -log p_T(sigma),  rarity(kappa | sigma) = -log p_T(kappa | sigma)

i.e. D_T plus an extra term the paper does not have: ``L_oracle``, the number of turns the environment's
scripted oracle needs (in the paper L enters only as the number of summed terms). p_T are the fixed
reference frequencies each ``Parameterisation`` declares (word frequencies, how often a parameter value
appears in the seed pool, ...). Nothing here depends on the policy being trained.

An ``EnvPoint`` is one concrete environment: the parameterisation's name, the pair sequence and an instance
seed (the pack seed its ``EnvFamily`` draws the hidden instance from). A ``Parameterisation`` maps a point to
``codjax.envs.make(env_name, **env_params(point))`` and declares the vocabularies the three directions edit
over (``codjax.evolve.directions``):

* **scenario** replaces the scenario of the chosen pairs by a *rarer* one (higher novelty), keeping the skill;
* **skill** replaces the skill of the chosen pairs by a rarer one (higher rarity), keeping the scenario;
* **length** inserts pairs (more execution turns).

The effort decides how many pairs one edit touches: ``low`` one pair, ``high`` one contiguous span (40-70 %
of the pairs), ``max`` any subset. Each parameterisation also names what the verifiers need: a constant
action (the invalid-test's trivial policy), the answer strings that must not leak into the prompt, and its
own quality checks (parameter bounds, a unique intended answer).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, Mapping, Sequence

from codjax.envs.base import EnvFamily, TaskEnv

DIRECTIONS = ("scenario", "skill", "length")
EFFORTS = ("low", "high", "max")
MAX_GENERATIONS = 15  # paper Sec. 5.2: past 15 generations pass rates are 0 and resolve nothing


@dataclasses.dataclass(frozen=True)
class Pair:
  """One step of the high-level trajectory: a scenario and the skill applied in it (both vocabulary names)."""

  scenario: str
  skill: str

  def to_json(self) -> list[str]:
    return [self.scenario, self.skill]

  @classmethod
  def from_json(cls, obj: Any) -> "Pair":
    if not (isinstance(obj, (list, tuple)) and len(obj) == 2 and all(isinstance(x, str) for x in obj)):
      raise ValueError(f"a pair is [scenario, skill] (two strings), got {obj!r}")
    return cls(obj[0], obj[1])


@dataclasses.dataclass(frozen=True)
class EnvPoint:
  """One concrete evolvable environment (module docstring)."""

  family: str  # parameterisation name (``codjax.evolve.registry``)
  pairs: tuple[Pair, ...]
  seed: int  # instance seed: the pack seed of the environment family
  #: explicit environment data (JSON-able) for environments an LLM evolver wrote as data (a TerminalSimulator
  #: task: instruction, initial file systems, checks, oracle commands); None for generated ones
  data: Any = None

  def to_json(self) -> dict:
    out = {"family": self.family, "pairs": [p.to_json() for p in self.pairs], "seed": int(self.seed)}
    if self.data is not None:
      out["data"] = self.data
    return out

  @classmethod
  def from_json(cls, obj: Any) -> "EnvPoint":
    if not isinstance(obj, Mapping):
      raise ValueError(f"an environment point is a JSON object, got {type(obj).__name__}")
    missing = {"family", "pairs", "seed"} - set(obj)
    if missing:
      raise ValueError(f"environment point misses {sorted(missing)}")
    seed = obj["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
      raise ValueError(f"environment point seed must be a non-negative integer, got {seed!r}")
    if not isinstance(obj["family"], str) or not isinstance(obj["pairs"], list):
      raise ValueError("environment point: family must be a string and pairs a list")
    return cls(obj["family"], tuple(Pair.from_json(p) for p in obj["pairs"]), seed, obj.get("data"))


class Parameterisation(abc.ABC):
  """An evolvable environment family: pair sequences <-> ``codjax.envs`` parameters (module docstring).

  Subclasses set the class attributes and implement ``env_params`` and ``seed_pairs``; the rest has
  defaults that fit most environments.
  """

  #: parameterisation name (the ``family`` of its points), e.g. ``"maze"``
  name: str = ""
  #: the ``codjax.envs`` registry name it builds, e.g. ``"maze"``
  env_name: str = ""
  #: reference frequencies p_T(sigma) of every scenario value (positive; need not sum to one)
  scenario_freq: Mapping[str, float] = {}
  #: reference frequencies p_T(kappa) of every skill value (``skill_prob`` may condition on the scenario)
  skill_freq: Mapping[str, float] = {}
  #: bounds on the number of pairs (the length direction fails past ``max_pairs``)
  min_pairs: int = 1
  max_pairs: int = 12
  #: ORBIT-style environments: how many episodes of one instance the oracle may use to solve it (1: one)
  oracle_episodes: int = 1

  # -- the mapping -------------------------------------------------------------------------------------
  @abc.abstractmethod
  def env_params(self, point: EnvPoint) -> dict:
    """Keyword arguments of ``codjax.envs.make(self.env_name, ...)`` for this point (ValueError if invalid)."""

  @abc.abstractmethod
  def seed_pairs(self, index: int) -> tuple[Pair, ...]:
    """The pair sequence of seed environment ``index`` (a lineage root); a pure function of ``index``."""

  def seed_point(self, index: int, seed: int) -> EnvPoint:
    """Seed environment ``index`` with instance seed ``seed``."""
    return EnvPoint(self.name, tuple(self.seed_pairs(index)), int(seed))

  def family(self, point: EnvPoint) -> EnvFamily:
    from codjax.envs import make

    return make(self.env_name, **self.env_params(point))

  def tasks(self, point: EnvPoint, num_tasks: int = 1) -> list[TaskEnv]:
    """``num_tasks`` fresh episodes of the point's hidden instance."""
    return self.family(point).sample_pack(point.seed, num_tasks)

  # -- vocabularies the directions edit over -----------------------------------------------------------
  def novelty(self, scenario: str) -> float:
    """-log p_T(sigma) (relative frequency within ``scenario_freq``)."""
    return _neglog(self.scenario_freq, scenario, "scenario")

  def skill_prob(self, skill: str, scenario: str) -> float:
    """p_T(kappa | sigma); default the scenario-free relative frequency."""
    del scenario
    return _rel(self.skill_freq, skill, "skill")

  def rarity(self, skill: str, scenario: str) -> float:
    """-log p_T(kappa | sigma)."""
    p = self.skill_prob(skill, scenario)
    if not p > 0.0:
      raise ValueError(f"{self.name}: skill {skill!r} has zero probability under scenario {scenario!r}")
    return -math.log(p)

  def compatible(self, pairs: Sequence[Pair]) -> bool:
    """Whether a pair sequence is allowed at all (cheap structural check before building anything)."""
    return (self.min_pairs <= len(pairs) <= self.max_pairs
            and all(p.scenario in self.scenario_freq and p.skill in self.skill_freq for p in pairs))

  def checked_pairs(self, point: EnvPoint) -> tuple[Pair, ...]:
    """``point.pairs`` after the structural checks (its family is this one, ``compatible``); ValueError naming
    the problem otherwise. ``env_params`` implementations start with it."""
    if point.family != self.name:
      raise ValueError(f"point belongs to {point.family!r}, not {self.name!r}")
    if not self.compatible(point.pairs):
      raise ValueError(f"{self.name}: pair sequence outside the vocabulary, the allowed combinations or "
                       f"{self.min_pairs}..{self.max_pairs} pairs: {[p.to_json() for p in point.pairs]}")
    return point.pairs

  def new_pair(self, pairs: Sequence[Pair], at: int, rng) -> Pair:
    """The pair the length direction inserts before position ``at``: the neighbour's scenario and skill
    (more of the same work), which keeps novelty and rarity per pair unchanged."""
    ref = pairs[min(at, len(pairs) - 1)] if pairs else None
    if ref is None:
      return Pair(rng.choice(sorted(self.scenario_freq)), rng.choice(sorted(self.skill_freq)))
    return ref

  def plan_length(self, point: EnvPoint, oracle_turns: int) -> int:
    """L_oracle of the difficulty: the turns the oracle needed (default). Environments whose oracle explores
    (a maze seen through local observations) override it with the instance's own plan length, so that the
    luck of one exploration does not set the bar a lineage must pass."""
    del point
    return int(oracle_turns)

  def score(self, point: EnvPoint, oracle_turns: int) -> float:
    """The off-policy difficulty d (module docstring) of a point whose oracle needed ``oracle_turns``."""
    return float(self.plan_length(point, oracle_turns)) + sum(self.novelty(p.scenario) + self.rarity(p.skill, p.scenario)
                                     for p in point.pairs)

  # -- what the verifiers need -------------------------------------------------------------------------
  def oracle(self):
    """The scripted reference solver (a ``codjax.envs.experts.TextPolicy``)."""
    from codjax.envs.experts import make_policy

    return make_policy(self.env_name, "expert")

  def random_policy(self):
    """The seeded random policy of the invalid-test."""
    from codjax.envs.experts import make_policy

    return make_policy(self.env_name, "random")

  @abc.abstractmethod
  def constant_action(self) -> str:
    """A well-formed action to repeat every turn (the invalid-test's constant policy)."""

  def answer_strings(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    """Strings that would give the answer away if they appeared in the prompt (the hidden code, word,
    goal cell, ...); read from the built tasks. Default: none."""
    del point, tasks
    return []

  def quality_problems(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    """Environment-specific quality problems (parameter bounds beyond the constructor's, a non-unique
    intended answer, ...); empty when there are none."""
    del point, tasks
    return []


def _rel(freq: Mapping[str, float], key: str, what: str) -> float:
  if key not in freq:
    raise ValueError(f"unknown {what} {key!r}; known: {sorted(freq)}")
  total = float(sum(freq.values()))
  return float(freq[key]) / total


def _neglog(freq: Mapping[str, float], key: str, what: str) -> float:
  p = _rel(freq, key, what)
  if not p > 0.0:
    raise ValueError(f"{what} {key!r} has zero reference frequency")
  return -math.log(p)
