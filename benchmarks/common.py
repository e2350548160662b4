"""Timing helpers shared by the codjax-vs-torch benchmark scripts.

Rules every script follows (developers' guide): both sides run in the same process on the same cores, their
repetitions are interleaved (A B A B ..., the order alternating each round) so that load from other
processes hits both alike, every timed call ends with a device sync (``jax.block_until_ready`` / the torch
result read back), compilation and first-call costs are paid in warmup rounds that are not timed, and the
reported figure is the median over rounds.

Each call records wall-clock seconds and the CPU seconds of the whole process (``time.process_time``: all
threads, XLA's and torch's included). On a machine shared with other jobs the wall clock includes time spent
descheduled, while CPU seconds count only this process's own work, so with ``--threads=1`` CPU seconds are
the steadier measure of cost (with several threads they also count torch/OpenMP spin-waiting, so compare
wall clock there).

``pin_threads(n)`` must run before jax or torch start their thread pools: it restricts the process to n
cores (``os.sched_setaffinity``, which XLA's CPU thread pool sizes itself from) and sets torch's intra-op
threads to the same n, so both frameworks compute with the same number of threads.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import resource
import statistics
import sys
import time
from typing import Callable, Sequence


def pin_threads(n: int | None) -> int:
  """Restricts this process to ``n`` cores (all available ones when None); returns the count used.

  Call before importing jax or torch."""
  cores = sorted(os.sched_getaffinity(0))
  if n is not None:
    if not 1 <= n <= len(cores):
      raise ValueError(f"threads must be in [1, {len(cores)}], got {n}")
    cores = cores[:n]
    os.sched_setaffinity(0, cores)
  return len(cores)


def set_torch_threads(n: int) -> None:
  import torch

  torch.set_num_threads(n)
  torch.set_num_interop_threads(1)


@dataclasses.dataclass
class Timings:
  """Per-round wall-clock and process-CPU seconds of one runner, with the kernel's share of that CPU time
  (``sys``) and the minor page faults of the round (``faults``: first touches of freshly mapped memory)."""

  wall: list[float] = dataclasses.field(default_factory=list)
  cpu: list[float] = dataclasses.field(default_factory=list)
  sys: list[float] = dataclasses.field(default_factory=list)
  faults: list[int] = dataclasses.field(default_factory=list)

  @property
  def wall_median(self) -> float:
    return statistics.median(self.wall)

  @property
  def cpu_median(self) -> float:
    return statistics.median(self.cpu)

  @property
  def sys_median(self) -> float:
    return statistics.median(self.sys) if self.sys else float("nan")

  @property
  def faults_median(self) -> float:
    return statistics.median(self.faults) if self.faults else float("nan")


def timed_usage(fn: Callable[[], object], sync: Callable[[object], object]) -> tuple[float, float, float, int]:
  """(wall seconds, process CPU seconds, kernel CPU seconds, minor page faults) of one ``sync(fn())``."""
  u0, w0, c0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), time.process_time()
  sync(fn())
  w1, c1, u1 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
  return w1 - w0, c1 - c0, u1.ru_stime - u0.ru_stime, u1.ru_minflt - u0.ru_minflt


def timed(fn: Callable[[], object], sync: Callable[[object], object]) -> tuple[float, float]:
  """(wall seconds, process CPU seconds) of one ``sync(fn())``."""
  return timed_usage(fn, sync)[:2]


def jax_sync(x):
  import jax

  return jax.block_until_ready(x)


def no_sync(x):
  """Torch CPU ops are synchronous: the value is complete when the call returns."""
  return x


def interleaved(runners: dict[str, tuple[Callable[[], object], Callable[[object], object]]], rounds: int,
                warmup: int = 1) -> dict[str, Timings]:
  """Times each runner ``rounds`` times, interleaved, after ``warmup`` untimed calls each.

  ``runners`` maps a name to (fn, sync). Round r runs the runners in their given order when r is even and
  reversed when odd, so neither side always runs right after the other.
  """
  names = list(runners)
  for name in names:
    fn, sync = runners[name]
    for _ in range(warmup):
      sync(fn())
  times = {name: Timings() for name in names}
  for r in range(rounds):
    for name in (names if r % 2 == 0 else names[::-1]):
      wall, cpu, kernel, faults = timed_usage(*runners[name])
      times[name].wall.append(wall)
      times[name].cpu.append(cpu)
      times[name].sys.append(kernel)
      times[name].faults.append(faults)
  return times


HEADER = ("workload", "impl", "wall s", "CPU s", "sys s", "page faults", "tokens/s", "vs torch (wall)",
          "vs torch (CPU)", "check")


def row(workload: str, impl: str, t: Timings, peer: Timings, tokens: int, check: str = "") -> list[object]:
  """A table row: medians (wall, process CPU, its kernel part, minor page faults per call), tokens/s by wall
  clock, and peer/this time ratios (> 1: faster than the peer)."""
  return [workload, impl, t.wall_median, t.cpu_median, t.sys_median, f"{int(t.faults_median):,}",
          tokens / t.wall_median, peer.wall_median / t.wall_median, peer.cpu_median / t.cpu_median, check]


def host_line() -> str:
  """CPU model, vector ISA, cores and memory of this machine, and torch's CPU kernel level when torch is
  loaded: the codjax/torch ratios depend on the host (for example AVX2-only vs AVX-512 hosts)."""
  model, flags = platform.processor() or "?", set()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, val = line.partition(":")
        if key.strip() == "model name":
          model = val.strip()
        elif key.strip() == "flags":
          flags = set(val.split())
          break
  except OSError:
    pass
  isa = next((x for x in ("avx512f", "avx2", "avx", "sse4_2") if x in flags), "?")
  extra = [x for x in ("avx512_bf16", "amx_tile") if x in flags]
  line = f"# host: {model}, {isa}{''.join(' +' + x for x in extra)}, {len(os.sched_getaffinity(0))} cores"
  try:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    line += f", {mem:.0f} GiB"
  except (ValueError, OSError):
    pass
  if "torch" in sys.modules:
    torch = sys.modules["torch"]
    line += f"; torch {torch.__version__} cpu capability {torch.backends.cpu.get_cpu_capability()}"
  return line


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
  """A Markdown table (so it can be pasted into benchmarks/README.md as is)."""
  cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
  widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
  line = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
  print(line(cells[0]))
  print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
  for r in cells[1:]:
    print(line(r))


def _fmt(c: object) -> str:
  if isinstance(c, float):
    if c == 0 or abs(c) >= 100:
      return f"{c:,.0f}"
    if abs(c) >= 1:
      return f"{c:.2f}"
    return f"{c:.3g}"
  return str(c)


def mib(n_bytes: float) -> float:
  return n_bytes / 2**20
