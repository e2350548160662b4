"""The jitted, sharded RL/SFT train step.

Given the train state (model params, optax state, step) and a batch of [B, T] arrays

  tokens, positions, segment_ids, loss_mask, advantages, old_logprobs
  (+ optional teacher_logprobs, ref_logprobs, seq_token_count, and loss_index [B, M]: the vocabulary products
  only at the loss tokens, ``codjax.rl.batch``)

the step computes token logprobs (vocab-chunked, ``codjax.rl.logprobs``), the registered loss as
(numerator, denominator), grads, global-norm clipping and the AdamW update. With k microbatches the batch
is split along B and scanned; numerators and their grads are summed and divided once by the summed
denominator, so the result equals the one-big-batch step exactly (token-mean over the whole batch).
A non-finite loss or gradient skips the update (params and optimizer state unchanged) and is reported.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rl.losses import LossConfig, get_loss

REQUIRED_FIELDS = ("tokens", "positions", "segment_ids", "loss_mask", "advantages", "old_logprobs")
OPTIONAL_FIELDS = ("teacher_logprobs", "ref_logprobs", "seq_token_count", "loss_index")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """AdamW with linear warmup then a constant learning rate (CoD paper Table 1; Trinity-RFT's optimizer defaults)."""

  learning_rate: float = 1e-6
  warmup_steps: int = 0
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8
  weight_decay: float = 0.01
  max_grad_norm: float = 1.0
  schedule: str = "constant"  # "constant" | "cosine" (cosine decays to decay_to * lr over total_steps)
  total_steps: int = 0
  decay_to: float = 0.1

  def __post_init__(self):
    if not self.learning_rate > 0:
      raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
    if self.warmup_steps < 0:
      raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
    if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1):
      raise ValueError("b1 and b2 must be in [0, 1)")
    if not self.eps > 0:
      raise ValueError(f"eps must be > 0, got {self.eps}")
    if self.weight_decay < 0 or self.max_grad_norm <= 0:
      raise ValueError("weight_decay must be >= 0 and max_grad_norm > 0")
    if self.schedule not in ("constant", "cosine"):
      raise ValueError(f"schedule must be 'constant' or 'cosine', got {self.schedule!r}")
    if self.schedule == "cosine" and self.total_steps <= self.warmup_steps:
      raise ValueError("a cosine schedule needs total_steps > warmup_steps")


def make_schedule(cfg: OptimizerConfig) -> optax.Schedule:
  warm = optax.linear_schedule(0.0, cfg.learning_rate, max(1, cfg.warmup_steps))
  if cfg.schedule == "constant":
    after = optax.constant_schedule(cfg.learning_rate)
  else:
    after = optax.cosine_decay_schedule(cfg.learning_rate, cfg.total_steps - cfg.warmup_steps, cfg.decay_to)
  if cfg.warmup_steps == 0:
    return after
  return optax.join_schedules([warm, after], [cfg.warmup_steps])


def make_optimizer(cfg: OptimizerConfig) -> optax.GradientTransformation:
  return optax.chain(
      optax.clip_by_global_norm(cfg.max_grad_norm),
      optax.adamw(make_schedule(cfg), b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay))


@dataclasses.dataclass(frozen=True)
class StepConfig:
  """Static settings of the train step."""

  loss: str = "rec_oneside_nois"
  loss_cfg: LossConfig = LossConfig()
  num_microbatches: int = 1
  vocab_chunks: int = 0  # 0: chunks of ~16k vocabulary entries (codjax.rl.logprobs.vocab_chunks)
  temperature: float = 1.0  # the rollout temperature: logprobs are of softmax(logits / temperature)
  # MoE models: weight of the load-balancing loss (Switch Transformer eq. 4-6, ``codjax.models.moe``) added to
  # the policy loss; 0 = off (dense models have none)
  router_aux_coef: float = 0.0

  def __post_init__(self):
    if not self.router_aux_coef >= 0:
      raise ValueError(f"router_aux_coef must be >= 0, got {self.router_aux_coef}")
    get_loss(self.loss)  # raises for unknown names
    if self.num_microbatches < 1:
      raise ValueError(f"num_microbatches must be >= 1, got {self.num_microbatches}")
    if self.vocab_chunks < 0:
      raise ValueError(f"vocab_chunks must be >= 0 (0 = auto), got {self.vocab_chunks}")
    if not self.temperature > 0:
      raise ValueError(f"temperature must be > 0, got {self.temperature}")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class TrainState:
  params: Any  # nnx.State of the model's Params
  opt_state: Any
  step: jax.Array


def init_train_state(model: nnx.Module, optimizer: optax.GradientTransformation) -> tuple[Any, TrainState]:
  """Splits the model into (graphdef, TrainState)."""
  graphdef, params = nnx.split(model, nnx.Param)
  return graphdef, TrainState(params=params, opt_state=optimizer.init(params), step=jnp.zeros((), jnp.int32))


