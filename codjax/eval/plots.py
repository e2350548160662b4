"""Reading run directories and plotting the CoD effect (``notebooks/explore_run.ipynb``).

A run directory (``codjax.train.loop``) holds ``metrics.jsonl`` (one JSON object per logged step with
``"step"`` and keys such as ``reward/<env>/pos<k>``), ``eval/<tag>.json`` files of the form
``{"step": s, "results": {label: {"reward_mean": [...], "reward_se": [...], "n": ..., ...}}}`` (ORBIT
summaries hold ``episode_success``/``episode_success_se`` per episode instead, read the same way), and
``eval/rl_effect.json``, the paired change of the evaluation reward from ``start`` to ``final``
(``{label: {"n", "mean", "se", "per_position": [[mean, se], ...]}}``, ``codjax.workflows.cod_summary.compare``), read
into ``Run.rl_effect``, and ``eval/baselines/<policy>.json``, scripted policies evaluated on the same packs
(``eval.baselines``), read into ``Run.baselines``. A standalone evaluation file (``launch/evaluate.py``'s ``{"meta", "results"}``) is read
as one checkpoint at step ``meta["step"]`` (0 when absent). Any other file under ``eval/`` is an error, so
that a new file the trainer writes is either read here or named in ``NOT_EVALUATIONS``.

Figures follow the paper's Figures 4 and 5: training reward per pack position over RL steps, smoothed by a
running average over a window of 17 logged steps, and evaluation reward per position per checkpoint (step 0 =
the initial model) with standard-error bars.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
from typing import Sequence

import numpy as np

_TRAIN_KEY = re.compile(r"^reward/(?P<env>.+)/pos(?P<pos>\d+)$")
# ORBIT's training metric of episode k (1-based): success rate of that episode over the step's trajectories
_ORBIT_TRAIN_KEY = re.compile(r"^orbit/(?P<env>.+)/ep(?P<pos>\d+)_success$")
PAPER_WINDOW = 17  # paper Figures 4, 5, 8: running-average window of size 17
RL_EFFECT_FILE = "rl_effect.json"  # Trainer._report_improvement
BASELINES_DIR = "baselines"  # eval/baselines/<policy>.json: scripted policies on the same packs (Trainer)
NOT_EVALUATIONS = (RL_EFFECT_FILE,)  # files of eval/ that are not per-checkpoint evaluations
# per-position (CoD) and per-episode (ORBIT) series of a summary: (means key, standard errors key)
_SERIES_KEYS = (("reward_mean", "reward_se"), ("episode_success", "episode_success_se"))


@dataclasses.dataclass
class EvalPoint:
  """One evaluation file: the checkpoint step and the per-label summaries."""

  tag: str
  step: int
  results: dict[str, dict]


@dataclasses.dataclass
class Run:
  name: str
  path: str
  config: dict | None
  metrics: list[dict]
  evals: list[EvalPoint]
  rl_effect: dict | None = None  # eval/rl_effect.json: {label: paired final - start difference}
  baselines: list[EvalPoint] = dataclasses.field(default_factory=list)  # eval/baselines/<policy>.json

  @property
  def is_orbit(self) -> bool:
    """A run of the ``orbit`` workflow (its config says so, or its metrics are ORBIT's)."""
    if isinstance(self.config, dict) and "workflow" in self.config:
      return self.config["workflow"] == "orbit"
    return any(_ORBIT_TRAIN_KEY.match(k) for row in self.metrics for k in row)

  def train_positions(self) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """{env: {position: (steps, rewards)}} from the ``reward/<env>/pos<k>`` training metrics (CoD), or
    {env: {episode: (steps, success rates)}} from ``orbit/<env>/ep<k>_success`` (ORBIT, episodes from 1)."""
    out: dict[str, dict[int, tuple[list, list]]] = {}
    for row in self.metrics:
      for key, v in row.items():
        m = _TRAIN_KEY.match(key) or _ORBIT_TRAIN_KEY.match(key)
        if m and isinstance(v, (int, float)):
          steps, vals = out.setdefault(m["env"], {}).setdefault(int(m["pos"]), ([], []))
          steps.append(int(row["step"]))
          vals.append(float(v))
    return {env: {k: (np.asarray(s), np.asarray(v)) for k, (s, v) in sorted(pos.items())}
            for env, pos in sorted(out.items())}


def repo_path(path: str, start: str | None = None) -> str:
  """``path`` itself when absolute; a relative path taken from the repository root, the first folder at or above
  ``start`` (default: the working directory) that holds ``setup.py`` and ``codjax/``, so that
  ``CODJAX_RUN_DIRS=runs/x`` names the same run from the repository root and from ``notebooks/`` (where Jupyter
  runs a notebook); outside a checkout, from ``start``."""
  if os.path.isabs(path):
    return path
  here = os.path.abspath(start or os.getcwd())
  folder = here
  while True:
    if os.path.isfile(os.path.join(folder, "setup.py")) and os.path.isdir(os.path.join(folder, "codjax")):
      return os.path.join(folder, path)
    parent = os.path.dirname(folder)
    if parent == folder:
      return os.path.join(here, path)
    folder = parent


def load_eval(path: str) -> EvalPoint:
  """Reads one evaluation file: the trainer's ``{"step", "results"}`` or launch/evaluate.py's
  ``{"meta", "results"}`` (step ``meta["step"]``, else 0)."""
  with open(path) as f:
    d = json.load(f)
  if not isinstance(d, dict) or not isinstance(d.get("results"), dict) or not ("step" in d or "meta" in d):
    raise ValueError(f"{path}: not an evaluation file (needs 'results' and 'step' or 'meta')")
  step = d["step"] if "step" in d else d["meta"].get("step", 0)
  return EvalPoint(os.path.splitext(os.path.basename(path))[0], int(step), dict(d["results"]))


def load_rl_effect(path: str) -> dict:
  """Reads ``eval/rl_effect.json``: {label: {"n", "mean", "se", "per_position": [[mean, se], ...]}}."""
  with open(path) as f:
    d = json.load(f)
  ok = isinstance(d, dict) and all(isinstance(r, dict) and {"mean", "se", "per_position"} <= set(r)
                                   for r in d.values())
  if not ok:
    raise ValueError(f"{path}: not an RL-effect file (needs {{label: {{mean, se, per_position}}}})")
  return d


def format_rl_effect(rl_effect: dict) -> str:
  """One line per label: the paired mean difference final - start, in standard errors, and per position."""
  lines = []
  for label, r in rl_effect.items():
    z = r["mean"] / r["se"] if r["se"] > 0 else float("nan")
    per = " ".join(f"{m:+.3f}+-{se:.3f}" for m, se in r["per_position"])
    lines.append(f"{label}: paired diff {r['mean']:+.3f} +- {r['se']:.3f} ({z:+.1f} s.e., n={r.get('n', '?')}); "
                 f"per position {per}")
  return "\n".join(lines)


def format_results(results: dict[str, dict]) -> str:
  """A text table of one evaluation's ``{label: summary}``: ``codjax.workflows.cod_summary.format_table`` for CoD summaries, one
  line of per-episode success (mean +- s.e.) per label for ORBIT summaries."""
  from codjax.workflows.cod_summary import format_table

  cod = {label: r for label, r in results.items() if isinstance(r.get("reward_mean"), list)}  # ORBIT's is a number
  lines = [format_table(cod)] if cod else []
  for label, r in results.items():
    if label not in cod:
      m, se = r.get("episode_success", []), r.get("episode_success_se", [])
      lines.append(f"{label}: " + " ".join(f"Ep{k + 1} {a:.3f}+-{b:.3f}" for k, (a, b) in enumerate(zip(m, se))))
  return "\n".join(lines)


def load_run(run_dir: str, name: str | None = None) -> Run:
  """Reads ``metrics.jsonl``, ``config.json`` (when present), every ``eval/*.json`` evaluation of a run,
  sorted by step (a ``start`` evaluation before later ones at the same step; a ``step_N`` file that ``final``
  repeats is listed once, as ``final``), and ``eval/rl_effect.json``."""
  if not os.path.isdir(run_dir):
    raise FileNotFoundError(f"run directory {run_dir!r} does not exist")
  metrics = []
  mpath = os.path.join(run_dir, "metrics.jsonl")
  if os.path.isfile(mpath):
    with open(mpath) as f:
      metrics = [json.loads(line) for line in f if line.strip()]
  cpath = os.path.join(run_dir, "config.json")
  config = json.load(open(cpath)) if os.path.isfile(cpath) else None
  paths = sorted(glob.glob(os.path.join(run_dir, "eval", "*.json")))
  evals = [load_eval(p) for p in paths if os.path.basename(p) not in NOT_EVALUATIONS]
  # the trainer writes final.json as a copy of step_N.json when the last periodic evaluation was at the last
  # step: one evaluation, listed once (as "final")
  finals = {(e.step, json.dumps(e.results, sort_keys=True)) for e in evals if e.tag == "final"}
  evals = [e for e in evals if e.tag == "final" or (e.step, json.dumps(e.results, sort_keys=True)) not in finals]
  evals.sort(key=lambda e: (e.step, e.tag != "start", e.tag))
  effect_path = os.path.join(run_dir, "eval", RL_EFFECT_FILE)
  rl_effect = load_rl_effect(effect_path) if os.path.isfile(effect_path) else None
  if not metrics and not evals:
    raise ValueError(f"{run_dir!r} has neither metrics.jsonl nor eval/*.json")
  baselines = [load_eval(p) for p in sorted(glob.glob(os.path.join(run_dir, "eval", BASELINES_DIR, "*.json")))]
  return Run(name or os.path.basename(os.path.normpath(run_dir)), run_dir, config, metrics, evals, rl_effect,
             baselines)


def smooth(values: Sequence[float], window: int = PAPER_WINDOW) -> np.ndarray:
  """Trailing running average: y_t = mean(x_{t-w+1..t}), over the available values near the start."""
  x = np.asarray(values, dtype=np.float64)
  if window < 1:
    raise ValueError(f"window must be >= 1, got {window}")
  if x.size == 0:
    return x
  c = np.concatenate([[0.0], np.cumsum(x)])
  idx = np.arange(1, x.size + 1)
  lo = np.maximum(idx - window, 0)
  return (c[idx] - c[lo]) / (idx - lo)


def _axes(n: int, axes, width: float = 5.0, height: float = 3.6):
  import matplotlib.pyplot as plt

  if axes is not None:
    axes = list(np.ravel(axes))
    if len(axes) < n:
      raise ValueError(f"need {n} axes, got {len(axes)}")
    return axes[0].figure, axes
  fig, ax = plt.subplots(1, max(n, 1), figsize=(width * max(n, 1), height), squeeze=False)
  return fig, list(ax[0])


def plot_train_positions(runs: Sequence[Run], window: int = PAPER_WINDOW, axes=None):
  """One panel per environment: smoothed training reward of every position over RL steps, per run."""
  panels = sorted({env for r in runs for env in r.train_positions()})
  if not panels:
    raise ValueError("no reward/<env>/pos<k> (CoD) or orbit/<env>/ep<k>_success (ORBIT) metrics in these runs")
  fig, axs = _axes(len(panels), axes)
  styles = ["-", "--", ":", "-."]
  for ax, env in zip(axs, panels):
    for i, run in enumerate(runs):
      for k, (steps, vals) in run.train_positions().get(env, {}).items():
        unit = "ep" if run.is_orbit else "pos"
        label = f"{unit} {k}" if len(runs) == 1 else f"{run.name} {unit} {k}"
        ax.plot(steps, smooth(vals, window), styles[i % len(styles)], color=f"C{k}", label=label)
    ax.set_title(f"train {'success' if any(r.is_orbit for r in runs) else 'reward'}: {env}")
    ax.set_xlabel("RL step")
    ax.set_ylabel(f"reward (running mean, window {window})")
    ax.legend(fontsize="small")
  fig.tight_layout()
  return fig


def eval_positions(evals: Sequence[EvalPoint]) -> dict[str, dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
  """{label: {position: (steps, means, standard errors)}} over the checkpoints, sorted by step (positions of a
  CoD pack, or episodes of an ORBIT trajectory). Two files of one step (``step_<s>`` and ``final``) are one
  checkpoint: the later file in the given order wins."""
  by: dict[str, dict[int, dict[int, tuple[float, float]]]] = {}
  for e in evals:
    for label, r in e.results.items():
      keys = next((k for k in _SERIES_KEYS if k[0] in r and k[1] in r), None)
      if keys is None:
        raise ValueError(f"evaluation {e.tag!r}, {label!r}: no per-position series ({_SERIES_KEYS})")
      for k, (m, se) in enumerate(zip(r[keys[0]], r[keys[1]])):
        by.setdefault(label, {}).setdefault(k, {})[e.step] = (float(m), float(se))
  out = {}
  for label, pos in sorted(by.items()):
    out[label] = {}
    for k, points in sorted(pos.items()):
      steps = sorted(points)
      out[label][k] = (np.asarray(steps), np.asarray([points[s][0] for s in steps]),
                       np.asarray([points[s][1] for s in steps]))
  return out


def plot_eval_positions(evals: Sequence[EvalPoint], axes=None, title: str = ""):
  """One panel per evaluated environment: mean reward of every position per checkpoint, +- one s.e."""
  series = eval_positions(evals)
  if not series:
    raise ValueError("no evaluation results to plot")
  fig, axs = _axes(len(series), axes)
  for ax, (label, pos) in zip(axs, series.items()):
    for k, (steps, means, ses) in pos.items():
      ax.errorbar(steps, means, yerr=ses, marker="o", capsize=3, color=f"C{k}", label=f"pos {k}")
    ax.set_title(f"{title + ': ' if title else ''}eval reward: {label}")
    ax.set_xlabel("checkpoint step (0 = initial model)")
    ax.set_ylabel("mean reward +- s.e.")
    ax.legend(fontsize="small", ncol=2)
  fig.tight_layout()
  return fig


def plot_episode_success(run: Run, tags: Sequence[str] = ("start", "final"), axes=None):
  """ORBIT: one panel per evaluated environment, success of episode 1..T (+- one s.e.) for the run's
  evaluations named in ``tags`` (``start`` = before RL, ``final`` = after) and its scripted baselines, so the
  in-context gain (the slope over episodes) and the RL effect (the gap between the curves) read off one figure."""
  points = [(e, False) for e in run.evals if e.tag in tags] + [(e, True) for e in run.baselines]
  labels = sorted({label for e, _ in points for label, r in e.results.items() if "episode_success" in r})
  if not labels:
    raise ValueError(f"{run.name}: no ORBIT evaluation (episode_success) among {list(tags)} or the baselines")
  fig, axs = _axes(len(labels), axes)
  for ax, label in zip(axs, labels):
    for i, (e, scripted) in enumerate(points):
      r = e.results.get(label)
      if r is None or "episode_success" not in r:
        continue
      x = np.arange(1, len(r["episode_success"]) + 1)
      name = f"{e.tag} (scripted)" if scripted else e.tag
      style = ":" if scripted else "-"
      ax.errorbar(x, r["episode_success"], yerr=r["episode_success_se"], marker="o", capsize=3, linestyle=style,
                  color=f"C{i}", label=name)
    ax.set_title(f"{run.name}: {label}")
    ax.set_xlabel("episode")
    ax.set_xticks(x)
    ax.set_ylabel("success rate +- s.e.")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize="small")
  fig.tight_layout()
  return fig
