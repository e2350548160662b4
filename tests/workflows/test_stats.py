"""``codjax.workflows.stats.mean_se`` against hand-computed values."""

import math

import numpy as np
import pytest

from codjax.workflows.stats import mean_se


def test_mean_se_of_a_vector_by_hand():
  # x = 1, 2, 3, 6: mean 3, squared deviations 4 + 1 + 0 + 9 = 14, s^2 = 14 / 3, se = sqrt(14 / 3) / 2
  m, se = mean_se([1, 2, 3, 6])
  assert isinstance(m, float) and isinstance(se, float)
  assert m == 3.0
  assert se == pytest.approx(math.sqrt(14 / 3) / 2, rel=1e-12)


def test_mean_se_per_column_and_along_axis_1():
  r = np.array([[0.0, 0.2], [0.0, 0.2], [0.1, 0.2], [0.1, 0.2]])
  m, se = mean_se(r)
  np.testing.assert_allclose(m, [0.05, 0.2])
  # column 0: deviations +-0.05, s^2 = 4 * 0.0025 / 3, se = 0.05 / sqrt(3); column 1 has no spread
  np.testing.assert_allclose(se, [0.05 / math.sqrt(3), 0.0], atol=1e-15)
  m1, se1 = mean_se(r.T, axis=1)
  np.testing.assert_allclose(m1, m)
  np.testing.assert_allclose(se1, se, atol=1e-15)


def test_mean_se_one_sample_and_none():
  assert mean_se([0.7]) == (0.7, 0.0)
  m, se = mean_se(np.zeros((1, 3)))
  np.testing.assert_array_equal(se, [0.0, 0.0, 0.0])
  m, se = mean_se([])
  assert math.isnan(m) and math.isnan(se)
  m, se = mean_se(np.zeros((0, 2)))
  assert m.shape == (2,) and np.isnan(m).all() and np.isnan(se).all()
  with pytest.raises(ValueError, match="scalar"):
    mean_se(3.0)
