"""Tests of codjax.rl.losses: gradients against Appendix-A formulas on a toy categorical policy,
OPD as reverse KL, KL / entropy terms, and exact (num, den) aggregation over microbatches and packed rows."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codjax.rl import losses
from codjax.rl.losses import LossConfig

B, T, V = 6, 10, 7
CFG = LossConfig(eps_low=0.2, eps_high=0.28)


def _toy_batch(seed=0):
  """A categorical policy (logits [B, T, V]) with sampled tokens, a rollout policy whose ratios cover every
  region of the one-side mask (kept clear of the clip boundaries), mixed-sign advantages and a ragged mask."""
  rng = np.random.default_rng(seed)
  logits = jnp.asarray(rng.normal(0, 1.5, (B, T, V)), jnp.float32)
  tokens = jnp.asarray(rng.integers(0, V, (B, T)))
  logp = _token_logp(logits, tokens)
  ratio = rng.choice([0.5, 0.7, 0.95, 1.1, 1.4, 1.9], (B, T)) * rng.uniform(0.97, 1.03, (B, T))
  old_logp = logp - jnp.log(jnp.asarray(ratio, jnp.float32))
  advantages = jnp.asarray(rng.choice([-1.0, 1.0], (B, T)) * rng.uniform(0.1, 2.0, (B, T)), jnp.float32)
  mask = jnp.asarray(rng.random((B, T)) < 0.8, jnp.float32)
  teacher = jnp.asarray(np.log(rng.dirichlet(np.ones(V), (B, T))), jnp.float32)
  teacher_logp = jnp.take_along_axis(teacher, tokens[..., None], -1)[..., 0]
  return dict(logits=logits, tokens=tokens, old_logp=old_logp, advantages=advantages, mask=mask,
              teacher_logp=teacher_logp)


def _token_logp(logits, tokens):
  return jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[..., None], -1)[..., 0]


def _num_grad(name, batch, cfg, **extra):
  loss = losses.get_loss(name)

  def num(logits):
    logp = _token_logp(logits, batch["tokens"])
    return loss(logp, batch["old_logp"], batch["advantages"], batch["mask"], cfg=cfg,
                teacher_logp=batch["teacher_logp"], **extra)[0]

  return jax.jit(jax.grad(num))(batch["logits"])


def _grad_logp(batch):
  """d logp_t / d logits_t = onehot(y_t) - softmax(logits_t)."""
  return jax.nn.one_hot(batch["tokens"], V) - jax.nn.softmax(batch["logits"])


def _one_side_mask(a, ratio, cfg):
  return ((a > 0) & (ratio <= 1 + cfg.eps_high)) | ((a < 0) & (ratio >= 1 - cfg.eps_low))


@pytest.mark.parametrize("aggregation", losses.AGGREGATIONS)
@pytest.mark.parametrize("name", ["ppo", "rec_oneside_is", "rec_oneside_nois", "opd", "sft"])
def test_gradient_matches_appendix_a(name, aggregation):
  batch = _toy_batch()
  cfg = LossConfig(eps_low=0.2, eps_high=0.28, aggregation=aggregation)
  logp = _token_logp(batch["logits"], batch["tokens"])
  a, ratio = batch["advantages"], jnp.exp(logp - batch["old_logp"])
  m = _one_side_mask(a, ratio, cfg)
  # The toy batch exercises every branch of the mask.
  for sign in (a > 0, a < 0):
    assert int(jnp.sum(sign & m)) > 3 and int(jnp.sum(sign & ~m)) > 3
  coef = {
      "ppo": -a * ratio * m,  # Eq. (1)
      "rec_oneside_is": -a * ratio * m,  # Eq. (1)
      "rec_oneside_nois": -a * m,  # Eq. (2)
      "opd": -(batch["teacher_logp"] - logp),  # reverse-KL policy gradient
      "sft": -jnp.ones_like(a),
  }[name]
  weights = losses.aggregation_weights(batch["mask"], aggregation)
  expected = (coef * weights)[..., None] * _grad_logp(batch)
  np.testing.assert_allclose(_num_grad(name, batch, cfg), expected, rtol=1e-5, atol=1e-6)


def test_loss_values():
  batch = _toy_batch(1)
  logp = _token_logp(batch["logits"], batch["tokens"])
  a, mask = batch["advantages"], batch["mask"]
  ratio = jnp.exp(logp - batch["old_logp"])
  args = (logp, batch["old_logp"], a, mask)
  ppo_t = -jnp.minimum(ratio * a, jnp.clip(ratio, 0.8, 1.28) * a)
  num, den, metrics = losses.get_loss("ppo")(*args, cfg=CFG)
  np.testing.assert_allclose(num, jnp.sum(ppo_t * mask), rtol=1e-5)
  assert float(den) == float(mask.sum())
  kept = _one_side_mask(a, ratio, CFG)
  np.testing.assert_allclose(metrics["clip_frac"][0], jnp.sum(~kept * mask), rtol=1e-6)
  np.testing.assert_allclose(metrics["advantage"][0], jnp.sum(a * mask), rtol=1e-5)
  np.testing.assert_allclose(metrics["ratio"][0], jnp.sum(ratio * mask), rtol=1e-5)
  num, _, _ = losses.get_loss("rec_oneside_nois")(*args, cfg=CFG)
  np.testing.assert_allclose(num, jnp.sum(-a * logp * kept * mask), rtol=1e-5)
  num, _, _ = losses.get_loss("sft")(*args, cfg=CFG)
  np.testing.assert_allclose(num, -jnp.sum(logp * mask), rtol=1e-5)


def test_ppo_dual_clip():
  logp = jnp.zeros((1, 3))
  old = -jnp.log(jnp.array([[4.0, 2.0, 4.0]]))  # ratios 4, 2, 4
  a = jnp.array([[-1.0, -1.0, 1.0]])
  cfg = LossConfig(dual_clip=3.0)
  loss = losses.get_loss("ppo")
  num_fn = lambda lp: loss(lp, old, a, jnp.ones((1, 3)), cfg=cfg)[0]
  # Token 0: -A rho = 4 > 3 = -3A, capped (no gradient); token 1: 2 < 3, unclipped; token 2: clipped at 1.2.
  np.testing.assert_allclose(num_fn(logp), 3.0 + 2.0 - 1.2, rtol=1e-6)
  np.testing.assert_allclose(jax.grad(num_fn)(logp), [[0.0, 2.0, 0.0]], atol=1e-6)


def test_opd_gradient_is_reverse_kl_gradient():
  """E_{y ~ pi}[grad l(y)] = grad KL(pi || teacher) for the per-token OPD loss, by exact enumeration."""
  rng = np.random.default_rng(3)
  theta = jnp.asarray(rng.normal(size=V), jnp.float32)
  teacher = jax.nn.log_softmax(jnp.asarray(rng.normal(size=V), jnp.float32))
  pi = jax.nn.softmax(theta)  # a constant: the sampling distribution of the expectation
  loss = losses.get_loss("opd")

  def expected_loss(th):
    logp = jax.nn.log_softmax(th)[None, :]  # every token y as one position, weighted by pi(y)
    return loss(logp, logp, jnp.zeros_like(logp), pi[None, :], cfg=CFG, teacher_logp=teacher[None, :])[0]

  def reverse_kl(th):
    lp = jax.nn.log_softmax(th)
    return jnp.sum(jnp.exp(lp) * (lp - teacher))

  np.testing.assert_allclose(jax.grad(expected_loss)(theta), jax.grad(reverse_kl)(theta), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kl_type", ["k1", "k2", "k3"])
def test_kl_terms(kl_type):
  batch = _toy_batch(2)
  rng = np.random.default_rng(5)
  ref_logp = batch["old_logp"] + jnp.asarray(rng.normal(0, 0.3, (B, T)), jnp.float32)
  cfg = LossConfig(kl_type=kl_type, kl_coef=0.1)
  logp = _token_logp(batch["logits"], batch["tokens"])
  x = ref_logp - logp
  dkl = {"k1": jnp.ones_like(x), "k2": -x, "k3": 1.0 - jnp.exp(x)}[kl_type]  # d kl / d logp
  base = _num_grad("rec_oneside_nois", batch, LossConfig())
  got = _num_grad("rec_oneside_nois", batch, cfg, ref_logp=ref_logp)
  expected = base + (0.1 * dkl * batch["mask"])[..., None] * _grad_logp(batch)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  kl_value = {"k1": -x, "k2": 0.5 * x**2, "k3": jnp.exp(x) - x - 1}[kl_type]
  _, _, metrics = losses.get_loss("rec_oneside_nois")(logp, batch["old_logp"], batch["advantages"],
                                                       batch["mask"], cfg=cfg, ref_logp=ref_logp)
  np.testing.assert_allclose(metrics["kl"][0], jnp.sum(kl_value * batch["mask"]), rtol=1e-4, atol=1e-6)


def test_kl_defaults_to_old_logp_and_entropy_bonus():
  batch = _toy_batch(4)
  logp = _token_logp(batch["logits"], batch["tokens"])
  args = (logp, batch["old_logp"], batch["advantages"], batch["mask"])
  loss = losses.get_loss("ppo")
  plain = loss(*args, cfg=CFG)[0]
  with_kl = loss(*args, cfg=LossConfig(eps_low=0.2, eps_high=0.28, kl_type="k2", kl_coef=0.5))[0]
  np.testing.assert_allclose(with_kl - plain, 0.25 * jnp.sum((batch["old_logp"] - logp) ** 2 * batch["mask"]),
                             rtol=1e-4)
  entropy = jnp.abs(logp)
  with_ent = loss(*args, cfg=LossConfig(eps_low=0.2, eps_high=0.28, entropy_coef=0.01), entropy=entropy)
  np.testing.assert_allclose(with_ent[0] - plain, -0.01 * jnp.sum(entropy * batch["mask"]), rtol=1e-4)
  np.testing.assert_allclose(with_ent[2]["entropy"][0], jnp.sum(entropy * batch["mask"]), rtol=1e-6)


def _split_sum(name, cfg, arrays, splits, extra_keys=()):
  """Sums (num, den) and metric pairs over row microbatches."""
  loss = jax.jit(functools.partial(losses.get_loss(name), cfg=cfg))
  num = den = 0.0
  metrics = {}
  for lo, hi in zip(splits[:-1], splits[1:]):
    part = {k: v[lo:hi] for k, v in arrays.items()}
    n, d, m = loss(part["logp"], part["old_logp"], part["advantages"], part["mask"],
                   **{k: part[k] for k in extra_keys})
    num, den = num + n, den + d
    for k, (mn, md) in m.items():
      prev = metrics.get(k, (0.0, 0.0))
      metrics[k] = (prev[0] + mn, prev[1] + md)
  return num, den, metrics


@pytest.mark.parametrize("name", ["ppo", "rec_oneside_nois", "opd"])
def test_token_mean_microbatches_are_exact(name):
  batch = _toy_batch(5)
  arrays = dict(logp=_token_logp(batch["logits"], batch["tokens"]), old_logp=batch["old_logp"],
                advantages=batch["advantages"], mask=batch["mask"], teacher_logp=batch["teacher_logp"])
  full = _split_sum(name, CFG, arrays, [0, B], ("teacher_logp",))
  parts = _split_sum(name, CFG, arrays, [0, 1, 4, B], ("teacher_logp",))
  np.testing.assert_allclose(parts[0], full[0], rtol=1e-5)
  np.testing.assert_allclose(parts[1], full[1], rtol=1e-6)
  for k in full[2]:
    np.testing.assert_allclose(parts[2][k], full[2][k], rtol=1e-5, atol=1e-6)


def _packed_batch(seed=6):
  """Rows packing several sequences (segment ids 1, 2, ...; 0 = padding) and the per-token loss-token count of
  each token's sequence, as the batch builder provides it."""
  rng = np.random.default_rng(seed)
  segments = np.zeros((4, 16), int)
  for row, lengths in enumerate([(5, 7, 3), (16,), (2, 9), (6, 4, 4)]):
    segments[row, :sum(lengths)] = np.repeat(np.arange(1, len(lengths) + 1), lengths)
  mask = (segments > 0) & (rng.random(segments.shape) < 0.75)
  count = np.zeros(segments.shape)
  for row in range(4):
    for seg in range(1, segments[row].max() + 1):
      sel = segments[row] == seg
      count[row, sel] = mask[row, sel].sum()
  batch = dict(logp=-rng.uniform(0.1, 3.0, segments.shape), old_logp=-rng.uniform(0.1, 3.0, segments.shape),
               advantages=rng.normal(size=segments.shape), mask=mask.astype(float), seq_token_count=count)
  return segments, {k: jnp.asarray(v, jnp.float32) for k, v in batch.items()}


