"""notebooks/explore_run.ipynb and codjax/eval/plots.py.

The notebook runs on a run directory written by the trainer itself (launch/train.py on the README's main job,
shrunk to one RL step and evaluated at start and end, so ``eval/start.json``, ``eval/final.json`` and
``eval/rl_effect.json`` exist) and on a standalone evaluation file written by launch/evaluate.py. The plotting
functions are also checked against known values on a synthetic run in the Trainer's format: scripted
FrozenLake-Obscure policies roll out CoD packs (``run_text_packs``), training metrics are
``cod_rollout_metrics`` written by ``MetricWriter`` to ``metrics.jsonl``, and evaluation files hold
``codjax.workflows.cod_summary.summarize`` under ``{"step", "results"}``.
"""

import json
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from codjax.agents.cod import run_text_packs  # noqa: E402
from codjax.common.metrics import MetricWriter, read_jsonl  # noqa: E402
from codjax.envs import make  # noqa: E402
from codjax.envs.experts import make_policy  # noqa: E402
from codjax.eval.plots import (NOT_EVALUATIONS, eval_positions, format_rl_effect, load_eval,  # noqa: E402
                               load_rl_effect, load_run, plot_eval_positions, plot_train_positions, smooth)
from codjax.workflows import cod_rollout_metrics  # noqa: E402
from codjax.workflows.cod_summary import summarize  # noqa: E402

pytestmark = pytest.mark.slow  # runs launch/train.py and executes the notebook (~55 s)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
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


def test_a_final_evaluation_that_repeats_the_last_periodic_one_is_listed_once(tmp_path):
  # eval.every = 12 and total_steps = 24: the trainer writes step_12, step_24 and final.json = step_24's copy
  d = str(tmp_path / "run")
  w = MetricWriter(d, tensorboard=False)
  w.write(1, {"train/loss": 0.1})
  w.close()
  _write_eval(d, "start", 0, "random")
  _write_eval(d, "step_12", 12, "random")
  last = _write_eval(d, "step_24", 24, "expert")
  _write_eval(d, "final", 24, "expert")
  run = load_run(d)
  assert [(e.tag, e.step) for e in run.evals] == [("start", 0), ("step_12", 12), ("final", 24)]
  assert run.evals[-1].results["frozenlake"] == json.loads(json.dumps(last))
  # a final evaluation that differs (other packs or seeds) is another evaluation: both stay
  summary = summarize(_rollouts("random", range(2000, 2012), 8))
  with open(os.path.join(d, "eval", "final.json"), "w") as f:
    json.dump({"step": 24, "results": {"frozenlake": summary}}, f)
  assert [(e.tag, e.step) for e in load_run(d).evals] == [("start", 0), ("step_12", 12), ("final", 24),
                                                           ("step_24", 24)]


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


def test_orbit_summaries_plot_per_episode_and_unknown_eval_files_are_errors(tmp_path):
  """ORBIT evaluation files (``episode_success`` per episode) are read like CoD's positions; a file under eval/
  that is neither an evaluation nor a known name is an error, never silently skipped."""
  os.makedirs(tmp_path / "eval")
  orbit = {"episode_success": [0.25, 0.5, 0.75], "episode_success_se": [0.1, 0.1, 0.05], "episodes": 3}
  (tmp_path / "eval" / "final.json").write_text(json.dumps({"step": 7, "results": {"maze": orbit}}))
  run = load_run(str(tmp_path))
  series = eval_positions(run.evals)["maze"]
  assert sorted(series) == [0, 1, 2] and series[2][1].tolist() == [0.75] and series[2][2].tolist() == [0.05]
  assert run.rl_effect is None
  (tmp_path / "eval" / "notes.json").write_text(json.dumps({"anything": 1}))
  with pytest.raises(ValueError, match="notes.json: not an evaluation file"):
    load_run(str(tmp_path))


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


# -- a run written by the trainer ---------------------------------------------------------------------------
TRAINED_STEPS = 1



MAIN_JOB = os.path.join(ROOT, "experiments", "tiny_cod_frozenlake.py")


