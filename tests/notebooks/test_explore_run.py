"""notebooks/explore_run.ipynb and codjax/eval/plots.py on a run directory in the Trainer's format.

The synthetic run is made by the real pieces the Trainer uses: scripted FrozenLake-Obscure policies roll out
CoD packs (``run_text_packs``), training metrics are ``cod_rollout_metrics`` written by ``MetricWriter`` to
``metrics.jsonl``, and evaluation files hold ``cod_eval.summarize`` under ``{"step", "results"}``.
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")

import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from codjax.agents.cod import run_text_packs  # noqa: E402
from codjax.envs import make  # noqa: E402
from codjax.envs.experts import make_policy  # noqa: E402
from codjax.eval.cod_eval import summarize  # noqa: E402
from codjax.eval.plots import (eval_positions, load_eval, load_run, plot_eval_positions,  # noqa: E402
                               plot_train_positions, smooth)
from codjax.train.metrics import MetricWriter  # noqa: E402
from codjax.train.workflows import cod_rollout_metrics  # noqa: E402

ENV = "frozenlake_obscure"
NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "explore_run.ipynb")
TRAIN_STEPS = 24


def _rollouts(kind: str, seeds, pack_size: int, repeats: int = 1):
  fam = make(ENV, preset="tiny")
  return run_text_packs(make_policy(ENV, kind), fam, seeds, pack_size, env_name=ENV, repeats=repeats)


def _write_eval(run_dir: str, tag: str, step: int, kind: str) -> dict:
  summary = summarize(_rollouts(kind, range(1000, 1012), 8))
  os.makedirs(os.path.join(run_dir, "eval"), exist_ok=True)
  with open(os.path.join(run_dir, "eval", f"{tag}.json"), "w") as f:
    json.dump({"step": step, "results": {"frozenlake": summary}}, f)
  return summary


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  """A run whose policy is random for the first half of training and the scripted expert afterwards."""
  d = str(tmp_path_factory.mktemp("runs") / "synthetic_run")
  w = MetricWriter(d, tensorboard=False)
  for step in range(1, TRAIN_STEPS + 1):
    kind = "random" if step <= TRAIN_STEPS // 2 else "expert"
    m = cod_rollout_metrics(_rollouts(kind, range(10 * step, 10 * step + 2), 4, repeats=2))
    m.update({"train/loss": 0.1, "red_temperature": 1.0})
    w.write(step, m)
  w.close()
  with open(os.path.join(d, "config.json"), "w") as f:
    json.dump({"name": "synthetic_run"}, f)
  _write_eval(d, "start", 0, "random")
  _write_eval(d, f"step_{TRAIN_STEPS // 2}", TRAIN_STEPS // 2, "random")
  _write_eval(d, "final", TRAIN_STEPS, "expert")
  return d


# -- codjax/eval/plots.py -----------------------------------------------------------------------------------
def test_smooth_is_a_trailing_running_mean():
  x = np.arange(10.0)
  y = smooth(x, 3)
  assert y[0] == 0.0 and y[1] == 0.5  # partial windows at the start
  np.testing.assert_allclose(y[2:], x[1:-1])  # mean(t-2, t-1, t) = t - 1
  np.testing.assert_allclose(smooth(x, 1), x)
  np.testing.assert_allclose(smooth(x, 100), np.cumsum(x) / np.arange(1, 11))
  assert smooth([], 17).size == 0
  with pytest.raises(ValueError):
    smooth(x, 0)


def test_load_run_reads_metrics_and_sorted_evals(run_dir):
  run = load_run(run_dir)
  assert run.name == "synthetic_run" and run.config == {"name": "synthetic_run"}
  assert len(run.metrics) == TRAIN_STEPS
  assert [e.step for e in run.evals] == [0, TRAIN_STEPS // 2, TRAIN_STEPS]
  assert run.evals[0].tag == "start"
  pos = run.train_positions()
  assert list(pos) == [ENV] and sorted(pos[ENV]) == [0, 1, 2, 3]
  steps, vals = pos[ENV][3]
  np.testing.assert_array_equal(steps, np.arange(1, TRAIN_STEPS + 1))
  raw = [row[f"reward/{ENV}/pos3"] for row in run.metrics]
  np.testing.assert_allclose(vals, raw)
  # the expert half is better than the random half at the last position
  assert vals[TRAIN_STEPS // 2:].mean() > vals[:TRAIN_STEPS // 2].mean()


def test_load_run_errors(tmp_path):
  with pytest.raises(FileNotFoundError):
    load_run(str(tmp_path / "missing"))
  with pytest.raises(ValueError, match="neither"):
    load_run(str(tmp_path))
  bad = tmp_path / "x.json"
  bad.write_text(json.dumps({"results": {}}))
  with pytest.raises(ValueError, match="not an evaluation file"):
    load_eval(str(bad))


def test_eval_positions_per_checkpoint(run_dir):
  run = load_run(run_dir)
  series = eval_positions(run.evals)
  final = json.load(open(os.path.join(run_dir, "eval", "final.json")))["results"]["frozenlake"]
  assert list(series) == ["frozenlake"] and sorted(series["frozenlake"]) == list(range(8))
  steps, means, ses = series["frozenlake"][7]
  np.testing.assert_array_equal(steps, [0, TRAIN_STEPS // 2, TRAIN_STEPS])
  assert means[-1] == final["reward_mean"][7] and ses[-1] == final["reward_se"][7]
  # a second file for the same step (step_N next to final) is one checkpoint: the later file wins
  dup = load_eval(os.path.join(run_dir, "eval", "start.json"))
  dup.step = TRAIN_STEPS
  steps2, means2, _ = eval_positions(run.evals + [dup])["frozenlake"][7]
  np.testing.assert_array_equal(steps2, steps)
  assert means2[-1] == dup.results["frozenlake"]["reward_mean"][7]


def test_plot_functions_draw_every_position(run_dir):
  run = load_run(run_dir)
  fig = plot_train_positions([run], window=5)
  (ax,) = fig.axes
  assert len(ax.lines) == 4
  steps, vals = run.train_positions()[ENV][0]
  np.testing.assert_allclose(ax.lines[0].get_ydata(), smooth(vals, 5))
  fig2 = plot_eval_positions(run.evals)
  (ax2,) = fig2.axes
  assert len(ax2.containers) == 8  # one errorbar container per position
  x, y = ax2.containers[7].lines[0].get_data()
  np.testing.assert_array_equal(x, [0, TRAIN_STEPS // 2, TRAIN_STEPS])
  # two runs share the panels, one line per run and position
  fig3 = plot_train_positions([run, run])
  assert len(fig3.axes[0].lines) == 8
  with pytest.raises(ValueError):
    plot_eval_positions([])
  import matplotlib.pyplot as plt

  plt.close("all")


# -- the notebook -------------------------------------------------------------------------------------------
def test_notebook_executes_on_a_run(run_dir, monkeypatch):
  monkeypatch.setenv("CODJAX_RUN_DIRS", run_dir)
  monkeypatch.setenv("CODJAX_EVAL_FILES", os.path.join(run_dir, "eval", "final.json"))
  nb = nbformat.read(NOTEBOOK, as_version=4)
  nb.cells.append(nbformat.v4.new_code_cell("import sys; print('KERNEL', sys.executable)"))
  # jupyter_client starts a kernelspec whose argv[0] is "python" with the running interpreter (the venv's)
  NotebookClient(nb, kernel_name="python3", timeout=180,
                 resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}).execute()
  outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
  assert not [o for o in outputs if o.output_type == "error"]
  text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
  assert f"KERNEL {sys.executable}" in text
  half = TRAIN_STEPS // 2
  assert f"synthetic_run: {TRAIN_STEPS} logged steps; evaluations at steps [0, {half}, {TRAIN_STEPS}]" in text
  assert "final (step 24)" in text and "pos7" in text  # the closing per-position table
  images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
  assert len(images) == 3  # training curves, the run's evaluations, the standalone evaluation file
