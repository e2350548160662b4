"""codjax.rl.batch.assemble_batch: training sequences -> [B, T] arrays, against arrays written out by hand.

First-fit-decreasing packing (longest first, each into the first row with room), segment ids 1, 2, ... per
row and positions restarting at 0 per sequence; advantages and old logprobs kept on loss tokens only; every
token carries its sequence's loss-token count; row counts padded to a multiple of ``row_multiple`` and then
to the buckets 1, 2, 4, 8, 16, 24, 32, ... (in units of that multiple); sequences longer than T cut to T.
"""

import numpy as np
import pytest

from codjax.rl.batch import TrainSequence, assemble_batch, fill_rows, length_bucket

S0 = TrainSequence(tokens=[11, 12, 13, 14, 15], loss_mask=[0, 0, 1, 1, 1],
                   old_logprobs=[-9.0, -9.0, -0.5, -1.0, -1.5], advantage=2.0,
                   teacher_logprobs=[-9.0, -9.0, -0.1, -0.2, -0.3])
S1 = TrainSequence(tokens=[21, 22, 23], loss_mask=[0, 1, 1], old_logprobs=[-9.0, -0.25, -0.75],
                   advantage=[9.0, -1.0, 0.5], teacher_logprobs=[-9.0, -0.4, -0.5])  # per-token advantages
S2 = TrainSequence(tokens=[31, 32, 33, 34, 35, 36, 37], loss_mask=[0, 0, 0, 1, 1, 0, 1],
                   old_logprobs=[-9.0, -9.0, -9.0, -2.0, -3.0, -9.0, -4.0], advantage=-1.0,
                   teacher_logprobs=[-9.0, -9.0, -9.0, -0.6, -0.7, -9.0, -0.8])


def test_packed_batch_arrays():
  # lengths 5, 3, 7 into rows of 8, longest first: S2 -> row 0 (7 used); S0 does not fit row 0 -> row 1
  # (5 used); S1 does not fit row 0 (7 + 3), fits row 1 (5 + 3 = 8). Two rows: bucket 2.
  batch, stats = assemble_batch([S0, S1, S2], 8, pack=True, with_teacher=True)
  want = {
      "tokens": [[31, 32, 33, 34, 35, 36, 37, 0], [11, 12, 13, 14, 15, 21, 22, 23]],
      "positions": [[0, 1, 2, 3, 4, 5, 6, 0], [0, 1, 2, 3, 4, 0, 1, 2]],
      "segment_ids": [[1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 2, 2, 2]],
      "loss_mask": [[0, 0, 0, 1, 1, 0, 1, 0], [0, 0, 1, 1, 1, 0, 1, 1]],
      "advantages": [[0, 0, 0, -1, -1, 0, -1, 0], [0, 0, 2, 2, 2, 0, -1, 0.5]],
      "old_logprobs": [[0, 0, 0, -2, -3, 0, -4, 0], [0, 0, -0.5, -1, -1.5, 0, -0.25, -0.75]],
      "teacher_logprobs": [[0, 0, 0, -0.6, -0.7, 0, -0.8, 0], [0, 0, -0.1, -0.2, -0.3, 0, -0.4, -0.5]],
      "seq_token_count": [[3, 3, 3, 3, 3, 3, 3, 1], [3, 3, 3, 3, 3, 2, 2, 2]],
  }
  assert sorted(batch) == sorted(want)
  for k, v in want.items():
    np.testing.assert_array_equal(batch[k], np.asarray(v, batch[k].dtype), err_msg=k)
    assert batch[k].shape == (2, 8)
  assert batch["tokens"].dtype == np.int32 and batch["advantages"].dtype == np.float32
  assert stats["layout"] == [(1, 0, 5), (1, 5, 3), (0, 0, 7)]
  assert {k: stats[k] for k in ("sequences", "rows", "truncated_sequences", "dropped_loss_tokens", "tokens",
                                "loss_tokens", "fill")} == {
      "sequences": 3, "rows": 2, "truncated_sequences": 0, "dropped_loss_tokens": 0, "tokens": 15,
      "loss_tokens": 8, "fill": 15 / 16}


