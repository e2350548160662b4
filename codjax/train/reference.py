"""Frozen policies that score the tokens of a train batch: the KL reference policy and the OPD teachers.

A ``FrozenPolicy`` holds a model whose parameters never change and returns, for a [B, T] batch in the train
step's own layout (tokens, positions, segment_ids; packed rows allowed),

  logp_ref[b, t] = log pi_ref(tokens[b, t] | earlier tokens of the same segment)   (0 at a segment's start)

at the rollout temperature, computed by the train step's own code (``codjax.rl.logprobs.shifted_token_logprobs``
with the same vocabulary chunks), jitted with the train step's shardings (parameters by the model's
logical-axis rules, batch rows over (data, fsdp)). Rows are scored in ``num_chunks`` slices (the trainer uses
``train.num_microbatches``), so the forward pass never holds more than a microbatch's activations.

The KL reference (``algorithm.kl_coef`` > 0, ``build_reference``): pi_ref is the model RL starts from -- the
SFT model after a warm start, else ``model.path`` -- or ``algorithm.ref_model_path``. The trainer attaches
``ref_logprobs`` (masked to the loss tokens) to every batch, and the loss's KL term estimates
KL(pi_theta || pi_ref) per token with k1 / k2 / k3 of x = logp_ref - logp_theta (``codjax.rl.losses``; k3 is
verl's ``low_var_kl``). With ``kl_coef`` = 0 nothing is built and nothing is scored.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
from flax import nnx

from codjax.parallel.mesh import batch_shards
from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rl.train_step import batch_shardings, device_batch


class FrozenPolicy:
  """A model with frozen parameters and a jitted, sharded token-logprob scorer (module docstring)."""

  def __init__(self, model: nnx.Module, *, mesh=None, temperature: float = 1.0, vocab_chunks: int = 0,
               copy: bool = False):
    """``copy``: keep a copy of the parameters (needed when ``model`` is the policy being trained, whose
    buffers the train step donates)."""
    if not temperature > 0:
      raise ValueError(f"temperature must be > 0, got {temperature}")
    self.cfg = model.cfg
    self.mesh = mesh
    self.temperature = float(temperature)
    self.vocab_chunks = int(vocab_chunks)
    self._graphdef, state = nnx.split(model)
    if copy:
      state = jax.tree.map(jnp.copy, state)
    self._state_sh = self._batch_sh = None
    if mesh is not None:
      from codjax.models.axes import PARAM_LOGICAL_AXES
      from codjax.parallel.sharding import state_shardings

      self._state_sh = state_shardings(state, mesh, PARAM_LOGICAL_AXES)
      self._batch_sh = batch_shardings({"tokens": None}, mesh)["tokens"]
      state = jax.device_put(state, self._state_sh)
    self.state = state
    self._fns: dict[tuple[int, bool], object] = {}  # (row chunks, scored at loss_index only)

  def _fn(self, num_chunks: int, indexed: bool = False):
    key = (num_chunks, indexed)
    if key not in self._fns:
      fn = functools.partial(_score, self._graphdef, self.temperature, self.vocab_chunks, num_chunks)
      if self.mesh is None:
        self._fns[key] = jax.jit(fn)
      else:
        b = self._batch_sh
        batch_in = (b,) * (4 if indexed else 3)
        self._fns[key] = jax.jit(fn, in_shardings=(self._state_sh,) + batch_in, out_shardings=b)
    return self._fns[key]

  def logprobs(self, batch: dict, num_chunks: int = 1, masked: bool = True) -> jax.Array:
    """[B, T] float32 logprobs of ``batch["tokens"]`` (times ``batch["loss_mask"]`` when ``masked``: 0 off the
    loss tokens). B must be a multiple of ``num_chunks`` (times the data * fsdp shards on a mesh). A masked call
    on a batch with ``loss_index`` scores only those positions (``codjax.rl.batch``): the same values."""
    rows = batch["tokens"].shape[0]
    shards = 1 if self.mesh is None else batch_shards(self.mesh)
    if num_chunks < 1 or rows % (num_chunks * shards):
      raise ValueError(f"{rows} batch rows cannot be split into {num_chunks} chunk(s) x {shards} shard(s)")
    indexed = masked and "loss_index" in batch
    scored = ("tokens", "positions", "segment_ids") + (("loss_index",) if indexed else ())
    fields = scored + (("loss_mask",) if masked else ())
    args = device_batch({k: batch[k] for k in fields}, self.mesh)  # global arrays with several processes
    logp = self._fn(int(num_chunks), indexed)(self.state, *(args[k] for k in scored))
    return logp * args["loss_mask"].astype(logp.dtype) if masked else logp


def _score(graphdef, temperature, vocab_chunks, num_chunks, state, tokens_bt, positions_bt, segment_ids_bt,
           index_bm=None):
  model = nnx.merge(graphdef, state)

  def one(xs):
    tokens, positions, segment_ids, index = xs
    logp, _ = shifted_token_logprobs(model, tokens, positions, segment_ids, temperature=temperature,
                                     num_chunks=vocab_chunks, index_bm=index)
    return logp

  xs = (tokens_bt, positions_bt, segment_ids_bt, index_bm)
  if num_chunks == 1:
    logp = one(xs)
  else:  # row slices one after the other (the train step's microbatches)
    split = lambda x: x.reshape((num_chunks, x.shape[0] // num_chunks) + x.shape[1:])  # noqa: E731
    logp = jax.lax.map(one, jax.tree.map(split, xs)).reshape(tokens_bt.shape)
  return jax.lax.stop_gradient(logp)


def is_hf_dir(path: str) -> bool:
  return os.path.isfile(os.path.join(path, "config.json"))


def build_reference(cfg, policy: nnx.Module, mesh) -> FrozenPolicy | None:
  """The KL reference policy of a training config, or None when ``algorithm.kl_coef`` is 0.

  ``algorithm.ref_model_path`` '' keeps a copy of ``policy`` (the model RL starts from); a path loads that
  HF checkpoint with the policy's dtypes. Its vocabulary must be the policy's (the same token ids)."""
  a = cfg.algorithm
  if not float(a.kl_coef) > 0:
    return None
  kw = dict(mesh=mesh, temperature=float(cfg.rollout.temperature), vocab_chunks=int(cfg.model.vocab_chunks))
  path = str(a.get("ref_model_path", ""))
  if not path:
    return FrozenPolicy(policy, copy=True, **kw)
  if not is_hf_dir(path):
    raise FileNotFoundError(f"algorithm.ref_model_path={path!r} is not an HF checkpoint directory (no config.json)")
  from codjax.models import from_pretrained
  from codjax.train.config import model_compute_overrides

  ref = from_pretrained(path, dtype=cfg.model.dtype, mesh=mesh, **model_compute_overrides(cfg.model))
  if ref.cfg.vocab_size != policy.cfg.vocab_size:
    raise ValueError(f"algorithm.ref_model_path={path!r} has vocabulary size {ref.cfg.vocab_size}, the policy "
                     f"{policy.cfg.vocab_size}: the reference must score the policy's token ids")
  return FrozenPolicy(ref, **kw)
