"""Evolvable parameterisations of the seven ORBIT games (the games: ORBIT paper, arXiv 2602.04089, Sec. 4.1 and
Appendix B; the knobs are codjax's choice: docs/methods/environment_evolution.md).

Each game reads its pair sequence ((scenario, skill), ...) as three knobs:

* **length** is the number of pairs and always sets the quantity that lengthens execution: RPS rounds,
  Blackjack hits needed (lower starting hand, longer horizon), Maze corridor segments (shortest path
  2n-1..2n, H = 2n + 1), Mastermind code length, Hangman / Wordle word length, Minesweeper board side
  (more safe cells, H grows with the board).
* **scenario** is the setting or representation: the Maze's grid shapes (square, oblong, wide, tall, large:
  every pair's shapes join the pool), the Minesweeper board's aspect, the Hangman / Wordle secret's word
  category. Where one value must be chosen for the whole environment (board aspect, word category) the
  *rarest* scenario of the sequence decides, so an edit towards a rarer scenario always shows. RPS,
  Blackjack and Mastermind have one scenario each (their representation changes need new game text and
  oracle parsing): the scenario direction fails there and the loop falls back.
* **skill** is the inference a pair asks for; each rare skill pair adds one unit of its knob: RPS
  ``subtle`` (a less biased adversary, min_dom - 0.05), Blackjack ``exact`` (dealer threshold + 1),
  Maze ``branch`` / ``loop`` (a bushier tree / more loops), Mastermind ``wide`` (one more symbol) and
  ``repeat`` (duplicates allowed), Hangman / Wordle ``rare`` (one more letter of JQXZKV) and ``double`` (one
  more repeated letter), Minesweeper ``dense`` (one more mine).

Reference frequencies p_T are fixed here (how often a value would appear in a seed pool of ORBIT-like
instances); novelty and rarity are their negative logs (``codjax.evolve.base``). The oracle plays
``oracle_episodes`` episodes of one instance in one context (ORBIT's T = 3). Budgets: RPS needs 8 wins of
12 (the seeded random policy wins about 5 % of instances over 3 episodes, the constant move wins when its
prey is the adversary's dominant move, which the invalid-test then rejects); Blackjack starting hands are
below every dealer total, so standing never wins. Answer strings are the hidden code / word / goal cell /
dealer hand; short words (< 5 letters) are checked as whole words in ``quality_problems`` instead, since
substring matching flags ordinary words of the rules text.
"""

from __future__ import annotations

import math
import random
import re
from typing import Mapping, Sequence

from codjax.envs.base import TaskEnv
from codjax.evolve.base import EnvPoint, Pair, Parameterisation
from codjax.evolve.registry import register


class _Game(Parameterisation):
  """Shared checks and helpers of the game parameterisations."""

  #: the length of most seeds (the game's default difficulty) and the other lengths seeds may take
  seed_lengths: tuple[int, ...] = (1,)
  #: scenarios seeds draw from (most common first)
  seed_scenarios: tuple[str, ...] = ()

  def _pairs(self, point: EnvPoint) -> tuple[Pair, ...]:
    return self.checked_pairs(point)

  @staticmethod
  def count(pairs: Sequence[Pair], skill: str) -> int:
    return sum(p.skill == skill for p in pairs)

  def rarest_scenario(self, pairs: Sequence[Pair]) -> str:
    """The scenario of lowest reference frequency among ``pairs`` (ties: the first)."""
    return min((p.scenario for p in pairs), key=lambda s: self.scenario_freq[s])

  def seed_pairs(self, index: int) -> tuple[Pair, ...]:
    """Seed ``index``: mostly the default length and the commonest skill, one scenario for all pairs, and on
    about a third of the seeds one pair with the second commonest skill (a pure function of the index)."""
    rng = random.Random(f"{self.name}/seed/{int(index)}")
    n = self.seed_lengths[0] if rng.random() < 0.6 else rng.choice(self.seed_lengths)
    scenarios = self.seed_scenarios or tuple(self.scenario_freq)
    scenario = scenarios[0] if rng.random() < 0.6 else rng.choice(scenarios)
    skills = sorted(self.skill_freq, key=lambda k: -self.skill_freq[k])
    pairs = [Pair(scenario, skills[0]) for _ in range(n)]
    if len(skills) > 1 and rng.random() < 1 / 3:
      pairs[rng.randrange(n)] = Pair(scenario, skills[1])
    return tuple(pairs)


