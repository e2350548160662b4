"""codjax/train/seed_runs.py: a seed's run directory from an SFT run, and the child process with its stop forwarded."""

import os
import resource
import signal
import sys
import threading
import time

import pytest

from codjax.common import interrupts
from codjax.train.seed_runs import prepare_seed_dir, run_child


def _sft_run(tmp_path):
  d = tmp_path / "sft_run"
  (d / "sft_model").mkdir(parents=True)
  (d / "sft_model" / "config.json").write_text('{"model_type": "qwen3"}')
  (d / "sft_model" / "model.safetensors").write_bytes(os.urandom(4096))
  (d / "sft_stats.json").write_text('{"train_s": 1.0}')
  return d


def test_a_seed_dir_gets_the_sft_model_once_and_resumes_from_checkpoints(tmp_path):
  src = _sft_run(tmp_path)
  run = tmp_path / "seed1"
  assert prepare_seed_dir(str(run), str(src)) is False
  for name in ("config.json", "model.safetensors"):
    assert (run / "sft_model" / name).read_bytes() == (src / "sft_model" / name).read_bytes()
  assert (run / "sft_stats.json").read_text() == '{"train_s": 1.0}'
  # same filesystem: hard links, not copies of the weights
  assert os.stat(run / "sft_model" / "model.safetensors").st_ino == os.stat(src / "sft_model" / "model.safetensors").st_ino
  assert prepare_seed_dir(str(run), str(src)) is False  # again: nothing to redo, no error
  (run / "checkpoints" / "12").mkdir(parents=True)  # a committed orbax step
  assert prepare_seed_dir(str(run), str(src)) is True
  (tmp_path / "seed2" / "sft_model").mkdir(parents=True)  # a copy that stopped before config.json
  assert prepare_seed_dir(str(tmp_path / "seed2"), str(src)) is False
  assert (tmp_path / "seed2" / "sft_model" / "config.json").is_file()


def test_run_child_reports_exit_code_wall_time_and_peak_rss():
  # the child touches 600 MiB (bytes of ones, so every page is written)
  code, wall, rss = run_child([sys.executable, "-c", "import time; x = b'\\x01' * (600 * 2**20); time.sleep(0.3); "
                               "raise SystemExit(3)"])
  assert code == 3 and wall >= 0.3
  # GiB: the child's 600 MiB are counted; Linux's figure is at least this process's RSS at the spawn (in a test
  # worker that has run JAX tests, several GiB), and never more than that or the child's own peak
  own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
  assert 0.58 < rss < max(2.0, own + 0.1)


def test_a_stop_request_reaches_the_child_as_sigterm(tmp_path):
  ready, got = tmp_path / "ready", tmp_path / "got"
  child = (f"import signal, sys, time\n"
           f"def on(s, f):\n  open({str(got)!r}, 'w').write('TERM'); sys.exit(143)\n"
           f"signal.signal(signal.SIGTERM, on)\nopen({str(ready)!r}, 'w').write('1')\ntime.sleep(60)\n")

  def stop_when_ready():
    for _ in range(600):
      if ready.exists():
        break
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

  previous = signal.getsignal(signal.SIGTERM)
  interrupts.install()
  try:
    threading.Thread(target=stop_when_ready, daemon=True).start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
      run_child([sys.executable, "-c", child])
    assert time.perf_counter() - t0 < 30  # the child stopped; nobody waited for its 60 s sleep
    assert got.read_text() == "TERM"
  finally:
    signal.signal(signal.SIGTERM, previous)
    interrupts.reset()
