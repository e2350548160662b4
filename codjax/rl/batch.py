"""Batch assembly: variable-length training sequences -> fixed-shape [B, T] arrays for the train step.

Each sequence carries its tokens, loss mask, rollout logprobs and either one advantage (broadcast over its
loss tokens) or per-token advantages. Sequences are packed first-fit-decreasing into rows of length T
(several per row, separated by segment ids 1, 2, ...; positions restart at 0 per sequence), or one per row
(``pack=False``, length bucketing). Row counts are padded to a multiple of ``row_multiple`` (microbatches x
data-parallel shards) and then up to the next bucket, so the step compiles for a handful of shapes only.
Sequences longer than T are cut to T (their tail loss tokens are dropped) and counted in ``stats``.

``seq_token_count`` gives every token the number of loss tokens of its sequence, which makes
sequence-mean-token-mean aggregation exact with packed rows (``codjax.rl.losses``).

``loss_index`` (optional, ``assemble_batch(with_loss_index=True)``): [B, M] int32, row b's loss-token columns in
order, then 0 (padding); M is the most loss tokens of any row rounded up to a multiple of max(16, T / 8), so a
batch shape compiles at most 8 widths. The train step and the reference scorer then compute the vocabulary
products only there (``codjax.rl.logprobs.shifted_token_logprobs(index_bm=...)``).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


@dataclasses.dataclass
class TrainSequence:
  tokens: Sequence[int]
  loss_mask: Sequence[int]
  old_logprobs: Sequence[float]
  advantage: float | Sequence[float] = 0.0
  teacher_logprobs: Sequence[float] | None = None


def row_bucket(n: int, multiple: int) -> int:
  """Padded row count for ``n`` rows: a multiple of ``multiple`` from the buckets 1, 2, 4, 8, 16, 24, 32, ...
  (in units of ``multiple``), so the train step compiles for a handful of shapes only."""
  n = max(1, -(-n // multiple))  # in units of `multiple`
  b = 1
  while b < n:
    b = b * 2 if b < 8 else b + 8  # 1, 2, 4, 8, 16, 24, 32, ...
  return b * multiple


def length_bucket(n: int, max_len: int, step: int = 64) -> int:
  """Row length for a longest sequence of ``n`` tokens: the next multiple of ``step`` (<= max_len)."""
  return int(min(max_len, max(step, -(-n // step) * step)))


def loss_index_width(max_count: int, seq_len: int) -> int:
  """M of ``loss_index``: ``max_count`` rounded up to a multiple of max(16, seq_len // 8), at most seq_len."""
  q = max(16, seq_len // 8)
  return int(min(seq_len, max(q, -(-max_count // q) * q)))


def loss_index(loss_mask_bt: np.ndarray) -> np.ndarray:
  """[B, M] int32: each row's columns with a nonzero loss mask, in order, padded with 0 (module docstring).
  Column 0 is left out: nothing precedes it, so its logprob is 0 on both paths, and 0 is free to mean padding."""
  mask = np.asarray(loss_mask_bt) != 0
  if mask.ndim != 2:
    raise ValueError(f"loss_mask must be [B, T], got shape {mask.shape}")
  mask[:, 0] = False
  counts = mask.sum(axis=1)
  width = loss_index_width(int(counts.max(initial=0)), mask.shape[1])
  cols = np.argsort(~mask, axis=1, kind="stable")[:, :width]  # each row's loss columns first, in order
  return np.where(np.arange(width)[None] < counts[:, None], cols, 0).astype(np.int32)


def assemble_batch(seqs: Sequence[TrainSequence], seq_len: int, *, pack: bool = True, row_multiple: int = 1,
                   with_teacher: bool = False, num_rows: int | None = None, bucket_len: bool = False,
                   with_loss_index: bool = False) -> tuple[dict[str, np.ndarray], dict[str, float]]:
  """Returns (batch arrays, stats). See module docstring.

  ``num_rows`` fixes the row count (constant shapes); the sequences must then fit (see ``fill_rows``).
  ``bucket_len`` (with ``pack=False``) shortens rows to ``length_bucket`` of the longest sequence: attention
  cost grows with the row length, so one-episode rows of a bucketed length beat long packed rows on CPU.
  ``with_loss_index`` adds ``loss_index`` (module docstring)."""
  if bucket_len and not pack and seqs:
    seq_len = length_bucket(max(len(s.tokens) for s in seqs), seq_len)
  if seq_len < 2:
    raise ValueError("seq_len must be >= 2")
  if row_multiple < 1:
    raise ValueError("row_multiple must be >= 1")
  lens = [min(len(s.tokens), seq_len) for s in seqs]
  cut = sum(len(s.tokens) > seq_len for s in seqs)
  dropped_loss_tokens = sum(int(np.sum(np.asarray(s.loss_mask)[seq_len:])) for s in seqs if len(s.tokens) > seq_len)
  rows: list[list[int]] = []
  fill: list[int] = []
  order = sorted(range(len(seqs)), key=lambda i: -lens[i])
  for i in order:
    if pack:
      for r, used in enumerate(fill):
        if used + lens[i] <= seq_len:
          rows[r].append(i)
          fill[r] += lens[i]
          break
      else:
        rows.append([i])
        fill.append(lens[i])
    else:
      rows.append([i])
      fill.append(lens[i])
  if num_rows is not None:
    if len(rows) > num_rows:
      raise ValueError(f"{len(rows)} rows needed but num_rows={num_rows}")
    n_rows = num_rows
  else:
    n_rows = row_bucket(len(rows), row_multiple)
  shape = (n_rows, seq_len)
  out = {
      "tokens": np.zeros(shape, np.int32),
      "positions": np.zeros(shape, np.int32),
      "segment_ids": np.zeros(shape, np.int32),
      "loss_mask": np.zeros(shape, np.float32),
      "advantages": np.zeros(shape, np.float32),
      "old_logprobs": np.zeros(shape, np.float32),
      "seq_token_count": np.ones(shape, np.float32),
  }
  if with_teacher:
    out["teacher_logprobs"] = np.zeros(shape, np.float32)
  layout = [(0, 0, 0)] * len(seqs)
  for r, members in enumerate(rows):
    col = 0
    for seg, i in enumerate(members, start=1):
      s, n = seqs[i], lens[i]
      sl = slice(col, col + n)
      layout[i] = (r, col, n)
      out["tokens"][r, sl] = np.asarray(s.tokens[:n])
      out["positions"][r, sl] = np.arange(n)
      out["segment_ids"][r, sl] = seg
      mask = np.asarray(s.loss_mask[:n], np.float32)
      out["loss_mask"][r, sl] = mask
      adv = np.asarray(s.advantage, np.float32)
      out["advantages"][r, sl] = (adv[:n] if adv.ndim else adv) * mask
      out["old_logprobs"][r, sl] = np.asarray(s.old_logprobs[:n], np.float32) * mask
      out["seq_token_count"][r, sl] = max(1.0, float(mask.sum()))
      if with_teacher:
        if s.teacher_logprobs is None:
          raise ValueError("with_teacher=True but a sequence has no teacher_logprobs")
        out["teacher_logprobs"][r, sl] = np.asarray(s.teacher_logprobs[:n], np.float32) * mask
      col += n
  if with_loss_index:
    out["loss_index"] = loss_index(out["loss_mask"])
  real = sum(lens)
  stats = {"sequences": float(len(seqs)), "rows": float(n_rows), "truncated_sequences": float(cut),
           "dropped_loss_tokens": float(dropped_loss_tokens), "tokens": float(real),
           "loss_tokens": float(out["loss_mask"].sum()), "fill": real / float(n_rows * seq_len),
           "layout": layout}  # per input sequence: (row, start column, length)
  return out, stats


def _rows_needed(lengths: Sequence[int], seq_len: int, limit: int) -> int:
  fill: list[int] = []
  for ln in sorted((min(x, seq_len) for x in lengths), reverse=True):
    for r, used in enumerate(fill):
      if used + ln <= seq_len:
        fill[r] += ln
        break
    else:
      fill.append(ln)
      if len(fill) > limit:
        break
  return len(fill)


def fill_rows(lengths: Sequence[int], seq_len: int, num_rows: int) -> int:
  """How many of the leading sequences fit into ``num_rows`` rows of ``seq_len`` under the first-fit-
  decreasing packing of ``assemble_batch`` (at least 1). Used for fixed-shape streaming (SFT) batches."""
  lo, hi = 1, len(lengths)
  while lo < hi:  # rows needed grows with the prefix length: binary search the longest prefix that fits
    mid = (lo + hi + 1) // 2
    if _rows_needed(lengths[:mid], seq_len, num_rows) <= num_rows:
      lo = mid
    else:
      hi = mid - 1
  return lo
