"""Asynchronous training with bounded staleness (``rollout.mode = "async"``, ``codjax.train.async_rollouts``).

Runs of the tiny trainer (JAX engine). Run-ahead is made deterministic, not timed: a wrapper around the
workflow's ``score`` (called by the trainer after it took a batch, before it trains) records the trained
batch (step, episode policy versions, pack ids) and, where a test needs the producer ahead, waits until the
producer has queued a given number of batches. Every later batch is then rolled out before the step's
training publishes the next version, so the versions each batch used follow from the protocol alone:

  wait, k = 2 (producer ahead by 2): batches 0, 1, 2 sampled with version 0, batch 3 with version 1
  drop, k = 1 (queue of 2 kept full): batch 2 (version 0) is 2 versions old at step 2 and dropped; batch 3
  (version 1) is trained instead

The last tests drive ``AsyncRollouts`` alone with a fake engine: stopping mid-batch, pausing.
"""

import os
import threading
import time
import traceback
import types

import jax
import numpy as np
import pytest

from codjax.common.metrics import read_jsonl
from codjax.train.async_rollouts import AsyncRollouts, InterruptibleEngine
from codjax.train.config import env_entry
from codjax.train.loop import Trainer

TIMING = ("time", "time/", "tok_per_s", "async/")


def _comparable(row):
  return {k: v for k, v in row.items()
          if not any(k == t or k.startswith(t) for t in TIMING) and not k.endswith("_per_s")}


def _params(trainer):
  leaves, _ = jax.tree_util.tree_flatten_with_path(trainer.state.params)
  return {jax.tree_util.keystr(p): np.asarray(v) for p, v in leaves}


def _cfg(train_config, run_dir, model, steps, **over):
  return train_config(run_dir, model, total_steps=steps, **{"eval.num_packs": 1, "eval.pack_size": 2,
                                                            "eval.every": 2, **over})


def _async(k, policy="wait"):
  return {"rollout.mode": "async", "rollout.max_staleness": k, "rollout.stale_policy": policy}


class Recorder:
  """Wraps ``trainer.workflow.score``: records each trained batch; optionally first waits until the producer
  has ``ahead`` batches queued, or raises ``Crash`` at step ``fail_at``."""

  def __init__(self, trainer, monkeypatch, ahead=0, fail_at=None):
    self.t, self.ahead, self.fail_at = trainer, ahead, fail_at
    self.orig = trainer.workflow.score
    self.batches = []
    monkeypatch.setattr(trainer.workflow, "score", self)

  def __call__(self, trajs, cfg):
    step = self.t.step
    if self.ahead:
      deadline = time.monotonic() + 240
      while self.t.producer.queue_depth < self.ahead:
        assert time.monotonic() < deadline, f"the producer did not get {self.ahead} batches ahead at step {step}"
        time.sleep(0.01)
    if step == self.fail_at:
      raise Crash(f"trainer crash at step {step}")
    eps = [ep for t in trajs for ep in t.episodes()]
    self.batches.append({"step": step, "versions": sorted({ep.policy_version for ep in eps}),
                         "stale": [step - ep.policy_version for ep in eps],
                         "packs": sorted({t.pack.pack_id for t in trajs}), "episodes": len(eps)})
    return self.orig(trajs, cfg)


class Crash(Exception):
  pass


def _run(cfg, monkeypatch=None, resume=False, **rec):
  t = Trainer(cfg, resume=resume)
  r = Recorder(t, monkeypatch, **rec) if monkeypatch is not None else None
  try:
    t.run()
    params = _params(t)
  finally:
    t.close()
  return read_jsonl(os.path.join(cfg.run_dir, "metrics.jsonl")), params, r


@pytest.fixture(scope="module")
def sync_and_async0(tmp_path_factory, tiny_train_model, train_config):
  """The synchronous run and the asynchronous k = 0 run (3 steps, an evaluation after step 2)."""
  d = tmp_path_factory.mktemp("async0")
  sync = _run(_cfg(train_config, d / "sync", tiny_train_model, 3))
  asyn = _run(_cfg(train_config, d / "async", tiny_train_model, 3, **_async(0)))
  return sync, asyn


