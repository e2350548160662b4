"""The trainer on the Qwen3.5/3.6 hybrid: a tiny CoD run (SFT warm start on expert packs, then CoD RL steps on
the JAX sampler) and a tiny multi-teacher OPD run with hybrid teachers, through the same code paths as Qwen3
(make_tiny checkpoint, from_pretrained dispatch, JaxEngine with recurrent state, train step, HF export)."""

import json
import os

import jax
import numpy as np
import pytest

from codjax.common.metrics import read_jsonl
from codjax.models import from_pretrained, save_pretrained
from codjax.models.qwen3_5 import Qwen35
from codjax.models.tokenizer import load_tokenizer
from codjax.train.loop import Trainer, ensure_model_dir

pytestmark = pytest.mark.slow  # two short training runs of a 4-layer hybrid (~2 min)

HYBRID = {"model.tiny.preset": "tiny-hybrid", "model.tiny.num_hidden_layers": 4}


def _run(cfg):
  t = Trainer(cfg)
  try:
    t.run()
  finally:
    t.close()
  return [r for r in read_jsonl(os.path.join(cfg.run_dir, "metrics.jsonl")) if "train/loss" in r]


def test_tiny_hybrid_cod_run_with_sft_warm_start(tmp_path, train_config):
  cfg = train_config(tmp_path / "run", tmp_path / "model", **HYBRID, **{
      "sft.steps": 3, "sft.batch_size": 2, "sft.num_packs": 4, "sft.seq_len": 384, "sft.learning_rate": 1e-3,
      "sft.warmup_steps": 1,
      "checkpoint.export_hf": True})
  rows = _run(cfg)
  with open(os.path.join(tmp_path / "model", "config.json")) as f:
    assert json.load(f)["model_type"] == "qwen3_5_text"
  with open(os.path.join(cfg.run_dir, "sft_stats.json")) as f:
    assert json.load(f)["loss_tokens"] > 0
  with open(os.path.join(cfg.run_dir, "sft_model", "config.json")) as f:
    assert json.load(f)["model_type"] == "qwen3_5_text"  # RL starts from the SFT hybrid
  assert [r["step"] for r in rows] == [1, 2]
  assert all(np.isfinite(r["train/loss"]) and r["train/grad_norm"] > 0 and r["train/skipped"] == 0 for r in rows)
  # the exported policy is a hybrid checkpoint codjax loads back
  m = from_pretrained(os.path.join(cfg.run_dir, "hf", "step_2"))
  assert isinstance(m, Qwen35) and m.cfg.layer_types.count("full_attention") == 1


def test_tiny_hybrid_multi_teacher_opd_run(tmp_path, train_config):
  student = tmp_path / "student"
  ensure_model_dir(train_config(tmp_path / "unused", student, **HYBRID))
  teachers = {}
  for k, label in enumerate(("fl", "fl2")):
    m = from_pretrained(str(student))
    m.embed_vd[...] = jax.random.normal(jax.random.key(k + 1), m.embed_vd[...].shape) * 0.5
    save_pretrained(m, str(tmp_path / f"teacher_{label}"), tokenizer=load_tokenizer(str(student)))
    teachers[label] = str(tmp_path / f"teacher_{label}")
  cfg = train_config(tmp_path / "run", student, **HYBRID, **{
      "algorithm.loss": "opd", "algorithm.advantage": "grpo", "algorithm.red_weight": False,
      "algorithm.entropy_coef": 0.0, "checkpoint.every": 0,
      # the student made above, trained as it is (its record names one environment; this run has two)
      "model.make_tiny": False})
  env = dict(cfg.data.envs["fl"])
  cfg.data.envs = {"fl": env, "fl2": {**env, "proportion": env.get("proportion", 1.0)}}
  cfg.algorithm.teachers = teachers
  rows = _run(cfg)
  assert [r["step"] for r in rows] == [1, 2]
  assert all(np.isfinite(r["train/advantage"]) and abs(r["train/advantage"]) > 1e-3 for r in rows)
  assert all(r["train/grad_norm"] > 0 and r["train/skipped"] == 0 for r in rows)
