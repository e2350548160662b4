"""Runs one command as N local processes of one multi-controller JAX program (``launch/multiprocess.py``).

Each process gets the standard coordinator variables that ``codjax.parallel.mesh.maybe_initialize_distributed``
reads (``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``), exactly what a cluster
launcher sets on every host; on CPU (``platform="cpu"``) also ``JAX_PLATFORMS=cpu`` and
``devices_per_process`` fake host devices, so a 2 x 4-device "cluster" runs on one machine.

Failure handling: the first process that exits non-zero (or is killed) ends the run: the others are sent
SIGTERM, then SIGKILL after a grace period, and its exit code is returned; Ctrl-C (SIGINT/SIGTERM to the
launcher) stops every process the same way. Output lines are prefixed with ``[p<i>]``.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Sequence

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def free_port() -> int:
  """A TCP port that was free a moment ago (for the coordinator)."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("127.0.0.1", 0))
    return int(s.getsockname()[1])


def process_env(process_id: int, num_processes: int, coordinator: str, platform: str = "cpu",
                devices_per_process: int = 0, base: dict | None = None) -> dict[str, str]:
  """The environment of process ``process_id``: ``base`` (default: this process's) plus the coordinator
  variables; on CPU the platform and ``devices_per_process`` fake devices (replacing any device-count flag)."""
  env = dict(os.environ if base is None else base)
  env.update(JAX_COORDINATOR_ADDRESS=coordinator, JAX_NUM_PROCESSES=str(num_processes),
             JAX_PROCESS_ID=str(process_id), PYTHONUNBUFFERED="1")
  if platform:
    env["JAX_PLATFORMS"] = platform
  if platform == "cpu" and devices_per_process:
    kept = [f for f in env.get("XLA_FLAGS", "").split() if not re.fullmatch(re.escape(DEVICE_COUNT_FLAG) + r"(=\S*)?", f)]
    env["XLA_FLAGS"] = " ".join(kept + [f"{DEVICE_COUNT_FLAG}={int(devices_per_process)}"])
  return env


def _pump(stream, prefix: str, sink, lock: threading.Lock) -> None:
  for line in iter(stream.readline, b""):
    with lock:
      sink.write(f"{prefix}{line.decode(errors='replace')}")
      sink.flush()
  stream.close()


def run_local(argv: Sequence[str], num_processes: int, devices_per_process: int = 0, platform: str = "cpu",
              port: int = 0, timeout_s: float | None = None, grace_s: float = 10.0, sink=None,
              extra_env: dict | None = None) -> int:
  """Runs ``argv`` (a full command, e.g. ``[sys.executable, "launch/train.py", ...]``) as ``num_processes``
  processes of one JAX program; returns 0 when all succeed, else the first failure's exit code (a process
  killed by a signal: 128 + the signal number; the timeout: 124)."""
  if num_processes < 1:
    raise ValueError(f"num_processes must be >= 1, got {num_processes}")
  if not argv:
    raise ValueError("no command to run")
  sink = sys.stdout if sink is None else sink
  coordinator = f"127.0.0.1:{port or free_port()}"
  lock = threading.Lock()
  procs: list[subprocess.Popen] = []
  pumps: list[threading.Thread] = []
  for i in range(num_processes):
    env = process_env(i, num_processes, coordinator, platform, devices_per_process)
    env.update(extra_env or {})
    p = subprocess.Popen(list(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    procs.append(p)
    t = threading.Thread(target=_pump, args=(p.stdout, f"[p{i}] ", sink, lock), daemon=True)
    t.start()
    pumps.append(t)

  def stop_all() -> None:
    for p in procs:
      if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
      try:
        p.wait(timeout=max(0.0, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()

  interrupted = []
  old = {}

  def on_signal(signum, frame):
    del frame
    interrupted.append(signum)

  if threading.current_thread() is threading.main_thread():
    for s in (signal.SIGINT, signal.SIGTERM):
      old[s] = signal.signal(s, on_signal)
  rc = 0
  start = time.monotonic()
  try:
    while True:
      codes = [p.poll() for p in procs]
      failed = [c for c in codes if c is not None and c != 0]
      if failed:
        rc = failed[0] if failed[0] > 0 else 128 - failed[0]
        with lock:
          sink.write(f"[launcher] process {codes.index(failed[0])} exited with {failed[0]}; stopping the others\n")
        break
      if all(c == 0 for c in codes):
        break
      if interrupted:
        rc = 128 + interrupted[0]
        break
      if timeout_s is not None and time.monotonic() - start > timeout_s:
        rc = 124
        with lock:
          sink.write(f"[launcher] timeout after {timeout_s:.0f} s; stopping every process\n")
        break
      time.sleep(0.05)
  finally:
    stop_all()
    for t in pumps:
      t.join(timeout=5)
    for s, h in old.items():
      signal.signal(s, h)
  return rc