def test_unpacked_batch_one_sequence_per_row_with_length_bucket():
  batch, stats = assemble_batch([S0, S1, S2], 256, pack=False, bucket_len=True)
  # one row per sequence, longest first; the row length is the next multiple of 64 of the longest (7): 64
  assert batch["tokens"].shape == (4, 64) and stats["rows"] == 4
  np.testing.assert_array_equal(batch["tokens"][:, :8], [[31, 32, 33, 34, 35, 36, 37, 0],
                                                         [11, 12, 13, 14, 15, 0, 0, 0],
                                                         [21, 22, 23, 0, 0, 0, 0, 0],
                                                         [0] * 8])
  np.testing.assert_array_equal(batch["segment_ids"][:, :8], [[1] * 7 + [0], [1] * 5 + [0] * 3,
                                                              [1] * 3 + [0] * 5, [0] * 8])
  np.testing.assert_array_equal(batch["advantages"][2, :4], [0, -1, 0.5, 0])
  assert not batch["tokens"][:, 8:].any() and not batch["loss_mask"][3].any()
  assert stats["layout"] == [(1, 0, 5), (2, 0, 3), (0, 0, 7)]
  assert length_bucket(70, 256) == 128 and length_bucket(70, 100) == 100 and length_bucket(1, 256) == 64


@pytest.mark.parametrize("n_seqs, row_multiple, rows", [
    (1, 1, 1), (3, 1, 4), (5, 1, 8), (9, 1, 16), (17, 1, 24), (25, 1, 32),
    (5, 2, 8), (3, 4, 4), (5, 4, 8), (13, 4, 16),
])
def test_row_count_buckets(n_seqs, row_multiple, rows):
  seqs = [TrainSequence([i + 1, i + 2], [0, 1], [0.0, -1.0], 1.0) for i in range(n_seqs)]
  batch, stats = assemble_batch(seqs, 4, pack=False, row_multiple=row_multiple)
  assert batch["tokens"].shape == (rows, 4) and stats["rows"] == rows
  assert batch["loss_mask"].sum() == n_seqs and batch["loss_mask"][n_seqs:].sum() == 0  # padding rows: no loss


def test_fixed_row_count():
  batch, _ = assemble_batch([S0, S1, S2], 8, pack=True, num_rows=3)
  assert batch["tokens"].shape == (3, 8) and not batch["tokens"][2].any()
  with pytest.raises(ValueError, match="2 rows needed but num_rows=1"):
    assemble_batch([S0, S1, S2], 8, pack=True, num_rows=1)
  # how many leading sequences fit n rows of 8 (same packing): [5] [5, 3] fit one row, [5, 3, 7] needs two
  assert fill_rows([5, 3, 7], 8, 1) == 2 and fill_rows([5, 3, 7], 8, 2) == 3 and fill_rows([9], 8, 1) == 1


def test_truncation_drops_tail_loss_tokens_and_counts_them():
  # rows of 4: S0 -> [11..14] (mask 0 0 1 1, one loss token dropped), S2 -> [31..34] (mask 0 0 0 1, two
  # dropped); lengths 4, 3, 4 pack one per row (ties keep input order): S0, S2, S1; three rows -> bucket 4
  batch, stats = assemble_batch([S0, S1, S2], 4, pack=True)
  np.testing.assert_array_equal(batch["tokens"], [[11, 12, 13, 14], [31, 32, 33, 34], [21, 22, 23, 0], [0] * 4])
  np.testing.assert_array_equal(batch["loss_mask"], [[0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 1, 0], [0] * 4])
  np.testing.assert_array_equal(batch["advantages"], [[0, 0, 2, 2], [0, 0, 0, -1], [0, -1, 0.5, 0], [0] * 4])
  np.testing.assert_array_equal(batch["old_logprobs"], [[0, 0, -0.5, -1], [0, 0, 0, -2], [0, -0.25, -0.75, 0],
                                                        [0] * 4])
  # the loss-token count of a cut sequence is what is left of it
  np.testing.assert_array_equal(batch["seq_token_count"], [[2] * 4, [1] * 4, [2, 2, 2, 1], [1] * 4])
  assert stats["truncated_sequences"] == 2 and stats["dropped_loss_tokens"] == 3
  assert stats["tokens"] == 11 and stats["loss_tokens"] == 5


def test_bad_arguments_raise():
  with pytest.raises(ValueError, match="seq_len must be >= 2"):
    assemble_batch([S0], 1)
  with pytest.raises(ValueError, match="row_multiple must be >= 1"):
    assemble_batch([S0], 8, row_multiple=0)
  with pytest.raises(ValueError, match="no teacher_logprobs"):
    assemble_batch([TrainSequence([1, 2], [0, 1], [0.0, -1.0], 1.0)], 8, with_teacher=True)
