"""benchmarks/gpu_check.py in --mode=cpu: every section runs and passes, and the report holds the
figures the GPU run is read for (parity errors within their tolerances, positive throughputs, vLLM greedy
agreement after a weight sync, the memory plan against the measured peak)."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "benchmarks", "gpu_check.py")
SECTIONS = ("platform", "torch_peer", "parity", "train_step", "memory_plan", "sampler", "vllm")


def run_check(out, *args, timeout=600):
  """The script in a subprocess on one CPU device (the suite's fake-device flag removed: one device, as a user
  runs it)."""
  env = dict(os.environ)
  env["XLA_FLAGS"] = re.sub(r"--xla_force_host_platform_device_count=\S*", "", env.get("XLA_FLAGS", "")).strip()
  proc = subprocess.run([sys.executable, SCRIPT, f"--out={out}", *args], capture_output=True, text=True,
                        timeout=timeout, cwd=ROOT, env=env)
  report = json.load(open(out)) if os.path.exists(out) else None
  return proc, report


@pytest.mark.slow  # the whole CPU mode, vLLM engine included (~90 s on the shared 2-core machine)
def test_cpu_mode_passes_every_section(tmp_path):
  proc, report = run_check(str(tmp_path / "gpu_check.json"), "--mode=cpu")
  assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
  assert report["ok"] and report["mode"] == "cpu"
  sections = report["sections"]
  assert tuple(sections) == SECTIONS
  for name, s in sections.items():
    assert s["ok"] and "error" not in s and s["checks"] and s["seconds"] > 0, (name, s)

  assert sections["platform"]["backend"] == "cpu" and sections["platform"]["codjax_fraction_next_to_vllm"] == 0.65
  p = sections["parity"]
  assert p["float32_rel_err"] <= p["tolerances"]["float32"]
  assert 0 < p["bfloat16_rel_err"] <= p["tolerances"]["bfloat16"]  # bf16 does differ, within tolerance
  assert p["float32_argmax_agreement"] == 1.0 and p["bfloat16_argmax_agreement"] > 0.9
  assert p["cudnn_vs_xla_rel_err"] == "n/a (no cudnn)"

  peer = sections["torch_peer"]
  assert peer["tokens_per_s"] > 0 and peer["finite"] and peer["mode"] == "cpu" and peer["rows"] == 2
  assert peer["impl"].startswith("transformers") and "gradient checkpointing True" in peer["impl"]
  t = sections["train_step"]
  assert t["tokens_per_s"] > 0 and t["mfu"] is None and t["achieved_tflops"] > 0
  assert t["vs_torch"] == pytest.approx(t["tokens_per_s"] / peer["tokens_per_s"])
  m = sections["memory_plan"]
  assert m["measured_as"].startswith("XLA compiled peak") and 0.67 <= m["ratio"] <= 1.5
  assert sections["sampler"]["decode_tokens_per_s"] > 0 and sections["sampler"]["generate_tokens_per_s"] > 0
  v = sections["vllm"]
  assert v["greedy_agreement"] >= 0.9 > v["greedy_agreement_before_sync"] and v["weight_sync_s"] > 0

  header = re.search(r"^\|\s+section \|\s+check \|\s+value \|\s+criterion \|\s+ok \|$", proc.stdout, re.M)
  assert header, proc.stdout[-3000:]
  table = proc.stdout[header.start():]
  rows = re.findall(r"^\|\s+(\w+) \|.*\|\s+(yes|NO) \|$", table, re.M)
  assert {name for name, _ in rows} == set(SECTIONS) and all(ok == "yes" for _, ok in rows)
  assert len(rows) == sum(len(s["checks"]) for s in sections.values())  # one row per check
  assert "all checks passed" in proc.stdout
  for name in SECTIONS:  # progress lines with the elapsed time
    assert re.search(rf"\[gpu_check +[\d.]+ s\] {name}: ok", proc.stdout)


def test_a_failed_check_fails_the_run(tmp_path):
  """--mode=full on a CPU-only machine: the platform check fails (no GPU backend); the report says so and the
  exit status is non-zero."""
  proc, report = run_check(str(tmp_path / "g.json"), "--mode=full", "--sections=platform", timeout=300)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert report["ok"] is False and list(report["sections"]) == ["platform"]
  platform = report["sections"]["platform"]
  assert platform["ok"] is False and {"check": "backend", "value": "cpu", "criterion": "gpu", "ok": False} in \
      platform["checks"]
  assert "FAILED: platform" in proc.stdout


def test_overrides_reach_the_sections_and_the_torch_child(tmp_path):
  """--remat, --batch, --extra_attention and --sampler_param_dtype change what is measured, in this process and in
  the torch peer's (which must run the same shapes for the ratio to be reported)."""
  proc, report = run_check(str(tmp_path / "g.json"), "--mode=cpu", "--sections=torch_peer,train_step,sampler",
                           "--remat=dots", "--batch=3", "--extra_attention=blockwise",
                           "--sampler_param_dtype=bfloat16", timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert report["shapes"]["remat"] == "dots" and report["shapes"]["batch"] == 3
  s = report["sections"]
  assert s["torch_peer"]["rows"] == 3 and s["torch_peer"]["mode_shapes"] == report["shapes"]
  t = s["train_step"]
  assert "remat dots" in t["model"] and t["rows"] == 3 and set(t["by_attention"]) == {"xla", "blockwise"}
  assert t["attention_errors"] == {} and "vs_torch" in t
  # float32 compute: the engine keeps bfloat16 parameters as they are (it only ever narrows them)
  assert "params bfloat16" in s["sampler"]["model"] and s["sampler"]["engine_param_dtypes"] == ["bfloat16"]
