"""launch/rl_seeds.py: RL seeds from one SFT model, on a run the trainer wrote (the README's main job shrunk to
seconds), and codjax/eval/rl_seeds.py's table.

The SFT run comes from launch/train.py itself (2 SFT steps, no RL); the launcher then runs two RL seeds from its
SFT model. What is checked against values computed here, not by the code under test: every seed's run holds
the SFT run's model byte for byte and a config with that seed, the SFT run's base model and step count; each
seed's RL effect is the paired difference of its own start and final evaluations (recomputed from their pack
rewards); the printed table and rl_seeds.json carry those numbers; a second invocation trains nothing and
prints the same table; bad input fails with a message before any run starts.
"""

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from codjax.eval.rl_seeds import SeedRow, format_table, read_row

pytestmark = pytest.mark.slow  # four launch/train.py runs of the tiny model (~4 min on 2 cores)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAIN_JOB = os.path.join(ROOT, "experiments", "tiny_cod_frozenlake.py")
LAUNCHER = os.path.join(ROOT, "launch", "rl_seeds.py")

# the main job shrunk to a minute: its tiny model with a 400-entry vocabulary, 120 SFT steps of 8 episodes (enough
# to answer in the protocol's format, so rewards vary between packs), 2 RL steps at a learning rate large enough
# to change what the policy samples, evaluation on 8 packs of 2
SHRUNK = {"model.tiny.vocab_size": 400, "model.tiny.corpus_packs": 8, "sft.num_packs": 60, "sft.batch_size": 8,
          "data.pack_size": 2, "data.repeats": 4, "data.packs_per_step": 2, "train.num_microbatches": 1,
          "rollout.max_slots": 16, "eval.num_packs": 8, "eval.pack_size": 2, "checkpoint.every": 0,
          "log.progress": False, "log.tensorboard": False}
SFT_STEPS = 120
RL_STEPS = 2
RL_LR = 0.03


def _env():
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)  # one CPU device, as on a user's machine
  return env


def _run(args, timeout=900):
  return subprocess.run([sys.executable, *args], cwd=ROOT, env=_env(), capture_output=True, text=True,
                        timeout=timeout)


def _tree_digest(d):
  h = hashlib.sha256()
  for name in sorted(os.listdir(d)):
    h.update(name.encode())
    with open(os.path.join(d, name), "rb") as f:
      h.update(f.read())
  return h.hexdigest()


def _paired(run_dir):
  """(mean, se, per-position means, before, after) recomputed from the run's start and final pack rewards."""
  load = lambda tag: json.load(open(os.path.join(run_dir, "eval", f"{tag}.json")))["results"]["frozenlake"]  # noqa: E731
  start, final = load("start"), load("final")
  a, b = np.asarray(start["pack_rewards"]), np.asarray(final["pack_rewards"])
  d = (b - a).mean(axis=1)
  return d.mean(), d.std(ddof=1) / np.sqrt(len(d)), (b - a).mean(axis=0), a.mean(), b.mean()


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
  """A run directory whose SFT warm start launch/train.py finished (no RL steps, no evaluation)."""
  run_dir = str(tmp_path_factory.mktemp("runs") / "sft_source")
  over = dict(SHRUNK, run_dir=run_dir, **{"model.path": os.path.join(run_dir, "base_model"),
                                          "sft.steps": SFT_STEPS, "total_steps": 0, "eval.at_start": False,
                                          "eval.at_end": False})
  proc = _run([os.path.join(ROOT, "launch", "train.py"), f"--config={MAIN_JOB}",
               *[f"--config.{k}={v}" for k, v in over.items()]])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert os.path.isfile(os.path.join(run_dir, "sft_model", "config.json"))
  return run_dir


def _sweep_args(sft_dir, out_root, seeds="1,2"):
  over = dict(SHRUNK, total_steps=RL_STEPS, **{"optim.learning_rate": RL_LR})
  return [LAUNCHER, f"--config={MAIN_JOB}", f"--sft_run={sft_dir}", f"--seeds={seeds}", f"--out_root={out_root}",
          *[f"--config.{k}={v}" for k, v in over.items()]]