def _whole_word_leak(word: str, tasks: Sequence[TaskEnv]) -> list[str]:
  if not tasks:
    return []
  system, obs = tasks[0].reset()
  if re.search(rf"\b{re.escape(word)}\b", f"{system}\n{obs}", re.IGNORECASE):
    return [f"the secret word {word!r} appears in the prompt"]
  return []


# ------------------------------------------------------------------------------------------------ RPS


@register
class RpsParams(_Game):
  """Rounds = pairs (12 for seeds, 8 wins needed); ``subtle`` pairs lower the adversary's bias."""

  name = env_name = "rps"
  scenario_freq: Mapping[str, float] = {"hidden_mix": 1.0}
  skill_freq: Mapping[str, float] = {"exploit": 0.8, "subtle": 0.2}
  min_pairs, max_pairs = 8, 24
  oracle_episodes = 3
  seed_lengths = (12, 13, 14)
  win_threshold = 0.65
  base_min_dom = 0.4
  subtle_step = 0.05

  def env_params(self, point: EnvPoint) -> dict:
    pairs = self._pairs(point)
    min_dom = max(0.1, self.base_min_dom - self.subtle_step * self.count(pairs, "subtle"))
    return {"rounds": len(pairs), "min_dom": round(min_dom, 6), "win_threshold": self.win_threshold}

  def constant_action(self) -> str:
    return "\\boxed{rock}"


# ------------------------------------------------------------------------------------------ Blackjack


