"""benchmarks/cache_writeback.py runs as its docstring says and reports the same cache bits for the whole-window
and span write-backs (the script checks them itself; a wrong span would print DIFFERENT)."""

import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "benchmarks", "cache_writeback.py")


def test_small_run_prints_a_row_per_shape_with_the_same_cache_bits():
  proc = subprocess.run([sys.executable, SCRIPT, "--rows=2,3", "--windows=128,192", "--span=64", "--rounds=1"],
                        capture_output=True, text=True, timeout=300, cwd=ROOT)
  assert proc.returncode == 0, proc.stderr[-2000:]
  rows = [line for line in proc.stdout.splitlines() if re.match(r"^\|\s+\d", line)]
  assert len(rows) == 4, proc.stdout
  for line in rows:
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[-1] == "same" and float(cells[2]) > 0 and float(cells[3]) > 0, line


def test_a_span_longer_than_the_window_is_a_clear_error():
  proc = subprocess.run([sys.executable, SCRIPT, "--rows=2", "--windows=32", "--span=64", "--rounds=1"],
                        capture_output=True, text=True, timeout=300, cwd=ROOT)
  assert proc.returncode != 0 and "need span <= window" in proc.stderr, proc.stderr[-2000:]