@pytest.fixture(scope="module")
def sweep(sft_run, tmp_path_factory):
  out_root = str(tmp_path_factory.mktemp("sweep") / "seeds")
  proc = _run(_sweep_args(sft_run, out_root))
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  return out_root, proc.stdout


def test_each_seed_trains_rl_from_the_same_sft_model(sft_run, sweep):
  out_root, _ = sweep
  want = _tree_digest(os.path.join(sft_run, "sft_model"))
  source_cfg = json.load(open(os.path.join(sft_run, "config.json")))
  for seed in (1, 2):
    d = os.path.join(out_root, f"seed{seed}")
    assert _tree_digest(os.path.join(d, "sft_model")) == want
    cfg = json.load(open(os.path.join(d, "config.json")))
    assert cfg["seed"] == seed and cfg["run_dir"] == d and cfg["total_steps"] == RL_STEPS
    assert cfg["optim"]["learning_rate"] == RL_LR  # the --config.* flags reach every seed
    assert cfg["model"]["path"] == os.path.join(sft_run, "base_model") == source_cfg["model"]["path"]
    assert cfg["sft"]["steps"] == SFT_STEPS
    steps = [json.loads(line)["step"] for line in open(os.path.join(d, "metrics.jsonl"))
             if "train/loss" in json.loads(line)]
    assert steps == list(range(1, RL_STEPS + 1))  # RL ran; SFT did not run again (no sft.jsonl written here)
    assert not os.path.exists(os.path.join(d, "sft.jsonl"))
    rec = json.load(open(os.path.join(d, "rl_seed.json")))
    assert rec["seed"] == seed and rec["wall_s"] > 0 and 0.1 < rec["peak_rss_gib"] < 24 and not rec["resumed"]
  # the seeds sample differently: their start evaluations (same SFT model, same packs) differ
  starts = [json.load(open(os.path.join(out_root, f"seed{s}", "eval", "start.json")))["results"]["frozenlake"]
            ["pack_rewards"] for s in (1, 2)]
  assert starts[0] != starts[1]


def test_the_table_holds_each_seeds_paired_effect(sweep):
  out_root, stdout = sweep
  summary = json.load(open(os.path.join(out_root, "rl_seeds.json")))
  assert [r["seed"] for r in summary["rows"]] == [1, 2]
  for r in summary["rows"]:
    mean, se, per, before, after = _paired(r["run_dir"])
    assert r["mean"] == pytest.approx(mean) and r["se"] == pytest.approx(se)
    assert r["per_position"] == pytest.approx(per.tolist())
    assert r["before"] == pytest.approx(before) and r["after"] == pytest.approx(after)
    assert se > 0 and r["z"] == pytest.approx(mean / se)
    assert f"| {r['seed']} | {before:.3f} -> {after:.3f} |" in stdout
    assert f"{mean:+.3f} ± {se:.3f} ({mean / se:+.1f} s.e.)" in stdout
  assert summary["min_z"] == pytest.approx(min(r["z"] for r in summary["rows"]))
  assert open(os.path.join(out_root, "rl_seeds.md")).read().strip() in stdout
  assert "of 2 RL seeds at or above 3 standard errors" in stdout


