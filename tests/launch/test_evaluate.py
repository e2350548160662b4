"""launch/evaluate.py end to end (subprocesses, as a user runs it): the JAX engine on the tiny checkpoint and
the scripted expert, over packs of the tiny FrozenLake experiment's evaluation block."""

import json
import math
import os
import signal
import subprocess
import sys
import time

from codjax.agents.cod import CodSettings, run_cod
from codjax.agents.episode import PolicyBackend
from codjax.envs.experts import make_policy
from codjax.train.config import load_experiment
from codjax.workflows.cod_summary import summarize
from codjax.workflows.packs import env_specs, eval_packs

import pytest

pytestmark = pytest.mark.slow  # launcher subprocesses (~75 s)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIG = os.path.join(ROOT, "experiments", "tiny_cod_frozenlake.py")


def run_evaluate(out_dir, *args, check=True):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)  # one CPU device: the experiment's mesh takes every device there is
  proc = subprocess.run([sys.executable, os.path.join(ROOT, "launch", "evaluate.py"), f"--config={CONFIG}",
                         f"--out={out_dir}", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=900)
  if check:
    assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def load_config():
  return load_experiment(CONFIG).get_config()


def load(out_dir):
  with open(os.path.join(out_dir, "eval.json")) as f:
    return json.load(f)


def check_cod_summary(r, n, size):
  assert r["n"] == n and r["pack_size"] == size
  for key in ("reward_mean", "reward_se", "format_error_rate"):
    assert len(r[key]) == size and all(isinstance(x, float) and math.isfinite(x) for x in r[key])
  assert all(0.0 <= m <= 1.0 for m in r["reward_mean"]) and all(s >= 0.0 for s in r["reward_se"])
  assert 0.0 <= r["hint_parse_rate"] <= 1.0


def test_expert_matches_the_trainers_eval_packs(tmp_path, tiny_ckpt):
  n, size = 24, 4
  proc = run_evaluate(tmp_path, "--engine=expert", f"--tokenizer={tiny_ckpt}", f"--config.eval.num_packs={n}",
                      f"--config.eval.pack_size={size}")
  got = load(tmp_path)
  r = got["results"]["frozenlake"]
  check_cod_summary(r, n, size)
  assert got["meta"]["engine"] == "expert" and got["meta"]["num_packs"] == n
  assert "expert / frozenlake" in proc.stdout and "pos3" in proc.stdout  # the printed table
  # the same packs and policy in process give the same numbers: evaluate.py adds nothing of its own
  cfg = load_config()
  spec = env_specs(cfg.data.envs)[0]
  packs = eval_packs(spec, n, size, cfg.data.n_train, cfg.data.n_test, cfg.data.split_seed, split="test")
  assert got["meta"]["pack_seeds"]["frozenlake"] == [p.pack_seed for p in packs]
  want = summarize(run_cod(PolicyBackend(make_policy(spec.name, "expert"), seed=cfg.seed), packs, 1,
                           CodSettings(protocol="compact")))
  assert r["reward_mean"] == want["reward_mean"] and r["reward_se"] == want["reward_se"]
  # the expert's CoD effect (benchmarks/README.md: tiny preset 0.26 -> 0.93), and its hints always parse
  assert r["reward_mean"][-1] > r["reward_mean"][0] + 0.3 and r["hint_parse_rate"] == 1.0
  # token-counted with the given tokenizer, never cut
  assert r["generated_tokens"] > 0 and r["truncated_episodes"] == 0


def test_expert_random_frac_evaluates_the_sft_teacher(tmp_path):
  """``--expert_random_frac`` runs sft.expert_random_frac's teacher: the same packs, worse than the expert."""
  n, size = 40, 4
  run_evaluate(tmp_path / "e", "--engine=expert", f"--config.eval.num_packs={n}", f"--config.eval.pack_size={size}")
  run_evaluate(tmp_path / "m", "--engine=expert", "--expert_random_frac=0.5", f"--config.eval.num_packs={n}",
               f"--config.eval.pack_size={size}")
  e, m = load(tmp_path / "e")["results"]["frozenlake"], load(tmp_path / "m")["results"]["frozenlake"]
  assert sum(m["reward_mean"]) < sum(e["reward_mean"]) - 0.3
  assert m["hint_parse_rate"] == 1.0  # update episodes stay the expert's


def test_jax_engine_on_the_tiny_checkpoint(tmp_path, tiny_ckpt):
  n, size = 3, 2
  proc = run_evaluate(tmp_path, "--engine=jax", f"--config.model.path={tiny_ckpt}", "--config.model.make_tiny=False",
                      f"--config.eval.num_packs={n}", f"--config.eval.pack_size={size}",
                      "--config.rollout.max_response_tokens=16", "--config.rollout.max_slots=4",
                      "--config.rollout.max_prompt_tokens=1536", "--config.train.seq_len=1536")
  got = load(tmp_path)
  assert got["meta"]["engine"] == "jax" and got["meta"]["model_path"] == tiny_ckpt
  r = got["results"]["frozenlake"]
  check_cod_summary(r, n, size)
  # a random model: every reply is sampled (16-token budget, flagged when cut), counted, and logged
  assert r["generated_tokens"] > 0 and r["response_tokens_mean"] <= 16
  assert r["truncated_episodes"] >= 1
  assert f"jax:{os.path.basename(tiny_ckpt)} / frozenlake" in proc.stdout


def test_eval_packing_selects_the_ralph_loop(tmp_path):
  """``--config.eval.packing=ralph_sample``: each pack repeats its first test task; meta records the packing."""
  n, size = 6, 3
  run_evaluate(tmp_path, "--engine=expert", f"--config.eval.num_packs={n}", f"--config.eval.pack_size={size}",
               "--config.eval.packing=ralph_sample")
  got = load(tmp_path)
  assert got["meta"]["packing"] == "ralph_sample" and got["meta"]["template_kwargs"] == {"enable_thinking": False}
  cfg = load_config()
  spec = env_specs(cfg.data.envs)[0]
  packs = eval_packs(spec, n, size, cfg.data.n_train, cfg.data.n_test, cfg.data.split_seed, packing="ralph_sample")
  assert all(len(set(p.task_seeds)) == 1 for p in packs)
  assert got["meta"]["pack_seeds"]["frozenlake"] == [p.pack_seed for p in packs]
  check_cod_summary(got["results"]["frozenlake"], n, size)


def test_bad_invocations_fail_with_a_clear_message(tmp_path):
  proc = run_evaluate(tmp_path, "--engine=jax", "--config.model.path=/nonexistent/ckpt",
                      "--config.model.make_tiny=False", check=False)
  assert proc.returncode != 0 and "set --config.model.path to an HF directory" in proc.stderr
  proc = run_evaluate(tmp_path, "--engine=openai", check=False)
  assert proc.returncode != 0 and "needs --base_url and --model_name" in proc.stderr
  proc = run_evaluate(tmp_path, "--engine=expert", "--config.eval.packing=ralph", check=False)
  assert proc.returncode != 0 and "eval.packing must be one of" in proc.stderr
  assert not os.path.exists(os.path.join(tmp_path, "eval.json"))


JAX_ARGS = ("--engine=jax", "--config.model.make_tiny=False", "--config.eval.num_packs=8", "--config.eval.pack_size=2",
            "--config.rollout.max_response_tokens=16", "--config.rollout.max_slots=2",
            "--config.rollout.max_prompt_tokens=1536", "--config.train.seq_len=1536")


def test_jax_evaluation_stopped_by_a_signal_resumes_to_the_uninterrupted_table(tmp_path, tiny_ckpt, pack_records):
  """SIGTERM mid-evaluation: the finished packs are on disk, the message says how to resume, and the resumed
  evaluation's table equals one that ran straight through (replies are seeded per episode and turn)."""
  args = (f"--config.model.path={tiny_ckpt}", *JAX_ARGS)
  straight = run_evaluate(tmp_path / "straight", *args)
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)
  out = tmp_path / "stopped"
  proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "launch", "evaluate.py"), f"--config={CONFIG}",
                           f"--out={out}", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  deadline = time.monotonic() + 600
  while pack_records(out) < 1 and proc.poll() is None and time.monotonic() < deadline:
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  _, err = proc.communicate(timeout=120)
  kept = pack_records(out)
  assert proc.returncode == 130, err[-3000:]
  assert 1 <= kept < 8, f"{kept} packs finished before the signal"
  assert f"{kept} finished pack(s) are kept in {out / 'eval_records.jsonl'}" in err and "--resume" in err
  assert not (out / "eval.json").exists()
  resumed = run_evaluate(out, *args, "--resume")
  assert f"resuming: {kept} finished pack(s)" in resumed.stdout
  a, b = load(tmp_path / "straight"), load(out)
  assert json.dumps(a["results"], sort_keys=True) == json.dumps(b["results"], sort_keys=True)
  assert b["meta"]["resumed_packs"] == {"frozenlake": kept}
  table = lambda text: [line for line in text.splitlines() if "/ frozenlake" in line]
  assert table(straight.stdout) == table(resumed.stdout)
  # another checkpoint into the same directory is refused, and the records stay as they were
  proc = run_evaluate(out, *args, "--config.eval.temperature=0.5", check=False)
  assert proc.returncode != 0 and "holds records of a different evaluation" in proc.stderr
  assert "config.eval.temperature: 1.0 -> 0.5" in proc.stderr and pack_records(out) == 8
