"""The policy model: Flax NNX Qwen3, presets, HF checkpoint I/O and tokenizer loading."""

from codjax.models.checkpoint import KEY_TABLE, from_pretrained, hf_tensors, save_pretrained
from codjax.models.config import PRESETS, Qwen3Config, preset
from codjax.models.qwen3 import Qwen3, abstract_model, init_model

__all__ = ["KEY_TABLE", "from_pretrained", "hf_tensors", "save_pretrained", "PRESETS", "Qwen3Config", "preset",
           "Qwen3", "abstract_model", "init_model"]
