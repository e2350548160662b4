"""The CoD-Train loop: two-step smoke runs, exact resume, checkpoint corruption handling, exports."""

import json
import os
import shutil

import numpy as np
import pytest

from codjax.common.metrics import read_jsonl
from codjax.train.checkpoint import CheckpointError, Checkpointer
from codjax.train.loop import RunDirInUse, Trainer

pytestmark = pytest.mark.slow  # tiny end-to-end training runs (~120 s)

TIMING = ("time", "time/", "tok_per_s", "rollout_gen_tok_per_s")


def _comparable(row):
  return {k: v for k, v in row.items() if not any(k == t or k.startswith(t) for t in TIMING)}


def _run(cfg, resume=False):
  t = Trainer(cfg, resume=resume)
  try:
    t.run()
  finally:
    t.close()
  return read_jsonl(os.path.join(cfg.run_dir, "metrics.jsonl"))


def test_two_step_smoke_run_jax_engine(tmp_path, tiny_train_model, train_config):
  cfg = train_config(tmp_path / "run", tiny_train_model, **{"eval.num_packs": 2, "eval.pack_size": 2,
                                                          "eval.at_end": True})
  rows = _run(cfg)
  train_rows = [r for r in rows if "train/loss" in r]
  assert [r["step"] for r in train_rows] == [1, 2]
  r = train_rows[-1]
  for key in ("reward/frozenlake_obscure/pos0", "reward/frozenlake_obscure/pos1", "hint_parse_rate",
              "format_error_rate", "response_tokens_mean", "red_temperature", "train/grad_norm",
              "train/clip_frac", "train/entropy", "time/rollout_s", "time/train_s", "tok_per_s"):
    assert key in r and np.isfinite(r[key]), key
  assert r["train/skipped"] == 0
  ev = json.load(open(tmp_path / "run" / "eval" / "final.json"))
  assert ev["results"]["fl"]["n"] == 2 and len(ev["results"]["fl"]["reward_mean"]) == 2
  assert os.listdir(tmp_path / "run" / "tb")
  assert sorted(Checkpointer(str(tmp_path / "run" / "checkpoints")).steps()) == [1, 2]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_resume_continues_exactly(tmp_path, tiny_train_model, train_config, dropped_sigterm):
  """A scheduler's SIGTERM in step 2, whose KeyboardInterrupt a finalizer dropped (as a gc callback can), stops
  the run after step 2's checkpoint; the resumed run's step 3 equals the uninterrupted run's."""
  full = _run(train_config(tmp_path / "full", tiny_train_model, total_steps=3))
  t = Trainer(train_config(tmp_path / "part", tiny_train_model, total_steps=3))
  step = t.train_step

  def step_with_a_signal():
    m = step()
    if t.step == 2:
      dropped_sigterm()
    return m

  t.train_step = step_with_a_signal
  try:
    with pytest.raises(KeyboardInterrupt, match="signal SIGTERM"):
      t.run()
  finally:
    t.close()
  from codjax.common import interrupts

  interrupts.reset()
  # the same command without --resume: refused before anything is written (it would overwrite the run's
  # config.json and metrics.jsonl, then fail at its first save because orbax refuses an existing step)
  files = {n: (tmp_path / "part" / n).read_bytes() for n in ("config.json", "metrics.jsonl")}
  with pytest.raises(RunDirInUse, match=r"steps \[1, 2\]\): pass --resume"):
    Trainer(train_config(tmp_path / "part", tiny_train_model, total_steps=3))
  assert {n: (tmp_path / "part" / n).read_bytes() for n in files} == files
  resumed = _run(train_config(tmp_path / "part", tiny_train_model, total_steps=3), resume=True)
  a = [_comparable(r) for r in full if "train/loss" in r]
  b = [_comparable(r) for r in resumed if "train/loss" in r]
  assert [r["step"] for r in b] == [1, 2, 3]
  assert a[2] == b[2]  # the step after the resume equals the uninterrupted run's step, metric for metric
  assert abs(a[2]["train/grad_norm"]) > 0


