"""Reading Hugging Face safetensors checkpoints, shared by every architecture's key table: the tensor index of a
single-file or sharded checkpoint (memory-mapped, with clear errors for missing or corrupt files) and the
checks of ``from_pretrained``'s arguments."""

from __future__ import annotations

import json
import os
from typing import Any

import ml_dtypes
import numpy as np
from safetensors import safe_open

from codjax.models.config import DTYPES

NP_DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


class SafetensorsIndex:
  """Maps tensor names to files for a single-file or sharded (``*.index.json``) checkpoint."""

  def __init__(self, path: str):
    self.path = path
    idx = os.path.join(path, "model.safetensors.index.json")
    single = os.path.join(path, "model.safetensors")
    if os.path.isfile(idx):
      try:
        with open(idx) as f:
          weight_map = json.load(f)["weight_map"]
      except (json.JSONDecodeError, KeyError) as e:
        raise ValueError(f"corrupt safetensors index {idx}: {e}") from None
      self.files = {k: os.path.join(path, v) for k, v in weight_map.items()}
      missing = sorted({f for f in self.files.values() if not os.path.isfile(f)})
      if missing:
        raise FileNotFoundError(f"checkpoint {path!r} is missing shard file(s) listed in the index: "
                                f"{[os.path.basename(m) for m in missing]}")
    elif os.path.isfile(single):
      self.files = None
      self._single = single
    else:
      raise FileNotFoundError(f"no model.safetensors or model.safetensors.index.json in {path!r}")
    self._handles: dict[str, Any] = {}
    if self.files is None:
      self._names = set(self._open(self._single).keys())
    else:
      self._names = set(self.files)

  def _open(self, file: str):
    if file not in self._handles:
      try:
        self._handles[file] = safe_open(file, framework="numpy")
      except Exception as e:  # safetensors raises SafetensorError for truncated/corrupt headers
        raise ValueError(f"cannot read safetensors file {file!r} (truncated or corrupt?): {e}") from None
    return self._handles[file]

  def __contains__(self, name: str) -> bool:
    return name in self._names

  @property
  def names(self) -> frozenset[str]:
    """Every tensor name in the checkpoint."""
    return frozenset(self._names)

  def get(self, name: str) -> np.ndarray:
    file = self._single if self.files is None else self.files[name]
    try:
      return self._open(file).get_tensor(name)
    except ValueError:
      raise
    except Exception as e:
      raise ValueError(f"cannot read tensor {name!r} from {file!r} (truncated or corrupt?): {e}") from None


def check_load_args(path: str, dtype: str | None, param_dtype: str | None, config_overrides: dict) -> dict:
  """Validates ``from_pretrained``'s directory and dtype arguments; returns the config overrides they imply."""
  if not os.path.isdir(path):
    raise FileNotFoundError(f"checkpoint directory {path!r} does not exist")
  for name, value in (("dtype", dtype), ("param_dtype", param_dtype)):
    if value is not None and value not in DTYPES:
      raise ValueError(f"{name} must be one of {sorted(DTYPES)}, got {value!r}")
  overrides = dict(config_overrides)
  if param_dtype is not None:
    overrides.setdefault("param_dtype", param_dtype)
  if dtype is not None:
    overrides.setdefault("param_dtype", dtype)
    overrides.setdefault("dtype", dtype)
  return overrides
