"""Teacher scoring for multi-teacher on-policy distillation (cod_reference.md sec. 3.3).

Each training sequence is scored by the teacher of its environment (``algorithm.teachers``: data-env label ->
HF checkpoint directory): the teacher's log-probability of every token of the student's exact sequence, at
the rollout temperature. The ``opd`` loss then uses A_t = logp_teacher(y_t) - sg(logp_student(y_t)).
Sequences are batched per teacher with the trainer's own batch layout and scored by a jitted forward.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from codjax.models import from_pretrained
from codjax.rl.batch import TrainSequence, assemble_batch
from codjax.rl.logprobs import shifted_token_logprobs


class TeacherPool:
  """Teacher models by data-env label, each with a jitted token-logprob scorer."""

  def __init__(self, paths: dict[str, str], *, dtype: str, mesh, temperature: float, vocab_chunks: int,
               seq_len: int):
    self.temperature = temperature
    self.seq_len = seq_len
    self.models = {}
    self._fns = {}
    for label, path in paths.items():
      model = from_pretrained(path, dtype=dtype, mesh=mesh)
      graphdef, params = nnx.split(model)

      def score(params, tokens, positions, segment_ids, graphdef=graphdef):
        lp, _ = shifted_token_logprobs(nnx.merge(graphdef, params), tokens, positions, segment_ids,
                                       temperature=temperature, num_chunks=vocab_chunks)
        return lp

      self.models[label] = params
      self._fns[label] = jax.jit(score)

  def score(self, label: str, seqs: list[TrainSequence], rows_per_call: int = 8) -> list[np.ndarray]:
    """Teacher logprobs (one array per sequence, aligned with its tokens; 0 at the first token)."""
    if label not in self._fns:
      raise KeyError(f"no teacher for environment {label!r}; teachers: {sorted(self._fns)}")
    batch, stats = assemble_batch(seqs, self.seq_len, pack=False, row_multiple=rows_per_call, bucket_len=True)
    n_rows = batch["tokens"].shape[0]
    out = np.zeros(batch["tokens"].shape, np.float32)
    for r0 in range(0, n_rows, rows_per_call):
      sl = slice(r0, r0 + rows_per_call)
      out[sl] = np.asarray(self._fns[label](self.models[label], jnp.asarray(batch["tokens"][sl]),
                                            jnp.asarray(batch["positions"][sl]),
                                            jnp.asarray(batch["segment_ids"][sl])))
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
