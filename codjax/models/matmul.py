"""The one 2-D matmul every weight product of the codjax decoders goes through: y = x W.

  y [N, K] = x [N, D] W [D, K];   backward:  dx = dy W^T,   dW = x^T dy

Autodiff of ``jnp.dot`` emits dW as a ``dot_general`` contracting dimension 0 of both operands. XLA's CPU
backend has no fast kernel for that form: it runs a generic loop nest instead of its YNNPACK / Eigen GEMM
(measured on the 2-core development host, jax 0.10.2, float32: the lm_head gradient [2044, 256]^T x
[2044, 32768] took 1.40 s in that form, 0.50 s with x^T materialised first, torch's ``mm`` 0.67 s; in the
hybrid benchmark's train step this one product was 1.6-2.0 s of ~7.3 s). On the CPU backend ``matmul``
therefore carries its own VJP that materialises x^T behind ``jax.lax.optimization_barrier`` (without the
barrier XLA folds the transpose straight back into the slow form) and multiplies x^T dy as a plain
row-major GEMM. Both products are the same sums, so values agree with autodiff's to float rounding (the
tests compare to 1e-6 relative).

On GPU and TPU the plain ``jnp.dot`` is used (cuBLAS and the TPU MXU take transposed operands natively, and
the sharding propagation of the plain form is the well-trodden one); the choice is made at trace time from
``jax.default_backend()``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


@jax.custom_vjp
def _matmul_tn_grad(x_nd, w_dk):
  return jnp.dot(x_nd, w_dk)


def _fwd(x_nd, w_dk):
  return jnp.dot(x_nd, w_dk), (x_nd, w_dk)


def _bwd(res, dy_nk):
  x_nd, w_dk = res
  dy_nk = dy_nk.astype(jnp.result_type(x_nd, w_dk))
  dx_nd = jnp.dot(dy_nk, w_dk.T).astype(x_nd.dtype)
  xt_dn = jax.lax.optimization_barrier(x_nd.T)
  dw_dk = jnp.dot(xt_dn, dy_nk).astype(w_dk.dtype)
  return dx_nd, dw_dk


_matmul_tn_grad.defvjp(_fwd, _bwd)


def matmul(x_nd, w_dk):
  """x [N, D] @ w [D, K] -> [N, K] (module docstring: on CPU with the weight gradient as x^T dy)."""
  if x_nd.ndim != 2 or w_dk.ndim != 2:
    raise ValueError(f"matmul takes 2-D operands, got {x_nd.shape} and {w_dk.shape}")
  if jax.default_backend() == "cpu":
    return _matmul_tn_grad(x_nd, w_dk)
  return jnp.dot(x_nd, w_dk)
