"""Host allocator policy for CPU training: keep freed memory in the process instead of mapping it anew.

Why: XLA's CPU runtime allocates an executable's temporaries as one block per call, from a worker thread
(1.96 GB for the train step of the 42M-parameter model in ``benchmarks/model_step.py``). glibc serves any
request over 64 MiB in a thread arena with a fresh ``mmap`` and unmaps it on ``free``, so every call touches
its whole scratch space as new pages: 0.5M minor page faults per step there, 1.3-2.6 s of kernel CPU time in a
4.5-6 s step (torch's eager step, which frees tensor by tensor, faulted 0.3M pages in the same run).

``keep_freed_memory()`` sets three glibc ``mallopt`` parameters: one arena (``M_ARENA_MAX = 1``: every thread
allocates from the main heap, which can grow to any size), no ``mmap`` for large blocks (``M_MMAP_MAX = 0``)
and no trimming of the heap top (``M_TRIM_THRESHOLD`` = SIZE_MAX). Blocks freed by one call are then reused
by the next one: after 2-3 warm-up calls the step above runs with no page faults at all, 1.1-1.45x faster
in wall time (``benchmarks/README.md``, "Fourth re-run"; results are bit-identical). The cost is that the process keeps
its peak heap (RSS never shrinks) and that all threads share one allocator lock, which is why it is applied to CPU runs only (``policy="auto"``).

It must run before JAX creates its CPU thread pools (first device query or computation): threads that
already own an arena keep it. Launch scripts call it first thing in ``main``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import pkgutil
import platform
from importlib.metadata import entry_points

POLICIES = ("auto", "keep", "system")
ENV_VAR = "CODJAX_HOST_ALLOCATOR"  # overrides the policy passed in (e.g. "system" to opt out everywhere)

# glibc <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8

_applied = False


def _accelerator_plugins() -> list[str]:
  """The PJRT plugins JAX would load (found as ``jax._src.xla_bridge.discover_pjrt_plugins`` finds them:
  the ``jax_plugins`` entry-point group and namespace package, without importing jax), plus libtpu."""
  found = [ep.value for ep in entry_points(group="jax_plugins")]
  spec = importlib.util.find_spec("jax_plugins")
  if spec is not None and spec.submodule_search_locations:
    found += [name for _, name, _ in pkgutil.iter_modules(spec.submodule_search_locations)]
  if importlib.util.find_spec("libtpu") is not None:
    found.append("libtpu")
  return found


def _cpu_only() -> bool:
  """True when JAX will run on the CPU: JAX_PLATFORMS says cpu, or no accelerator plugin is installed."""
  plats = os.environ.get("JAX_PLATFORMS", "").strip().lower()
  if plats:
    return plats.split(",")[0].strip() == "cpu"
  return not _accelerator_plugins()


def _jax_backend_started() -> bool:
  import sys

  if "jax" not in sys.modules:
    return False
  from jax._src import xla_bridge

  return xla_bridge.backends_are_initialized()


def keep_freed_memory(policy: str = "auto") -> tuple[bool, str]:
  """Applies the allocator policy; returns (applied, reason).

  ``policy``: ``auto`` (keep on CPU-only runs), ``keep`` (always, on glibc) or ``system`` (leave malloc as
  it is). The ``CODJAX_HOST_ALLOCATOR`` environment variable, when set, replaces ``policy``.
  """
  global _applied
  policy = os.environ.get(ENV_VAR, policy).strip().lower()
  if policy not in POLICIES:
    raise ValueError(f"host allocator policy must be one of {POLICIES}, got {policy!r}"
                     f"{f' (from ${ENV_VAR})' if ENV_VAR in os.environ else ''}")
  if _applied:
    return True, "already applied"
  if policy == "system":
    return False, "policy 'system': glibc defaults kept"
  if policy == "auto" and not _cpu_only():
    return False, "policy 'auto': an accelerator backend is installed, glibc defaults kept"
  if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
    return False, f"not a glibc Linux process ({platform.system()} {platform.libc_ver()[0] or 'unknown libc'})"
  if _jax_backend_started():
    return False, ("JAX's backend is already initialized (its threads own their arenas); call "
                   "keep_freed_memory() before the first JAX computation")
  libc = ctypes.CDLL(None)
  libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
  # mallopt's value is an int; glibc converts -1 to SIZE_MAX for the trim threshold (never trim)
  for param, value in ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, -1)):
    if libc.mallopt(param, value) != 1:
      raise RuntimeError(f"glibc mallopt({param}, {value}) failed")
  _applied = True
  return True, "one arena, no mmap for large blocks, no heap trimming"


def define_flag():
  """The ``--host_allocator`` absl flag of the launch scripts (pass its value to ``keep_freed_memory``)."""
  from absl import flags

  return flags.DEFINE_enum("host_allocator", "auto", POLICIES,
                           "host malloc policy: auto = keep freed memory in the process on CPU-only runs (no "
                           "per-step page faults on XLA's scratch buffers), keep = always, system = glibc "
                           "defaults (codjax/train/host_allocator.py)")