@pytest.mark.parametrize("name", ["ppo", "rec_oneside_is", "sft"])
def test_seq_mean_token_mean_with_packed_rows(name):
  segments, batch = _packed_batch()
  cfg = LossConfig(aggregation="seq-mean-token-mean")
  num, den, _ = _split_sum(name, cfg, batch, [0, 4], ("seq_token_count",))
  parts = _split_sum(name, cfg, batch, [0, 1, 3, 4], ("seq_token_count",))
  np.testing.assert_allclose(parts[0], num, rtol=1e-5)
  np.testing.assert_allclose(parts[1], den, rtol=1e-6)
  # Reference: every sequence unpacked into its own row, then the mean over sequences of each row's
  # token-mean, taken with the token-mean loss restricted to one row at a time.
  rows = [(row, seg) for row in range(segments.shape[0]) for seg in range(1, segments[row].max() + 1)
          if batch["mask"][row, segments[row] == seg].sum() > 0]
  unpacked = {k: np.zeros((len(rows), segments.shape[1]), np.float32) for k in batch if k != "seq_token_count"}
  for i, (row, seg) in enumerate(rows):
    sel = segments[row] == seg
    for k in unpacked:
      unpacked[k][i, :sel.sum()] = batch[k][row, sel]
  token_mean = jax.jit(functools.partial(losses.get_loss(name), cfg=LossConfig()))
  per_seq = []
  for i in range(len(rows)):
    one_row = unpacked["mask"] * (np.arange(len(rows)) == i)[:, None]
    n, d, _ = token_mean(unpacked["logp"], unpacked["old_logp"], unpacked["advantages"], one_row)
    per_seq.append(float(n / d))
  assert float(den) == pytest.approx(len(per_seq))
  np.testing.assert_allclose(num / den, np.mean(per_seq), rtol=1e-5)


