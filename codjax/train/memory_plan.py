"""Per-device memory plan of a training config, from shapes and shardings only (``launch/plan_memory.py``).

Nothing is allocated. The model (dense Qwen3, or the Qwen3.5/3.6 hybrid of Gated DeltaNet and gated attention,
dense or mixture of experts) is built with ``nnx.eval_shape`` and the optimizer state with
``jax.eval_shape(optimizer.init)``; every leaf's per-device shard comes from the trainer's own logical-axis
rules (``codjax.parallel.state_shardings`` with the architecture's ``PARAM_LOGICAL_AXES``: expert weights split
over the ``expert`` axis) on a ``jax.sharding.AbstractMesh`` of the config's ``MESH_AXES`` sizes (data, fsdp,
tensor, expert; an axis the config block lacks is 1), so any device count can be planned on any machine.

Rows of the plan (bytes per device):

* parameters: sum over parameters of prod(shard shape) * itemsize (parameter dtype = ``model.param_dtype``,
  '' = ``model.dtype``).
* KL reference policy (training configs with ``algorithm.kl_coef`` > 0): the frozen reference's parameters,
  sharded like the policy's (a copy of the starting model, or ``algorithm.ref_model_path``'s architecture).
* gradients: the same tree again (``jax.value_and_grad`` returns gradients in the parameter dtype); twice
  with ``train.num_microbatches`` > 1 (the scan's accumulator plus the current microbatch's gradients).
* optimizer state: the optax state of ``make_optimizer`` (AdamW keeps mu and nu in the parameter dtype).
* activations of the train step for one microbatch (formula below).
* rollout engine: ``jax``: the KV cache (k^T [L, slots, K, H, S] and v [L, slots, K, S, H], sharded as
  ``cache_k_lbkhs`` / ``cache_v_lbksh``, slots rounded up to a multiple of data * fsdp * expert, S = max
  prompt + max response + 1) plus the engine's copy of the parameters. The hybrid's cache
  (``Qwen35.init_cache``, sharded by ``CACHE_LOGICAL_AXES``): the KV cache of its A full layers only, and per
  slot and linear layer the float32 recurrent state [Hv, dk, dv] (Hv dk dv 4 bytes, heads over ``tensor``) and
  the last W-1 convolution inputs of the q | k | v channels ((2 Hk dk + Hv dv)(W-1) a bytes), independent of
  S. ``vllm``: ``gpu_memory_utilization`` x device memory on the device(s) vLLM runs on (its weights and KV
  cache live inside that reservation); any other engine name is an error.

Evaluation configs (``total_steps`` 0) have no gradient or activation rows; their optimizer state is still
counted because the Trainer allocates it when it starts.

Activations. With R the batch's row count, k microbatches, P = data * fsdp * expert batch shards,
b = R / (k P) rows per device per microbatch, T = ``train.seq_len``, n = b T tokens, a = bytes of
``model.dtype``, and the architecture's D, F, N (query heads), K (kv heads), H (head dim), L, V, where N, K,
F and V are divided by the tensor size when it divides them:

  e   = a (4D + 3NH + 3KH + 3F) + s      bytes one layer keeps per token for its backward pass: the layer
        input, two RMSNorm outputs, the post-attention residual, raw and normed/rotated q and k, v, the
        attention output, gate, up and silu(gate) * up; s = N T (a + 4) for ``attention_impl="xla"`` (the
        [N, T, T] probabilities in the compute dtype plus softmax's float32 output), s = N (T + B) / 2 (a + 4)
        for ``blockwise`` (query blocks of B = 128 keep only their key prefix), s = 4N for ``cudnn`` (flash
        attention keeps a float32 logsumexp per head)
  saved layers   remat none: L n e;  dots: L n a (3D + NH + 2KH + 2F) (the layer input and the outputs of
                 the weight matmuls);  full: L n a D (the layer inputs the scan keeps)
  working layer  n e (cotangents of one layer) for remat none; 2 n e (one layer recomputed plus its
                 cotangents) otherwise
  attention mask b T^2 bytes (the boolean [b, 1, T, T] built from segment ids) + T^2 (the causal pattern)
  hidden/rope    2 n D a (embedding output, final normed hidden) + 2 n (H/2) 4 (float32 sin and cos)
  logprobs       4 n (V/C) 4 + 4 C n 4: ``codjax.rl.logprobs`` recomputes one [b, T, V/C] float32 vocabulary
                 chunk in the backward pass (logits, exp, exp * logits and their cotangent) and the scan
                 keeps its four [b, T] float32 carries per chunk; C = the chunk count actually used (with
                 ``train.logits="loss_tokens"`` these run on [b, M] rows, M <= T: the plan is an upper bound)
  batch          f R/P T 4 (the step's int32/float32 [R, T] inputs, sharded over P): f = 7, + 1 teacher
                 logprobs (opd), + 1 reference logprobs (KL)

Hybrid layers (``Qwen35Config``). Per token and layer, with Hk, Hv linear key / value heads of dims dk, dv
(divided by the tensor size like N, K), X = 2 Hk dk + Hv dv the q | k | v channels, W the convolution width,
C = min(delta_chunk_size, T) and M the MLP term (the residuals of the jaxpr, counted once per buffer):

  M        dense: a 6F (gate, up, silu's internals, the product).  MoE (top-k of E experts of width Fe, shared
           expert Fs; Fe, Fs over tensor): a (2kD + 6k Fe + 6Fs + D) + 8E (k routed copies of the input and of
           the expert outputs, expert and shared MLPs, the combined output; float32 router logits and
           probabilities). On CPU XLA lowers ragged_dot densely and keeps more than this
  full     a (4D + 7NH + 4KH) + s + M: Qwen3's terms plus the output gate, its sigmoid and the gated output
  linear   a (4D + 2 Hv dv) + 4 (2W + 3) X + 20 Hv dv + 4 Hv (9C + 6dk + 5dv + dk dv / C) + 8 Hk dk + 3 Hv C + M:
           layer input, norms and residual, z and the output projection's input; the causal convolution's
           float32 shifted inputs, their segment-masked copies, sum and silu; the gated norm (float32); the
           chunked delta rule: nine [B, Hv, T/C, C, C] float32 matrices (decays and their masks, A, (I + A)^-1,
           q k^T and the scan's copy), the [.., C, dk | dv] float32 chunks (q, k, k beta, W, decayed q and k,
           v, U, outputs, the WY right-hand side), the state carried across chunks, the l2-normed q, k and
           three boolean [C, C] masks
  dots     only the weight matmuls are saved (``dots_with_no_batch_dims_saveable``): full a (3D + 2NH + 2KH)
           + M', linear a (3D + X + Hv dv + 2Hv) + M'; M' = a 2F dense, a (E + 2Fs + 1) MoE

The layers run as L / p blocks of p layers (p = ``layer_period``: 3 linear + 1 full), and remat wraps each
layer: saved = n (A full + R linear) for none, n (A full' + R linear') for dots, L n a D for full (every
layer's input); working = n max(layer) (a layer's cotangents, or the one layer being recomputed). MoE models add the [L, n, E] float32 router logits of the load-balancing loss; rope
uses the rotary dimension.

R defaults to the worst case: every episode in its own row. A CoD step has packs_per_step x G trajectories
of S solve episodes plus S - 1 update episodes (with hints); rows are padded to the trainer's bucket of a
multiple of k P (``codjax.rl.batch``). ``rows`` overrides the unpadded row count (for example the packed row
count of a measured step).

Accuracy: against XLA's buffer assignment of the real train step on CPU (tests/launch/test_plan_memory.py),
activations + gradients come out at 1.17-1.23x XLA's temporary bytes for remat full, 0.86-0.99x for dots and
0.82-0.87x for none; for the hybrid (8-12 layers, so the block scan iterates) at 0.80-0.91x for none (the
remat full / dots ratios, 1.06-1.08x and 1.20-1.22x, were measured when remat wrapped a whole block of p
layers, before it moved to single layers, and are not re-measured). The hybrid's terms are calibrated on CPU XLA, which fuses less
than a GPU compile: read them as an upper estimate there. Not modeled: allocator fragmentation, the optimizer
update's transient copies (they live after the activations are freed), vLLM's and CUDA's own overheads
outside the reservation, and JAX's default preallocation (set ``XLA_PYTHON_CLIENT_MEM_FRACTION`` below 1 -
gpu_memory_utilization when vLLM shares the GPU).
"""

