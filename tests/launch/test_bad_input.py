"""A newcomer's mistakes and a machine smaller than the config's: one line that names the fix, before anything is
allocated (codjax/common/cli.py, the memory check of codjax/train/memory_plan.py, the mesh fallback of
codjax/parallel/mesh.py, launch/evaluate.py's engine default, launch/serve_fleet.py, launch/plan_memory.py)."""

import glob
import json
import logging
import os
import subprocess
import sys

import ml_collections
import pytest

from codjax.common import cli
from codjax.parallel.mesh import fallback_mesh_sizes, make_mesh
from codjax.train import memory_plan
from codjax.train.config import base_config, load_experiment

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TINY = os.path.join(ROOT, "experiments", "tiny_cod_frozenlake.py")
EVAL_HARD = os.path.join(ROOT, "experiments", "eval_frozenlake_hard.py")
MOE_35B = os.path.join(ROOT, "experiments", "evolve_terminal_qwen3_6_35b_a3b.py")
GIB = 1024**3


def _launch(script, *args, env=None):
  full_env = {**os.environ, **(env or {})}
  full_env.pop(cli.TRACEBACK_ENV, None)
  return subprocess.run([sys.executable, os.path.join(ROOT, "launch", script), *args], capture_output=True,
                        text=True, timeout=300, cwd=ROOT, env=full_env)


def _lines(text):
  return [line for line in text.splitlines() if line.strip()]


# -- one line per mistake ---------------------------------------------------------------------------------------
@pytest.mark.slow  # launcher subprocesses
def test_command_line_mistakes_are_one_line_each():
  typo = _launch("plan_memory.py", f"--config={TINY}", "--config.optim.learnng_rate=1")
  assert typo.returncode == 2 and _lines(typo.stderr) == [
      'plan_memory.py: error: --config.optim.learnng_rate=1: the config has no field "learnng_rate"; '
      'did you mean "learning_rate"?'], typo.stderr
  missing = _launch("plan_memory.py", "--config=experiments/no_such_experiment.py")
  assert missing.returncode == 2 and len(_lines(missing.stderr)) == 1, missing.stderr
  assert "--config=experiments/no_such_experiment.py: no such file" in missing.stderr
  invalid = _launch("plan_memory.py", f"--config={TINY}", "--config.rollout.engine=vlm")
  assert invalid.returncode == 2 and len(_lines(invalid.stderr)) == 1, invalid.stderr
  assert "rollout.engine must be one of ('jax', 'vllm', 'fleet'), got 'vlm'" in invalid.stderr
  # the traceback behind the flag
  shown = _launch("plan_memory.py", f"--config={TINY}", "--config.rollout.engine=vlm", "--traceback")
  assert shown.returncode != 0 and "Traceback (most recent call last)" in shown.stderr


def test_every_launcher_runs_through_the_cli_wrapper():
  for path in sorted(glob.glob(os.path.join(ROOT, "launch", "*.py"))):
    text = open(path).read()
    assert "cli.run(main)" in text and "app.run(" not in text, path


def test_known_noise_is_dropped_and_other_warnings_kept():
  seen = []

  class Keep(logging.Handler):
    def emit(self, record):
      seen.append(record.getMessage())

  for name in ("transformers", "jax._src.xla_bridge"):
    logging.getLogger(name).addHandler(Keep())
  cli.quiet_known_warnings()
  logging.getLogger("transformers").warning("PyTorch was not found. Models won't be available")
  logging.getLogger("transformers").warning("a tokenizer warning that matters")
  logging.getLogger("jax._src.xla_bridge").warning("Unable to initialize backend 'tpu': INTERNAL: libtpu.so")
  logging.getLogger("jax._src.xla_bridge").warning("An NVIDIA GPU may be present on this machine")
  assert seen == ["a tokenizer warning that matters", "An NVIDIA GPU may be present on this machine"]


