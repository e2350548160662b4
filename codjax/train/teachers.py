"""Teacher scoring for multi-teacher on-policy distillation (CoD paper, Sec. 3.1 "Multi-teacher on-policy
distillation"; agentscope-ai/Trinity-RFT ``trinity/common/workflows/connect_the_dots/cod_workflow.py``).

Each training sequence is scored by the teacher of its environment (``algorithm.teachers``: data-env label ->
HF checkpoint directory): the teacher's log-probability of every token of the student's exact sequence, at
the rollout temperature. The ``opd`` loss then uses A_t = logp_teacher(y_t) - sg(logp_student(y_t)).
Sequences are batched per teacher with the trainer's own batch layout and scored by the frozen-policy scorer
the KL reference uses (``codjax.train.reference.FrozenPolicy``: the train step's logprob code and shardings).
"""

from __future__ import annotations

import numpy as np

from codjax.models import from_pretrained
from codjax.parallel.mesh import batch_shards
from codjax.rl.batch import TrainSequence, assemble_batch
from codjax.train.reference import FrozenPolicy


class TeacherPool:
  """Teacher models by data-env label, each a ``FrozenPolicy``."""

  def __init__(self, paths: dict[str, str], *, dtype: str, mesh, temperature: float, vocab_chunks: int,
               seq_len: int):
    self.temperature = temperature
    self.seq_len = seq_len
    self.shards = 1 if mesh is None else batch_shards(mesh)
    self.models = {label: FrozenPolicy(from_pretrained(path, dtype=dtype, mesh=mesh), mesh=mesh,
                                       temperature=temperature, vocab_chunks=vocab_chunks)
                   for label, path in paths.items()}

  def score(self, label: str, seqs: list[TrainSequence], rows_per_call: int = 8) -> list[np.ndarray]:
    """Teacher logprobs (one array per sequence, aligned with its tokens; 0 at the first token), scored
    ``rows_per_call`` rows per device at a time."""
    if label not in self.models:
      raise KeyError(f"no teacher for environment {label!r}; teachers: {sorted(self.models)}")
    chunk = rows_per_call * self.shards
    batch, stats = assemble_batch(seqs, self.seq_len, pack=False, row_multiple=chunk, bucket_len=True)
    out = np.asarray(self.models[label].logprobs(batch, batch["tokens"].shape[0] // chunk, masked=False))
    return [out[r, c:c + n] for r, c, n in stats["layout"]]


def attach_teacher_logprobs(pool: TeacherPool, seqs: list[TrainSequence], labels: list[str]) -> None:
  """Fills ``seq.teacher_logprobs`` in place, scoring each env's sequences with its own teacher."""
  by_label: dict[str, list[int]] = {}
  for i, label in enumerate(labels):
    by_label.setdefault(label, []).append(i)
  for label, idx in by_label.items():
    scores = pool.score(label, [seqs[i] for i in idx])
    for i, lp in zip(idx, scores):
      full = np.zeros(len(seqs[i].tokens), np.float32)
      full[:len(lp)] = lp
      seqs[i].teacher_logprobs = full