from __future__ import annotations

import dataclasses
import math
import os

import jax
import numpy as np
from flax import nnx
from jax.sharding import AbstractMesh, AxisType, NamedSharding

from codjax.models import abstract_model, preset
from codjax.models import qwen3 as qwen3_lib
from codjax.models import qwen3_5 as qwen3_5_lib
from codjax.models.config import (ALL_PRESETS, DTYPES, ModelConfig, Qwen3Config, Qwen35Config,
                                  config_from_pretrained_dir)
from codjax.models.qwen3 import BLOCK_Q
from codjax.parallel.mesh import MESH_AXES, batch_shards
from codjax.parallel.sharding import ACTIVATION_AXES, logical_to_spec, state_shardings
from codjax.rl.batch import row_bucket
from codjax.rl.logprobs import vocab_chunks as used_vocab_chunks
from codjax.rl.train_step import make_optimizer
from codjax.train.config import optimizer_config

GIB = 1024**3


def compute_settings(cfg) -> dict:
  """The compute fields of ``cfg.model`` shared by both architecture configs (dtypes, remat, attention, layer
  loop)."""
  m = cfg.model
  return dict(param_dtype=str(m.param_dtype or m.dtype), dtype=str(m.dtype), remat=str(m.remat),
              attention_impl=str(m.attention_impl), scan_layers=bool(m.scan_layers))


def param_logical_axes(arch: ModelConfig) -> dict:
  """The logical-axis table of the architecture's parameters (Qwen3 or the Qwen3.5/3.6 hybrid)."""
  return (qwen3_5_lib if isinstance(arch, Qwen35Config) else qwen3_lib).PARAM_LOGICAL_AXES