# -- plan_memory's exit status and the 35B-A3B mesh ------------------------------------------------------------
@pytest.mark.slow  # launcher subprocesses
def test_plan_memory_exit_status_says_whether_it_fits():
  fits = _launch("plan_memory.py", f"--config={MOE_35B}", "--device_memory_gib=141")
  assert fits.returncode == 0, fits.stderr
  assert "mesh          data=3 fsdp=4 tensor=1 expert=2 (24 devices)" in fits.stdout
  assert "device memory 141 GiB: fits" in fits.stdout
  over = _launch("plan_memory.py", f"--config={MOE_35B}", "--device_memory_gib=141", "--config.mesh.fsdp=1",
                 "--config.mesh.expert=8")
  assert over.returncode == 1 and "DOES NOT FIT" in over.stdout
  assert "does not fit 141 GiB per device" in over.stderr


# -- the mesh on a smaller machine ------------------------------------------------------------------------------
def test_mesh_falls_back_for_evaluation_and_refuses_for_training():
  eight = ml_collections.ConfigDict(dict(data=1, fsdp=8, tensor=1, expert=1))
  sizes, note = fallback_mesh_sizes(eight, 1)
  assert sizes == {"data": 1, "fsdp": 1, "tensor": 1, "expert": 1}
  assert note.startswith("mesh: the config's data=1 fsdp=8 tensor=1 expert=1 does not fit the 1 device(s)")
  assert fallback_mesh_sizes(eight, 8) == ({"data": 1, "fsdp": 8, "tensor": 1, "expert": 1}, "")
  fill = ml_collections.ConfigDict(dict(data=2, fsdp=-1, tensor=1))
  assert fallback_mesh_sizes(fill, 8) == ({"data": 2, "fsdp": 4, "tensor": 1, "expert": 1}, "")
  assert fallback_mesh_sizes(fill, 3)[0] == {"data": 1, "fsdp": 3, "tensor": 1, "expert": 1}
  import jax

  with pytest.raises(ValueError, match=r"needs 16 devices, 8 available: .*--config.mesh.fsdp=-1"):
    make_mesh(1, 16, 1, devices=jax.devices())


# -- the engine default -----------------------------------------------------------------------------------------
def test_vllm_config_without_vllm_evaluates_on_the_jax_sampler(evaluate_launcher):
  cfg = load_experiment(EVAL_HARD).get_config()
  assert cfg.rollout.engine == "vllm"
  engine, note = evaluate_launcher.default_engine(cfg, installed=lambda: False)
  assert engine == "jax" and "vLLM is not installed" in note and "--engine=jax" in note
  assert evaluate_launcher.default_engine(cfg, installed=lambda: True) == ("vllm", "")


# -- the memory check before allocating -------------------------------------------------------------------------
def _tiny_eval_config(ckpt, **rollout):
  cfg = load_experiment(EVAL_HARD).get_config()
  cfg.model.path = ckpt
  cfg.rollout.update(engine="jax", **rollout)
  return cfg


def _cache_bytes(ckpt, slots, positions):
  """The tiny checkpoint's KV cache by hand: k and v, L x K x H per position, bfloat16."""
  with open(os.path.join(ckpt, "config.json")) as f:
    c = json.load(f)
  head = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
  return 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * head * positions * slots * 2