@pytest.mark.slow
def test_async_k0_reproduces_the_synchronous_loop(sync_and_async0):
  (sync_rows, sync_params, _), (async_rows, async_params, _) = sync_and_async0
  assert [r["step"] for r in async_rows if "train/loss" in r] == [1, 2, 3]
  assert any("eval/fl/reward_mean/0" in r for r in async_rows)  # the evaluation ran while the producer lived
  assert [_comparable(r) for r in async_rows] == [_comparable(r) for r in sync_rows]
  assert sorted(async_params) == sorted(sync_params)
  for k, v in sync_params.items():
    np.testing.assert_array_equal(async_params[k], v, err_msg=k)
  train = [r for r in async_rows if "train/loss" in r]
  assert all(r["async/staleness_max"] == 0 and r["async/dropped_batches"] == 0 for r in train)
  assert [r["async/policy_version"] for r in train] == [0, 1, 2]
  # k = 0: batch s needs version s, which the step that trains batch s - 1 publishes, so nothing is ever queued
  # behind the batch taken, and every batch starts by applying a version the engine never held (a measured,
  # non-zero sync)
  assert [r["async/batch_index"] for r in train] == [0, 1, 2]
  assert [r["async/queue_depth"] for r in train] == [0, 0, 0]
  assert all(r["time/sync_s"] > 0 for r in train), [r["time/sync_s"] for r in train]
  for r in train:
    assert r["async/trainer_idle_frac"] == pytest.approx(r["time/trainer_idle_s"] / r["time/step_s"], rel=1e-9)
  # the first step starts the producer: the trainer waits for the whole first rollout (compilation included;
  # at most the weight load may run before it starts waiting), and of the step's wall time the producer is
  # busy at least that load and rollout and at most the part the trainer is not training: with k = 0 the
  # producer waits for the next version while the trainer trains
  first = train[0]
  step_s, sync_s, roll_s = first["time/step_s"], first["time/sync_s"], first["time/rollout_s"]
  assert first["time/trainer_idle_s"] >= 0.5 * roll_s, first
  busy = first["async/producer_busy_frac"]
  assert (sync_s + roll_s) / step_s - 1e-9 <= busy <= 1 - first["time/train_s"] / step_s + 1e-9, first


@pytest.mark.slow
def test_async_k0_resume_is_exact(tmp_path, sync_and_async0, tiny_train_model, train_config):
  _, (whole_rows, whole_params, _) = sync_and_async0
  run_dir = tmp_path / "run"
  _run(_cfg(train_config, run_dir, tiny_train_model, 2, **_async(0)))
  rows, params, _ = _run(_cfg(train_config, run_dir, tiny_train_model, 3, **_async(0)), resume=True)
  assert [_comparable(r) for r in rows] == [_comparable(r) for r in whole_rows]
  for k, v in whole_params.items():
    np.testing.assert_array_equal(params[k], v, err_msg=k)


@pytest.mark.slow
def test_wait_policy_runs_ahead_within_the_bound(tmp_path, tiny_train_model, train_config, monkeypatch):
  cfg = _cfg(train_config, tmp_path / "run", tiny_train_model, 4, **_async(2))
  rows, _, rec = _run(cfg, monkeypatch, ahead=2)
  assert [b["step"] for b in rec.batches] == [0, 1, 2, 3]
  assert [b["versions"] for b in rec.batches] == [[0], [0], [0], [1]]  # module docstring
  assert all(0 <= s <= 2 for b in rec.batches for s in b["stale"])
  assert [b["packs"] for b in rec.batches] == [[0], [1], [2], [3]]  # the pack stream in order, once each
  train = [r for r in rows if "train/loss" in r]
  assert [r["async/staleness_max"] for r in train] == [0, 1, 2, 2]
  assert [r["staleness"] for r in train] == [0, 1, 2, 2]
  assert all(np.isfinite(r["train/loss"]) for r in train)
  # the losses' importance ratios are against the stored behaviour logprobs: 1 for the fresh batch (the
  # trainer's logprobs equal the sampler's), not 1 for the batches sampled with older weights
  kl = [r["train/approx_kl"] for r in train]
  assert kl[0] < 1e-6 and min(kl[1:]) > 100 * max(kl[0], 1e-9), kl
  assert any("eval/fl/reward_mean/0" in r for r in rows)  # evaluated with the producer ahead (paused)