def test_checkpoint_corruption_falls_back_and_crash_mid_save_is_harmless(tmp_path, tiny_train_model, train_config):
  cfg = train_config(tmp_path / "run", tiny_train_model)
  t = Trainer(cfg)
  try:
    t.run()
    ck = t.ckpt
    state = t.state
    # a crash mid-save leaves only a temporary directory: it is never taken for a checkpoint
    os.makedirs(os.path.join(ck.directory, "3.orbax-checkpoint-tmp", "state"))
    assert Checkpointer(ck.directory).steps() == [1, 2]
    # corrupt the newest checkpoint: restore falls back to the previous one
    newest = os.path.join(ck.directory, "2", "state")
    for root, _, files in os.walk(newest):
      for f in files:
        p = os.path.join(root, f)
        data = open(p, "rb").read()
        open(p, "wb").write(data[: len(data) // 3])
    got = Checkpointer(ck.directory).restore_latest(state)
    assert got.step == 1 and got.meta["step"] == 1
    # the unreadable step is moved aside (not deleted), so a resumed run can write step 2 again
    assert Checkpointer(ck.directory).steps() == [1]
    assert [d.split("-")[0] for d in os.listdir(os.path.join(ck.directory, "quarantine"))] == ["2"]
    # nothing readable left: a clear error, not a silent fresh start
    shutil.rmtree(os.path.join(ck.directory, "1", "state"))
    with pytest.raises(CheckpointError, match="no readable checkpoint"):
      Checkpointer(ck.directory).restore_latest(state)
  finally:
    t.close()


def test_export_hf_loads_in_transformers(tmp_path, tiny_train_model, train_config):
  import torch
  from transformers import AutoModelForCausalLM, AutoTokenizer

  cfg = train_config(tmp_path / "run", tiny_train_model, total_steps=1)
  t = Trainer(cfg)
  try:
    t.run()
    out = t.export_hf(str(tmp_path / "hf"))
  finally:
    t.close()
  m = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
  tok = AutoTokenizer.from_pretrained(out)
  ids = tok.encode("Direction 1", add_special_tokens=False)
  assert np.isfinite(m(torch.tensor([ids])).logits.detach().numpy()).all()


def test_two_step_smoke_run_vllm_engine(tmp_path, tiny_train_model, train_config):
  import vllm  # noqa: F401  (a missing or broken vLLM fails the test, never skips it)
  cfg = train_config(tmp_path / "run", tiny_train_model, **{"rollout.engine": "vllm",
                                                                 "rollout.vllm.dtype": "float32",
                                                                 "rollout.vllm.enforce_eager": True,
                                                                 "rollout.vllm.gpu_memory_utilization": 0.0,
                                                                 "checkpoint.every": 0})
  rows = _run(cfg)
  train_rows = [r for r in rows if "train/loss" in r]
  assert [r["step"] for r in train_rows] == [1, 2]
  assert all(np.isfinite(r["train/grad_norm"]) and r["train/skipped"] == 0 for r in train_rows)
  assert train_rows[0]["generated_tokens"] > 0


def test_final_evaluation_reuses_a_periodic_one_at_the_last_step(tmp_path, tiny_train_model, train_config, monkeypatch):
  """eval.every dividing total_steps: the last periodic evaluation is the final one (same weights and seeds), so
  it is not run twice; a fresh evaluation of the final weights gives the same results."""
  import codjax.train.loop as loop

  calls = []
  real = loop.evaluate_engine
  monkeypatch.setattr(loop, "evaluate_engine", lambda *a, **k: calls.append(1) or real(*a, **k))
  cfg = train_config(tmp_path / "run", tiny_train_model, **{"eval.num_packs": 2, "eval.pack_size": 2,
                                                          "eval.every": 1, "eval.at_end": True,
                                                          "checkpoint.every": 0})
  t = Trainer(cfg)
  try:
    t.run()
    assert len(calls) == 2  # steps 1 and 2; no third pass for "final"
    ev = tmp_path / "run" / "eval"
    final, last = json.load(open(ev / "final.json")), json.load(open(ev / "step_2.json"))
    assert final["step"] == 2 and final["same_as"] == "step_2" and final["results"] == last["results"]
    again = t.evaluate("again")
    assert json.loads(json.dumps(again)) == final["results"]
  finally:
    t.close()
