"""The JAX engine's kernel settings: the bucket lists that fix the kernels' shapes, the named kernel sets
(``Kernels``, ``KERNELS``; ``JaxEngine(kernels=...)``), the CPU feature flags some of them depend on, and the
bucketing helpers the engine plans its calls with."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import numpy as np

CHUNK_BUCKETS = (16, 32, 64, 128, 256, 512)
MIN_LENGTH_BUCKET = 128
# windows up to this many positions are powers of two; under the "fast" kernels longer ones also take the
# midpoints 3 * 2^k / 2 (768, 1536, 3072, ...): a decode step's attention reads the window, and a conversation
# just past a power of two would otherwise read up to twice its length
FINE_LENGTH_FROM = 512
# min_batch applies to prefill chunks too, except under the "fast" kernels (a padding row costs its whole chunk):
# a chunk of C tokens is padded to at most max(1, PREFILL_PAD_TOKENS // C) rows (16/32-token chunks: 8 rows;
# 64: 4; 128: 2; 256 and 512: 1), so a lone 512-token prompt runs 512 token slots, not 4,096
PREFILL_PAD_TOKENS = 256


@dataclasses.dataclass(frozen=True)
class Kernels:
  """How the engine shapes and compiles its kernels. Every choice keeps the replies' distribution and the
  per-row keys; they differ in float rounding only (logprobs within ~1e-5), so a recorded run reproduces bit
  for bit only with the choice it was made with.

  fine_windows: windows past ``FINE_LENGTH_FROM`` also take the midpoints 3 * 2^k / 2 (else powers of two).
  prefill_pad_tokens: prefill chunks of C tokens run at least min(min_batch, PREFILL_PAD_TOKENS // C) rows
    (None: at least ``min_batch`` rows, whatever C).
  cpu_decode_options: XLA compiler options of the decode loop on the CPU backend. ``{"xla_cpu_experimental_
    ynn_fusion_type": ""}`` leaves its matmuls of a few rows to XLA's own dot emitter instead of YNNPACK
    fusions, which run [8, 384] x [384, 1024]-sized products at ~4 GB/s of weights against ~6.6 GB/s (2 GHz
    AVX2 host; decode steps of the 13M-parameter benchmark model 25 -> 18 ms at 8 rows). Prefill keeps YNNPACK
    (hundreds of rows: no difference measured).
  unrolled_prefill: on models that allow it (``UNROLLED_PREFILL``: Qwen3), prefill chunks run the layers
    unrolled over per-layer weights and caches (the decode loop's form) instead of a ``scan`` over the stacked
    ones, whose per-layer weight slices and stacked cache outputs XLA on CPU copies; the caches come out
    bit-identical. 13M-parameter benchmark model, 2 GHz AVX2 host, 2 cores, median ms per call (scan ->
    unrolled): 8 rows x 16 tokens over 768 positions 173 -> 159, 8 x 64 over 512 363 -> 330, 8 x 512 over 768
    2,871 -> 2,193 (benchmarks/README.md).
  decode_floor: the smallest batch a generate call's decode runs, its phases and a call of a few requests
    alike (None: ``min_batch``). A call decodes in phases that halve the batch once at most half its rows are
    still going; with a floor below ``min_batch`` the last rows of uneven replies stop running in an 8-row
    kernel; each smaller batch compiles once per window (decode step of the 13M-parameter model: ~17 ms at
    8 rows, ~8 ms at 1 on one core). Logprobs move within float rounding (other batch shapes), so
    runs recorded with another choice do not reproduce bit for bit; prefill floors keep ``min_batch``.
  packed_prefill: on models that allow it (``forward_cached_packed``: Qwen3) and with ``unrolled_prefill``, a
    prefill chunk's valid tokens run packed through the row-wise products (N tokens, N a multiple of
    max(16, B C / 8), instead of B C slots); only attention sees the padded [B, C] layout. A chunk of rows of
    uneven length, or one row under the kernel's row floor, no longer computes its padding.
  decode_window_step: decode calls work on the next multiple of this many positions at or past their furthest
    position (at least ``MIN_LENGTH_BUCKET``) instead of ``fine_windows``' powers of two and midpoints; prefill
    keeps those. A decode step reads its whole window of keys and values (at 8 rows over 768 positions of the
    13M-parameter benchmark model as many bytes as the weights), and the benchmark's calls end at 246-759
    positions: 64-position windows cut a call at 531 positions from 768 to 576. Each (rows, window) compiles
    once: up to max_seq_len / step decode programs per batch size instead of ~2 log2(max_seq_len).
  max_prefill_chunk: prefill chunks hold at most this many tokens per row (the chunk buckets above it are not
    used; None: the engine's ``chunk_buckets`` as given). A chunk's attention reads its whole window for every
    query, and a chunk's window is the bucket of its furthest position: a 374-token suffix from position 130
    runs as one 512-token chunk over 768 positions, or as 256 + 128 over 512 and 768. 13M-parameter benchmark
    model, 8 rows x 512 tokens: ~0.25 ms per window position of the call (315 ms over 512 positions, 381 over
    768), about as much as its products. In whole mid rounds of benchmarks/rollout.py the gain is small: the
    hint turn's prefill 359 ms as one chunk against 175 + 181 ms as two (the second chunk's short rows padded to
    256 queries), interleaved rounds -1 % (medians of 12; earlier comparisons on the noisy host -8 % to +3 %;
    2026-12-06; docs/results.md).
  decode_panels: on the CPU backend, for models that allow it (``panel_layers``: Qwen3), the decode loop's
    weight products of batches of up to ``decode_panel_rows`` rows read the layer weights as column panels of
    this width (``codjax.models.matmul.PanelWeight``, made once per weight version beside the per-layer
    weights: a third copy of the layer weights in memory) instead of row-major [K, N] matrices. XLA on CPU runs
    a few rows by a [K, N] weight at a fraction of the memory bandwidth that contiguous [K, 32] panels allow
    (13M-parameter benchmark model, 2 vCPUs of an AVX-512 EPYC, ms per decode step over 512 positions at 1 / 2
    rows: 3.24 / 4.11 -> 2.28 / 3.29 interleaved; at 8 rows attention dominates and panels gain nothing:
    2026-12-07; docs/results.md). None: plain weights.
  decode_panel_rows: the largest decode batch that takes the panels (larger ones take the per-layer weights).
  decode_panels_if: a CPU feature flag (``/proc/cpuinfo``) without which the panels are left out (measured on
    AVX-512 hosts only; elsewhere the decode runs as under the same kernels without panels, bit for bit).
  cpu_decode_options_unless: a CPU feature flag (``/proc/cpuinfo``); on hosts that have it the decode loop
    compiles with XLA's default options instead of ``cpu_decode_options``. With AVX-512 YNNPACK's few-row
    products and attention batches beat XLA's dot emitter (2 vCPUs of an AVX-512 EPYC, 13M-parameter model, ms
    per decode step at 8 rows: 5.1 against 6.6 over 256 positions, 6.5 against 10.6 over 768; interleaved mid
    rounds of benchmarks/rollout.py 6.03 -> 5.06 s), the reverse of the AVX2 host above. Runs on hosts without
    the flag are unchanged bit for bit.
  """

  fine_windows: bool
  prefill_pad_tokens: int | None
  cpu_decode_options: tuple[tuple[str, str], ...]
  unrolled_prefill: bool = False
  decode_floor: int | None = None
  cpu_decode_options_unless: str | None = None
  packed_prefill: bool = False
  decode_window_step: int | None = None
  max_prefill_chunk: int | None = None
  decode_panels: int | None = None
  decode_panel_rows: int = 4
  decode_panels_if: str | None = None


# "fast3": the default, "fast2" whose decode phases of up to 4 rows read the layer weights as column panels on
# AVX-512 hosts (2026-12-07; there it rounds differently from "fast2", elsewhere it is "fast2"); "fast2": "fast"
# with decode phases down to 2 rows, packed prefill, 64-position decode windows and prefill chunks of at most 256
# tokens (2026-12-06; each rounds differently from "fast"); "fast": the kernels of
# the main job's recorded run (experiments/tiny_cod_frozenlake.py selects it); "v1": the kernels of the runs recorded in
# the README and benchmarks/README.md before 2026-12-05 (every prefill padded to min_batch rows, power-of-two
# windows, YNNPACK in decode); experiments with recorded numbers select theirs (``rollout.jax_kernels``) so
# they reproduce bit for bit (the unrolled prefill leaves every cache bit as it was); "fast", "fast2" and "fast3" drop
# YNNPACK from the decode loop on hosts without AVX-512 only (``cpu_decode_options_unless``: the main job's
# recorded run, made on such a host, is unchanged; on AVX-512 hosts they decode with XLA's defaults)
_FAST = Kernels(fine_windows=True, prefill_pad_tokens=PREFILL_PAD_TOKENS,
                cpu_decode_options=(("xla_cpu_experimental_ynn_fusion_type", ""),), unrolled_prefill=True,
                cpu_decode_options_unless="avx512f")
_FAST2 = dataclasses.replace(_FAST, decode_floor=2, packed_prefill=True, decode_window_step=64, max_prefill_chunk=256)
KERNELS = {
    "fast": _FAST,
    "fast2": _FAST2,
    "fast3": dataclasses.replace(_FAST2, decode_panels=32, decode_panel_rows=4, decode_panels_if="avx512f"),
    "v1": Kernels(fine_windows=False, prefill_pad_tokens=None, cpu_decode_options=()),
}
# kernels run at least this many rows (padding rows are free of tokens): fewer kernel signatures to compile (a
# small batch of a tiny model costs about what 8 rows cost) at the price of padding in 1-4-row calls
MIN_BATCH_BUCKET = 8


def _bucket(n: int, buckets: Sequence[int]) -> int:
  for b in buckets:
    if n <= b:
      return b
  return buckets[-1]


def _round_up(n: int, m: int) -> int:
  """The smallest multiple of ``m`` that is >= n."""
  return -(-n // m) * m


def _packed_size(total: int, slots: int) -> int:
  """Packed tokens N a chunk of ``slots`` token slots runs for ``total`` valid ones (``Kernels.packed_prefill``):
  the next multiple of max(16, slots / 8), at most ``slots`` (at most 8 sizes per chunk shape to compile)."""
  g = max(16, slots // 8)
  return min(slots, _round_up(max(1, total), g))


def _pack_chunk(chunk_bc: np.ndarray, valid_b: np.ndarray):
  """A [B, C] chunk's valid tokens packed (``Kernels.packed_prefill``): tokens [1, N] (N: ``_packed_size``),
  ``to_bc`` [B C] (the packed token of each slot; pad slots take token 0) and ``to_n`` [N] (the slot of each
  packed token; the tail past the valid ones points at slot 0)."""
  b, c = chunk_bc.shape
  src = np.flatnonzero((np.arange(c)[None, :] < valid_b[:, None]).reshape(-1))
  n = _packed_size(len(src), b * c)
  to_n = np.zeros((n,), np.int32)
  to_n[:len(src)] = src
  to_bc = np.zeros((b * c,), np.int32)
  to_bc[src] = np.arange(len(src), dtype=np.int32)
  tokens = np.zeros((1, n), np.int32)
  tokens[0, :len(src)] = chunk_bc.reshape(-1)[src]
  return tokens, to_bc, to_n


def _pow2(n: int, lo: int = 1) -> int:
  return max(lo, 1 << max(0, math.ceil(math.log2(max(1, n)))))


def _length_bucket(end: int, fine: bool = True) -> int:
  """The window for ``end`` positions: a power of two >= ``MIN_LENGTH_BUCKET``, or (``fine``) past
  ``FINE_LENGTH_FROM`` also 3 * 2^k / 2 (a window is then never more than 1.5x a conversation that long)."""
  p = _pow2(end, lo=MIN_LENGTH_BUCKET)
  mid = 3 * p // 4
  return mid if fine and p > FINE_LENGTH_FROM and end <= mid else p


@functools.lru_cache(maxsize=None)
def cpu_flags() -> frozenset[str]:
  """The feature flags of this host's CPU (``/proc/cpuinfo``; empty where that file does not exist)."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, val = line.partition(":")
        if key.strip() == "flags":
          return frozenset(val.split())
  except OSError:
    pass
  return frozenset()


def cpu_has(flag: str) -> bool:
  """Whether this host's CPU lists ``flag`` (``cpu_flags``)."""
  return flag in cpu_flags()


def decode_compiler_options(kernels: Kernels, backend: str) -> dict[str, str]:
  """XLA compiler options of the decode loop: ``Kernels.cpu_decode_options`` on a CPU backend whose host
  lacks ``Kernels.cpu_decode_options_unless``, none elsewhere."""
  if backend != "cpu":
    return {}
  if kernels.cpu_decode_options_unless and cpu_has(kernels.cpu_decode_options_unless):
    return {}
  return dict(kernels.cpu_decode_options)
