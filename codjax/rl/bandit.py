"""The two-action contextual bandit of the CoD paper, Appendix E: expected and sampled REINFORCE dynamics.

Context z in {z1 = (0.6, 0.4), z2 = (0.4, 0.6)} with P(z1) = rho (Eq. 4); action a in {1, 2}; reward
R(a, z) = z_a. The policy has logits w_a z_a + b_a, theta = (w1, w2, b1, b2), so pi(a=1 | z) =
sigmoid(w1 z1 - w2 z2 + b1 - b2) (Eq. 5). The optimal-action margins are (Eq. 6, 7)

  m1 = 0.6 w1 - 0.4 w2 + b1 - b2,     m2 = -0.4 w1 + 0.6 w2 - b1 + b2,

and the L2-regularized expected reward is (Eq. 8, 11)

  J_{lam,rho}(theta) = 0.4 + 0.2 [rho s(m1) + (1 - rho) s(m2)] - lam/2 |theta|^2.

Expected REINFORCE is the gradient flow d theta/dt = grad J_rho(theta) - lam theta with (Eq. 9)

  grad J_rho = 0.2 rho s'(m1) (0.6, -0.4, 1, -1) + 0.2 (1 - rho) s'(m2) (-0.4, 0.6, -1, 1),

integrated here with classical RK4 inside ``lax.scan``. The finite-sample version (Eq. 18) draws B contexts
and on-policy actions per update and steps theta <- (1 - eta lam) theta + eta/B sum_j R_j grad log
pi(a_j | z_j), with grad log pi(a | z) = (1[a = 1] - pi(1 | z)) (z1, -z2, 1, -1) (zero baseline).

``converged_policies`` integrates the regularized flow from theta = 0 (which selects the stationary branch of
Eq. 15 plotted in Figure 9) and ``evaluation_table`` evaluates each converged policy under every mixture
rho' (Eq. 13, 16, 17).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

CONTEXTS = np.array([[0.6, 0.4], [0.4, 0.6]], np.float32)
_DIR1 = np.array([0.6, -0.4, 1.0, -1.0], np.float32)  # d m1 / d theta
_DIR2 = np.array([-0.4, 0.6, -1.0, 1.0], np.float32)  # d m2 / d theta


def margins(theta: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Optimal-action margins (m1, m2) of Eq. 6-7; theta [..., 4]."""
  return theta @ _DIR1, theta @ _DIR2


def objective(theta: jax.Array, rho: jax.Array | float, lam: float = 0.0) -> jax.Array:
  """J_{lam,rho}(theta) of Eq. 8 / Eq. 11."""
  m1, m2 = margins(theta)
  reward = 0.4 + 0.2 * (rho * jax.nn.sigmoid(m1) + (1.0 - rho) * jax.nn.sigmoid(m2))
  return reward - 0.5 * lam * jnp.sum(theta**2, axis=-1)


def _sigmoid_prime(x: jax.Array) -> jax.Array:
  s = jax.nn.sigmoid(x)
  return s * (1.0 - s)


def flow_velocity(theta: jax.Array, rho: jax.Array | float, lam: float = 0.0) -> jax.Array:
  """Expected REINFORCE direction, Eq. 9 plus the weight-decay term -lam theta; theta [..., 4], rho [...]."""
  m1, m2 = margins(theta)
  c1 = 0.2 * rho * _sigmoid_prime(m1)
  c2 = 0.2 * (1.0 - rho) * _sigmoid_prime(m2)
  return c1[..., None] * _DIR1 + c2[..., None] * _DIR2 - lam * theta


def _rk4_step(theta, rho, lam, dt):
  k1 = flow_velocity(theta, rho, lam)
  k2 = flow_velocity(theta + 0.5 * dt * k1, rho, lam)
  k3 = flow_velocity(theta + 0.5 * dt * k2, rho, lam)
  k4 = flow_velocity(theta + dt * k3, rho, lam)
  return theta + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


