"""Exact resume through the trainer when the engine lags (``rollout.sync_interval`` = 3, a checkpoint per step).

Timeline of the runs (S = 3): the engine syncs before steps 1 and 4, so steps 1-3 sample from the initial
weights w0 and steps 4-6 from w3. The checkpoints of steps 4 and 5 hold the engine weights w3 beside the
state; step 3's does not (step 4 syncs anyway). Each interrupted run below resumes from step 4, whose next
step must sample from w3, not from the restored state w4: only the checkpoint holds w3.
"""

import os

import numpy as np
import orbax.checkpoint as ocp
import pytest

from codjax.common.metrics import read_jsonl
from codjax.train.checkpoint import QUARANTINE_DIR, REASON_FILE
from codjax.train.loop import Trainer

pytestmark = pytest.mark.slow  # three tiny training runs and two resumes (about 2.5 min on 2 cores)

SYNC = 3
N = 5  # steps of a whole run
TIMING = ("time", "time/", "tok_per_s", "rollout_gen_tok_per_s")


def _comparable(row):
  return {k: v for k, v in row.items() if not any(k == t or k.startswith(t) for t in TIMING)}


def _cfg(train_config, run_dir, model, steps):
  return train_config(run_dir, model, total_steps=steps, **{"rollout.sync_interval": SYNC})


def _run(cfg, resume=False):
  t = Trainer(cfg, resume=resume)
  try:
    t.run()
  finally:
    t.close()
  return _train_rows(cfg.run_dir)


def _train_rows(run_dir):
  return [_comparable(r) for r in read_jsonl(os.path.join(run_dir, "metrics.jsonl")) if "train/loss" in r]


def _item(run_dir, step, item):
  return ocp.StandardCheckpointer().restore(os.path.join(run_dir, "checkpoints", str(step), item))


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory, tiny_train_model, train_config):
  """The uninterrupted run: (run_dir, its train metric rows)."""
  run_dir = tmp_path_factory.mktemp("resume") / "whole"
  return str(run_dir), _run(_cfg(train_config, run_dir, tiny_train_model, N))


def test_uninterrupted_run_keeps_engine_weights_in_the_checkpoint_step(whole_run):
  run_dir, rows = whole_run
  assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
  assert [r["staleness"] for r in rows] == [0, 1, 2, 0, 1]  # syncs before steps 1 and 4
  assert all(np.isfinite(r["train/loss"]) for r in rows)
  ck = os.path.join(run_dir, "checkpoints")
  assert sorted(int(d) for d in os.listdir(ck) if d.isdigit()) == [3, 4, 5]  # max_to_keep = 3
  assert not os.path.isdir(os.path.join(ck, "3", "engine"))  # step 4 syncs: no lagging engine to keep
  assert not os.path.exists(os.path.join(run_dir, "engine_weights"))
  # steps 4 and 5 sampled from the weights of step 3, i.e. step 3's trained parameters
  params3 = {k: v for k, v in _item(run_dir, 3, "state").items() if k.startswith(".params")}
  for step in (4, 5):
    engine = _item(run_dir, step, "engine")
    assert sorted(engine) == sorted(k[len(".params"):] for k in params3)
    for k, v in params3.items():
      np.testing.assert_array_equal(np.asarray(engine[k[len(".params"):]]), np.asarray(v))
  params5 = {k: v for k, v in _item(run_dir, 5, "state").items() if k.startswith(".params")}
  assert any(not np.array_equal(np.asarray(params5[k]), np.asarray(v)) for k, v in params3.items())


def test_resume_after_corrupt_newest_checkpoint_is_exact(tmp_path, whole_run, tiny_train_model, train_config):
  _, whole = whole_run
  run_dir = tmp_path / "run"
  _run(_cfg(train_config, run_dir, tiny_train_model, N))
  # truncate the array data of the newest step (its metadata stays readable)
  newest = run_dir / "checkpoints" / str(N)
  data = [p for p in newest.rglob("*") if p.is_file() and p.parent.name == "d"]
  assert data
  for p in data:
    b = p.read_bytes()
    p.write_bytes(b[: len(b) // 3])
  resumed = _run(_cfg(train_config, run_dir, tiny_train_model, N), resume=True)
  assert resumed == whole  # step 5 re-run from step 4 with the engine weights w3; no duplicated lines
  quarantined = os.listdir(run_dir / "checkpoints" / QUARANTINE_DIR)
  assert len(quarantined) == 1 and quarantined[0].startswith(f"{N}-")
  reason = (run_dir / "checkpoints" / QUARANTINE_DIR / quarantined[0] / REASON_FILE).read_text()
  assert f"step {N} quarantined" in reason
  assert os.path.isdir(run_dir / "checkpoints" / str(N) / "engine")  # rewritten by the resumed run


class _Died(BaseException):
  """The process dying: not an Exception, so nothing on the way up handles it."""


def test_resume_after_death_between_the_writes_of_a_save_is_exact(tmp_path, whole_run, tiny_train_model,
                                                                   train_config, monkeypatch):
  _, whole = whole_run
  run_dir = tmp_path / "run"
  orig = ocp.StandardCheckpointHandler.async_save

  async def dying_save(self, directory, *args, **kwargs):
    """Writes the engine item of step N completely, then dies before orbax commits the step."""
    futures = await orig(self, directory, *args, **kwargs)
    path = str(getattr(directory, "path", directory))
    if os.path.basename(path).startswith("engine") and os.path.basename(os.path.dirname(path)).startswith(f"{N}."):
      for f in futures or []:
        f.result()
      raise _Died()
    return futures

  monkeypatch.setattr(ocp.StandardCheckpointHandler, "async_save", dying_save)
  t = Trainer(_cfg(train_config, run_dir, tiny_train_model, N))
  with pytest.raises(_Died):
    t.run()
  monkeypatch.undo()
  t.writer.close()
  assert [r["step"] for r in _train_rows(run_dir)] == [1, 2, 3, 4, 5]  # step 5 logged before its save
  # what the death left: step 5's uncommitted temporary directory, its engine item written
  tmp_dirs = [d for d in os.listdir(run_dir / "checkpoints") if d.startswith(f"{N}.")]
  assert len(tmp_dirs) == 1 and any(n.startswith("engine") for n in os.listdir(run_dir / "checkpoints" / tmp_dirs[0]))
  resumed = _run(_cfg(train_config, run_dir, tiny_train_model, N), resume=True)
  assert resumed == whole
  assert not os.path.exists(run_dir / "checkpoints" / QUARANTINE_DIR)  # nothing was unreadable
