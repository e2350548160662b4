"""Run metrics: one JSONL file per run, TensorBoard event files, and a console progress bar."""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import numpy as np


def _clean(v: Any):
  if isinstance(v, (np.floating, np.integer)):
    v = v.item()
  if hasattr(v, "item") and getattr(v, "shape", None) == ():
    v = v.item()
  if isinstance(v, float) and not math.isfinite(v):
    return str(v)
  return v


class MetricWriter:
  """Appends ``{"step": s, "time": t, **metrics}`` lines to ``<run_dir>/<name>.jsonl`` (flushed per line)
  and scalars to TensorBoard under ``<run_dir>/tb``."""

  def __init__(self, run_dir: str, name: str = "metrics", tensorboard: bool = True):
    os.makedirs(run_dir, exist_ok=True)
    self.path = os.path.join(run_dir, f"{name}.jsonl")
    self._f = open(self.path, "a", buffering=1)
    self._tb = None
    if tensorboard:
      from tensorboardX import SummaryWriter

      self._tb = SummaryWriter(os.path.join(run_dir, "tb"), flush_secs=10)

  def write(self, step: int, metrics: dict[str, Any]) -> None:
    row = {"step": int(step), "time": time.time(), **{k: _clean(v) for k, v in metrics.items()}}
    self._f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      for k, v in row.items():
        if k not in ("step", "time") and isinstance(v, (int, float)) and not isinstance(v, bool):
          self._tb.add_scalar(k, v, step)

  def close(self) -> None:
    self._f.close()
    if self._tb is not None:
      self._tb.close()


def read_jsonl(path: str) -> list[dict]:
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


class Progress:
  """A tqdm bar (or nothing) that shows a few headline metrics."""

  def __init__(self, total: int, initial: int = 0, enabled: bool = True, desc: str = "train"):
    self._bar = None
    if enabled:
      from tqdm import tqdm

      self._bar = tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True)

  def update(self, metrics: dict[str, Any], keys=("reward_mean", "loss", "tok_per_s"), n: int = 1) -> None:
    if self._bar is None:
      return
    self._bar.set_postfix({k: f"{metrics[k]:.3g}" for k in keys if isinstance(metrics.get(k), (int, float))})
    self._bar.update(n)

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()