def test_evaluation_that_does_not_fit_is_refused_before_loading(evaluate_launcher, tiny_ckpt, tmp_path,
                                                                monkeypatch):
  """256 slots x 32,001 positions on a host of 2 GiB: refused in one line naming rollout.max_slots, before the
  model is loaded or the output directory is written (the engine is never built)."""
  cfg = _tiny_eval_config(tiny_ckpt)
  one = {"data": 1, "fsdp": 1, "tensor": 1, "expert": 1}
  rows = memory_plan.evaluation_rows(cfg, one, cpu=True)
  cache = _cache_bytes(tiny_ckpt, 257, 32_001)  # max_slots + 1 slots of max_prompt + max_response + 1
  assert rows["jax engine KV cache (257 slots x 32001)"] == cache
  assert rows["jax engine working copies (CPU)"] == 4 * cache
  monkeypatch.setenv(memory_plan.MEMORY_ENV, "2")

  def never(*a, **k):
    raise AssertionError("the engine was built before the memory check")

  monkeypatch.setattr(evaluate_launcher, "_CheckpointEngine", never)
  monkeypatch.setattr(evaluate_launcher, "checkpoint_mesh", lambda cfg: one)
  out = tmp_path / "out"
  with pytest.raises(memory_plan.MemoryRefused) as refused:
    evaluate_launcher.evaluate(cfg, evaluate_launcher.Options(engine="jax"), str(out))
  text = str(refused.value)
  assert "\n" not in text and "--config.rollout.max_slots (now 256;" in text and "--nomemory_check" in text
  assert "2.00 GiB is available (CODJAX_MEMORY_GIB=2)" in text
  assert not out.exists()
  # the suggested slot count fits 2 GiB by the same hand calculation
  fit = int(text.split("(now 256; ")[1].split(" fits")[0])
  assert 5 * _cache_bytes(tiny_ckpt, fit + 1, 32_001) <= 2 * GIB < 5 * _cache_bytes(tiny_ckpt, fit + 3, 32_001)
  # enough memory, or the override: the check lets it through (to the engine, here the stub)
  for env, opts in (("1000", {}), ("2", {"memory_check": False})):
    monkeypatch.setenv(memory_plan.MEMORY_ENV, env)
    with pytest.raises(AssertionError, match="engine was built"):
      evaluate_launcher.evaluate(cfg, evaluate_launcher.Options(engine="jax", **opts), str(tmp_path / env))


def test_training_plan_is_checked_against_the_budget():
  c = base_config()
  c.model.update(make_tiny=True, path="/nonexistent/tiny")
  p = memory_plan.plan(c)
  assert memory_plan.check_training_memory(c, budget=(p.total, "test")).total == p.total
  with pytest.raises(memory_plan.MemoryRefused, match=r"memory plan: training needs .* but .* \(test\); lower"):
    memory_plan.check_training_memory(c, budget=(p.total - 1, "test"))


# -- serve_fleet's context length -------------------------------------------------------------------------------
@pytest.mark.slow  # a launcher subprocess
def test_serve_fleet_refuses_a_context_past_the_model_positions(tiny_ckpt):
  with open(os.path.join(tiny_ckpt, "config.json")) as f:
    limit = json.load(f)["max_position_embeddings"]
  proc = _launch("serve_fleet.py", f"--model_path={tiny_ckpt}", f"--max_model_len={limit + 1}",
                 env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": ""})
  assert proc.returncode == 2 and len(_lines(proc.stderr)) == 1, proc.stderr
  assert f"--max_model_len={limit + 1} exceeds the model's max_position_embeddings ({limit}" in proc.stderr


# -- the rollout benchmark's JAX path without torch -------------------------------------------------------------
@pytest.mark.slow  # a subprocess
def test_rollout_benchmark_jax_engines_need_no_torch(tmp_path):
  code = f"""
import sys
sys.modules["torch"] = None  # import torch raises ImportError
sys.path.insert(0, {os.path.join(ROOT, "benchmarks")!r})
sys.argv = ["rollout.py"]
import rollout
from absl import flags
rollout.bench_config = lambda name, ckpt_dir: []  # the engines themselves are not run here
flags.FLAGS(["rollout.py", "--engines=jax,jax_workers", "--ckpt_dir={tmp_path}"])
rollout.main([])
try:
  flags.FLAGS(["rollout.py", "--engines=jax,hf", "--ckpt_dir={tmp_path}"])
  rollout.main([])
except ImportError:
  print("hf needs torch")
"""
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "hf needs torch" in proc.stdout