def test_rl_through_two_jax_workers_trains_on_what_one_engine_samples(sft_run, sweep, tmp_path):
  """``rollout.jax_workers=2`` (two samplers side by side, codjax.rollout.jax_workers) through the launcher and
  the trainer: seed 1's run samples the same episodes as the sweep's single-engine seed 1 (same evaluation pack
  rewards before and after, same rollout rewards and token counts per step), and trains to the same losses up to
  float rounding (the workers' batches have other shapes)."""
  out_root = str(tmp_path / "workers")
  proc = _run(_sweep_args(sft_run, out_root, seeds="1") + ["--config.rollout.jax_workers=2"])
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  one, two = (os.path.join(root, "seed1") for root in (sweep[0], out_root))
  assert json.load(open(os.path.join(two, "config.json")))["rollout"]["jax_workers"] == 2
  for tag in ("start", "final"):
    rewards = [json.load(open(os.path.join(d, "eval", f"{tag}.json")))["results"]["frozenlake"]["pack_rewards"]
               for d in (one, two)]
    assert rewards[0] == rewards[1], tag
  rows = [[json.loads(line) for line in open(os.path.join(d, "metrics.jsonl"))] for d in (one, two)]
  rows = [[r for r in rs if "train/loss" in r] for rs in rows]
  assert len(rows[0]) == len(rows[1]) == RL_STEPS
  for a, b in zip(*rows):
    same = [k for k in a if k.startswith(("reward", "generated_tokens", "response_tokens", "batch/", "hint_parse",
                                          "format_error"))]
    assert len(same) >= 10 and {k: a[k] for k in same} == {k: b.get(k) for k in same}
    assert b["train/loss"] == pytest.approx(a["train/loss"], rel=1e-4, abs=1e-6)


def test_a_second_invocation_reads_the_finished_seeds_back(sft_run, sweep):
  out_root, first = sweep
  metrics = [os.path.join(out_root, f"seed{s}", "metrics.jsonl") for s in (1, 2)]
  before = [os.stat(p).st_mtime_ns for p in metrics]
  proc = _run(_sweep_args(sft_run, out_root))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.count("finished earlier") == 2 and "launch/train.py" not in proc.stdout
  assert [os.stat(p).st_mtime_ns for p in metrics] == before
  table = lambda out: out[out.index("| RL seed |"):]  # noqa: E731
  assert table(proc.stdout) == table(first)


def test_bad_input_fails_before_any_run(sft_run, tmp_path):
  out_root = str(tmp_path / "never")
  cases = [
      ([f"--sft_run={tmp_path}"], "no sft_model/config.json"),
      ([f"--sft_run={sft_run}", "--config.seed=3"], "--config.seed is set per seed"),
      ([f"--sft_run={sft_run}", "--seeds=1,x"], "--seeds must be integers"),
      ([f"--sft_run={sft_run}", "--seeds=2,2"], "distinct seeds"),
      ([f"--sft_run={sft_run}", "--config.eval.at_start=False"], "eval.at_start and eval.at_end"),
      ([f"--sft_run={sft_run}", "--config.data.repeats=0"], "repeats"),
  ]
  for extra, message in cases:
    proc = _run([LAUNCHER, f"--config={MAIN_JOB}", f"--out_root={out_root}", *extra], timeout=120)
    assert proc.returncode != 0 and message in proc.stderr, (extra, proc.stderr[-1500:])
  assert not os.path.exists(out_root)


def test_format_table_marks_the_seeds_over_the_bar(tmp_path):
  row = lambda seed, mean, se: SeedRow(seed=seed, run_dir="", label="x", n=600, before=0.25, after=0.25 + mean,  # noqa: E731
                                       mean=mean, se=se, per_position=(0.0, mean), hint_acc=(0.8, 0.7),
                                       hint_parse=(0.99, 0.98), wall_s=371.0, peak_rss_gib=2.94)
  text = format_table([row(1, 0.05, 0.01), row(2, 0.02, 0.01)])
  assert "| 1 | 0.250 -> 0.300 | **+0.050 ± 0.010 (+5.0 s.e.)** | +0.000 / +0.050 | 0.80 -> 0.70 (0.990 -> 0.980) " \
         "| 6 min 11 s, 2.9 GiB |" in text
  assert "| 2 | 0.250 -> 0.270 | +0.020 ± 0.010 (+2.0 s.e.) |" in text
  assert text.endswith("1 of 2 RL seeds at or above 3 standard errors (lowest +2.0)")
  with pytest.raises(FileNotFoundError, match="rl_effect.json is missing"):
    read_row(str(tmp_path), 1)
