"""The smoke preset (codjax.train.smoke): every experiment's shrunk config validates, and each CPU experiment runs
every stage it has through ``launch/train.py --smoke`` (slow: about a minute each on 2 idle cores).

What a run must contain is read from the experiment's own config (does it warm-start, evaluate before RL,
checkpoint), independently of the smoke code; paper-scale configs (Qwen3-8B and larger) need weights, so only
their shrunk configs are validated."""

import glob
import json
import os
import subprocess
import sys

import pytest

from codjax.train.checkpoint import committed_steps
from codjax.train.config import load_experiment, validate
from codjax.train.smoke import RL_STEPS, SFT_STEPS, apply_smoke, smoke_overrides

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STEMS = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(ROOT, "experiments", "*.py"))
               if not os.path.basename(p).startswith("_"))
CPU_STEMS = ["tiny_cod_frozenlake", "orbit_tiny", "orbit_tiny_learns", "evoharness_tiny", "evolve_tiny_maze"]


def config(stem):
  return load_experiment(os.path.join(ROOT, "experiments", f"{stem}.py")).get_config()


@pytest.mark.parametrize("stem", STEMS)
def test_every_experiment_s_smoke_config_validates(stem, monkeypatch):
  monkeypatch.chdir(ROOT)  # experiments that extend another one load it by its repository path
  orig = config(stem)
  cfg = validate(apply_smoke(config(stem)))
  assert cfg.run_dir == orig.run_dir.rstrip("/") + "_smoke" and cfg.name == orig.name + "_smoke"
  assert cfg.total_steps == min(orig.total_steps, 2)
  assert cfg.sft.steps == min(orig.sft.steps, 4)
  assert cfg.sft.steps == 0 or (cfg.sft.warmup_steps < cfg.sft.steps and cfg.sft.num_packs <= 8)
  assert cfg.eval.num_packs <= 2 and cfg.data.packs_per_step <= 2 and cfg.rollout.max_response_tokens <= 16
  assert (cfg.checkpoint.every > 0) == (orig.checkpoint.every > 0 and orig.total_steps > 0) or orig.total_steps == 0
  assert not (cfg.model.make_tiny and cfg.model.path)  # a generated smoke model never lands in a real run's path
  assert "run_dir" not in smoke_overrides(cfg) and "name" not in smoke_overrides(cfg)  # no second suffix


def test_a_short_sft_on_the_command_line_is_not_refused_under_smoke():
  """``sft.steps`` below the experiment's warm-up: the warm-up follows the steps."""
  cfg = config("tiny_cod_frozenlake")
  cfg.sft.steps = 3
  cfg = validate(apply_smoke(cfg))
  assert (cfg.sft.steps, cfg.sft.warmup_steps) == (3, 2)


def _run(args, timeout=900):
  """A launcher as a user runs it: one CPU device (the suite's fake devices are dropped)."""
  flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                   if not f.startswith("--xla_force_host_platform_device_count"))
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags)
  return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("stem", CPU_STEMS)
def test_the_smoke_run_goes_through_every_stage(stem, tmp_path):
  orig = config(stem) if stem != "evolve_tiny_maze" else None
  extra = []
  if stem == "evolve_tiny_maze":  # its training tasks are evolved lineages: a small set first
    lineages = str(tmp_path / "lineages")
    proc = _run([os.path.join(ROOT, "launch", "evolve.py"), "--env=maze_compact", "--lineages=2",
                 "--generations=1", "--width=1", f"--out={lineages}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    extra = [f"--config.data.lineages.dir={lineages}"]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
      orig = config(stem)
    finally:
      os.chdir(cwd)
  run_dir = str(tmp_path / stem)
  proc = _run([os.path.join(ROOT, "launch", "train.py"), f"--config=experiments/{stem}.py", "--smoke",
               f"--config.run_dir={run_dir}", *extra])
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
  out = run_dir + "_smoke"
  assert not os.path.exists(run_dir)  # the smoke run never writes into the run directory it was given
  cfg = json.load(open(os.path.join(out, "config.json")))
  steps = min(orig.total_steps, RL_STEPS)
  assert cfg["total_steps"] == steps
  base = cfg["base_model"]
  assert os.path.dirname(base["path"]) == str(tmp_path / "base_models")
  assert os.path.basename(base["path"]).startswith(f"{orig.name}_smoke-") and base["generated_by"]["tiny"]
  if orig.sft.steps:
    assert os.path.isfile(os.path.join(out, "sft_model", "config.json"))
    sft = [json.loads(line) for line in open(os.path.join(out, "sft.jsonl"))]
    assert sft[-1]["step"] == min(orig.sft.steps, SFT_STEPS)
  metrics = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
  assert [m["step"] for m in metrics if "train/loss" in m] == list(range(1, steps + 1))
  assert os.path.isfile(os.path.join(out, "eval", "start.json")) == bool(orig.eval.at_start)
  assert os.path.isfile(os.path.join(out, "eval", "final.json")) == bool(orig.eval.at_end)
  if orig.checkpoint.every:
    assert committed_steps(os.path.join(out, "checkpoints"))[-1] == steps
  if stem == "tiny_cod_frozenlake":  # this run is an SFT run: RL seeds from it under the smoke preset too
    proc = _run([os.path.join(ROOT, "launch", "rl_seeds.py"), f"--config=experiments/{stem}.py", f"--sft_run={out}",
                 "--seeds=1", "--smoke"])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    seed_cfg = json.load(open(os.path.join(out + "_rl_seeds", "seed1", "config.json")))
    assert seed_cfg["total_steps"] == steps and seed_cfg["eval"]["num_packs"] <= 2
    assert seed_cfg["model"]["path"] == base["path"] and not seed_cfg["model"]["make_tiny"]
    assert os.path.isfile(os.path.join(out + "_rl_seeds", "rl_seeds.md"))
