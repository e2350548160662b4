"""Tests of the Appendix-E contextual bandit (codjax.rl.bandit) and its launcher launch/bandit.py."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize

from codjax.rl import bandit

pytestmark = pytest.mark.slow  # bandit training and its launcher (~15 s)

LAM = 1e-4
RHOS = np.round(np.linspace(0.0, 1.0, 11), 1)
REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def policies():
  thetas = bandit.converged_policies(jnp.asarray(RHOS), LAM, dt=10.0, num_steps=100_000)  # t = 1e6
  return np.asarray(thetas), np.asarray(bandit.evaluation_table(thetas, jnp.asarray(RHOS), LAM))


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def test_flow_velocity_is_the_gradient_of_eq8():
  rng = np.random.default_rng(0)
  for _ in range(5):
    theta, rho = jnp.asarray(rng.normal(0, 3, 4), jnp.float32), float(rng.random())
    expected = jax.grad(bandit.objective)(theta, rho, LAM)
    np.testing.assert_allclose(bandit.flow_velocity(theta, rho, LAM), expected, rtol=1e-5, atol=1e-7)


def test_eq18_estimator_is_unbiased():
  """Enumerating the four (context, action) outcomes of one sample gives exactly Eq. 9."""
  theta, rho = jnp.array([0.7, -1.2, 0.4, 0.1]), 0.3
  total = jnp.zeros(4)
  for ctx, p_ctx in ((bandit.CONTEXTS[0], rho), (bandit.CONTEXTS[1], 1 - rho)):
    p1 = jax.nn.sigmoid(ctx[0] * theta[0] - ctx[1] * theta[1] + theta[2] - theta[3])
    for is_1, p_a in ((True, p1), (False, 1 - p1)):
      total += p_ctx * p_a * bandit.reinforce_gradient(theta, ctx[None], jnp.array([is_1]))
  np.testing.assert_allclose(total, bandit.flow_velocity(theta, rho), rtol=1e-5, atol=1e-7)


def test_balanced_policy_is_0_5693_under_every_mixture(policies):
  thetas, table = policies
  assert [f"{v:.4f}" for v in table[5]] == ["0.5693"] * 11  # the paper's printed precision
  # Closed form: equal margins with sigma'(m) = 250 lam m (Eq. 15 at rho = 1/2).
  m = optimize.brentq(lambda x: _sigmoid(x) * (1 - _sigmoid(x)) - 250 * LAM * x, 0.1, 50.0)
  m1, m2 = bandit.margins(jnp.asarray(thetas[5]))
  assert abs(float(m1) - m) < 1e-3 and abs(float(m2) - m) < 1e-3
  assert abs(0.4 + 0.2 * _sigmoid(m) - 25 * LAM * m * m - 0.5693) < 5e-5


def test_converged_policies_are_stationary_min_norm_points(policies):
  thetas, _ = policies
  m1, m2 = (np.asarray(m, np.float64) for m in bandit.margins(jnp.asarray(thetas)))
  ds1, ds2 = _sigmoid(m1) * (1 - _sigmoid(m1)), _sigmoid(m2) * (1 - _sigmoid(m2))
  # Eq. 15.
  np.testing.assert_allclose(0.2 * RHOS * ds1, 12.5 * LAM * (m1 + m2) + 0.1 * LAM * (m1 - m2), atol=2e-6)
  np.testing.assert_allclose(0.2 * (1 - RHOS) * ds2, 12.5 * LAM * (m1 + m2) - 0.1 * LAM * (m1 - m2), atol=2e-6)
  # Eq. 12.
  star = np.stack([2.6 * m1 + 2.4 * m2, 2.4 * m1 + 2.6 * m2, 0.2 * (m1 - m2), -0.2 * (m1 - m2)], axis=-1)
  np.testing.assert_allclose(thetas, star, atol=2e-3)


def test_figure9_qualitative_facts(policies):
  thetas, table = policies
  m1, m2 = (np.asarray(m) for m in bandit.margins(jnp.asarray(thetas)))
  slope = 0.2 * (_sigmoid(m1) - _sigmoid(m2))  # Eq. 17
  # rho = 0.4 / 0.6: nearly flat lines, in-distribution gain over the balanced policy of about 3e-4.
  for i in (4, 6):
    assert abs(slope[i]) < 0.01
    assert 2e-4 < table[i, i] - table[5, i] < 4e-4
  # rho <= 0.3 (>= 0.7): a strong action-2 (action-1) bias, wrong in the minority context, steep lines.
  for i in range(4):
    assert m1[i] < -4 and m2[i] > 4 and thetas[i, 2] < -2 and thetas[i, 3] > 2
    assert m1[10 - i] > 4 and m2[10 - i] < -4 and thetas[10 - i, 2] > 2
    assert abs(slope[i]) > 0.19 and abs(slope[10 - i]) > 0.19
  # Curves within each group nearly overlap.
  assert np.ptp(table[:4], axis=0).max() < 2e-3 and np.ptp(table[7:], axis=0).max() < 2e-3
  # The problem is symmetric under swapping the actions and rho -> 1 - rho.
  np.testing.assert_allclose(thetas[::-1], thetas[:, [1, 0, 3, 2]], atol=2e-3)


def test_finite_sample_run_tracks_the_expected_flow():
  rhos = jnp.array([0.5, 0.8])
  keys = jax.random.split(jax.random.key(0), 2)
  sampled = jax.vmap(lambda k, r: bandit.sampled_reinforce(k, r, LAM, 0.02, 128, 2000, 5))(keys, rhos)
  expected = jax.vmap(lambda r: bandit.gradient_flow(r, LAM, 4.0, 10, 5))(rhos)  # t = 0.02 * 2000 per record
  np.testing.assert_allclose(sampled, expected, atol=0.08)
  assert float(jnp.abs(sampled[0, :, 2:]).max()) < 0.08  # balanced: biases stay near zero
  assert float(sampled[1, -1, 2]) > 1.0  # rho = 0.8: an action-1 preference develops


def test_launcher_prints_table_and_writes_figures(tmp_path):
  env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
             JAX_PLATFORMS="cpu")
  cmd = [sys.executable, str(REPO / "launch" / "bandit.py"), f"--out_dir={tmp_path}", "--flow_dt=10",
         "--flow_steps=100000", "--num_updates=1000", "--num_records=10"]
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = proc.stdout
  balanced = next(line for line in out.splitlines() if line.startswith(" 0.5 |"))
  assert balanced.split("|")[1].split() == ["0.5693"] * 11
  for name in ("figure9.png", "figure10.png", "figure11.png"):
    assert (tmp_path / name).stat().st_size > 10_000
