"""codjax.models.matmul: values and gradients equal plain ``jnp.dot``'s (float64 numpy reference for the
gradient formulas), in float32 and bfloat16, under jit, vmap-free reshapes and on a sharded mesh."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codjax.models.matmul import matmul


@pytest.mark.parametrize("dtype,tol", [(jnp.float32, 1e-5), (jnp.bfloat16, 2e-2)])
def test_matmul_and_its_gradients_equal_the_textbook_formulas(dtype, tol):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(37, 24)).astype(np.float32)
  w = rng.normal(size=(24, 50)).astype(np.float32)
  c = rng.normal(size=(37, 50)).astype(np.float32)

  def loss(x, w):
    return jnp.sum(matmul(x, w).astype(jnp.float32) * c)

  y = jax.jit(matmul)(jnp.asarray(x, dtype), jnp.asarray(w, dtype))
  assert y.dtype == dtype and y.shape == (37, 50)
  dx, dw = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.asarray(x, dtype), jnp.asarray(w, dtype))
  assert dx.dtype == dtype and dw.dtype == dtype
  x64, w64, c64 = (a.astype(np.float64) for a in (x, w, c))
  scale = lambda a: np.abs(a).max()
  np.testing.assert_allclose(np.asarray(y, np.float64), x64 @ w64, atol=tol * scale(x64 @ w64))
  np.testing.assert_allclose(np.asarray(dx, np.float64), c64 @ w64.T, atol=tol * scale(c64 @ w64.T))
  np.testing.assert_allclose(np.asarray(dw, np.float64), x64.T @ c64, atol=tol * scale(x64.T @ c64))


def test_matmul_gradient_equals_autodiff_of_dot_and_composes_with_remat():
  rng = np.random.default_rng(1)
  x = jnp.asarray(rng.normal(size=(64, 32)), jnp.float32)
  w1 = jnp.asarray(rng.normal(size=(32, 48)) * 0.2, jnp.float32)
  w2 = jnp.asarray(rng.normal(size=(48, 16)) * 0.2, jnp.float32)

  def net(mm, x, w1, w2):
    return jnp.sum(jnp.tanh(mm(jax.nn.silu(mm(x, w1)), w2)) ** 2)

  ours = jax.jit(jax.grad(jax.checkpoint(lambda *a: net(matmul, *a)), argnums=(0, 1, 2)))(x, w1, w2)
  ref = jax.jit(jax.grad(lambda *a: net(jnp.dot, *a), argnums=(0, 1, 2)))(x, w1, w2)
  for a, b in zip(ours, ref):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_matmul_rejects_non_2d_operands():
  with pytest.raises(ValueError, match="2-D"):
    matmul(jnp.zeros((2, 3, 4)), jnp.zeros((4, 5)))


def test_panel_weight_products_equal_the_plain_product_under_the_layer_code_s_reshapes():
  """``PanelWeight``: a [D, N, H] weight contracted over D and an [N, H, D] one contracted over (N, H), stored
  as column panels, multiply 1, 3 and 8 rows as the plain [K, N] view does (float64 reference), through the
  ``astype`` / ``reshape`` / ``shape`` the layer code applies; only the [K, N] view reshapes, and an output
  width that is not a multiple of the panel width is refused."""
  from codjax.models.matmul import PanelWeight, panel_matmul

  rng = np.random.default_rng(2)
  q_dnh = rng.normal(size=(48, 4, 16)).astype(np.float32)  # contract D: [48, 64]
  o_nhd = rng.normal(size=(4, 16, 48)).astype(np.float32)  # contract N, H: [64, 48]
  for w, contract in ((q_dnh, 1), (o_nhd, 2)):
    k = int(np.prod(w.shape[:contract]))
    pw = jax.jit(lambda a, c=contract: PanelWeight.from_array(a, c, 16))(jnp.asarray(w))
    assert pw.shape == w.shape and pw.w_pkj.shape == (w.size // k // 16, k, 16)
    view = pw.astype(jnp.float32).reshape(k, -1)
    assert view.shape == (k, w.size // k)
    for rows in (1, 3, 8):
      x = rng.normal(size=(rows, k)).astype(np.float32)
      want = x.astype(np.float64) @ w.reshape(k, -1).astype(np.float64)
      got = jax.jit(matmul)(jnp.asarray(x), view)
      np.testing.assert_allclose(np.asarray(got, np.float64), want, atol=1e-5 * np.abs(want).max())
      np.testing.assert_array_equal(np.asarray(panel_matmul(jnp.asarray(x), view)), np.asarray(got))
    with pytest.raises(ValueError, match="view only"):
      pw.reshape(k * 2, -1)
  with pytest.raises(ValueError, match="not a multiple"):
    PanelWeight.from_array(jnp.zeros((8, 40)), 1, 16)