def _tiny_architecture(m, compute: dict) -> ModelConfig:
  """``make_tiny_checkpoint``'s architecture for ``model.tiny``: its preset with the tiny fields that are
  architecture fields (the rest are tokenizer options), the vocabulary at its upper bound."""
  name = str(m.tiny.get("preset", "tiny"))
  cls = Qwen35Config if isinstance(preset(name), Qwen35Config) else Qwen3Config
  fields = {f.name for f in dataclasses.fields(cls)}
  tiny = {k: v for k, v in m.tiny.items() if k in fields}
  if m.tiny.get("tokenizer", "bpe") == "qwen3.5":
    from codjax.models.qwen_tokenizer import VOCAB_ROWS

    tiny["vocab_size"] = VOCAB_ROWS
  else:
    tiny["vocab_size"] = -(-int(tiny["vocab_size"]) // 64) * 64  # make_tiny_checkpoint's upper bound
  return preset(name, **tiny, **compute)


def resolve_architecture(cfg, model_preset: str | None = None) -> tuple[ModelConfig, str]:
  """The architecture to plan for (a ``Qwen3Config`` or a ``Qwen35Config``), and where it came from.

  Order: ``model_preset``; the config.json at ``model.path`` when it exists (either family, by its
  model_type); ``model.preset``; the ``model.tiny`` architecture when ``model.make_tiny``; ``model.arch`` (the
  preset name an experiment gives for a checkpoint it does not ship). Compute settings (dtype, remat,
  attention) come from the config."""
  m = cfg.model
  compute = compute_settings(cfg)
  if model_preset:
    return preset(model_preset, **compute), f"--model_preset={model_preset}"
  if m.path and os.path.isfile(os.path.join(m.path, "config.json")):
    return config_from_pretrained_dir(m.path, **compute), os.path.join(m.path, "config.json")
  if m.preset:
    return preset(str(m.preset), **compute), f"model.preset={m.preset}"
  if m.make_tiny:
    return _tiny_architecture(m, compute), "model.tiny (make_tiny)"
  arch = m.get("arch", "")
  if arch:
    return preset(str(arch), **compute), f"model.arch={arch} ({m.path!r} not found)"
  raise ValueError(f"cannot tell the model architecture: {m.path!r} has no config.json and the config names no "
                   "preset (model.preset / model.arch); pass --model_preset=<name>, one of "
                   f"{sorted(ALL_PRESETS)}")


def mesh_sizes(mesh_cfg, devices: int | None = None) -> dict[str, int]:
  """Sizes of every axis of ``MESH_AXES`` (data, fsdp, tensor required; another axis, such as expert, is 1 when
  the block lacks it); one -1 axis takes the remaining ``devices`` (default: jax.device_count())."""
  sizes = [int(mesh_cfg[ax] if ax in ("data", "fsdp", "tensor") else mesh_cfg.get(ax, 1)) for ax in MESH_AXES]
  if sum(s == -1 for s in sizes) > 1 or any(s == 0 or s < -1 for s in sizes):
    raise ValueError(f"mesh sizes must be positive with at most one -1, got {dict(zip(MESH_AXES, sizes))}")
  known = math.prod(s for s in sizes if s != -1)
  if -1 in sizes:
    n = jax.device_count() if devices is None else devices
    if n % known:
      raise ValueError(f"{n} devices cannot be split into {dict(zip(MESH_AXES, sizes))}")
    sizes[sizes.index(-1)] = n // known
  elif devices is not None and devices != known:
    raise ValueError(f"mesh {dict(zip(MESH_AXES, sizes))} needs {known} devices, --devices={devices}")
  return dict(zip(MESH_AXES, sizes))


def abstract_mesh(sizes: dict[str, int]) -> AbstractMesh:
  return AbstractMesh(tuple(sizes[a] for a in MESH_AXES), MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def device_bytes(tree, shardings) -> int:
  """Bytes one device holds of ``tree`` (ShapeDtypeStructs) laid out by ``shardings`` (the largest shard)."""
  leaves = jax.tree.leaves(tree)
  shards = jax.tree.leaves(shardings, is_leaf=lambda x: isinstance(x, NamedSharding))
  if len(leaves) != len(shards):
    raise ValueError("tree and shardings do not match")
  return int(sum(math.prod(s.shard_shape(x.shape)) * np.dtype(x.dtype).itemsize for x, s in zip(leaves, shards)))


def _div(dim: int, tp: int) -> int:
  return dim // tp if dim % tp == 0 else dim


def episodes_per_step(cfg) -> int:
  """Training sequences of one step: packs x G trajectories x (S solves + S - 1 hint updates)."""
  d = cfg.data
  s = int(d.pack_size)
  per_traj = s + (s - 1 if cfg.cod.use_hints else 0)
  return int(d.packs_per_step) * int(d.repeats) * per_traj


def reference_on(cfg) -> bool:
  """Whether the trainer holds a frozen KL reference policy (``algorithm.kl_coef`` > 0 in a training config)."""
  return int(cfg.total_steps) > 0 and float(cfg.algorithm.kl_coef) > 0


def batch_fields(cfg) -> int:
  """[R, T] arrays of one train-step batch: tokens, positions, segment ids, loss mask, advantages, rollout
  logprobs, sequence token counts (+ teacher logprobs for opd, + reference logprobs with a KL term)."""
  return 7 + int(cfg.algorithm.loss == "opd") + int(reference_on(cfg))


def _attention_scores(arch: ModelConfig, n_h: int, t: int, a: int) -> int:
  """Per-token bytes of the attention probabilities a layer keeps (the ``s`` term of the module docstring)."""
  if arch.attention_impl == "xla":
    return n_h * t * (a + 4)
  if arch.attention_impl == "blockwise":  # a query attends (T + block) / 2 keys on average
    return int(n_h * (t + min(t, BLOCK_Q)) / 2 * (a + 4))
  return 4 * n_h


def _tail_rows(arch: ModelConfig, rows: int, t: int, tp: int, vocab_chunks: int, a: int, half_rope: int) -> dict:
  n = rows * t
  c = used_vocab_chunks(arch.vocab_size, vocab_chunks)
  vc = _div(arch.vocab_size // c, tp)
  return {
      "attention mask": int(rows * t * t + t * t),
      "hidden states and rope": int(2 * n * arch.hidden_size * a + 2 * n * half_rope * 4),
      f"logprob chunk (V/{c})": int(4 * n * vc * 4 + 4 * c * n * 4),
  }


def activation_bytes(arch: ModelConfig, rows: int, seq_len: int, tp: int, vocab_chunks: int) -> dict[str, int]:
  """Train-step activations of ``rows`` rows of ``seq_len`` tokens on one device (module docstring)."""
  if isinstance(arch, Qwen35Config):
    return hybrid_activation_bytes(arch, rows, seq_len, tp, vocab_chunks)
  a = np.dtype(DTYPES[arch.dtype]).itemsize
  d, h, l = arch.hidden_size, arch.head_dim, arch.num_hidden_layers
  n_h, k_h, f = _div(arch.num_attention_heads, tp), _div(arch.num_key_value_heads, tp), _div(arch.intermediate_size, tp)
  t = seq_len
  n = rows * t
  e = a * (4 * d + 3 * n_h * h + 3 * k_h * h + 3 * f) + _attention_scores(arch, n_h, t, a)
  if arch.remat == "none":
    saved, work = l * n * e, n * e
  elif arch.remat == "dots":
    saved, work = l * n * a * (3 * d + n_h * h + 2 * k_h * h + 2 * f), 2 * n * e
  else:
    saved, work = l * n * a * d, 2 * n * e
  return {
      f"saved layer activations (remat {arch.remat})": int(saved),
      "working layer (backward)": int(work),
      **_tail_rows(arch, rows, t, tp, vocab_chunks, a, h // 2),
  }


def hybrid_layer_bytes(arch: Qwen35Config, seq_len: int, tp: int) -> dict[str, int]:
  """Per-token bytes one Qwen3.5/3.6 layer keeps for its backward pass, by layer kind and remat policy
  (module docstring, "Hybrid layers"): ``full`` / ``linear`` (remat none or the recomputed layer), their
  ``*_dots`` counterparts (remat dots) and ``mlp`` / ``mlp_dots`` (included in all four)."""
  a = np.dtype(DTYPES[arch.dtype]).itemsize
  d, h = arch.hidden_size, arch.head_dim
  n_h, k_h = _div(arch.num_attention_heads, tp), _div(arch.num_key_value_heads, tp)
  hk, hv = _div(arch.linear_num_key_heads, tp), _div(arch.linear_num_value_heads, tp)
  dk, dv = arch.linear_key_head_dim, arch.linear_value_head_dim
  c = min(arch.delta_chunk_size, seq_len)
  if arch.is_moe:
    k, e = arch.num_experts_per_tok, arch.num_experts
    fm, fs = _div(arch.moe_intermediate_size, tp), _div(arch.shared_expert_intermediate_size, tp)
    mlp = a * (2 * k * d + 6 * k * fm + 6 * fs + d) + 8 * e
    mlp_dots = a * (e + 2 * fs + 1)  # router, shared expert and its gate (expert ragged_dots are not saved)
  else:
    f = _div(arch.intermediate_size, tp)
    mlp, mlp_dots = a * 6 * f, a * 2 * f
  x = 2 * hk * dk + hv * dv  # the q | k | v channels of a linear layer
  w = arch.linear_conv_kernel_dim
  full = a * (4 * d + 7 * n_h * h + 4 * k_h * h) + _attention_scores(arch, n_h, seq_len, a) + mlp
  delta = 4 * hv * (9 * c + 6 * dk + 5 * dv + dk * dv // c) + 8 * hk * dk + 3 * hv * c
  linear = a * (4 * d + 2 * hv * dv) + 4 * (2 * w + 3) * x + 20 * hv * dv + delta + mlp
  full_dots = a * (3 * d + 2 * n_h * h + 2 * k_h * h) + mlp_dots
  linear_dots = a * (3 * d + x + hv * dv + 2 * hv) + mlp_dots
  return dict(full=full, linear=linear, full_dots=full_dots, linear_dots=linear_dots, mlp=mlp, mlp_dots=mlp_dots)


def hybrid_activation_bytes(arch: Qwen35Config, rows: int, seq_len: int, tp: int,
                            vocab_chunks: int) -> dict[str, int]:
  """``activation_bytes`` for the Qwen3.5/3.6 hybrid: A full and R linear layers, run as L / p blocks of p
  layers under remat (module docstring, "Hybrid layers")."""
  a = np.dtype(DTYPES[arch.dtype]).itemsize
  t, n = seq_len, rows * seq_len
  per = hybrid_layer_bytes(arch, t, tp)
  n_full, n_lin = len(arch.full_layers), len(arch.linear_layers)
  kinds = ["full" if kind == "full_attention" else "linear" for kind in arch.layer_types[:arch.layer_period]]
  largest = max(per[kind] for kind in set(kinds))
  if arch.remat == "none":
    saved = n * (n_full * per["full"] + n_lin * per["linear"])
  elif arch.remat == "dots":
    saved = n * (n_full * per["full_dots"] + n_lin * per["linear_dots"])
  else:
    saved = arch.num_hidden_layers * n * a * arch.hidden_size
  out = {
      f"saved layer activations (remat {arch.remat})": int(saved),
      "working layer (backward)": int(n * largest),
  }
  if arch.is_moe:  # the stacked [L, n, E] float32 router logits of the load-balancing loss
    out["router logits (MoE balancing loss)"] = int(arch.num_hidden_layers * n * arch.num_experts * 4)
  out.update(_tail_rows(arch, rows, t, tp, vocab_chunks, a, arch.rotary_dim // 2))
  return out


@dataclasses.dataclass
class MemoryPlan:
  arch: ModelConfig
  arch_source: str
  mesh: dict[str, int]
  episodes: int
  rows: int  # padded row count of one step
  rows_per_device: int  # per microbatch
  seq_len: int
  num_microbatches: int
  vocab_chunks: int
  params: int
  reference: int  # the frozen KL reference policy's parameters (0 when kl_coef is 0)
  grads: int
  optimizer: int
  activations: dict[str, int]
  engine: dict[str, int]
  notes: list[str]

  @property
  def devices(self) -> int:
    return math.prod(self.mesh.values())

  @property
  def total(self) -> int:
    return (self.params + self.reference + self.grads + self.optimizer + sum(self.activations.values())
            + sum(self.engine.values()))


def plan(cfg, *, devices: int | None = None, model_preset: str | None = None, rows: int | None = None,
         device_memory_gib: float = 80.0) -> MemoryPlan:
  """Per-device memory of ``cfg``'s train step and rollout engine (module docstring)."""
  arch, source = resolve_architecture(cfg, model_preset)
  sizes = mesh_sizes(cfg.mesh, devices)
  mesh = abstract_mesh(sizes)
  tp, shards = sizes["tensor"], batch_shards(mesh)

  model = abstract_model(arch)
  axes = param_logical_axes(arch)
  _, params = nnx.split(model, nnx.Param)
  optimizer = make_optimizer(optimizer_config(cfg.optim, int(cfg.total_steps)))
  opt_state = jax.eval_shape(optimizer.init, params)
  p_bytes = device_bytes(params, state_shardings(params, mesh, axes))
  o_bytes = device_bytes(opt_state, state_shardings(opt_state, mesh, axes))
  k = int(cfg.train.num_microbatches)

  t = int(cfg.train.seq_len)
  notes = []
  act, grads, episodes, n_rows, per_device = {}, 0, 0, 0, 0
  if int(cfg.total_steps) > 0:
    episodes = episodes_per_step(cfg)
    n_rows = row_bucket(int(rows) if rows else episodes, k * shards)
    per_device = n_rows // (k * shards)
    act = activation_bytes(arch, per_device, t, tp, int(cfg.model.vocab_chunks))
    act["batch arrays"] = batch_fields(cfg) * (n_rows // shards) * t * 4
    grads = p_bytes * (2 if k > 1 else 1)
    if not rows:
      notes.append("rows: worst case, one row per episode; packing several episodes per row needs fewer "
                   "(--rows=<measured batch/rows>)")
  else:
    notes.append("evaluation config (total_steps 0): no train step; the optimizer state is counted because "
                 "the Trainer allocates it when it starts")
  ref = 0
  if reference_on(cfg):
    ref_path = str(cfg.algorithm.get("ref_model_path", ""))
    if ref_path:  # another checkpoint: its own architecture, the policy's dtypes
      ref_arch = config_from_pretrained_dir(ref_path, **compute_settings(cfg))
      _, ref_params = nnx.split(abstract_model(ref_arch), nnx.Param)
      ref = device_bytes(ref_params, state_shardings(ref_params, mesh, param_logical_axes(ref_arch)))
    else:  # a copy of the starting model
      ref = p_bytes
  if ref:
    notes.append("KL reference policy: a frozen copy of the parameters; its forward pass (one microbatch, no "
                 "gradients) runs before the train step and needs less than the train step's activations")
  r = cfg.rollout
  engine: dict[str, int] = {}
  if r.engine == "jax":
    slots = -(-(int(r.max_slots) + 1) // shards) * shards
    s_len = int(r.max_prompt_tokens) + int(r.max_response_tokens) + 1
    engine.update(jax_engine_cache_bytes(arch, model, slots, s_len, mesh))
    engine["jax engine parameter copy"] = p_bytes
  elif r.engine == "vllm":
    util = float(r.vllm.gpu_memory_utilization or 0.9)  # vLLM's default when unset
    engine[f"vllm reservation ({util:g} x device)"] = int(util * device_memory_gib * GIB)
    notes.append(f"vLLM runs on {int(r.vllm.tensor_parallel_size)} device(s) per process; the other devices "
                 "do not hold this row. Set XLA_PYTHON_CLIENT_MEM_FRACTION <= "
                 f"{max(0.0, 1 - util - 0.05):.2f} so JAX leaves vLLM its share.")
  else:
    raise ValueError(f"unknown rollout engine {r.engine!r}: the memory plan knows 'jax' and 'vllm'")
  return MemoryPlan(arch=arch, arch_source=source, mesh=sizes, episodes=episodes, rows=n_rows,
                    rows_per_device=per_device, seq_len=t, num_microbatches=k,
                    vocab_chunks=used_vocab_chunks(arch.vocab_size, int(cfg.model.vocab_chunks)), params=p_bytes,
                    reference=ref, grads=grads, optimizer=o_bytes, activations=act, engine=engine,
                    notes=notes)


def jax_engine_cache_bytes(arch: ModelConfig, model, slots: int, s_len: int, mesh) -> dict[str, int]:
  """Per-device bytes of the JAX sampler's cache of ``slots`` slots of ``s_len`` positions, laid out as the
  engine lays it out (module docstring): Qwen3's KV cache, or the hybrid's KV cache of its full layers plus
  the recurrent state and convolution inputs of its linear layers (``model.init_cache``, shape only)."""
  itemsize = np.dtype(DTYPES[arch.dtype]).itemsize
  if not isinstance(arch, Qwen35Config):
    shape = (arch.num_hidden_layers, slots, arch.num_key_value_heads, arch.head_dim, s_len)
    spec = logical_to_spec(ACTIVATION_AXES["cache_k_lbkhs"], shape, mesh)  # v: same size, same split
    kv = 2 * math.prod(NamedSharding(mesh, spec).shard_shape(shape)) * itemsize
    return {f"jax engine KV cache ({slots} slots x {s_len})": int(kv)}
  cache = jax.eval_shape(lambda: model.init_cache(slots, s_len))
  per = {}
  for name, x in cache.items():
    spec = logical_to_spec(qwen3_5_lib.CACHE_LOGICAL_AXES[name], x.shape, mesh)
    per[name] = math.prod(NamedSharding(mesh, spec).shard_shape(x.shape)) * np.dtype(x.dtype).itemsize
  out = {f"jax engine KV cache ({slots} slots x {s_len})": int(per["k"] + per["v"])}  # the full layers
  if arch.linear_layers:
    out["jax engine DeltaNet state (float32)"] = int(per["state"])
    out["jax engine convolution inputs"] = int(per["conv_q"] + per["conv_k"] + per["conv_v"])
  return out


def _count(n: int) -> str:
  return f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.2f} M"


def _describe(a: ModelConfig) -> str:
  f = a.intermediate_size if not isinstance(a, Qwen35Config) or not a.is_moe else a.moe_intermediate_size
  return (f"{_count(a.num_params())} parameters (L={a.num_hidden_layers} D={a.hidden_size} F={f} "
          f"N={a.num_attention_heads} K={a.num_key_value_heads} H={a.head_dim} V={a.vocab_size})")


def _describe_hybrid(a: Qwen35Config) -> str:
  text = (f"{a.model_type}: {len(a.full_layers)} gated-attention + {len(a.linear_layers)} Gated DeltaNet layers "
          f"(rotary {a.rotary_dim}; linear heads {a.linear_num_key_heads} key x {a.linear_key_head_dim}, "
          f"{a.linear_num_value_heads} value x {a.linear_value_head_dim}, conv {a.linear_conv_kernel_dim}, "
          f"chunk {a.delta_chunk_size})")
  if a.is_moe:
    text += (f"; {a.num_experts} experts top-{a.num_experts_per_tok} of width {a.moe_intermediate_size} + shared "
             f"{a.shared_expert_intermediate_size}, {_count(a.num_active_params())} active per token")
  return text


def format_plan(p: MemoryPlan, device_memory_gib: float) -> str:
  a = p.arch
  g = lambda x: f"{x / GIB:10.2f}"  # noqa: E731
  lines = [
      f"architecture  {p.arch_source}: {_describe(a)}, params {a.param_dtype}, compute {a.dtype}",
      *([f"              {_describe_hybrid(a)}"] if isinstance(a, Qwen35Config) else []),
      "mesh          " + " ".join(f"{k}={v}" for k, v in p.mesh.items() if k in ("data", "fsdp", "tensor") or v > 1)
      + f" ({p.devices} devices)",
      (f"batch         {p.episodes} episodes/step -> {p.rows} rows x {p.seq_len} tokens, {p.num_microbatches} "
       f"microbatch(es): {p.rows_per_device} row(s) per device per microbatch" if p.rows
       else "batch         none (evaluation only)"),
      f"              remat={a.remat} attention={a.attention_impl} vocabulary chunks={p.vocab_chunks}",
      "",
      f"{'per device':44s}{'GiB':>10s}",
      f"{'  parameters':44s}{g(p.params)}",
      *([f"{'  KL reference policy parameters':44s}{g(p.reference)}"] if p.reference else []),
      f"{'  gradients' + (' (+ microbatch accumulator)' if p.num_microbatches > 1 else ''):44s}{g(p.grads)}",
      f"{'  optimizer state':44s}{g(p.optimizer)}",
  ]
  if p.activations:
    lines.append(f"{'  activations (train step)':44s}{g(sum(p.activations.values()))}")
  lines += [f"{'    ' + k:44s}{g(v)}" for k, v in p.activations.items()]
  lines += [f"{'  ' + k:44s}{g(v)}" for k, v in p.engine.items()]
  lines.append(f"{'  total':44s}{g(p.total)}")
  free = device_memory_gib * GIB - p.total
  verdict = (f"fits ({free / GIB:.2f} GiB left)" if free >= 0 else f"DOES NOT FIT (over by {-free / GIB:.2f} GiB)")
  lines.append(f"device memory {device_memory_gib:g} GiB: {verdict}")
  lines += [f"note: {n}" for n in p.notes]
  return "\n".join(lines)


# -- checking a plan against this machine before allocating ---------------------------------------------------
#
# The launchers compare the plan with the memory this process can use before they load a model (training:
# ``check_training_memory``; launch/evaluate.py: ``check_evaluation_memory``) and refuse in one line naming
# the settings to change, instead of being killed by the kernel (CPU) or failing deep in an allocation
# (GPU). On CPU every device of the process shares the host's memory: the budget is the host's available
# memory (``MemAvailable``) split over the local CPU devices; on an accelerator it is the first local device's
# free memory as JAX reports it. ``CODJAX_MEMORY_GIB`` sets the budget per device instead (to plan for another
# machine, or for tests); ``CODJAX_SKIP_MEMORY_CHECK=1`` (or launch/evaluate.py's ``--nomemory_check``) skips
# the check, for a user who knows the plan overestimates their run.

MEMORY_ENV = "CODJAX_MEMORY_GIB"
# The JAX sampler's peak on CPU over its cache's bytes: a tiny Qwen3 at 32,001 positions grew by 3.3x its cache
# per added slot with 600-token prompts (16 -> 64 slots), and to about 5x in an evaluation whose contexts reach
# the full length (the cache, the window of active slots taken out of it, the updated cache written back).
CPU_SAMPLER_FACTOR = 5
SKIP_ENV = "CODJAX_SKIP_MEMORY_CHECK"


class MemoryRefused(ValueError):
  """The plan does not fit this machine (a ``ValueError``: the launchers report it in one line)."""


def _host_available_bytes() -> int:
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def memory_budget() -> tuple[int, str]:
  """Bytes one device of this process can use, and where the figure comes from (module comment above)."""
  env = os.environ.get(MEMORY_ENV, "")
  if env:
    try:
      gib = float(env)
    except ValueError:
      raise ValueError(f"{MEMORY_ENV}={env!r} must be a number of GiB per device") from None
    return int(gib * GIB), f"{MEMORY_ENV}={env}"
  devices = jax.local_devices()
  if devices[0].platform == "cpu":
    n = len(devices)
    return _host_available_bytes() // n, (f"this host's available memory over its {n} CPU device(s)" if n > 1
                                          else "this host's available memory")
  stats = devices[0].memory_stats() or {}
  if "bytes_limit" not in stats:
    return 0, ""  # the platform does not say: nothing to check against
  free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
  return free, f"{devices[0].device_kind} {devices[0].id}'s free memory"


def _skip() -> bool:
  return os.environ.get(SKIP_ENV, "") not in ("", "0")


def _engine_slots(cfg, shards: int) -> int:
  return -(-(int(cfg.rollout.max_slots) + 1) // shards) * shards


def _context_fix(cfg) -> str:
  r = cfg.rollout
  return (f"the context (--config.rollout.max_prompt_tokens={int(r.max_prompt_tokens)}, "
          f"--config.rollout.max_response_tokens={int(r.max_response_tokens)})")


def _slots_that_fit(cfg, cache: int, other: int, budget: int, shards: int) -> int:
  """The largest ``rollout.max_slots`` whose cache fits next to ``other`` bytes (the cache is linear in slots)."""
  per_slot = cache / _engine_slots(cfg, shards)
  slots = int((budget - other) // per_slot) if per_slot else 0
  return max(0, slots // shards * shards - 1)


def _refusal(what: str, rows: dict[str, int], budget: int, source: str, fix: str, override: str) -> MemoryRefused:
  top = ", ".join(f"{k} {v / GIB:.2f}" for k, v in sorted(rows.items(), key=lambda kv: -kv[1])[:3])
  return MemoryRefused(f"memory plan: {what} needs {sum(rows.values()) / GIB:.2f} GiB per device ({top}) but "
                       f"{budget / GIB:.2f} GiB is available ({source}); {fix}, or {override} to run anyway")


def evaluation_rows(cfg, mesh: dict[str, int], cpu: bool = False) -> dict[str, int]:
  """Per-device bytes of evaluating ``cfg``'s checkpoint on the JAX sampler over ``mesh`` (axis sizes): the
  parameters as loaded (``model.param_dtype``, '' = ``model.dtype``), the sampler's cast copy when it keeps
  them in a narrower compute dtype, and its cache (``jax_engine_cache_bytes``); on CPU (``cpu``) the sampler's
  working copies of the cache too (``CPU_SAMPLER_FACTOR`` - 1 times it). No optimizer, no train step."""
  arch, _ = resolve_architecture(cfg)
  amesh = abstract_mesh({ax: int(mesh.get(ax, 1)) for ax in MESH_AXES})
  model = abstract_model(arch)
  _, params = nnx.split(model, nnx.Param)
  p_bytes = device_bytes(params, state_shardings(params, amesh, param_logical_axes(arch)))
  rows = {"parameters": p_bytes}
  p_size, c_size = np.dtype(DTYPES[arch.param_dtype]).itemsize, np.dtype(DTYPES[arch.dtype]).itemsize
  if not isinstance(arch, Qwen35Config) and c_size < p_size:  # the sampler's compute-dtype copy (Qwen3)
    rows["jax engine parameter copy"] = p_bytes * c_size // p_size
  r = cfg.rollout
  s_len = int(r.max_prompt_tokens) + int(r.max_response_tokens) + 1
  cache = jax_engine_cache_bytes(arch, model, _engine_slots(cfg, batch_shards(amesh)), s_len, amesh)
  rows.update(cache)
  if cpu:
    rows["jax engine working copies (CPU)"] = (CPU_SAMPLER_FACTOR - 1) * sum(cache.values())
  return rows


def check_evaluation_memory(cfg, mesh: dict[str, int], *, budget: tuple[int, str] | None = None) -> None:
  """Raises ``MemoryRefused`` when evaluating ``cfg`` on the JAX sampler over ``mesh`` does not fit
  ``budget`` (bytes per device, its source; default ``memory_budget()``). Call before loading the model."""
  if _skip():
    return
  budget = budget or memory_budget()
  if not budget[0]:
    return
  rows = evaluation_rows(cfg, mesh, cpu=jax.local_devices()[0].platform == "cpu")
  if sum(rows.values()) <= budget[0]:
    return
  shards = mesh.get("data", 1) * mesh.get("fsdp", 1) * mesh.get("expert", 1)
  cache = sum(v for k, v in rows.items() if k.startswith("jax engine") and "parameter" not in k)
  fit = _slots_that_fit(cfg, cache, sum(rows.values()) - cache, budget[0], shards)
  slots = f"--config.rollout.max_slots (now {int(cfg.rollout.max_slots)}" + (f"; {fit} fits)" if fit else ")")
  raise _refusal("evaluation", rows, budget[0], budget[1], f"lower {slots} or {_context_fix(cfg)}",
                 f"pass --nomemory_check or set {SKIP_ENV}=1")


def check_training_memory(cfg, *, budget: tuple[int, str] | None = None) -> MemoryPlan | None:
  """Raises ``MemoryRefused`` when ``cfg``'s training plan (``plan``) does not fit ``budget`` (bytes per device,
  its source; default ``memory_budget()``); returns the plan, or None when nothing was checked (skipped, no
  budget known, or a mesh this machine cannot build: the trainer's mesh refuses that itself). Call before the
  trainer allocates anything."""
  if _skip():
    return None
  from codjax.train.config import validate

  cfg = validate(cfg)
  sizes = [int(cfg.mesh[ax] if ax in ("data", "fsdp", "tensor") else cfg.mesh.get(ax, 1)) for ax in MESH_AXES]
  n = jax.device_count()
  if -1 not in sizes and math.prod(sizes) != n:
    return None
  budget = budget or memory_budget()
  if not budget[0]:
    return None
  try:
    p = plan(cfg, devices=n, device_memory_gib=budget[0] / GIB)
  except ValueError as e:  # an architecture the plan cannot tell (a hub id): the trainer loads what it can
    print(f"memory plan: not checked ({e})", flush=True)
    return None
  if p.total <= budget[0]:
    return p
  rows = {"parameters": p.params, "KL reference": p.reference, "gradients": p.grads, "optimizer state": p.optimizer,
          "activations": sum(p.activations.values()), **p.engine}
  rows = {k: v for k, v in rows.items() if v}
  fix = (f"lower --config.rollout.max_slots, {_context_fix(cfg)}, --config.train.seq_len or the batch "
         "(--config.train.num_microbatches splits it), or change the mesh (launch/plan_memory.py shows the rows)")
  raise _refusal("training", rows, budget[0], budget[1], fix, f"set {SKIP_ENV}=1")
