"""Fixtures of the launcher tests."""

import json
import os

import pytest


@pytest.fixture
def pack_records():
  """``count(out_dir)``: finished-pack records in ``out_dir/eval_records.jsonl`` (0 before the file exists); a
  line still being written is not counted."""

  def count(out_dir):
    path = os.path.join(out_dir, "eval_records.jsonl")
    if not os.path.exists(path):
      return 0
    n = 0
    with open(path) as f:
      for line in f:
        try:
          n += json.loads(line).get("record") == "pack"
        except ValueError:
          pass
    return n

  return count