def test_seq_mean_defaults_to_one_sequence_per_row():
  _, batch = _packed_batch()
  cfg = LossConfig(aggregation="seq-mean-token-mean")
  loss = losses.get_loss("rec_oneside_nois")
  # On-policy (ratio 1), so every token is kept and the loss is -A logp.
  num, den, _ = loss(batch["logp"], batch["logp"], batch["advantages"], batch["mask"], cfg=cfg)
  per_row = jnp.sum(-batch["advantages"] * batch["logp"] * batch["mask"], 1) / batch["mask"].sum(1)
  assert float(den) == pytest.approx(4.0)
  np.testing.assert_allclose(num, jnp.sum(per_row), rtol=1e-5)


def test_jit_matches_eager_and_metrics_have_no_gradient():
  batch = _toy_batch(7)
  logp = _token_logp(batch["logits"], batch["tokens"])
  args = (logp, batch["old_logp"], batch["advantages"], batch["mask"])
  loss = losses.get_loss("ppo")
  eager = loss(*args, cfg=CFG)
  jitted = jax.jit(functools.partial(loss, cfg=CFG))(*args)
  np.testing.assert_allclose(jitted[0], eager[0], rtol=1e-6)
  np.testing.assert_allclose(jitted[2]["clip_frac"][0], eager[2]["clip_frac"][0])
  metric_grad = jax.grad(lambda lp: loss(lp, *args[1:], cfg=CFG)[2]["ratio"][0])(logp)
  np.testing.assert_array_equal(metric_grad, 0.0)