def _loss_terms(graphdef, params, mb: dict[str, jax.Array], cfg: StepConfig):
  model = nnx.merge(graphdef, params)
  with_aux = cfg.router_aux_coef > 0 and getattr(model.cfg, "is_moe", False)
  out = shifted_token_logprobs(model, mb["tokens"], mb["positions"], mb["segment_ids"],
                               temperature=cfg.temperature, num_chunks=cfg.vocab_chunks, with_aux=with_aux,
                               index_bm=mb.get("loss_index"))
  logp, entropy = out[:2]
  mask = mb["loss_mask"].astype(jnp.float32)
  num, den, metrics = get_loss(cfg.loss)(
      logp, mb["old_logprobs"], mb["advantages"], mask, cfg=cfg.loss_cfg,
      ref_logp=mb.get("ref_logprobs"), teacher_logp=mb.get("teacher_logprobs"),
      seq_token_count=mb.get("seq_token_count"), entropy=jax.lax.stop_gradient(entropy)
      if cfg.loss_cfg.entropy_coef == 0 else entropy)
  if with_aux:  # weighted like the policy loss over microbatches: the step's loss is num / den
    aux = out[2]
    num = num + cfg.router_aux_coef * aux * den
    metrics = {**metrics, "router_aux_loss": (aux * den, den)}
  return num, (den, metrics)


def _split_microbatches(batch: dict[str, jax.Array], k: int) -> dict[str, jax.Array]:
  def split(x):
    if x.shape[0] % k:
      raise ValueError(f"batch size {x.shape[0]} is not divisible by num_microbatches={k}")
    return x.reshape((k, x.shape[0] // k) + x.shape[1:])

  return {name: split(x) for name, x in batch.items()}


def train_step(graphdef, optimizer: optax.GradientTransformation, cfg: StepConfig, state: TrainState,
               batch: dict[str, jax.Array]) -> tuple[TrainState, dict[str, jax.Array]]:
  """One optimizer step (pure; jit it with ``make_train_step``)."""
  value_and_grad = jax.value_and_grad(_loss_terms, argnums=1, has_aux=True)

  if cfg.num_microbatches == 1:
    (num, (den, metrics)), grads = value_and_grad(graphdef, state.params, batch, cfg)
  else:
    mbs = _split_microbatches(batch, cfg.num_microbatches)

    def body(acc, mb):
      (n, (d, m)), g = value_and_grad(graphdef, state.params, mb, cfg)
      acc_n, acc_d, acc_m, acc_g = acc
      return (acc_n + n, acc_d + d, jax.tree.map(jnp.add, acc_m, m), jax.tree.map(jnp.add, acc_g, g)), None

    first = jax.tree.map(lambda x: x[0], mbs)
    shapes = jax.eval_shape(lambda: value_and_grad(graphdef, state.params, first, cfg))
    (_, (_, m_shape)), g_shape = shapes
    zeros = lambda t: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), t)  # noqa: E731
    init = (jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32), zeros(m_shape), zeros(g_shape))
    (num, den, metrics, grads), _ = jax.lax.scan(body, init, mbs)

  safe_den = jnp.maximum(den, 1e-8)
  loss = num / safe_den
  grads = jax.tree.map(lambda g: g / safe_den, grads)
  grad_norm = optax.global_norm(grads)
  finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
  updates, new_opt = optimizer.update(grads, state.opt_state, state.params)
  new_params = optax.apply_updates(state.params, updates)
  keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)  # noqa: E731
  new_state = TrainState(params=keep(new_params, state.params), opt_state=keep(new_opt, state.opt_state),
                         step=state.step + finite.astype(jnp.int32))
  out = {name: n / jnp.maximum(d, 1e-8) for name, (n, d) in metrics.items()}
  out.update(loss=loss, grad_norm=grad_norm, skipped=1 - finite.astype(jnp.int32),
             loss_tokens=jnp.sum(batch["loss_mask"]).astype(jnp.float32))
  return new_state, out


def batch_shardings(batch_spec: dict[str, Any], mesh: Mesh) -> dict[str, NamedSharding]:
  """Batch arrays are sharded over the batch axes (data, fsdp, expert) on B and replicated over tensor."""
  axes = tuple(a for a in ("data", "fsdp", "expert") if a in mesh.shape)
  return {k: NamedSharding(mesh, P(axes)) for k in batch_spec}


def device_batch(batch: dict[str, Any], mesh: Mesh | None) -> dict[str, jax.Array]:
  """A host batch (numpy, the same on every process) as the step's inputs: device arrays with one process;
  with several (``jax.distributed``), global arrays over ``batch_shardings`` of which each process
  supplies its own devices' rows (``codjax.parallel.multihost.global_batch``)."""
  if mesh is None or jax.process_count() == 1:
    return {k: jnp.asarray(v) for k, v in batch.items()}
  from codjax.parallel.multihost import global_batch

  return global_batch(batch, batch_shardings(batch, mesh))


def make_train_step(graphdef, optimizer: optax.GradientTransformation, cfg: StepConfig, state: TrainState,
                    mesh: Mesh | None = None, batch_fields: tuple[str, ...] = REQUIRED_FIELDS):
  """Returns ``step(state, batch) -> (state, metrics)`` jitted with donated state (and explicit shardings on
  a mesh: params/optimizer by the logical-axis rules, batch over (data, fsdp))."""

  def fn(state, batch):
    return train_step(graphdef, optimizer, cfg, state, batch)

  if mesh is None:
    return jax.jit(fn, donate_argnums=(0,))
  from codjax.models.axes import PARAM_LOGICAL_AXES
  from codjax.parallel.sharding import state_shardings

  st_sh = state_shardings(state, mesh, PARAM_LOGICAL_AXES)
  b_sh = batch_shardings({k: None for k in batch_fields}, mesh)
  return jax.jit(fn, in_shardings=(st_sh, b_sh), out_shardings=(st_sh, None), donate_argnums=(0,))
