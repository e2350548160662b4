"""The generated tiny base model matches its config (codjax.train.base_model): a directory per generating settings
by default, a refusal naming the differing fields for a set ``model.path``, the record in the run's config.json,
and refusals that write nothing into the run directory.

Expected values come from the configs themselves (the HF config.json of the written model must carry the
configured hidden size and the rounded-up vocabulary), not from the code under test."""

import json
import os

import pytest

from codjax.train.base_model import RECORD, BaseModelError
from codjax.train.loop import Trainer, ensure_model_dir


def _hf(path):
  with open(os.path.join(path, "config.json")) as f:
    return json.load(f)


def _keyed(train_config, tmp_path, **over):
  c = train_config(tmp_path / "runs" / "run", "", **over)
  c.name = "demo"
  return c


def test_a_changed_setting_gets_its_own_directory(train_config, tmp_path):
  first = ensure_model_dir(_keyed(train_config, tmp_path))
  assert os.path.dirname(first) == str(tmp_path / "runs" / "base_models")
  assert os.path.basename(first).startswith("demo-")
  assert ensure_model_dir(_keyed(train_config, tmp_path)) == first  # same settings: reused
  # another architecture (the reported case: vocabulary and hidden size) -> another directory with that model
  other = ensure_model_dir(_keyed(train_config, tmp_path, **{"model.tiny.vocab_size": 384,
                                                              "model.tiny.hidden_size": 32}))
  assert other != first
  assert (_hf(first)["hidden_size"], _hf(other)["hidden_size"]) == (64, 32)
  # the seed changes the tokenizer's corpus: another directory, another tokenizer
  reseeded = ensure_model_dir(_keyed(train_config, tmp_path, seed=4))
  assert reseeded not in (first, other)
  with open(os.path.join(first, "tokenizer.json")) as a, open(os.path.join(reseeded, "tokenizer.json")) as b:
    assert a.read() != b.read()
  rec = json.load(open(os.path.join(reseeded, RECORD)))
  assert rec["corpus"]["seed"] == 4 and rec["tiny"]["hidden_size"] == 64 and rec["init_seed"] == 0
  assert sorted(os.listdir(tmp_path / "runs" / "base_models")) == sorted(
      os.path.basename(p) for p in (first, other, reseeded))  # no scratch directories left behind


def test_a_set_path_with_another_model_is_refused_with_the_fields(train_config, tmp_path):
  path = tmp_path / "m"
  ensure_model_dir(train_config(tmp_path / "run", path))
  with pytest.raises(BaseModelError) as e:
    ensure_model_dir(train_config(tmp_path / "run", path, **{"model.tiny.vocab_size": 384,
                                                             "model.tiny.hidden_size": 32}))
  msg = str(e.value)
  assert "\n" not in msg and f"model.path={str(path)!r}" in msg
  assert "model.tiny.vocab_size: 320 -> 384" in msg and "model.tiny.hidden_size: 64 -> 32" in msg
  assert "model.tiny.num_hidden_layers" not in msg  # only what differs
  with pytest.raises(BaseModelError, match=r"seed: 3 -> 5") as e:
    ensure_model_dir(train_config(tmp_path / "run", path, seed=5))
  assert "model.tiny" not in str(e.value)
  assert ensure_model_dir(train_config(tmp_path / "run", path)) == str(path)  # its own settings: reused


def test_a_model_without_a_record_is_refused(train_config, tiny_ckpt, tmp_path):
  with pytest.raises(BaseModelError, match=r"model.make_tiny=False"):
    ensure_model_dir(train_config(tmp_path / "run", tiny_ckpt))


def test_config_json_records_the_model_used(train_config, tmp_path):
  cfg = _keyed(train_config, tmp_path, **{"checkpoint.every": 0})
  trainer = Trainer(cfg)
  try:
    used = trainer.model_path
  finally:
    trainer.close()
  rec = json.load(open(tmp_path / "runs" / "run" / "config.json"))
  assert rec["model"]["path"] == rec["base_model"]["path"] == used
  assert os.path.dirname(used) == str(tmp_path / "runs" / "base_models")
  gen = rec["base_model"]["generated_by"]
  assert gen == json.load(open(os.path.join(used, RECORD)))
  assert gen["tiny"]["vocab_size"] == 320 and gen["tiny"]["hidden_size"] == 64 and gen["corpus"]["seed"] == 3
  assert gen["corpus"]["model.tiny.corpus_packs"] == 8 and len(gen["corpus"]["sha256"]) == 64


def test_refusals_leave_no_run_directory(train_config, tmp_path):
  missing = str(tmp_path / "no_model")
  run_dir = tmp_path / "run"
  with pytest.raises(ValueError, match=r"model\.path=.*no_model.* not an HF checkpoint directory"):
    Trainer(train_config(run_dir, missing, **{"model.make_tiny": False}))
  assert not run_dir.exists()
  path = tmp_path / "m"
  ensure_model_dir(train_config(tmp_path / "other", path))
  with pytest.raises(BaseModelError, match="model.tiny.hidden_size"):
    Trainer(train_config(run_dir, path, **{"model.tiny.hidden_size": 32}))
  assert not run_dir.exists()