def test_registry_and_validation():
  assert set(losses.available_losses()) >= {"ppo", "rec_oneside_nois", "rec_oneside_is", "opd", "sft"}
  with pytest.raises(ValueError, match="unknown loss"):
    losses.get_loss("dpo")
  with pytest.raises(ValueError, match="already registered"):
    losses.register_loss("ppo")(lambda *a, **k: None)
  x = jnp.zeros((1, 2))
  with pytest.raises(ValueError, match="teacher_logp"):
    losses.get_loss("opd")(x, x, x, x + 1, cfg=CFG)
  with pytest.raises(ValueError, match="entropy"):
    losses.get_loss("ppo")(x, x, x, x + 1, cfg=LossConfig(entropy_coef=0.1))
  for bad in (dict(eps_low=1.0), dict(eps_high=-0.1), dict(kl_type="k4"), dict(kl_coef=0.1),
              dict(aggregation="sum"), dict(dual_clip=0.5), dict(entropy_coef=-1.0)):
    with pytest.raises(ValueError):
      LossConfig(**bad)


def test_register_custom_loss():
  @losses.register_loss("test_only_half_sft")
  def half_sft(logp, old_logp, advantages, *, cfg, teacher_logp=None):
    """-logp / 2."""
    del old_logp, advantages, cfg, teacher_logp
    return -0.5 * logp, {}

  x = -jnp.ones((2, 3))
  num, den, metrics = losses.get_loss("test_only_half_sft")(x, x, x, jnp.ones((2, 3)), cfg=CFG)
  assert float(num) == 3.0 and float(den) == 6.0 and "pg_loss" in metrics


