"""RL runs per seed from one finished SFT model (``launch/rl_seeds.py``): the seed's run directory and the child
trainer process.

A seed's run directory receives the SFT run's ``sft_model/`` (hard links where the filesystem allows, else copies:
an 8B model is not duplicated on disk) and ``sft_stats.json``; the trainer then finds the SFT model there and
starts RL from it. The child runs ``launch/train.py``; its wall time and peak RSS come from ``wait4``, and a stop
request reaching the parent (SIGTERM or Ctrl-C as ``KeyboardInterrupt``, ``codjax.common.interrupts``) is passed
on to the child as SIGTERM, which the trainer handles after its current step, before the parent stops.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from codjax.train.checkpoint import committed_steps


def _link_or_copy(src: str, dst: str) -> None:
  try:
    os.link(src, dst)
  except OSError:
    shutil.copy2(src, dst)


def prepare_seed_dir(run_dir: str, sft_run: str) -> bool:
  """Puts the SFT model into ``run_dir`` (once); True when the run has committed checkpoints to resume from."""
  if committed_steps(os.path.join(run_dir, "checkpoints")):
    return True
  os.makedirs(run_dir, exist_ok=True)
  if not os.path.isfile(os.path.join(run_dir, "sft_model", "config.json")):
    shutil.rmtree(os.path.join(run_dir, "sft_model"), ignore_errors=True)
    shutil.copytree(os.path.join(sft_run, "sft_model"), os.path.join(run_dir, "sft_model"),
                    copy_function=_link_or_copy)
  stats = os.path.join(sft_run, "sft_stats.json")
  if os.path.isfile(stats):
    shutil.copy2(stats, os.path.join(run_dir, "sft_stats.json"))
  return False


def run_child(cmd: list[str]) -> tuple[int, float, float]:
  """Runs ``cmd``; (exit code, wall seconds, peak RSS in GiB of the child). A stop request reaching this process
  is passed on to the child as SIGTERM before this process stops.

  The peak is Linux's ``ru_maxrss`` of the child, which counts the spawning process's RSS at the spawn (exec
  records the high-water mark of the memory it replaces): it is the child's own peak whenever that is larger, as
  for a trainer started by ``launch/rl_seeds.py`` (which stays at ~0.2 GiB)."""
  t0 = time.perf_counter()
  proc = subprocess.Popen(cmd)
  try:
    _, status, usage = os.wait4(proc.pid, 0)
  except KeyboardInterrupt:
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    raise
  proc.returncode = os.waitstatus_to_exitcode(status)
  return proc.returncode, time.perf_counter() - t0, usage.ru_maxrss / 2**20  # ru_maxrss: KiB on Linux
