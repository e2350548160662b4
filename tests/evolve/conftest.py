"""Fixtures of the evolution tests: a small parameterisation over the real maze (one pair per corridor segment)."""

import pytest

from codjax.evolve.base import Pair, Parameterisation
from codjax.evolve.registry import register


@register
class MazeSegments(Parameterisation):
  """Path length = number of pairs; a ``wide`` scenario switches to a wider board (rarer in the seed pool)."""

  name = "test_maze"
  env_name = "maze"
  scenario_freq = {"square": 0.8, "wide": 0.2}
  skill_freq = {"walk": 1.0}
  min_pairs, max_pairs = 4, 9
  oracle_episodes = 3

  def env_params(self, point):
    n = len(point.pairs)
    shapes = [(9, 7)] if any(p.scenario == "wide" for p in point.pairs) else [(7, 7)]
    return {"min_path": n, "max_path": n, "max_turns": n + 3, "shapes": shapes}

  def seed_pairs(self, index):
    return (Pair("square", "walk"),) * (5 + index % 2)

  def constant_action(self):
    return "\\boxed{up}"


@pytest.fixture
def maze_param():
  """The registered test parameterisation (family ``test_maze``)."""
  return MazeSegments()