def test_rec_oneside_is_value_by_hand():
  """REC-OneSide-IS (Trinity-RFT rec_policy_loss.py, weight importance_sampling): l_t = -A_t rho_t M_t logp_t with
  rho_t = pi_theta / pi_old detached and the one-side mask M (eps_low 0.2, eps_high 0.28), token-mean over the
  loss tokens. Every token's term, worked out by hand:

    tok  A     rho  logp  M                               l = -A rho M logp
    0    +1    1.1  -0.5  kept (A > 0, rho <= 1.28)        0.55
    1    +2    1.5  -0.7  clipped (A > 0, rho > 1.28)      0
    2    -1    0.9  -1.0  kept (A < 0, rho >= 0.8)        -0.9
    3    -0.5  0.5  -0.4  clipped (A < 0, rho < 0.8)       0
    4     0    2.0  -1.2  (A = 0)                          0
    5    +1    0.5  -2.0  kept                             1.0
    6    -1    3.0  -0.1  kept                            -0.3
    7    +5    1.0  -3.0  (not a loss token)               -
  token-mean: (0.55 - 0.9 + 1.0 - 0.3) / 7 = 0.35 / 7 = 0.05. Per row (row 0 = tokens 0-3, row 1 = 4-7),
  seq-mean-token-mean: ((0.55 - 0.9) / 4 + (1.0 - 0.3) / 3) / 2. Gradient wrt logp: -A rho M (Eq. 1).
  """
  a = np.array([[1.0, 2.0, -1.0, -0.5], [0.0, 1.0, -1.0, 5.0]])
  rho = np.array([[1.1, 1.5, 0.9, 0.5], [2.0, 0.5, 3.0, 1.0]])
  logp = np.array([[-0.5, -0.7, -1.0, -0.4], [-1.2, -2.0, -0.1, -3.0]])
  mask = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
  old = logp - np.log(rho)
  args = [jnp.asarray(x, jnp.float32) for x in (logp, old, a, mask)]
  loss = losses.get_loss("rec_oneside_is")
  cfg = LossConfig(eps_low=0.2, eps_high=0.28)
  num, den, metrics = loss(*args, cfg=cfg)
  assert float(den) == 7.0
  np.testing.assert_allclose(float(num) / float(den), 0.05, rtol=1e-5)
  assert float(metrics["clip_frac"][0]) == 2.0  # tokens 1 and 3
  grad = jax.grad(lambda lp: loss(lp, *args[1:], cfg=cfg)[0])(args[0])
  np.testing.assert_allclose(grad, [[-1.1, 0.0, 0.9, 0.0], [0.0, -0.5, 3.0, 0.0]], rtol=1e-5, atol=1e-6)
  num, den, _ = loss(*args, cfg=LossConfig(eps_low=0.2, eps_high=0.28, aggregation="seq-mean-token-mean"))
  np.testing.assert_allclose([float(num), float(den)], [(-0.35 / 4 + 0.7 / 3), 2.0], rtol=1e-5)
