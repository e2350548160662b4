"""The Checkpointer's resume rules on a small pytree (no trainer): quarantine of unreadable steps, engine
weights inside the orbax step, mismatches that are errors rather than corruption; and metric truncation."""

import json
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codjax.common.metrics import MetricWriter, read_jsonl, truncate_jsonl
from codjax.train.checkpoint import QUARANTINE_DIR, REASON_FILE, CheckpointError, CheckpointMismatch, Checkpointer


def _state(v):
  return {"params": {"w": jnp.full((3, 2), float(v)), "b": jnp.arange(4.0) + v}, "count": jnp.asarray(v, jnp.int32)}


def _engine(v):
  return {"w": jnp.full((3, 2), 100.0 + v), "b": jnp.arange(4.0) - v}


def _truncate_arrays(step_dir):
  files = [p for p in pathlib.Path(step_dir).rglob("*") if p.is_file() and p.parent.name == "d"]
  assert files
  for p in files:
    p.write_bytes(p.read_bytes()[:3])


def _eq(a, b):
  return jax.tree.structure(a) == jax.tree.structure(b) and all(
      np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def _needs_engine(meta):
  return _engine(0) if meta["lags"] else None


def test_engine_weights_live_in_their_own_step(tmp_path):
  ck = Checkpointer(str(tmp_path / "ck"), max_to_keep=5)
  ck.save(1, _state(1), {"lags": True}, engine_params=_engine(1))
  ck.save(2, _state(2), {"lags": False})
  ck.save(3, _state(3), {"lags": True}, engine_params=_engine(3))
  ck.close()
  ck = Checkpointer(str(tmp_path / "ck"), max_to_keep=5)  # a fresh process
  assert ck.steps() == [1, 2, 3]
  got = ck.restore_latest(_state(0), _needs_engine)
  assert got.step == 3 and got.meta == {"lags": True}
  assert _eq(got.state, _state(3)) and _eq(got.engine, _engine(3))
  one = ck.restore(1, _state(0), _needs_engine)
  assert _eq(one.engine, _engine(1))  # each step keeps its own engine weights, not the latest ones
  two = ck.restore(2, _state(0), _needs_engine)
  assert two.engine is None and _eq(two.state, _state(2))


def test_unreadable_newest_step_is_quarantined_and_can_be_saved_again(tmp_path):
  ck = Checkpointer(str(tmp_path / "ck"))
  for s in (1, 2):
    ck.save(s, _state(s), {"lags": False})
  _truncate_arrays(tmp_path / "ck" / "2")
  got = ck.restore_latest(_state(0), _needs_engine)
  assert got.step == 1 and _eq(got.state, _state(1))
  assert ck.steps() == [1]
  (moved,) = os.listdir(tmp_path / "ck" / QUARANTINE_DIR)
  assert moved.startswith("2-")
  q = tmp_path / "ck" / QUARANTINE_DIR / moved
  assert (q / "state").is_dir() and "step 2 quarantined" in (q / REASON_FILE).read_text()
  ck.save(2, _state(22), {"lags": False})  # the resumed run writes step 2 again (orbax refused before)
  assert Checkpointer(str(tmp_path / "ck")).restore_latest(_state(0)).step == 2


def test_nothing_readable_is_an_error_and_nothing_moves(tmp_path):
  ck = Checkpointer(str(tmp_path / "ck"))
  for s in (1, 2):
    ck.save(s, _state(s), {"lags": False})
    _truncate_arrays(tmp_path / "ck" / str(s))
  with pytest.raises(CheckpointError, match=r"(?s)no readable checkpoint.*step 2.*step 1"):
    ck.restore_latest(_state(0))
  assert ck.steps() == [1, 2] and not os.path.exists(tmp_path / "ck" / QUARANTINE_DIR)


def test_non_finite_step_is_quarantined(tmp_path):
  ck = Checkpointer(str(tmp_path / "ck"))
  ck.save(1, _state(1), {"lags": False})
  bad = _state(2)
  bad["params"]["w"] = bad["params"]["w"].at[0, 0].set(jnp.nan)
  ck.save(2, bad, {"lags": False})
  assert ck.restore_latest(_state(0)).step == 1
  (moved,) = os.listdir(tmp_path / "ck" / QUARANTINE_DIR)
  assert "non-finite" in (tmp_path / "ck" / QUARANTINE_DIR / moved / REASON_FILE).read_text()


def test_lagging_step_without_engine_weights_is_a_clear_error_not_a_fallback(tmp_path):
  ck = Checkpointer(str(tmp_path / "ck"))
  ck.save(1, _state(1), {"lags": True}, engine_params=_engine(1))
  ck.save(2, _state(2), {"lags": True})  # e.g. written by the old engine_weights mechanism
  with pytest.raises(CheckpointMismatch, match="step 2 holds no engine weights"):
    ck.restore_latest(_state(0), _needs_engine)
  assert ck.steps() == [1, 2] and not os.path.exists(tmp_path / "ck" / QUARANTINE_DIR)


def test_structure_mismatch_is_a_clear_error_not_a_fallback(tmp_path):
  ck = Checkpointer(str(tmp_path / "ck"))
  for s in (1, 2):
    ck.save(s, _state(s), {"lags": False})
  other_shape = _state(0)
  other_shape["params"]["w"] = jnp.zeros((3, 3))
  with pytest.raises(CheckpointMismatch, match=r"has shape \(3, 2\), this run expects \(3, 3\)"):
    ck.restore_latest(other_shape)
  other_keys = {"params": {"w": jnp.zeros((3, 2))}, "count": jnp.asarray(0, jnp.int32)}
  with pytest.raises(CheckpointMismatch, match="does not match the model/optimizer structure"):
    ck.restore_latest(other_keys)
  assert ck.steps() == [1, 2] and not os.path.exists(tmp_path / "ck" / QUARANTINE_DIR)


def test_metric_lines_after_the_restored_step_are_dropped(tmp_path):
  w = MetricWriter(str(tmp_path), tensorboard=False)
  for s in (0, 1, 2, 2, 3):
    w.write(s, {"v": s})
  w.close()
  with open(tmp_path / "metrics.jsonl", "a") as f:
    f.write('{"step": 4, "ti')  # a line cut by a crash mid-write
  w = MetricWriter(str(tmp_path), tensorboard=False, keep_through=2)
  w.write(3, {"v": 30})
  w.close()
  assert [(r["step"], r["v"]) for r in read_jsonl(str(tmp_path / "metrics.jsonl"))] == [
      (0, 0), (1, 1), (2, 2), (2, 2), (3, 30)]
  assert truncate_jsonl(str(tmp_path / "metrics.jsonl"), -1) == 5
  assert read_jsonl(str(tmp_path / "metrics.jsonl")) == []
  with open(tmp_path / "bad.jsonl", "w") as f:
    f.write(json.dumps({"step": 1}) + "\nnot json\n" + json.dumps({"step": 2}) + "\n")
  with pytest.raises(ValueError, match="line 2 is not JSON"):
    truncate_jsonl(str(tmp_path / "bad.jsonl"), 0)
