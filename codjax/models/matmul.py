"""The one 2-D matmul every weight product of the codjax decoders goes through: y = x W.

  y [N, K] = x [N, D] W [D, K];   backward:  dx = dy W^T,   dW = x^T dy

Autodiff of ``jnp.dot`` emits dW as a ``dot_general`` contracting dimension 0 of both operands. XLA's CPU
backend has no fast kernel for that form: it runs a generic loop nest instead of its YNNPACK / Eigen GEMM
(measured on a 2-core CPU host, jax 0.10.2, float32: the lm_head gradient [2044, 256]^T x
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

import math

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


@jax.tree_util.register_pytree_node_class
class PanelWeight:
  """A weight W of logical shape ``shape`` whose first ``contract`` dims are contracted (K = their product,
  N = the rest), stored for few-row products as column panels: ``w_pkj`` [N / J, K, J], panel p holding
  W[:, p J : (p + 1) J] of the [K, N] view contiguously.

  y [R, N] = x [R, K] W [K, N] then runs as the batched product y[:, p J + j] = sum_k x[r, k] w_pkj[p, k, j]
  (``panel_matmul``). XLA on CPU multiplies 1-8 rows by a row-major [K, N] weight at a fraction of the
  memory bandwidth a contiguous [K, J] panel allows (2 vCPUs of an AVX-512 EPYC, 8 rows: 384 x 1,024 147 ->
  95-117 us, 1,024 x 384 164 -> 82 us; benchmarks/README.md, 2026-12-07); at hundreds of rows the
  plain product is faster, so only the decode loop takes panels. Supports what the layer code does with a
  weight: ``shape``, ``astype`` and a ``reshape`` to the [K, N] view.
  """

  def __init__(self, w_pkj, shape: tuple[int, ...], contract: int = 1):
    self.w_pkj = w_pkj
    self.shape = tuple(int(n) for n in shape)
    self.contract = int(contract)

  @classmethod
  def from_array(cls, w, contract: int = 1, panel: int = 32) -> "PanelWeight":
    """Panels of ``panel`` columns (N must be a multiple of it) of ``w`` viewed as [K, N]."""
    k = int(math.prod(w.shape[:contract]))
    n = int(math.prod(w.shape[contract:]))
    if n % panel:
      raise ValueError(f"{n} output columns of a {tuple(w.shape)} weight are not a multiple of panels of {panel}")
    return cls(w.reshape(k, n // panel, panel).transpose(1, 0, 2), w.shape, contract)

  def tree_flatten(self):
    return (self.w_pkj,), (self.shape, self.contract)

  @classmethod
  def tree_unflatten(cls, aux, children):
    return cls(children[0], *aux)

  @property
  def dtype(self):
    return self.w_pkj.dtype

  def astype(self, dtype) -> "PanelWeight":
    return PanelWeight(self.w_pkj.astype(dtype), self.shape, self.contract)

  def reshape(self, *shape) -> "PanelWeight":
    """Only the [K, N] view (``-1`` allowed for N): the panels are laid out for it."""
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    k, n = self.w_pkj.shape[1], self.w_pkj.shape[0] * self.w_pkj.shape[2]
    if len(shape) != 2 or shape[0] != k or shape[1] not in (n, -1):
      raise ValueError(f"a PanelWeight of shape {self.shape} reshapes to its [{k}, {n}] view only, not {shape}")
    return PanelWeight(self.w_pkj, (k, n), 1)


def panel_matmul(x_nd, w: PanelWeight):
  """x [R, K] @ W [K, N] -> [R, N] from W's column panels (``PanelWeight``)."""
  p, k, j = w.w_pkj.shape
  if x_nd.ndim != 2 or x_nd.shape[1] != k:
    raise ValueError(f"panel_matmul takes x [R, {k}], got {x_nd.shape}")
  xb = jnp.broadcast_to(x_nd[None], (p,) + x_nd.shape)
  y_prj = jnp.einsum("prk,pkj->prj", xb, w.w_pkj.astype(x_nd.dtype))  # astype to the same dtype is a no-op
  return y_prj.transpose(1, 0, 2).reshape(x_nd.shape[0], p * j)


def matmul(x_nd, w_dk):
  """x [N, D] @ w [D, K] -> [N, K] (module docstring: on CPU with the weight gradient as x^T dy; a
  ``PanelWeight`` runs ``panel_matmul``)."""
  if isinstance(w_dk, PanelWeight):
    return panel_matmul(x_nd, w_dk)
  if x_nd.ndim != 2 or w_dk.ndim != 2:
    raise ValueError(f"matmul takes 2-D operands, got {x_nd.shape} and {w_dk.shape}")
  if jax.default_backend() == "cpu":
    return _matmul_tn_grad(x_nd, w_dk)
  return jnp.dot(x_nd, w_dk)