@functools.partial(jax.jit, static_argnames=("steps_per_record", "num_records"))
def gradient_flow(rho: jax.Array | float, lam: float, dt: float, steps_per_record: int, num_records: int,
                  theta0: jax.Array | None = None) -> jax.Array:
  """RK4 integration of the expected flow; returns theta at t = 0, dt * steps_per_record, ... [R + 1, 4]."""
  theta0 = jnp.zeros(4) if theta0 is None else theta0

  def record(theta, _):
    theta = jax.lax.fori_loop(0, steps_per_record, lambda _, th: _rk4_step(th, rho, lam, dt), theta)
    return theta, theta

  _, path = jax.lax.scan(record, theta0, None, length=num_records)
  return jnp.concatenate([theta0[None], path])


def grad_log_policy(theta: jax.Array, context: jax.Array, action_is_1: jax.Array) -> jax.Array:
  """grad_theta log pi(a | z) for contexts [..., 2] and actions (True for a = 1) [...]; returns [..., 4]."""
  p1 = jax.nn.sigmoid(context[..., 0] * theta[0] - context[..., 1] * theta[1] + theta[2] - theta[3])
  direction = jnp.stack([context[..., 0], -context[..., 1], jnp.ones_like(p1), -jnp.ones_like(p1)], axis=-1)
  return (action_is_1.astype(p1.dtype) - p1)[..., None] * direction


def reinforce_gradient(theta: jax.Array, context: jax.Array, action_is_1: jax.Array) -> jax.Array:
  """The sample-mean REINFORCE gradient (1/B) sum_j R(a_j, z_j) grad log pi(a_j | z_j) of Eq. 18."""
  reward = jnp.where(action_is_1, context[..., 0], context[..., 1])
  return jnp.mean(reward[..., None] * grad_log_policy(theta, context, action_is_1), axis=0)


def _sampled_update(theta, key, rho, lam, eta, batch_size):
  key_z, key_a = jax.random.split(key)
  context = jnp.where(jax.random.bernoulli(key_z, rho, (batch_size,))[:, None], CONTEXTS[0], CONTEXTS[1])
  p1 = jax.nn.sigmoid(context[:, 0] * theta[0] - context[:, 1] * theta[1] + theta[2] - theta[3])
  action_is_1 = jax.random.uniform(key_a, (batch_size,)) < p1
  return (1.0 - eta * lam) * theta + eta * reinforce_gradient(theta, context, action_is_1)


@functools.partial(jax.jit, static_argnames=("batch_size", "steps_per_record", "num_records"))
def sampled_reinforce(key: jax.Array, rho: jax.Array | float, lam: float, eta: float, batch_size: int,
                      steps_per_record: int, num_records: int) -> jax.Array:
  """Finite-sample REINFORCE (Eq. 18) from theta = 0; theta every ``steps_per_record`` updates [R + 1, 4]."""

  def record(carry, _):
    theta, key = carry

    def update(_, state):
      th, k = state
      k, sub = jax.random.split(k)
      return _sampled_update(th, sub, rho, lam, eta, batch_size), k

    theta, key = jax.lax.fori_loop(0, steps_per_record, update, (theta, key))
    return (theta, key), theta

  theta0 = jnp.zeros(4)
  _, path = jax.lax.scan(record, (theta0, key), None, length=num_records)
  return jnp.concatenate([theta0[None], path])


def converged_policies(rhos: jax.Array, lam: float, dt: float = 5.0, num_steps: int = 200_000) -> jax.Array:
  """theta_rho [P, 4] for training mixtures rhos [P]: the flow from theta = 0 run to time dt * num_steps.

  Figure 9 uses lam = 1e-4, for which the defaults (t = 1e6, about 100 / lam) leave the velocity below 1e-6.
  """
  return jax.vmap(lambda rho: gradient_flow(rho, lam, dt, num_steps, 1)[-1])(jnp.asarray(rhos))


def evaluation_table(thetas: jax.Array, eval_rhos: jax.Array, lam: float) -> jax.Array:
  """J_{lam,rho'}(theta) for every policy [P, 4] and evaluation mixture rho' [E]; returns [P, E]."""
  return objective(thetas[:, None, :], eval_rhos[None, :], lam)
