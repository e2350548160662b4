"""The policy model: Flax NNX Qwen3 and Qwen3.5/3.6, presets, HF checkpoint I/O and tokenizer loading.

``init_model`` / ``abstract_model`` pick the architecture from the config's type (``Qwen3Config`` -> ``Qwen3``,
``Qwen35Config`` -> ``Qwen35``) and ``from_pretrained`` from config.json's model_type, so callers need no branch.
"""

from codjax.models import qwen3 as _qwen3
from codjax.models import qwen3_5 as _qwen3_5
from codjax.models.checkpoint import KEY_TABLE, from_pretrained, hf_tensors, save_pretrained
from codjax.models.config import (HYBRID_PRESETS, PRESETS, ModelConfig, Qwen3Config, Qwen35Config,
                                  config_from_hf_dict, config_from_pretrained_dir, preset)
from codjax.models.qwen3 import Qwen3
from codjax.models.qwen3_5 import Qwen35


def _module_for(cfg):
  if isinstance(cfg, Qwen35Config):
    return _qwen3_5
  if isinstance(cfg, Qwen3Config):
    return _qwen3
  raise TypeError(f"expected a Qwen3Config or Qwen35Config, got {type(cfg).__name__}")


def init_model(cfg: ModelConfig, seed: int = 0) -> Qwen3 | Qwen35:
  """A randomly initialised model of the config's architecture."""
  return _module_for(cfg).init_model(cfg, seed=seed)


def abstract_model(cfg: ModelConfig) -> Qwen3 | Qwen35:
  """A model of the config's architecture whose parameters are ``jax.ShapeDtypeStruct`` (no memory)."""
  return _module_for(cfg).abstract_model(cfg)


__all__ = ["KEY_TABLE", "from_pretrained", "hf_tensors", "save_pretrained", "HYBRID_PRESETS", "PRESETS",
           "ModelConfig", "Qwen3Config", "Qwen35Config", "config_from_hf_dict", "config_from_pretrained_dir",
           "preset", "Qwen3", "Qwen35", "abstract_model", "init_model"]