def _main_job_overrides(run_dir: str) -> dict:
  """The README's main job shrunk to seconds: a smaller tiny model, no SFT, one RL step, evaluation at start and
  end on 3 packs of 2 (so eval/start.json, final.json and rl_effect.json are written)."""
  return {"run_dir": run_dir, "model.path": os.path.join(run_dir, "base_model"), "model.tiny.vocab_size": 400,
          "model.tiny.hidden_size": 64, "model.tiny.num_hidden_layers": 1, "model.tiny.num_attention_heads": 2,
          "model.tiny.num_key_value_heads": 1, "model.tiny.intermediate_size": 128, "model.tiny.corpus_packs": 8,
          "sft.steps": 0, "total_steps": TRAINED_STEPS, "data.pack_size": 2, "data.repeats": 2,
          "data.packs_per_step": 1, "train.num_microbatches": 1, "rollout.max_response_tokens": 12,
          "rollout.max_slots": 16, "eval.num_packs": 3, "eval.pack_size": 2, "checkpoint.every": 0,
          "log.progress": False, "log.tensorboard": False}


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, evaluate_launcher):
  """A run directory written by ``launch/train.py`` on the main job's config (as the README runs it, one CPU
  device), and a launch/evaluate.py file of the same config's evaluation packs with the scripted expert."""
  from codjax.train.config import load_experiment, override

  run_dir = str(tmp_path_factory.mktemp("runs") / "tiny_cod_frozenlake")
  over = _main_job_overrides(run_dir)
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)  # one CPU device, as on a user's machine
  proc = subprocess.run([sys.executable, os.path.join(ROOT, "launch", "train.py"), f"--config={MAIN_JOB}",
                         *[f"--config.{k}={v}" for k, v in over.items()]], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "[RL effect] frozenlake" in proc.stdout
  cfg = override(load_experiment(MAIN_JOB).get_config(), over)
  launcher = evaluate_launcher
  results, meta = launcher.evaluate(cfg, launcher.Options(engine="expert"))
  eval_file = launcher.write_eval(str(tmp_path_factory.mktemp("standalone")), results, meta)
  return run_dir, eval_file


def test_every_file_the_trainer_writes_is_read_or_ignored_by_name(trained_run):
  run_dir, _ = trained_run
  names = sorted(os.listdir(os.path.join(run_dir, "eval")))
  assert names == ["final.json", "rl_effect.json", "start.json"]  # what made the notebook fail: rl_effect.json
  run = load_run(run_dir)
  assert [e.tag for e in run.evals] == ["start", "final"] and [e.step for e in run.evals] == [0, TRAINED_STEPS]
  assert set(names) - {f"{e.tag}.json" for e in run.evals} == set(NOT_EVALUATIONS)
  # rl_effect.json: the paired difference final - start over the same packs, recomputed here from the two files
  start = json.load(open(os.path.join(run_dir, "eval", "start.json")))["results"]["frozenlake"]
  final = json.load(open(os.path.join(run_dir, "eval", "final.json")))["results"]["frozenlake"]
  d = np.asarray(final["pack_rewards"]) - np.asarray(start["pack_rewards"])
  effect = run.rl_effect["frozenlake"]
  assert effect["n"] == 3 and effect["mean"] == pytest.approx(d.mean(axis=1).mean())
  assert [m for m, _ in effect["per_position"]] == pytest.approx(d.mean(axis=0).tolist())
  assert format_rl_effect(run.rl_effect).startswith(f"frozenlake: paired diff {d.mean():+.3f} +- ")
  assert len(run.metrics) == len(read_jsonl(os.path.join(run_dir, "metrics.jsonl")))
  assert sorted(run.train_positions()["frozenlake_obscure"]) == [0, 1]


def test_standalone_evaluation_files_load(trained_run):
  _, eval_file = trained_run
  point = load_eval(eval_file)
  saved = json.load(open(eval_file))
  assert point.step == 0 and point.tag == "eval" and point.results == saved["results"]
  assert saved["meta"]["engine"] == "expert" and saved["meta"]["packing"] == "cod"
  with pytest.raises(ValueError, match="not an RL-effect file"):
    load_rl_effect(eval_file)


# -- the notebook -------------------------------------------------------------------------------------------
def test_notebook_executes_on_a_run_written_by_the_trainer(trained_run, monkeypatch):
  run_dir, eval_file = trained_run
  monkeypatch.setenv("CODJAX_RUN_DIRS", run_dir)
  monkeypatch.setenv("CODJAX_EVAL_FILES", eval_file)
  nb = nbformat.read(NOTEBOOK, as_version=4)
  nb.cells.append(nbformat.v4.new_code_cell("import sys; print('KERNEL', sys.executable)"))
  # jupyter_client starts a kernelspec whose argv[0] is "python" with the running interpreter (the venv's)
  NotebookClient(nb, kernel_name="python3", timeout=180,
                 resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}).execute()
  outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
  assert not [o for o in outputs if o.output_type == "error"]
  text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
  assert f"KERNEL {sys.executable}" in text
  logged = len(read_jsonl(os.path.join(run_dir, "metrics.jsonl")))
  assert f"tiny_cod_frozenlake: {logged} logged steps; evaluations at steps [0, {TRAINED_STEPS}]" in text
  assert f"final (step {TRAINED_STEPS})" in text and "pos1" in text  # the closing per-position table
  effect = load_rl_effect(os.path.join(run_dir, "eval", "rl_effect.json"))
  assert "tiny_cod_frozenlake (final - start)" in text and format_rl_effect(effect) in text  # the paired RL effect
  images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
  assert len(images) == 3  # training curves, the run's evaluations, the standalone evaluation file