@pytest.mark.slow
def test_drop_policy_drops_and_counts_stale_batches(tmp_path, tiny_train_model, train_config, monkeypatch):
  cfg = _cfg(train_config, tmp_path / "run", tiny_train_model, 3, **_async(1, "drop"), **{"eval.num_packs": 0})
  rows, _, rec = _run(cfg, monkeypatch, ahead=2)
  assert [b["versions"] for b in rec.batches] == [[0], [0], [1]]
  assert [b["packs"] for b in rec.batches] == [[0], [1], [3]]  # batch 2 dropped: 2 versions old at step 2
  assert all(0 <= s <= 1 for b in rec.batches for s in b["stale"])
  per_batch = {b["episodes"] for b in rec.batches}
  assert len(per_batch) == 1
  train = [r for r in rows if "train/loss" in r]
  assert [r["async/dropped_batches"] for r in train] == [0, 0, 1]
  assert [r["async/dropped_episodes"] for r in train] == [0, 0, per_batch.pop()]
  assert [r["async/batch_index"] for r in train] == [0, 1, 3]


@pytest.mark.slow
def test_resume_after_a_crash_trains_every_pack_once(tmp_path, tiny_train_model, train_config, monkeypatch):
  run_dir = tmp_path / "run"
  cfg = _cfg(train_config, run_dir, tiny_train_model, 4, **_async(2), **{"eval.num_packs": 0})
  t = Trainer(cfg)
  first = Recorder(t, monkeypatch, ahead=2, fail_at=2)  # the producer holds batches 2 and 3 (and maybe 4)
  try:
    with pytest.raises(Crash):
      t.run()
  finally:
    t0 = time.monotonic()
    t.close()
    assert time.monotonic() - t0 < 60  # the producer stops
  monkeypatch.undo()
  _, _, second = _run(cfg, monkeypatch, resume=True)
  trained = first.batches + second.batches
  assert [b["step"] for b in trained] == [0, 1, 2, 3]
  assert [p for b in trained for p in b["packs"]] == [0, 1, 2, 3]  # none twice, none skipped, in stream order
  assert [b["versions"] for b in second.batches][0] == [2]  # the resumed producer starts from the checkpoint
  rows = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
  assert [r["step"] for r in rows if "train/loss" in r] == [1, 2, 3, 4]


@pytest.mark.slow
def test_producer_exception_surfaces_in_the_trainer(tmp_path, tiny_train_model, train_config):
  cfg = _cfg(train_config, tmp_path / "run", tiny_train_model, 3, **_async(1), **{"eval.num_packs": 0})
  t = Trainer(cfg)
  orig, calls = t.rollout, []

  def failing_rollout(packs):
    calls.append(packs[0].pack_id)
    if len(calls) == 2:
      raise RuntimeError("engine died")
    return orig(packs)

  t.rollout = failing_rollout
  try:
    with pytest.raises(RuntimeError, match="engine died") as info:
      t.run()
  finally:
    t0 = time.monotonic()
    t.close()
    assert time.monotonic() - t0 < 60
  text = "".join(traceback.format_exception(info.value))
  assert "failing_rollout" in text and "rollout producer thread" in text  # the producer's traceback and note
  assert t.producer is None
  rows = read_jsonl(os.path.join(cfg.run_dir, "metrics.jsonl"))
  assert [r["step"] for r in rows if "train/loss" in r] == [1]


@pytest.mark.parametrize("over, reason", [
    ({"workflow": "evoharness", "algorithm.advantage": "grpo", "data.envs": {"h": env_entry("alfworld_synth")}},
     "after_step"),
    ({"data.lineages.dir": "/nonexistent/lineages"}, "data.lineages.dir"),
])
def test_unsupported_configurations_are_refused(tmp_path, train_config, over, reason):
  cfg = train_config(tmp_path / "run", tmp_path / "model", **_async(1), **over)
  with pytest.raises(ValueError, match=reason):
    Trainer(cfg)


