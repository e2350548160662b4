"""Per-token policy losses with deferred normalization, selected by name from a registry.

Every registered loss has the signature

  loss_fn(logp, old_logp, advantages, mask, *, cfg, ref_logp=None, teacher_logp=None,
          seq_token_count=None, entropy=None) -> (numerator, denominator, metrics)

with [B, T] arrays: ``logp`` the current policy's log-probability of each sampled token (differentiable),
``old_logp`` the rollout policy's, ``advantages`` the per-token advantage A_i, ``mask`` 1 on loss tokens.
The loss value is numerator / denominator; the train step sums both over microbatches and devices and
divides once, so every mean below is exact over the whole batch. ``metrics`` maps names to (num, den)
pairs aggregated the same way, with gradients stopped.

Aggregation (``cfg.aggregation``), with l_t the per-token loss and m_t the mask:
* ``token-mean`` (paper Appendix A, the default): num = sum_t l_t m_t, den = sum_t m_t = N tokens.
* ``seq-mean-token-mean`` (ORBIT's public script XiaofengLin7/ORBIT ``scripts/train_multi_task_multi_episode.sh``,
  verl's ``loss_agg_mode``): every sequence's token-mean counts once. With n_t the
  number of loss tokens of the sequence token t belongs to (``seq_token_count``, from the batch builder, so
  packed rows holding several sequences are exact): num = sum_t l_t m_t / n_t, den = sum_t m_t / n_t = the
  number of sequences. Without ``seq_token_count`` each row is taken to be one sequence.

Per-token losses, with rho = pi_theta / pi_old = exp(logp - old_logp) (log-ratio clipped to
+-``max_log_ratio`` for numerical safety), their gradients given per token as multiples of grad logp, and
the one-side clipping mask of Appendix A

  M = 1(A >= 0, rho <= 1 + eps_high) + 1(A <= 0, rho >= 1 - eps_low)   (at A = 0 the loss is 0 either way):

* ``ppo``: l = -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A) with a differentiable ratio; gradient
  -A rho M grad logp, i.e. Eq. (1). Optional dual clip (verl): for A < 0, l = min(l, -c A).
* ``rec_oneside_is``: l = -A sg(rho) M logp (REC-OneSide with IS weight); gradient Eq. (1) again.
* ``rec_oneside_nois``: l = -A M logp, rho (stopped) only decides M; gradient Eq. (2). With advantages
  already reweighted by adaptive RED-Weight (``advantages.apply_red_weight``) the gradient is Eq. (3).
* ``opd``: on-policy distillation (CoD paper Sec. 3.1 and 3.4; the ``fix_opd_advantage`` form of
  agentscope-ai/Trinity-RFT ``trinity/algorithm/policy_loss_fn/rec_policy_loss.py``): per-token
  advantage A = teacher_logp - sg(logp), l = -A logp, no clipping; ``advantages`` is not used. Its gradient
  (logp - teacher_logp) grad logp is the on-policy reverse-KL gradient grad KL(pi_theta || pi_teacher).
* ``sft``: l = -logp (cross-entropy on the masked tokens); ``advantages`` is not used.

Optional terms, off by default: ``kl_coef * kl_t`` against ``ref_logp`` (the trainer passes a frozen reference
policy's, ``codjax.train.reference``; a caller that gives none gets the rollout policy's ``old_logp``), with
x = ref - logp, k1 = -x, k2 = x^2 / 2, k3 = exp(x) - x - 1 (Schulman's estimators; k3 is verl's low_var_kl);
and ``-entropy_coef * entropy_t`` (an entropy bonus on the per-token entropy the caller computes).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Protocol

import jax
import jax.numpy as jnp

KL_TYPES = (None, "k1", "k2", "k3")
AGGREGATIONS = ("token-mean", "seq-mean-token-mean")

Metrics = dict[str, tuple[jax.Array, jax.Array]]


@dataclasses.dataclass(frozen=True)
class LossConfig:
  """Static loss hyperparameters (hashable, so it can be a static argument of a jitted step)."""

  eps_low: float = 0.2
  eps_high: float = 0.2
  dual_clip: float | None = None  # ppo only: cap the loss of A < 0 tokens at -dual_clip * A (verl uses 3).
  max_log_ratio: float = 20.0
  kl_type: str | None = None
  kl_coef: float = 0.0
  entropy_coef: float = 0.0
  aggregation: str = "token-mean"

  def __post_init__(self):
    if not 0.0 <= self.eps_low < 1.0:
      raise ValueError(f"eps_low must be in [0, 1), got {self.eps_low}")
    if self.eps_high < 0.0:
      raise ValueError(f"eps_high must be >= 0, got {self.eps_high}")
    if self.dual_clip is not None and self.dual_clip <= 1.0:
      raise ValueError(f"dual_clip must be > 1 or None, got {self.dual_clip}")
    if self.max_log_ratio <= 0.0:
      raise ValueError(f"max_log_ratio must be > 0, got {self.max_log_ratio}")
    if self.kl_type not in KL_TYPES:
      raise ValueError(f"kl_type must be one of {KL_TYPES}, got {self.kl_type!r}")
    if self.kl_coef < 0.0 or self.entropy_coef < 0.0:
      raise ValueError("kl_coef and entropy_coef must be >= 0")
    if self.kl_coef > 0.0 and self.kl_type is None:
      raise ValueError("kl_coef > 0 needs a kl_type (k1, k2 or k3)")
    if self.aggregation not in AGGREGATIONS:
      raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")


class LossFn(Protocol):

  def __call__(self, logp: jax.Array, old_logp: jax.Array, advantages: jax.Array, mask: jax.Array, *,
               cfg: LossConfig, ref_logp: jax.Array | None = None, teacher_logp: jax.Array | None = None,
               seq_token_count: jax.Array | None = None,
               entropy: jax.Array | None = None) -> tuple[jax.Array, jax.Array, Metrics]:
    ...


# A per-token term: (logp, old_logp, advantages, cfg, teacher_logp) -> (loss_t, {metric name: value_t}).
TokenTerm = Callable[..., tuple[jax.Array, dict[str, jax.Array]]]

_LOSSES: dict[str, LossFn] = {}


def kl_estimate(logp: jax.Array, ref_logp: jax.Array, kl_type: str) -> jax.Array:
  """Per-token k1 / k2 / k3 estimate of KL(pi_theta || pi_ref) from samples of pi_theta."""
  x = ref_logp - logp
  if kl_type == "k1":
    return -x
  if kl_type == "k2":
    return 0.5 * x**2
  if kl_type == "k3":
    return jnp.expm1(x) - x
  raise ValueError(f"unknown kl_type {kl_type!r}")


def aggregation_weights(mask: jax.Array, aggregation: str,
                        seq_token_count: jax.Array | None = None) -> jax.Array:
  """Per-token weights w_t such that the aggregated loss is sum(l w) / sum(w)."""
  if aggregation == "token-mean":
    return mask
  if aggregation == "seq-mean-token-mean":
    if seq_token_count is None:
      seq_token_count = jnp.sum(mask, axis=-1, keepdims=True)
    return mask / jnp.maximum(seq_token_count.astype(mask.dtype), 1.0)
  raise ValueError(f"unknown aggregation {aggregation!r}")


def _log_ratio(logp: jax.Array, old_logp: jax.Array, cfg: LossConfig) -> jax.Array:
  return jnp.clip(logp - old_logp, -cfg.max_log_ratio, cfg.max_log_ratio)


def _one_side_mask(advantages: jax.Array, ratio: jax.Array, cfg: LossConfig) -> jax.Array:
  return ((advantages >= 0) & (ratio <= 1.0 + cfg.eps_high)) | ((advantages <= 0) & (ratio >= 1.0 - cfg.eps_low))


def _with_common_terms(term: TokenTerm) -> LossFn:
  """Wraps a per-token term with the optional KL / entropy terms and the (num, den) aggregation."""

  def loss_fn(logp, old_logp, advantages, mask, *, cfg, ref_logp=None, teacher_logp=None,
              seq_token_count=None, entropy=None):
    dtype = jnp.result_type(logp.dtype, jnp.float32)
    logp = logp.astype(dtype)
    old_logp = old_logp.astype(dtype)
    advantages = advantages.astype(dtype)
    mask = mask.astype(dtype)
    weights = aggregation_weights(mask, cfg.aggregation, seq_token_count)
    den = jnp.sum(weights)

    def agg(values):
      return jnp.sum(values * weights)

    policy_t, token_metrics = term(logp, old_logp, advantages, cfg=cfg, teacher_logp=teacher_logp)
    total_t = policy_t
    metrics: Metrics = {"pg_loss": (agg(policy_t), den)}
    if cfg.kl_type is not None:
      kl_t = kl_estimate(logp, old_logp if ref_logp is None else ref_logp.astype(dtype), cfg.kl_type)
      total_t = total_t + cfg.kl_coef * kl_t
      metrics["kl"] = (agg(kl_t), den)
    if cfg.entropy_coef > 0.0 and entropy is None:
      raise ValueError("entropy_coef > 0 needs the per-token entropy")
    if entropy is not None:
      entropy = entropy.astype(dtype)
      if cfg.entropy_coef > 0.0:
        total_t = total_t - cfg.entropy_coef * entropy
      metrics["entropy"] = (agg(entropy), den)
    log_ratio = _log_ratio(logp, old_logp, cfg)
    token_metrics = {"ratio": jnp.exp(log_ratio), "approx_kl": jnp.expm1(log_ratio) - log_ratio,
                     **token_metrics}
    metrics.update({name: (agg(value.astype(dtype)), den) for name, value in token_metrics.items()})
    metrics = jax.tree.map(jax.lax.stop_gradient, metrics)
    return agg(total_t), den, metrics

  loss_fn.__doc__ = term.__doc__
  return loss_fn


def register_loss(name: str) -> Callable[[TokenTerm], LossFn]:
  """Registers a per-token term under ``name``; the decorated name becomes the full (num, den) loss."""

  def decorator(term: TokenTerm) -> LossFn:
    if name in _LOSSES:
      raise ValueError(f"loss {name!r} is already registered")
    loss_fn = _with_common_terms(term)
    loss_fn.__name__ = loss_fn.__qualname__ = name
    _LOSSES[name] = loss_fn
    return loss_fn

  return decorator


def get_loss(name: str) -> LossFn:
  """The registered loss ``name``."""
  if name not in _LOSSES:
    raise ValueError(f"unknown loss {name!r}; registered: {sorted(_LOSSES)}")
  return _LOSSES[name]


def available_losses() -> tuple[str, ...]:
  return tuple(sorted(_LOSSES))


@register_loss("ppo")
def ppo(logp, old_logp, advantages, *, cfg, teacher_logp=None):
  """PPO/GRPO clip, l = -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A); gradient Eq. (1)."""
  del teacher_logp
  ratio = jnp.exp(_log_ratio(logp, old_logp, cfg))
  unclipped = -advantages * ratio
  clipped = -advantages * jnp.clip(ratio, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
  loss = jnp.maximum(unclipped, clipped)
  clip_frac = clipped > unclipped
  if cfg.dual_clip is not None:
    cap = -cfg.dual_clip * advantages
    dual = (advantages < 0) & (loss > cap)
    loss = jnp.where(dual, cap, loss)
    clip_frac = clip_frac | dual
  return loss, {"clip_frac": clip_frac, "advantage": advantages}


def _rec_oneside(logp, old_logp, advantages, cfg, importance_weight: bool):
  ratio = jax.lax.stop_gradient(jnp.exp(_log_ratio(logp, old_logp, cfg)))
  kept = _one_side_mask(advantages, ratio, cfg)
  weight = advantages * ratio if importance_weight else advantages
  loss = -jnp.where(kept, weight * logp, 0.0)
  return loss, {"clip_frac": ~kept, "advantage": advantages}


@register_loss("rec_oneside_nois")
def rec_oneside_nois(logp, old_logp, advantages, *, cfg, teacher_logp=None):
  """REC-OneSide-NoIS, l = -A M logp with a stopped ratio in M; gradient Eq. (2) (Eq. (3) with RED)."""
  del teacher_logp
  return _rec_oneside(logp, old_logp, advantages, cfg, importance_weight=False)


@register_loss("rec_oneside_is")
def rec_oneside_is(logp, old_logp, advantages, *, cfg, teacher_logp=None):
  """REC-OneSide-IS, l = -A sg(rho) M logp; gradient Eq. (1)."""
  del teacher_logp
  return _rec_oneside(logp, old_logp, advantages, cfg, importance_weight=True)


@register_loss("opd")
def opd(logp, old_logp, advantages, *, cfg, teacher_logp=None):
  """On-policy distillation, l = -(teacher_logp - sg(logp)) logp; gradient = reverse-KL policy gradient."""
  del old_logp, advantages, cfg
  if teacher_logp is None:
    raise ValueError("the opd loss needs teacher_logp")
  adv = teacher_logp.astype(logp.dtype) - jax.lax.stop_gradient(logp)
  return -adv * logp, {"advantage": adv, "clip_frac": jnp.zeros_like(logp)}


@register_loss("sft")
def sft(logp, old_logp, advantages, *, cfg, teacher_logp=None):
  """Supervised fine-tuning, l = -logp on the loss tokens."""
  del old_logp, advantages, cfg, teacher_logp
  return -logp, {}
