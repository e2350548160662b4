"""Run metrics: one JSONL file per run, TensorBoard event files, and a console progress bar."""

from __future__ import annotations

import json
import logging
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
  and scalars to TensorBoard under ``<run_dir>/tb``.

  ``keep_through`` (a resumed run): existing lines with ``step > keep_through`` are dropped first, because the
  run writes those steps again, so the file reads step for step as an uninterrupted run's (-1 drops every
  line). TensorBoard event files are append-only: there, re-run steps appear twice.

  ``enabled=False`` (every process but process 0 of a multi-process run) writes nothing and touches no file."""

  def __init__(self, run_dir: str, name: str = "metrics", tensorboard: bool = True, keep_through: int | None = None,
               enabled: bool = True):
    self.enabled = bool(enabled)
    self._f = self._tb = None
    if not self.enabled:
      return
    os.makedirs(run_dir, exist_ok=True)
    self.path = os.path.join(run_dir, f"{name}.jsonl")
    if keep_through is not None:
      truncate_jsonl(self.path, int(keep_through))
    self._f = open(self.path, "a", buffering=1)
    self._tb = None
    if tensorboard:
      from tensorboardX import SummaryWriter

      self._tb = SummaryWriter(os.path.join(run_dir, "tb"), flush_secs=10)

  def write(self, step: int, metrics: dict[str, Any]) -> None:
    if not self.enabled:
      return
    row = {"step": int(step), "time": time.time(), **{k: _clean(v) for k, v in metrics.items()}}
    self._f.write(json.dumps(row) + "\n")
    if self._tb is not None:
      for k, v in row.items():
        if k not in ("step", "time") and isinstance(v, (int, float)) and not isinstance(v, bool):
          self._tb.add_scalar(k, v, step)

  def close(self) -> None:
    if self._f is not None:
      self._f.close()
    if self._tb is not None:
      self._tb.close()


def read_jsonl(path: str) -> list[dict]:
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def truncate_jsonl(path: str, keep_through: int) -> int:
  """Drops the lines of ``path`` whose ``step`` exceeds ``keep_through`` (an unparsable last line, cut by a
  crash mid-write, goes too); rewrites the file atomically and returns the number of lines dropped."""
  if not os.path.isfile(path):
    return 0
  with open(path) as f:
    lines = [line for line in f if line.strip()]
  kept = []
  for i, line in enumerate(lines):
    try:
      row = json.loads(line)
    except json.JSONDecodeError:
      if i == len(lines) - 1:
        continue
      raise ValueError(f"{path}: line {i + 1} is not JSON")
    if int(row["step"]) <= keep_through:
      kept.append(line if line.endswith("\n") else line + "\n")
  dropped = len(lines) - len(kept)
  if dropped:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
      f.writelines(kept)
    os.replace(tmp, path)
    logging.info("%s: dropped %d lines after step %d (a resumed run writes them again)", path, dropped,
                 keep_through)
  return dropped


class Progress:
  """A tqdm bar (or nothing) that shows a few headline metrics."""

  def __init__(self, total: int, initial: int = 0, enabled: bool = True, desc: str = "train", unit: str = "it",
               fractional: bool = False):
    self._bar = None
    if enabled:
      from tqdm import tqdm

      # fractional (advance_to with partial units): the count shown with one decimal
      fmt = ("{l_bar}{bar}| {n:.1f}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
             if fractional else None)
      self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True, bar_format=fmt)

  def update(self, metrics: dict[str, Any], keys=("reward_mean", "loss", "tok_per_s"), n: int = 1) -> None:
    if self._bar is None:
      return
    self._bar.set_postfix({k: f"{metrics[k]:.3g}" for k in keys if isinstance(metrics.get(k), (int, float))})
    self._bar.update(n)

  def advance_to(self, value: float) -> None:
    """Moves the bar forward to ``value`` (fractional units allowed; never backwards), so tqdm's rate and
    estimate follow the work done."""
    if self._bar is not None and value > self._bar.n + 1e-9:
      self._bar.update(min(value, self._bar.total or value) - self._bar.n)

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()
