"""The standard error of a mean, the one place every evaluation summary computes it.

For n samples x_1..x_n along an axis: mean = sum_i x_i / n and
se = s / sqrt(n) with s^2 = sum_i (x_i - mean)^2 / (n - 1) (the sample standard deviation, ``ddof=1``).
One sample has no spread to estimate: se = 0 (a single pack is reported, not rejected); no samples give
NaN for both.
"""

from __future__ import annotations

import math

import numpy as np


def mean_se(x, axis: int = 0):
  """(mean, standard error of the mean) of ``x`` along ``axis`` (module docstring).

  A 1-D input gives two floats; a higher-rank one gives two arrays over the remaining axes.
  """
  x = np.asarray(x, dtype=np.float64)
  if x.ndim == 0:
    raise ValueError("mean_se needs at least one axis of samples, got a scalar")
  n = x.shape[axis]
  if n == 0:
    mean = np.full(np.delete(x.shape, axis), np.nan)
    se = mean.copy()
  else:
    mean = x.mean(axis=axis)
    se = x.std(axis=axis, ddof=1) / math.sqrt(n) if n > 1 else np.zeros_like(mean)
  if np.ndim(mean) == 0:
    return float(mean), float(se)
  return mean, se