class FakeEngine:
  """Counts generate calls (each takes 10 ms), records ended sessions and the weights applied."""

  def __init__(self):
    self.calls, self.ended, self.weights = 0, [], []

  def generate(self, prompts, params, session_ids=None):
    self.calls += 1
    time.sleep(0.01)
    return [None] * len(prompts)

  def end_session(self, session_id):
    self.ended.append(session_id)

  def update_weights(self, model):
    self.weights.append(model)


def _fake_trajs(n):
  return [types.SimpleNamespace(episodes=lambda eps=[types.SimpleNamespace(policy_version=-1)]: eps) for _ in range(n)]


def test_close_abandons_the_batch_in_flight_and_ends_its_sessions():
  eng = FakeEngine()
  guard = InterruptibleEngine(eng)
  started = threading.Event()

  def produce(i):  # a rollout of 10_000 engine calls (100 s) on session 100 + i
    for _ in range(10_000):
      guard.generate([[1]], None, session_ids=[100 + i])
      started.set()
    return [], {}, _fake_trajs(1)

  ar = AsyncRollouts(produce, eng.update_weights, version=5, model="w5", first_batch=5, max_staleness=0,
                     stale_policy="wait", interrupt=guard.stop_event, on_abandon=guard.end_live_sessions)
  assert started.wait(30)
  t0 = time.monotonic()
  assert ar.close()
  assert time.monotonic() - t0 < 5 and not ar.alive
  assert eng.ended == [105] and eng.weights == ["w5"]
  with pytest.raises(RuntimeError, match="stopped"):
    ar.take(0)


def test_pause_holds_the_producer_and_it_reapplies_the_newest_weights_after():
  """Only the pause holds the producer here: with k = 1000 (queue of 1001) and nothing taken it would go on
  rolling out. The paused block uses the engine (loads other weights, as an evaluation does), so afterwards
  the producer must load the newest published weights again, even when no newer version was published."""
  eng = FakeEngine()
  active = []  # generate calls in progress

  def produce(i):
    for _ in range(5):
      active.append(i)
      try:
        eng.generate([[1]], None)
      finally:
        active.remove(i)
    return [i], {"k": i + 1}, _fake_trajs(2)

  def wait_for(cond, what):
    deadline = time.monotonic() + 30
    while not cond():
      assert time.monotonic() < deadline, what
      time.sleep(0.01)

  ar = AsyncRollouts(produce, eng.update_weights, version=0, model="w0", first_batch=0, max_staleness=1000,
                     stale_policy="wait")
  try:
    got = ar.take(0)
    assert (got.batch.index, got.batch.version, got.batch.packs, got.batch.sampler_state) == (0, 0, [0], {"k": 1})
    assert got.staleness == [0, 0]  # every episode stamped with the version
    wait_for(lambda: eng.calls >= 10, "the producer did not run ahead")  # the bound lets it run
    with ar.paused():
      assert not active  # the batch in flight finished before the block
      n = eng.calls
      eng.update_weights("eval")  # the block uses the engine
      time.sleep(0.3)
      assert eng.calls == n  # ~30 engine calls' time, none made: only the pause holds the producer
    wait_for(lambda: eng.calls > n, "the producer did not resume after the pause")
    assert eng.weights == ["w0", "eval", "w0"]  # the same version again: the engine's weights were replaced
    with ar.paused():
      n = eng.calls
      ar.publish(1, "w1")
      ar.publish(2, "w2")
      time.sleep(0.1)
      assert eng.calls == n and eng.weights[-1] == "w0"  # nothing applied while paused
    wait_for(lambda: eng.calls > n, "the producer did not resume after the pause")
    assert eng.weights == ["w0", "eval", "w0", "w2"]  # only the newest of the versions published meanwhile
    with pytest.raises(ValueError, match="not newer"):
      ar.publish(2, "again")
  finally:
    ar.close()
