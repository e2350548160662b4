"""Plots of an EvoHarness run (notebooks/evoharness_run.ipynb): harness annealing and bank evolution.

* ``load_bank_log``: ``<run>/harness/bank_log.jsonl``, one line per policy update, as written by the trainer's
  ``evoharness`` workflow (``after_step``): {step, updates, stats: bank sizes, report: consolidation ops}.
* ``call_curve`` / ``plot_harness_calls``: harness calls per episode over training steps, in total and by
  verb, from ``metrics.jsonl`` (the paper's "harness annealing": calls per episode 9.03 -> 2.98 on ALFWorld).
* ``plot_bank``: bank size per category and operations applied per consolidation (the paper's "harness
  evolution").
* ``plot_family_success``: success per task family of the evaluations in ``eval/*.json`` (the paper's table).
"""

from __future__ import annotations

import json
import os

import numpy as np

from codjax.common.metrics import read_jsonl
from codjax.eval.plots import smooth
from codjax.workflows.evoharness_summary import FAMILY_COLUMNS, VERBS


def load_bank_log(run_dir: str) -> list[dict]:
  """The bank log's lines (a clear error when the run has none: not an EvoHarness run, or no step yet)."""
  path = os.path.join(run_dir, "harness", "bank_log.jsonl")
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path} does not exist: not an EvoHarness run, or no policy update was made yet")
  out = []
  with open(path) as f:
    for k, line in enumerate(f, start=1):
      line = line.strip()
      if not line:
        continue
      try:
        out.append(json.loads(line))
      except json.JSONDecodeError as e:
        raise ValueError(f"{path} line {k} is not JSON ({e}); the file is corrupt") from None
  return out


def call_curve(run_dir: str) -> dict[str, np.ndarray]:
  """{"step": [S], "total": [S], verb: [S]} harness calls per episode at every logged training step."""
  rows = [r for r in read_jsonl(os.path.join(run_dir, "metrics.jsonl")) if "evoharness/calls_per_episode" in r]
  if not rows:
    raise ValueError(f"{run_dir}/metrics.jsonl has no 'evoharness/calls_per_episode': not an EvoHarness run")
  out = {"step": np.array([r["step"] for r in rows]),
         "total": np.array([r["evoharness/calls_per_episode"] for r in rows], np.float64)}
  for v in VERBS:
    out[v] = np.array([r.get(f"evoharness/calls_per_episode/{v}", 0.0) for r in rows], np.float64)
  return out


def plot_harness_calls(run_dir: str, ax=None, window: int = 1):
  import matplotlib.pyplot as plt

  c = call_curve(run_dir)
  ax = ax or plt.subplots(figsize=(6, 3.5))[1]
  ax.plot(c["step"], smooth(c["total"], window), color="k", lw=2, label="all calls")
  for v in VERBS:
    ax.plot(c["step"], smooth(c[v], window), lw=1, label=v)
  ax.set_xlabel("policy update")
  ax.set_ylabel("harness calls per episode")
  ax.set_title("harness annealing")
  ax.legend(fontsize=8)
  return ax


def bank_curves(run_dir: str) -> dict[str, np.ndarray]:
  """{"step": [S], size statistic: [S], "op/<kind>": [S]} from the bank log."""
  log = load_bank_log(run_dir)
  out = {"step": np.array([x["step"] for x in log])}
  keys = sorted({k for x in log for k, v in x.get("stats", {}).items() if isinstance(v, (int, float))})
  for k in keys:
    out[k] = np.array([float(x.get("stats", {}).get(k, 0.0)) for x in log])
  ops = sorted({k for x in log for k in (x.get("report") or {}).get("applied", {})})
  for k in ops:
    out[f"op/{k}"] = np.array([float((x.get("report") or {}).get("applied", {}).get(k, 0)) for x in log])
  return out


def plot_bank(run_dir: str, axes=None):
  import matplotlib.pyplot as plt

  b = bank_curves(run_dir)
  if axes is None:
    axes = plt.subplots(1, 2, figsize=(11, 3.5))[1]
  for k, v in b.items():
    if k != "step" and not k.startswith("op/"):
      axes[0].plot(b["step"], v, label=k)
  axes[0].set_xlabel("policy update")
  axes[0].set_title("bank size")
  axes[0].legend(fontsize=7)
  for k, v in b.items():
    if k.startswith("op/"):
      axes[1].plot(b["step"], v, marker=".", label=k[3:])
  axes[1].set_xlabel("policy update")
  axes[1].set_title("consolidation operations")
  axes[1].legend(fontsize=7)
  return axes


def family_table(results: dict) -> dict[str, dict[str, float]]:
  """{label: {column: success}} with the paper's columns and Avg, from ``{label: summary}``."""
  out = {}
  for label, r in results.items():
    row = {col: float(r["family_success"][col]) for _, col in FAMILY_COLUMNS if col in r.get("family_success", {})}
    row["Avg"] = float(r["success"])
    out[label] = row
  return out


def plot_family_success(results: dict, ax=None):
  import matplotlib.pyplot as plt

  table = family_table(results)
  cols = [c for _, c in FAMILY_COLUMNS] + ["Avg"]
  ax = ax or plt.subplots(figsize=(7, 3.5))[1]
  width = 0.8 / max(len(table), 1)
  for i, (label, row) in enumerate(table.items()):
    ax.bar(np.arange(len(cols)) + i * width, [row.get(c, np.nan) for c in cols], width, label=label)
  ax.set_xticks(np.arange(len(cols)) + 0.4 - width / 2)
  ax.set_xticklabels(cols)
  ax.set_ylim(0, 1)
  ax.set_ylabel("success")
  ax.legend(fontsize=7)
  return ax
