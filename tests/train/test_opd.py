"""Multi-teacher on-policy distillation: teacher scoring and a two-step OPD run of the trainer."""

import os

import jax
import jax.numpy as jnp
import numpy as np

from codjax.common.metrics import read_jsonl
from codjax.models import from_pretrained, save_pretrained
from codjax.models.tokenizer import load_tokenizer
from codjax.rl.batch import TrainSequence
from codjax.rl.logprobs import shifted_token_logprobs
from codjax.train.loop import Trainer
from codjax.train.teachers import TeacherPool, attach_teacher_logprobs

import pytest

pytestmark = pytest.mark.slow  # teacher runs (~40 s)


def _teacher(student_dir, out):
  """A teacher with the student's tokenizer and different weights."""
  m = from_pretrained(str(student_dir))
  m.embed_vd[...] = jax.random.normal(jax.random.key(1), m.embed_vd[...].shape) * 0.5
  save_pretrained(m, str(out), tokenizer=load_tokenizer(str(student_dir)))
  return str(out)


def test_teacher_scores_match_direct_forward(tmp_path, tiny_train_model):
  path = _teacher(tiny_train_model, tmp_path / "teacher")
  pool = TeacherPool({"fl": path}, dtype="float32", mesh=None, temperature=0.8, vocab_chunks=2, seq_len=128)
  rng = np.random.default_rng(0)
  seqs = [TrainSequence(rng.integers(0, 300, n).tolist(), [0] * 3 + [1] * (n - 3), [0.0] * n, 0.0)
          for n in (17, 40, 9)]
  attach_teacher_logprobs(pool, seqs, ["fl"] * 3)
  teacher = from_pretrained(path)
  for s in seqs:
    ref, _ = shifted_token_logprobs(teacher, jnp.asarray([s.tokens]), temperature=0.8)
    np.testing.assert_allclose(s.teacher_logprobs, np.asarray(ref[0]), rtol=1e-5, atol=1e-5)


def test_two_step_opd_run(tmp_path, tiny_train_model, train_config):
  teacher = _teacher(tiny_train_model, tmp_path / "teacher")
  cfg = train_config(tmp_path / "run", tiny_train_model, **{"algorithm.loss": "opd", "algorithm.advantage": "grpo",
                                                             "algorithm.red_weight": False,
                                                             "algorithm.entropy_coef": 0.0, "checkpoint.every": 0})
  cfg.algorithm.teachers = {"fl": teacher}
  t = Trainer(cfg)
  try:
    t.run()
  finally:
    t.close()
  rows = [r for r in read_jsonl(os.path.join(cfg.run_dir, "metrics.jsonl")) if "train/loss" in r]
  assert [r["step"] for r in rows] == [1, 2]
  # the opd per-token advantage (teacher - student logprob) is what drives the update
  assert all(np.isfinite(r["train/advantage"]) and abs(r["train/advantage"]) > 1e-3 for r in rows)
  assert all(r["train/grad_norm"] > 0 and r["train/skipped"] == 0 for r in rows)