@register
class BlackjackParams(_Game):
  """Hits needed = pairs n: H = n + 2 (n hits, a stand, and the faithful last turn that never counts) and a
  starting hand of at most 16 - 3 (n - 1), below every dealer total; ``exact`` pairs raise the dealer's
  minimum total by one each (at most 20), narrowing the winning window to the top of the range."""

  name = env_name = "blackjack"
  scenario_freq: Mapping[str, float] = {"indexed_deck": 1.0}
  skill_freq: Mapping[str, float] = {"hit": 0.75, "exact": 0.25}
  min_pairs, max_pairs = 1, 5
  oracle_episodes = 3
  seed_lengths = (2, 1)
  shuffles = 20_000

  def env_params(self, point: EnvPoint) -> dict:
    pairs = self._pairs(point)
    n = len(pairs)
    return {"max_turns": n + 2, "dealer_min": min(20, 17 + self.count(pairs, "exact")),
            "player_max": max(4, 16 - 3 * (n - 1)), "dealer_max": 20, "shuffles": self.shuffles}

  def constant_action(self) -> str:
    return "\\boxed{stand}"

  def answer_strings(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    from codjax.envs.games.blackjack import hand_text

    return [f"Dealer's hand: {hand_text(tasks[0].instance.dealer)}"] if tasks else []

  def quality_problems(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    from codjax.envs.games.blackjack import hand_total

    if not tasks:
      return []
    cfg, inst = tasks[0].cfg, tasks[0].instance
    problems = []
    if hand_total(inst.dealer) < cfg.dealer_min:
      problems.append(f"no deal with a dealer total >= {cfg.dealer_min} was found")
    if hand_total(inst.player) > cfg.player_max:
      problems.append(f"no deal with a starting hand <= {cfg.player_max} was found")
    if hand_total(inst.dealer) > cfg.dealer_max:
      problems.append(f"no deal with a dealer total <= {cfg.dealer_max} was found (21 cannot be beaten)")
    return problems


# ----------------------------------------------------------------------------------------------- Maze

# shapes (width, height) of each maze scenario for n corridor segments (g = max(0, n - 4) grows the grid)
_MAZE_SHAPES = {
    "square": lambda g: ((6 + g, 6 + g), (7 + g, 7 + g)),
    "oblong": lambda g: ((7 + g, 6 + g), (6 + g, 7 + g)),
    "wide": lambda g: ((10 + g, 5 + g // 2),),
    "tall": lambda g: ((5 + g // 2, 10 + g),),
    "large": lambda g: ((9 + g, 9 + g),),
}
_MAZE_ORDER = ("square", "oblong", "wide", "tall", "large")


@register
class MazeParams(_Game):
  """Corridor segments = pairs n: shortest path in [2n - 1, 2n], H = 2n + 1 (n = 4 is ORBIT's 7..8 and 9).
  The grid shapes are the union of every pair's scenario shapes, in the order of ORBIT's list for the default
  pool ((6,6), (7,6), (7,7), (6,7)); each ``branch`` pair lowers the single-carve probability of the growth
  step by 0.2 (from 0.7, at least 0.1: a bushier tree), each ``loop`` pair opens one more loop. Measured: both
  change the generated mazes but barely change the frontier oracle's turns (the length knob does)."""

  name = env_name = "maze"
  scenario_freq: Mapping[str, float] = {"square": 0.4, "oblong": 0.4, "wide": 0.08, "tall": 0.08, "large": 0.04}
  skill_freq: Mapping[str, float] = {"walk": 0.7, "branch": 0.2, "loop": 0.1}
  min_pairs, max_pairs = 2, 9
  oracle_episodes = 3
  seed_lengths = (4,)
  seed_scenarios = ("square", "oblong")

  def seed_pairs(self, index: int) -> tuple[Pair, ...]:
    """ORBIT's default pool: segments alternate square and oblong scenarios (both shape pairs), walk skills
    with one branch or loop on some seeds; odd indices start with the oblong scenario."""
    base = list(super().seed_pairs(index))
    first = self.seed_scenarios[index % 2]
    other = self.seed_scenarios[1 - index % 2]
    return tuple(Pair(first if i % 2 == 0 else other, p.skill) for i, p in enumerate(base))

  def env_params(self, point: EnvPoint) -> dict:
    pairs = self._pairs(point)
    n, g = len(pairs), max(0, len(pairs) - 4)
    shapes: list[tuple[int, int]] = []
    used = {p.scenario for p in pairs}
    if {"square", "oblong"} <= used:  # ORBIT's default order
      a, b = _MAZE_SHAPES["square"](g), _MAZE_SHAPES["oblong"](g)
      shapes += [a[0], b[0], a[1], b[1]]
    for s in _MAZE_ORDER:
      for shape in _MAZE_SHAPES[s](g):
        if s in used and shape not in shapes:
          shapes.append(shape)
    return {"min_path": 2 * n - 1, "max_path": 2 * n, "max_turns": 2 * n + 1,
            "shapes": tuple(shapes), "single_carve": round(max(0.1, 0.7 - 0.2 * self.count(pairs, "branch")), 6),
            "loops": self.count(pairs, "loop")}

  def constant_action(self) -> str:
    return "\\boxed{up}"

  def plan_length(self, point: EnvPoint, oracle_turns: int) -> int:
    """The maze's shortest start-goal path: the frontier oracle's turn count over 3 exploring episodes
    swings with its luck (5-20 turns on seeds of one length), the plan a solver needs does not."""
    del oracle_turns
    return int(self.tasks(point, 1)[0].instance.shortest)

  def answer_strings(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    if not tasks:
      return []
    r, c = tasks[0].instance.goal
    return [f"({r},{c})", f"({r}, {c})"]


@register
class MazeCompactParams(MazeParams):
  """Maze with the game's ``compact`` text (the small-model wording of experiments/orbit_tiny_learns.py; same
  rules and instances) and seeds one segment shorter than ORBIT's default (paths 5-6 in 7 moves), the task
  source of experiments/evolve_tiny_maze.py."""

  name = "maze_compact"
  env_name = "maze"
  seed_lengths = (3,)

  def env_params(self, point: EnvPoint) -> dict:
    return {**super().env_params(point), "text": "compact"}


# ----------------------------------------------------------------------------------------- Mastermind


@register
class MastermindParams(_Game):
  """Code positions = pairs n (code length n, H = max(3, n) guesses per episode); ``wide`` pairs add one
  symbol each to the 6 digits, any ``repeat`` pair allows repeated digits."""

  name = env_name = "mastermind"
  scenario_freq: Mapping[str, float] = {"digits": 1.0}
  skill_freq: Mapping[str, float] = {"distinct": 0.7, "wide": 0.2, "repeat": 0.1}
  min_pairs, max_pairs = 2, 6
  oracle_episodes = 3
  seed_lengths = (3,)

  def env_params(self, point: EnvPoint) -> dict:
    pairs = self._pairs(point)
    n = len(pairs)
    return {"code_length": n, "num_digits": 6 + self.count(pairs, "wide"),
            "duplicates": self.count(pairs, "repeat") > 0, "max_turns": max(3, n)}

  #: code universes above this size are played by the oracle's fast greedy rule (the exact DP over 360
  #: codes of length 4 takes seconds per instance)
  exact_limit = 240

  def oracle(self):
    from codjax.envs.experts import make_policy

    return make_policy(self.env_name, "expert", episodes=self.oracle_episodes, exact_limit=self.exact_limit)

  def constant_action(self) -> str:
    return "\\boxed{1 2 3}"

  def answer_strings(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    if not tasks:
      return []
    code = tasks[0].instance.code
    return [" ".join(map(str, code)), "[" + ", ".join(map(str, code)) + "]"]

  def quality_problems(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    if tasks and tuple(tasks[0].instance.code) == (1, 2, 3)[:len(tasks[0].instance.code)]:
      return ["the secret code is the constant policy's guess"]
    return []


# ------------------------------------------------------------------------------------- Hangman, Wordle

_WORD_SCENARIOS: Mapping[str, float] = {"any": 0.7, "noun": 0.15, "verb": 0.1, "adjective": 0.05}
_WORD_SKILLS: Mapping[str, float] = {"common": 0.8, "rare": 0.12, "double": 0.08}


class _WordGame(_Game):
  """Letters = pairs n (word length n); the rarest scenario is the secret's category; each ``rare`` pair asks
  one more letter of JQXZKV in the secret, each ``double`` pair one more repeated letter."""

  scenario_freq = _WORD_SCENARIOS
  skill_freq = _WORD_SKILLS
  oracle_episodes = 3

  def env_params(self, point: EnvPoint) -> dict:
    pairs = self._pairs(point)
    scenario = self.rarest_scenario(pairs)
    return {"word_length": len(pairs), "category": "all" if scenario == "any" else scenario,
            "min_rare": self.count(pairs, "rare"), "min_repeats": self.count(pairs, "double")}

  def answer_strings(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    if not tasks:
      return []
    secret = tasks[0].instance.secret
    return [secret] if len(secret) >= 5 else []

  def quality_problems(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    from codjax.envs.games import words

    if not tasks:
      return []
    secret = tasks[0].instance.secret
    problems = _whole_word_leak(secret, tasks)
    if secret not in words.vocabulary(len(secret)):
      problems.append(f"the secret {secret!r} is not in the game's word list")
    return problems


@register
class HangmanParams(_WordGame):
  name = env_name = "hangman"
  min_pairs, max_pairs = 3, 9
  seed_lengths = (3, 4)

  def constant_action(self) -> str:
    return "\\boxed{E}"


@register
class WordleParams(_WordGame):
  name = env_name = "wordle"
  min_pairs, max_pairs = 4, 9
  seed_lengths = (5,)

  def constant_action(self) -> str:
    return "\\boxed{CRANE}"

  def quality_problems(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    problems = super().quality_problems(point, tasks)
    if tasks and tasks[0].instance.secret == "CRANE":
      problems.append("the secret is the constant policy's guess")
    return problems


# ---------------------------------------------------------------------------------------- Minesweeper

# (rows, cols) of each board aspect for n pairs; the cell count stays close to n * n
_MINE_BOARDS = {
    "square": lambda n: (n, n),
    "oblong": lambda n: (n - 1, n + 1),
    "strip": lambda n: (max(3, n - 2), n + 3),
}


@register
class MinesweeperParams(_Game):
  """Board side = pairs n (n = 5: ORBIT's 5x5, 5 mines, H = 8): the rarest scenario sets the aspect, the mines
  are a fifth of the cells plus one per ``dense`` pair, H = ceil(0.32 * cells) (8 on 25 cells)."""

  name = env_name = "minesweeper"
  scenario_freq: Mapping[str, float] = {"square": 0.7, "oblong": 0.2, "strip": 0.1}
  skill_freq: Mapping[str, float] = {"deduce": 0.75, "dense": 0.25}
  min_pairs, max_pairs = 4, 7
  oracle_episodes = 3
  seed_lengths = (5,)
  seed_scenarios = ("square", "oblong")

  def env_params(self, point: EnvPoint) -> dict:
    pairs = self._pairs(point)
    rows, cols = _MINE_BOARDS[self.rarest_scenario(pairs)](len(pairs))
    cells = rows * cols
    return {"rows": rows, "cols": cols, "mines": round(cells / 5) + self.count(pairs, "dense"),
            "max_turns": math.ceil(0.32 * cells - 1e-9)}

  def constant_action(self) -> str:
    return "\\boxed{reveal 0 0}"
