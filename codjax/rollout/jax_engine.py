"""The built-in JAX sampler: batched KV-cache sampling from a codjax Qwen3 or Qwen3.5/3.6 hybrid, with
per-session prefix reuse.

Memory layout: one KV cache (Qwen3: k^T ``[L, slots, K, H, S]``, v ``[L, slots, K, S, H]``: see
``codjax.models.qwen3.cached_attention``; the hybrid: the same for its full-attention layers, plus per slot the
convolution inputs and float32 recurrent state of every Gated DeltaNet layer). The engine reaches the cache
only through the model (``cache_take`` / ``cache_put`` / ``cache_layers`` / ``cache_stack``, and Qwen3's
``cache_take_layers`` / ``cache_put_layers`` / ``cache_put_span``, which gather each layer's window directly and
write back only the positions a call wrote), so one engine serves both. On the CPU backend the per-layer
weights the prefill and decode kernels take are made once per weight version (``_split_weights``), not sliced
out of the stacked weights inside every call (a copy there). A slot's recurrent state is always the state
after the session's ``cached_len`` tokens (a snapshot at the end of the last fed token: finished rows feed
nothing, chunk padding never enters it, a prefill from position 0 starts from zeros), which is what prefix
reuse needs. Slot 0 is scratch (padding rows of a bucketed batch write there); every session (an episode)
owns one slot while it is alive, and its tokens occupy cache positions ``[0, cached_len)`` of that slot. A
request whose prompt extends the session's history only prefills the new suffix (the next user turn), instead
of the whole conversation. With more live sessions
than slots, the least recently used session not in the current call loses its slot (LRU eviction) and is
re-prefilled when it comes back; ``stats["evictions"]`` counts it.

Each ``generate`` call:
  1. prefill every request's new tokens except the prompt's last one, in chunks of a bucketed length (jitted
     per (batch bucket, chunk bucket, length bucket); a chunk more than a quarter padding is split into the
     next smaller bucket and a short one; under ``Kernels.packed_prefill`` the chunk's valid tokens run
     packed through the row-wise products and only attention sees the padded chunk); requests prefilled from
     position 0 share their common prompt
     prefixes (the G repeats of a pack's first turn, a shared system prompt): computed once, then copied
     between cache slots (``stats["shared_tokens"]``);
  2. decode inside one jitted ``lax.while_loop`` (no Python loop over tokens): each iteration feeds every
     row's pending token (first the prompt's last token) and samples the next; rows stop on a stop token or
     their token budget; the loop exits when at most half of its power-of-two batch is still going, and those
     rows continue in the next, smaller batch (a "phase", starting from their last sampled token; a batch of
     ``min_batch`` rows, or the kernels' lower ``decode_floor``, runs to the end), so finished rows stop
     costing compute (``stats["decode_phases"]`` counts phases).
Continuous batching (``submit`` / ``poll``, driven by ``codjax.agents.episode.run_streaming``): requests
enter and leave the decode batch one by one. A request's prompt suffix except its last token is prefilled when
it joins; the same decode kernel then runs every request in flight and exits once a given number of rows
stopped, so the caller can step that episode's environment and submit its next turn while the others keep
their place. Same keys, same replies as ``generate`` with per-request seeds. Arrivals come one or two at a
time, so the within-call sharing above rarely sees two prompts together: a request that starts a session from
position 0 also copies the longest common prefix (at least the smallest chunk bucket) of any resident
session's cached history, or of an ended session's whose slot nobody took since (``_retired``), on models
whose cache rows can be cut at any position (``PREFIX_COPY``). ``generate`` keeps its within-call plan only:
its requests arrive together, and its recorded runs reproduce bit for bit.
Sampling keys are per row and per token, so a reply's draws depend on its own key alone, never on the other
requests of the call, their order, the batch size, the padding or the phases: request r has a row key,
``jax.random.key(params.seeds[r])`` with per-request seeds, else ``fold_in(call_key, r)`` (call_key =
``key(params.seed)``, or a split of the engine's own key when unseeded), and token t of its reply is drawn
with ``fold_in(row_key, t)``. The keys are traced kernel arguments (no recompiles when they change).
Request batches are padded to power-of-two buckets of at least ``min_batch`` rows (continuous batching's
prefills of arrivals, one or two at a time: at least 1) and chunk lengths to a fixed bucket list, so a new
prompt length does not trigger a recompile. Each kernel works on the cache positions ``[0, Lb)`` only, Lb
the bucket (a power of two >= 128, past 512 also 1.5x powers of two, capped at ``max_seq_len``: ``Kernels``)
of the furthest position the call writes: the
cost of a decode step (attention reads, the per-step cache update) scales with the conversations' length,
not with ``max_seq_len``. Parameters are a jit argument: ``update_weights`` swaps them without recompiling.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from codjax.rollout.base import Completion, SamplingParams
from codjax.rollout.sampling import indexed_keys, sample_tokens, seed_keys, token_keys

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
    benchmarks/README.md, eighteenth session).
  decode_panels: on the CPU backend, for models that allow it (``panel_layers``: Qwen3), the decode loop's
    weight products of batches of up to ``decode_panel_rows`` rows read the layer weights as column panels of
    this width (``codjax.models.matmul.PanelWeight``, made once per weight version beside the per-layer
    weights: a third copy of the layer weights in memory) instead of row-major [K, N] matrices. XLA on CPU runs
    a few rows by a [K, N] weight at a fraction of the memory bandwidth that contiguous [K, 32] panels allow
    (13M-parameter benchmark model, 2 vCPUs of an AVX-512 EPYC, ms per decode step over 512 positions at 1 / 2
    rows: 3.24 / 4.11 -> 2.28 / 3.29 interleaved; at 8 rows attention dominates and panels gain nothing:
    benchmarks/README.md, twenty-fourth session). None: plain weights.
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


def _cache_shardings(cache, mesh: Mesh):
  """Shardings of the sampler cache: slots over the batch axes, heads over ``tensor``. Qwen3's cache is
  (k^T, v); the hybrid's a dict named as ``codjax.models.qwen3_5.CACHE_LOGICAL_AXES``."""
  from codjax.parallel.sharding import activation_sharding, logical_to_spec

  if isinstance(cache, tuple):
    ck, cv = cache
    return (activation_sharding("cache_k_lbkhs", ck.shape, mesh), activation_sharding("cache_v_lbksh", cv.shape, mesh))
  from codjax.models.qwen3_5 import CACHE_LOGICAL_AXES

  return {n: jax.sharding.NamedSharding(mesh, logical_to_spec(CACHE_LOGICAL_AXES[n], v.shape, mesh))
          for n, v in cache.items()}


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
  """Length of the longest common prefix of two token lists."""
  n = min(len(a), len(b))
  neq = np.flatnonzero(np.asarray(a[:n], np.int64) != np.asarray(b[:n], np.int64))
  return int(neq[0]) if len(neq) else n


def _share_plan(prefixes: Sequence[Sequence[int] | None], partial: bool, min_share: int):
  """Which rows copy their prompt prefix from another row instead of computing it.

  ``prefixes[r]``: the tokens row r writes from cache position 0 (None: a row continuing a cached history).
  Returns (dup, part): ``dup[r] = q`` for a row whose prefix equals row q's (q the first row with it), and,
  when ``partial``, ``part[q] = (l, n)`` for a distinct prefix whose first n >= ``min_share`` tokens equal
  leader row l's (then it computes only its tokens from n on). Leaders are chosen in sorted order: a prefix
  shares with the last leader before it, which among the leaders before it has the longest common prefix."""
  dup: dict[int, int] = {}
  first: dict[tuple, int] = {}
  for r, p in enumerate(prefixes):
    if p:
      q = first.setdefault(tuple(p), r)
      if q != r:
        dup[r] = q
  part: dict[int, tuple[int, int]] = {}
  if partial:
    leader = None
    for q in sorted(first.values(), key=lambda r: list(prefixes[r])):
      n = _lcp(prefixes[leader], prefixes[q]) if leader is not None else 0
      if n >= min_share:
        part[q] = (leader, n)
      else:
        leader = q
  return dup, part


@dataclasses.dataclass
class _Session:
  slot: int | None  # None: evicted (its KV cache was given to another session; re-prefilled on next use)
  tokens: list[int]  # history whose first cached_len tokens are in the cache
  cached_len: int = 0
  last_used: int = 0


@dataclasses.dataclass
class _StreamRow:
  """A request in flight under continuous batching: its reply so far and the token it feeds next."""
  rid: int
  sid: int
  session: _Session
  prompt: list[int]
  key_data: np.ndarray  # uint32 key data of the request's row key
  budget: int  # tokens it may generate in all
  fresh: bool = True  # its prompt suffix is not prefilled yet
  gen: list[int] = dataclasses.field(default_factory=list)
  lps: list[float] = dataclasses.field(default_factory=list)


def check_requests(prompts, session_ids) -> None:
  """``generate``'s checks of a call's session ids (also ``codjax.rollout.jax_workers``'s)."""
  if session_ids is not None and len(session_ids) != len(prompts):
    raise ValueError("session_ids must match prompts one to one")
  if session_ids is not None and len(set(session_ids)) != len(session_ids):
    raise ValueError("session_ids must be distinct within one generate call")


def sampling_params(model, params, copy: bool):
  """The parameters the engine stores: floating leaves wider than the compute dtype in that dtype when ``model``
  casts every parameter to it before use (``PARAMS_CAST_TO_COMPUTE_BEFORE_USE``, Qwen3), which leaves the logits unchanged
  and halves the bytes a decode step reads for float32 parameters under bfloat16 compute (1.54x decode
  tokens/s on an H200, benchmarks/README.md "On one H200"); otherwise the parameters themselves (a copy when
  ``copy``)."""
  dt = model.cfg.jnp_dtype
  if getattr(type(model), "PARAMS_CAST_TO_COMPUTE_BEFORE_USE", False):
    narrower = lambda x: jnp.issubdtype(x.dtype, jnp.floating) and jnp.dtype(dt).itemsize < x.dtype.itemsize
  else:
    narrower = lambda x: False
  # a cast leaf is a new array already; the others are copied when asked (update_weights: the trainer donates)
  keep = jnp.copy if copy else (lambda x: x)
  return jax.tree.map(lambda x: x.astype(dt) if narrower(x) else keep(x), params)


class JaxEngine:
  """KV-cache sampler over a codjax ``Qwen3`` (see module docstring)."""

  def __init__(self, model, *, max_slots: int = 64, max_seq_len: int = 2048, mesh: Mesh | None = None,
               seed: int = 0, cache_dtype=None, chunk_buckets: Sequence[int] = CHUNK_BUCKETS,
               min_batch: int = MIN_BATCH_BUCKET, kernels: str = "fast3", share_with: "JaxEngine | None" = None):
    """``share_with``: another engine of the same model, kernels and bucket settings whose weights and jitted
    kernels this one uses (``codjax.rollout.jax_workers``: engines side by side on one host), instead of
    making its own: one copy of the weights and one compilation per kernel signature for all of them. Each
    engine keeps its own cache, sessions and key."""
    if max_slots < 1 or max_seq_len < 2:
      raise ValueError("max_slots must be >= 1 and max_seq_len >= 2")
    if min_batch < 1 or min_batch & (min_batch - 1):
      raise ValueError(f"min_batch must be a power of two >= 1, got {min_batch}")
    if kernels not in KERNELS:
      raise ValueError(f"kernels must be one of {sorted(KERNELS)}, got {kernels!r}")
    self.min_batch = min_batch
    self.kernels = kernels
    self.cfg = model.cfg
    self.max_slots = max_slots
    self.max_seq_len = max_seq_len
    self.mesh = mesh
    if not chunk_buckets or min(int(b) for b in chunk_buckets) < 1:
      raise ValueError(f"chunk_buckets must be positive token counts, got {tuple(chunk_buckets)}")
    buckets = tuple(sorted(int(b) for b in chunk_buckets))
    cap = KERNELS[kernels].max_prefill_chunk  # the kernel set's cap on chunk length (the smallest bucket stays)
    self.chunk_buckets = buckets if cap is None else (tuple(b for b in buckets if b <= cap) or buckets[:1])
    self._graphdef, params = nnx.split(model, nnx.Param)
    params = sampling_params(model, params, copy=False)
    self._params = params
    n = max_slots + 1
    if mesh is not None:  # slots are sharded over the batch axes (data, fsdp, expert): round up to a multiple
      from codjax.parallel.mesh import batch_shards

      m = batch_shards(mesh)
      n = _round_up(n, m)
    self.max_slots = n - 1
    cache = model.init_cache(n, max_seq_len, cache_dtype)
    if mesh is not None:
      from codjax.models.axes import PARAM_LOGICAL_AXES
      from codjax.parallel.sharding import state_shardings

      cache = jax.device_put(cache, _cache_shardings(cache, mesh))
      self._params = jax.device_put(params, state_shardings(params, mesh, PARAM_LOGICAL_AXES))
    else:
      # commit the cache to a device so the donated outputs of later calls have the same signature
      dev = jax.devices()[0]
      cache = jax.device_put(cache, dev)
    self._cache = cache
    self._model_cls = type(model)
    if share_with is not None:
      self._check_shareable(share_with, mesh, min_batch)
    self._split_fn = jax.jit(lambda p: nnx.merge(self._graphdef, p).split_layers())
    self._panel_fn = None  # the jitted panel_layers program, made on first use (``_panel_weights``)
    # per-layer weights and panels: made here, or the shared engine's (``use_weights_of``, at the end)
    self._layers = self._split_weights(self._params) if share_with is None else None
    self._panels = self._panel_weights(self._layers)
    self._free = list(range(self.max_slots, 0, -1))
    # free slots that still hold an ended session's prefix (slot -> its tokens in cache positions [0, len)):
    # continuous batching's arrivals copy from them until the slot is taken again
    self._retired: dict[int, list[int]] = {}
    self._sessions: dict[int, _Session] = {}
    self._key = jax.random.key(seed)
    k = self._kernels
    self._packed_prefill = k.packed_prefill and k.unrolled_prefill and hasattr(self._model_cls,
                                                                              "forward_cached_packed")
    self._prefill_fn = jax.jit(self._prefill_impl, donate_argnums=(1,), static_argnames=("length",))
    self._prefill_packed_fn = jax.jit(self._prefill_packed_impl, donate_argnums=(1,),
                                      static_argnames=("chunk_shape", "length"))
    self._copy_fn = jax.jit(self._copy_impl, donate_argnums=(0,), static_argnames=("length",))
    self._decode_fns: dict[tuple, object] = {}
    self._clock = 0
    self._anon = 0
    self.stats = {"prefill_tokens": 0, "reused_tokens": 0, "generated_tokens": 0, "calls": 0, "evictions": 0,
                  "decode_phases": 0, "stream_decodes": 0, "shared_tokens": 0}
    # continuous batching (submit / poll): the requests in flight, their shared sampling settings, kernels
    self._stream: list[_StreamRow] = []
    self._stream_sig: tuple | None = None
    self._stream_params: SamplingParams | None = None
    self._next_rid = 0
    if share_with is not None:  # the other engine's programs (the same kernels, compiled once for both), weights
      self._split_fn, self._panel_fn = share_with._split_fn, share_with._panel_fn
      self._prefill_fn, self._prefill_packed_fn = share_with._prefill_fn, share_with._prefill_packed_fn
      self._copy_fn, self._decode_fns = share_with._copy_fn, share_with._decode_fns
      self.use_weights_of(share_with)

  def _check_shareable(self, other: "JaxEngine", mesh, min_batch: int) -> None:
    """Raises unless ``other``'s jitted kernels compute what this engine's own would (``share_with``)."""
    if mesh is not None or other.mesh is not None:
      raise ValueError("share_with: engines on a mesh keep their own weights and kernels")
    dtypes = lambda cache: [x.dtype for x in jax.tree.leaves(cache)]
    if ((self._model_cls, self._graphdef, self.kernels, self.chunk_buckets, min_batch, self.max_seq_len,
         dtypes(self._cache)) != (other._model_cls, other._graphdef, other.kernels, other.chunk_buckets,
                                  other.min_batch, other.max_seq_len, dtypes(other._cache))):
      raise ValueError("share_with needs an engine of the same model, kernels, chunk buckets, min_batch, "
                       "max_seq_len and cache dtype")

  def use_weights_of(self, other: "JaxEngine") -> None:
    """Samples with ``other``'s current weights (after its ``update_weights``; engines made with
    ``share_with``): no copy, no conversion. Cached sessions are invalidated, as by ``update_weights``."""
    if self._stream:
      raise RuntimeError(f"use_weights_of with {len(self._stream)} requests in flight: poll them first")
    self._params, self._layers, self._panels = other._params, other._layers, other._panels
    for s in self._sessions.values():
      s.cached_len = 0
    self._retired.clear()

  # -- jitted kernels ------------------------------------------------------------------------------------
  def _split_weights(self, params):
    """The model's per-layer weights (``split_layers``) as arrays of their own, made once per weight version
    on the CPU backend (None elsewhere). Inside a kernel the slices of the stacked weights are copies on XLA
    CPU: every prefill and decode call rewrote all layer weights first (13M-parameter benchmark model, 2 vCPUs:
    ~15 ms of a 1-row 16-token prefill's ~20 ms; benchmarks/README.md "Per-layer weights made once"). The
    price is a second copy of the layer weights in memory; the values, and so every sample, are the same."""
    return self._split_fn(params) if jax.default_backend() == "cpu" else None

  def _panel_weights(self, layers):
    """The per-layer weights as column panels for the decode loop's few-row products
    (``Kernels.decode_panels``; the model's ``panel_layers``), made once per weight version; None where the
    kernels, the host CPU (``Kernels.decode_panels_if``), the backend (CPU only), the model or a mesh (sharded
    engines keep plain weights) leave them out."""
    k = self._kernels
    width = k.decode_panels
    panel_layers = getattr(self._model_cls, "panel_layers", None)
    if width is None or layers is None or panel_layers is None or self.mesh is not None:
      return None
    if k.decode_panels_if is not None and not cpu_has(k.decode_panels_if):
      return None
    if self._panel_fn is None:  # one jitted program for every weight version
      self._panel_fn = jax.jit(functools.partial(panel_layers, panel=width))
    return self._panel_fn(layers)

  def _weights(self):
    """The first argument of the prefill kernels: (parameters, per-layer weights or None)."""
    return self._params, self._layers

  def _decode_weights(self, rows: int):
    """The first argument of a decode kernel of ``rows`` rows: (parameters, per-layer weights: the panels
    for batches of up to ``Kernels.decode_panel_rows`` rows where the engine has them)."""
    if self._panels is not None and rows <= self._kernels.decode_panel_rows:
      return self._params, self._panels
    return self._params, self._layers

  def _batch_bucket(self, rows: int, lo: int | None = None) -> int:
    """Rows a kernel runs for ``rows`` requests: the power of two >= rows, at least ``lo`` (``min_batch``)."""
    return _pow2(rows, lo=self.min_batch if lo is None else lo)

  @property
  def _kernels(self) -> Kernels:
    return KERNELS[self.kernels]

  def _prefill_floor(self, chunk: int) -> int:
    """The fewest rows a prefill kernel of ``chunk`` tokens per row runs: ``min_batch``, lowered for long chunks
    so the floor's padding rows hold at most ``Kernels.prefill_pad_tokens`` token slots in all."""
    pad = self._kernels.prefill_pad_tokens
    return self.min_batch if pad is None else min(self.min_batch, _pow2(max(1, pad // chunk)))

  def _decode_floor(self) -> int:
    """The smallest batch a generate call's decode phases run (``Kernels.decode_floor``, at most min_batch)."""
    floor = self._kernels.decode_floor
    return self.min_batch if floor is None else min(self.min_batch, floor)

  def _length_bucket(self, end: int) -> int:
    """Cache positions a call works on: the bucket of its furthest written position ``end`` (exclusive)."""
    return min(self.max_seq_len, _length_bucket(end, self._kernels.fine_windows))

  def _decode_window(self, end: int) -> int:
    """Cache positions a decode call works on for furthest position ``end`` (``Kernels.decode_window_step``)."""
    step = self._kernels.decode_window_step
    if step is None:
      return self._length_bucket(end)
    return min(self.max_seq_len, max(MIN_LENGTH_BUCKET, _round_up(end, step)))

  def _prefill_impl(self, weights, cache, slots_b, tokens_bc, start_b, valid_b, *, length: int):
    """Writes one chunk for the rows ``slots_b`` on cache positions [0, length) (row b's first ``valid_b[b]``
    tokens are real: a recurrent state never sees the rest). No logits: the decode kernel feeds every row's
    last prompt token itself. ``weights``: ``_weights()``."""
    if self._kernels.unrolled_prefill and getattr(self._model_cls, "UNROLLED_PREFILL", False):
      return self._unrolled_chunk(weights, cache, slots_b, start_b, tokens_bc.shape[1], length,
                                  lambda m, split, layers: m.forward_cached_unrolled(tokens_bc, start_b, split,
                                                                                     layers, valid_b))
    model = nnx.merge(self._graphdef, weights[0])
    sub = model.cache_take(cache, slots_b, length)
    _, sub = model.forward_cached(tokens_bc, start_b, sub, valid_b)
    return model.cache_put(cache, sub, slots_b, length)

  def _prefill_packed_impl(self, weights, cache, slots_b, tokens_1n, start_b, to_bc, to_n, *,
                           chunk_shape: tuple[int, int], length: int):
    """``_prefill_impl`` of a [B, C] chunk given packed (``Kernels.packed_prefill``; ``to_bc`` / ``to_n``:
    ``qwen3._packed_core``)."""
    return self._unrolled_chunk(weights, cache, slots_b, start_b, chunk_shape[1], length,
                                lambda m, split, layers: m.forward_cached_packed(tokens_1n, start_b, to_bc, to_n,
                                                                                 chunk_shape, split, layers))

  def _unrolled_chunk(self, weights, cache, slots_b, start_b, c: int, length: int, forward):
    """A prefill chunk of ``c`` tokens per row through per-layer weights and window caches:
    ``forward(model, split weights, layer caches) -> (hidden, layer caches)``, then written back."""
    params, split = weights
    model = nnx.merge(self._graphdef, params)
    layers, window = self._take_layers(model, cache, slots_b, length)
    _, layers = forward(model, model.split_layers() if split is None else split, layers)
    return self._write_back(model, cache, layers, window, slots_b, start_b, c, length)

  @staticmethod
  def _take_layers(model, cache, slots_b, length: int):
    """A kernel's per-layer window caches (``cache_layers`` form) and, for models without
    ``cache_take_layers``, the stacked window they were cut from (else None)."""
    if hasattr(model, "cache_take_layers"):
      return model.cache_take_layers(cache, slots_b, length), None
    window = model.cache_take(cache, slots_b, length)
    return model.cache_layers(window), window

  @staticmethod
  def _write_back(model, cache, layers, window, slots_b, start_b, n: int, length: int):
    """Writes a kernel's per-layer window caches back into the engine's cache: only the ``n`` positions from
    ``start_b`` it wrote (the model's ``cache_put_span``, where it has one and n is at most a quarter of the
    window), else the whole window. Both leave the same cache bits. The span has a fixed cost (its per-row
    slices), so it pays on windows of 4n positions or more: ``benchmarks/cache_writeback.py``, 13M-parameter
    benchmark model, 8 rows, window take + write-back of a 64-position span 1.9-2.6 ms over 128-768 positions
    against 1.0 / 1.9 / 2.7 / 4.2 / 6.0 / 7.0 ms for the whole window over 128 / 256 / 384 / 512 / 640 / 768
    (benchmarks/README.md, eighteenth session)."""
    put_span = getattr(model, "cache_put_span", None)
    if put_span is not None and 4 * n <= length:
      return put_span(cache, layers, slots_b, start_b, n)
    if window is None:
      return model.cache_put_layers(cache, layers, slots_b, length)
    return model.cache_put(cache, model.cache_stack(layers, window), slots_b, length)

  def _copy_impl(self, cache, src_b, dst_b, *, length: int):
    """Copies cache positions [0, length) (and, for hybrid models, the recurrent state) of the slots ``src_b``
    into the slots ``dst_b``: shared prompt prefixes are prefilled once."""
    cls = self._model_cls
    return cls.cache_put(cache, cls.cache_take(cache, src_b, length), dst_b, length)

  def _decode_impl(self, weights, cache, slots_b, tok_b, pos_b, budget_b, stop_ids, key_data_b, offset_b,
                   temperature, top_p, min_active, *, max_new: int, top_k: int, greedy: bool, length: int):
    """Feed-then-sample decode on cache positions [0, length): iteration i feeds row b's pending token at
    position ``pos_b[b] + i`` and draws token ``offset_b[b] + i`` of its reply with ``fold_in(key_b,
    offset_b[b] + i)``; a row stops on a stop token or after ``budget_b[b]`` tokens (a row with budget 0, a
    padding row, never runs). The loop exits once at most ``min_active`` rows are still going; returns the
    cache, tokens [B, max_new], logprobs and per-row counts. A row's pending token is its prompt's last token
    (a new reply) or the last token it sampled (a reply continued from an earlier phase or poll), so a phase
    or poll that continues a row needs no separate one-token prefill. ``weights``: ``_decode_weights(B)``."""
    params, layers = weights
    model = nnx.merge(self._graphdef, params)
    # per-layer weights (made once per weight version on CPU, else split here, once outside the token loop: no
    # per-token copies) and caches
    layers = model.split_layers() if layers is None else layers
    head = model.decode_head()
    sub, window = self._take_layers(model, cache, slots_b, length)
    keys_b = jax.random.wrap_key_data(key_data_b)
    b = slots_b.shape[0]

    def is_stop(tok):
      return jnp.any(tok[:, None] == stop_ids[None, :], axis=-1)

    def cond(state):
      i, _, _, _, _, done, _ = state
      return (i < max_new) & (jnp.sum(~done) > min_active)

    def body(state):
      i, sub, tok, out_t, out_lp, done, n = state
      active = ~done
      # a finished row feeds nothing: its recurrent state (hybrid models) stays at its reply's end; its K/V
      # write lands past its valid length (never read), clamped to the window's last position
      hidden, sub = model.forward_cached_unrolled(tok[:, None], pos_b + i, layers, sub, active.astype(jnp.int32))
      nt, nlp = sample_tokens(token_keys(keys_b, offset_b + i), model.decode_logits(hidden[:, 0], head),
                              temperature, top_k, top_p, greedy)
      out_t = out_t.at[:, i].set(jnp.where(active, nt, 0))
      out_lp = out_lp.at[:, i].set(jnp.where(active, nlp, 0.0))
      n = n + active.astype(jnp.int32)
      done = done | (active & (is_stop(nt) | (n >= budget_b)))
      return i + 1, sub, jnp.where(active, nt, tok), out_t, out_lp, done, n

    state = (jnp.int32(0), sub, tok_b, jnp.zeros((b, max_new), jnp.int32), jnp.zeros((b, max_new), jnp.float32),
             budget_b <= 0, jnp.zeros((b,), jnp.int32))
    _, sub, _, out_t, out_lp, _, n = jax.lax.while_loop(cond, body, state)
    cache = self._write_back(model, cache, sub, window, slots_b, pos_b, max_new, length)
    return cache, out_t, out_lp, n

  # -- sessions ------------------------------------------------------------------------------------------
  def _take_slot(self, busy: set[int]) -> int:
    """A free slot (one without a retired prefix first, else the one retired first), evicting the least
    recently used session not in ``busy`` if none is free."""
    if self._free:
      plain = [slot for slot in self._free if slot not in self._retired]
      # a slot without a retired prefix if there is one, else the one retired first (dicts keep that order)
      slot = plain[-1] if plain else next(iter(self._retired))
      self._free.remove(slot)
      self._retired.pop(slot, None)
      return slot
    victims = [(s.last_used, k) for k, s in self._sessions.items() if s.slot is not None and k not in busy]
    if not victims:
      raise RuntimeError(f"JaxEngine: more concurrent requests than cache slots (max_slots={self.max_slots})")
    _, k = min(victims)
    s = self._sessions[k]
    slot, s.slot, s.cached_len = s.slot, None, 0
    self.stats["evictions"] += 1
    return slot

  def _session(self, sid: int | None, prompt: Sequence[int], busy: set[int]) -> tuple[int, _Session]:
    """The session of ``sid`` (new if unknown) holding a cache slot, with ``cached_len`` valid for ``prompt``."""
    if sid is not None and sid in self._sessions:
      s = self._sessions[sid]
      if s.slot is None:
        s.slot = self._take_slot(busy)
      elif not (len(prompt) >= s.cached_len and list(prompt[:s.cached_len]) == s.tokens[:s.cached_len]):
        s.cached_len = 0  # history diverged: re-prefill from scratch
    else:
      s = _Session(slot=self._take_slot(busy), tokens=[])
      if sid is None:
        self._anon += 1
        sid = -self._anon
      self._sessions[sid] = s
    self._clock += 1
    s.last_used = self._clock
    return sid, s

  def end_session(self, session_id: int) -> None:
    if any(r.sid == session_id for r in self._stream):
      raise RuntimeError(f"session {session_id} has a request in flight; poll it to completion first")
    s = self._sessions.pop(session_id, None)
    if s is not None and s.slot is not None:
      self._free.append(s.slot)
      if s.cached_len >= self.chunk_buckets[0] and getattr(self._model_cls, "PREFIX_COPY", False):
        self._retired[s.slot] = list(s.tokens[:s.cached_len])

  def num_sessions(self) -> int:
    return len(self._sessions)

  # -- public API ----------------------------------------------------------------------------------------
  def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               session_ids: Sequence[int] | None = None) -> list[Completion]:
    if not prompts:
      return []
    check_requests(prompts, session_ids)  # before the key split: a refused call leaves the engine's key as it was
    return self._generate_runs(prompts, params, session_ids, self.call_keys(params, len(prompts)))

  def call_keys(self, params: SamplingParams, n: int) -> np.ndarray:
    """The row keys ``generate`` gives a call of ``n`` requests (module docstring), as their key data (uint32
    [>= n, key size], ``jax.random.key_data``; rows past n are padding); an unseeded call splits the engine's
    key, as ``generate`` does."""
    seeds = params.request_seeds(n)
    call_key = None
    if seeds is None:
      if params.seed is not None:
        call_key = jax.random.key(params.seed)
      else:
        self._key, call_key = jax.random.split(self._key)
    return np.asarray(jax.random.key_data(self._row_keys(seeds, call_key, 0, n)), np.uint32)

  def generate_keyed(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                     session_ids: Sequence[int] | None, key_data: np.ndarray) -> list[Completion]:
    """``generate`` with request r's row key given by its key data ``key_data[r]`` (``call_keys``' form, at least
    ``len(prompts)`` rows; ``params``' seeds are not read): the entry point of callers that split one call's
    requests over several engines and keep every request's draws (``codjax.rollout.jax_workers``)."""
    if not prompts:
      return []
    check_requests(prompts, session_ids)
    key_data = np.asarray(key_data, np.uint32)
    if key_data.ndim != 2 or key_data.shape[0] < len(prompts):
      raise ValueError(f"key data {key_data.shape} for {len(prompts)} requests: need [>= {len(prompts)}, key size]")
    return self._generate_runs(prompts, params, session_ids, key_data)

  def _generate_runs(self, prompts, params: SamplingParams, session_ids, key_data) -> list[Completion]:
    """Checked requests in runs of at most ``max_slots`` (``_generate``)."""
    out = []
    for i in range(0, len(prompts), self.max_slots):  # more requests than slots: runs of max_slots
      sl = slice(i, i + self.max_slots)
      out += self._generate(prompts[sl], params, None if session_ids is None else session_ids[sl], key_data[sl])
    return out

  def _row_keys(self, seeds, call_key, start: int, n: int):
    """The row keys of the call's requests [start, start + n) (module docstring): per-request seeds, else
    ``fold_in(call_key, r)``; as a [max(min_batch, _pow2(n))] array whose rows past n are padding, so the eager
    ops that make them compile once per power of two above ``min_batch`` (calls of up to ``min_batch``
    requests share one shape, as the kernels they feed do), not once per request count."""
    npad = max(self.min_batch, _pow2(n))
    if seeds is not None:
      return seed_keys(list(seeds[start:start + n]) + [0] * (npad - n))
    return indexed_keys(call_key, npad, start)

  def _generate(self, prompts, params: SamplingParams, session_ids, key_data) -> list[Completion]:
    """One run of at most ``max_slots`` requests; the row key whose data is ``key_data[r]`` keys request r's
    draws."""
    self.stats["calls"] += 1
    keys, sessions = [], []
    busy = set(session_ids or ())
    for i, p in enumerate(prompts):
      if len(p) == 0:
        raise ValueError("empty prompt")
      if len(p) >= self.max_seq_len:
        raise ValueError(f"prompt of {len(p)} tokens does not fit max_seq_len={self.max_seq_len}")
      k, s = self._session(None if session_ids is None else session_ids[i], p, busy)
      busy.add(k)
      keys.append(k)
      sessions.append(s)
    for s, p in zip(sessions, prompts):
      self.stats["reused_tokens"] += s.cached_len
      self.stats["prefill_tokens"] += len(p) - min(s.cached_len, len(p))
    # 1. prefill every prompt but its last token (shared prefixes once); 2. decode in phases, each feeding its
    # rows' pending tokens first (the prompt's last token, then the last sampled one)
    self._prefill_prompts([s.slot for s in sessions], [min(s.cached_len, len(p) - 1) for p, s in
                                                       zip(prompts, sessions)], prompts)
    gen, gen_lp = self._decode_rows(prompts, [s.slot for s in sessions], params,
                                    key_data)
    stops = set(params.stop_token_ids)
    out = []
    for i, (p, s) in enumerate(zip(prompts, sessions)):
      ids = gen[i]
      finish = "stop" if ids and ids[-1] in stops else "length"
      out.append(Completion(token_ids=ids, logprobs=gen_lp[i], finish_reason=finish))
      self.stats["generated_tokens"] += len(ids)
      s.tokens = list(p) + ids
      s.cached_len = len(s.tokens) - 1  # the last sampled token was never fed back
      if session_ids is None:
        self.end_session(keys[i])
    return out

  def _decode_rows(self, prompts, slots: Sequence[int], params: SamplingParams, key_data):
    """Samples every row's reply (its prompt but the last token is in cache slot ``slots[r]``) with the row
    key whose data is ``key_data[r]``; returns (token ids, logprobs) per row. Decoding runs in phases: a phase
    runs the pending rows in a power-of-two batch until at most half of it is still going; those rows continue
    in the next, smaller batch (feeding their last sampled token first), so a call whose replies have uneven
    lengths stops paying for rows that already finished. A row's token t is drawn with ``fold_in(row_key, t)``
    in whichever phase and batch position it runs."""
    budget0 = [min(self.max_seq_len - len(p), params.max_tokens) for p in prompts]
    stops = set(params.stop_token_ids)
    n = len(prompts)
    gen: list[list[int]] = [[] for _ in range(n)]
    gen_lp: list[list[float]] = [[] for _ in range(n)]
    pending = list(range(n))
    floor = self._decode_floor()
    while pending:
      bb = self._batch_bucket(len(pending), floor)
      toks, lps, counts = self._run_decode(
          slots=[slots[i] for i in pending], tok=[gen[i][-1] if gen[i] else prompts[i][-1] for i in pending],
          pos=[len(prompts[i]) - 1 + len(gen[i]) for i in pending], left=[budget0[i] - len(gen[i]) for i in pending],
          key_data=key_data[pending], offset=[len(gen[i]) for i in pending], params=params,
          min_active=bb // 2 if bb > floor else 0, min_rows=floor)
      self.stats["decode_phases"] += 1
      going = []
      for r, i in enumerate(pending):
        c = int(counts[r])
        gen[i] += toks[r, :c].tolist()
        gen_lp[i] += lps[r, :c].tolist()
        if not (gen[i][-1] in stops or len(gen[i]) >= budget0[i]):
          going.append(i)
      pending = going
    return gen, gen_lp

  def _run_decode(self, *, slots, tok, pos, left, key_data, offset, params: SamplingParams, min_active: int,
                  min_rows: int | None = None):
    """One decode kernel over m rows padded to a power-of-two batch of at least ``min_rows`` (default
    ``min_batch``; padding rows: budget 0, scratch slot 0): row r feeds ``tok[r]`` at position ``pos[r]`` and
    may draw ``left[r]`` tokens, numbered from ``offset[r]``; exits once at most ``min_active`` rows are going.
    Returns host arrays (tokens, logprobs, counts)."""
    m = len(slots)
    bb = self._batch_bucket(m, min_rows)
    pad = bb - m
    i32 = lambda xs: np.asarray(list(xs) + [0] * pad, np.int32)
    pos_b, left_b = i32(pos), i32(left)
    keys = np.concatenate([np.asarray(key_data, np.uint32), np.repeat(np.asarray(key_data[:1], np.uint32), pad, 0)])
    length = self._decode_window(int((pos_b[:m] + left_b[:m]).max()))
    # one output width per sampling setting (not per call's longest remaining budget): fewer kernel signatures
    max_new = _pow2(min(int(params.max_tokens), self.max_seq_len), lo=8)
    stop = np.array(list(params.stop_token_ids) or [-1], np.int32)
    stop = np.pad(stop, (0, _pow2(len(stop)) - len(stop)), constant_values=-1)
    fn = self._decode_fn(bb, max_new, params.top_k, params.greedy, int(stop.shape[0]), length)
    self._cache, toks, lps, counts = fn(
        self._decode_weights(bb), self._cache, jnp.asarray(i32(slots)), jnp.asarray(i32(tok)), jnp.asarray(pos_b),
        jnp.asarray(left_b), jnp.asarray(stop), jnp.asarray(keys), jnp.asarray(i32(offset)),
        jnp.float32(params.temperature), jnp.float32(params.top_p), jnp.int32(min_active))
    return np.asarray(toks)[:m], np.asarray(lps)[:m], np.asarray(counts)[:m]

  def _decode_fn(self, bb: int, max_new: int, top_k: int, greedy: bool, n_stop: int, length: int):
    """The jitted decode kernel for these static shapes (compiled once per signature; the engine's cache
    donated)."""
    sig = (bb, max_new, top_k, greedy, n_stop, length)
    if sig not in self._decode_fns:
      options = decode_compiler_options(self._kernels, jax.default_backend())
      # setdefault: engines sharing the table (``share_with``) from several threads keep one program per signature
      self._decode_fns.setdefault(sig, jax.jit(functools.partial(self._decode_impl, max_new=max_new, top_k=top_k,
                                                                 greedy=greedy, length=length), donate_argnums=(1,),
                                               compiler_options=options or None))
    return self._decode_fns[sig]

  def _resident_prefix(self, prompt: Sequence[int], end: int, exclude: set[int]) -> tuple[int, int]:
    """(slot, n): the cache slot outside ``exclude`` whose valid prefix (a resident session's first
    ``cached_len`` tokens, or a retired slot's) shares the most first tokens, n, with ``prompt[:end]``;
    (0, 0) when none shares at least the smallest chunk bucket."""
    lo = self.chunk_buckets[0]
    if end < lo:
      return 0, 0
    head = list(prompt[:lo])
    cands = [(s.slot, s.tokens[:s.cached_len]) for s in self._sessions.values()
             if s.slot is not None and s.slot not in exclude and s.cached_len >= lo]
    cands += [(slot, toks) for slot, toks in self._retired.items() if slot not in exclude]
    best = (0, 0)
    for slot, toks in cands:
      if list(toks[:lo]) == head:  # cheap filter before the full comparison
        n = _lcp(prompt[:end], toks)
        if n > best[1]:
          best = (slot, n)
    return best

  def _prefill_prompts(self, slots: Sequence[int], starts: Sequence[int], prompts: Sequence[Sequence[int]],
                       min_rows: int | None = None, resident: bool = False):
    """Writes ``prompts[r][starts[r]:-1]`` into cache slot ``slots[r]`` (the last token is the decode kernel's
    to feed). Rows prefilled from position 0 share their prompts' common prefixes: requests with the same
    prompt (the G repeats of a pack's first turn) are prefilled once and copied, and on models whose cache
    rows can be cut at any position (``PREFIX_COPY``: plain attention; a hybrid's recurrent state exists only
    at a prompt's end) a prompt that starts with another's first tokens (a shared system prompt) copies them
    and prefills only the rest. ``stats["shared_tokens"]`` counts the tokens copied instead of computed, and
    ``stats["prefill_tokens"]`` (prompt tokens fed to the model) leaves them out. Kernels run at least
    ``min_rows`` rows (default ``min_batch``). With ``resident`` (continuous batching's arrivals), a leader
    prefilled from position 0 on a ``PREFIX_COPY`` model first copies the longest prefix it shares with a slot
    outside the call (``_resident_prefix``) and computes only the rest."""
    ends = [len(p) - 1 for p in prompts]
    partial = bool(getattr(self._model_cls, "PREFIX_COPY", False))
    dup, part = _share_plan([list(p[:e]) if st == 0 else None for p, st, e in zip(prompts, starts, ends)],
                            partial, self.chunk_buckets[0])
    # 1. rows that compute their prompt from their start: leaders, and rows continuing a cached history; a
    # leader from position 0 starts past the prefix it copies from a resident slot (resident mode)
    first = [r for r in range(len(prompts)) if r not in dup and r not in part and ends[r] > starts[r]]
    begin = {r: starts[r] for r in first}
    if resident and partial:
      exclude = set(slots)
      ext = [(slots[r], r) + self._resident_prefix(prompts[r], ends[r], exclude) for r in first if starts[r] == 0]
      ext = [(dst, r, src, n) for dst, r, src, n in ext if n > 0]
      self._copy_rows([(src, dst, n) for dst, _, src, n in ext], min_rows)
      for _, r, _, n in ext:
        begin[r] = n
      shared_ext = sum(n for _, _, _, n in ext)
      self.stats["shared_tokens"] += shared_ext
      self.stats["prefill_tokens"] -= shared_ext
    self._prefill_rows([slots[r] for r in first], [begin[r] for r in first],
                       [prompts[r][begin[r]:ends[r]] for r in first], min_rows)
    # 2. copies from leaders (shared prefixes, and duplicates of leaders); then the rest of each shared prefix
    copies = ([(slots[part[r][0]], slots[r], part[r][1]) for r in part]
              + [(slots[q], slots[r], ends[r]) for r, q in dup.items() if q not in part])
    # 3. duplicates of rows completed in 2
    later = [(slots[q], slots[r], ends[r]) for r, q in dup.items() if q in part]
    self._copy_rows(copies, min_rows)
    rest = [r for r in part if ends[r] > part[r][1]]
    self._prefill_rows([slots[r] for r in rest], [part[r][1] for r in rest],
                       [prompts[r][part[r][1]:ends[r]] for r in rest], min_rows)
    self._copy_rows(later, min_rows)
    shared = sum(n for _, _, n in copies + later)
    self.stats["shared_tokens"] += shared
    self.stats["prefill_tokens"] -= shared

  def _copy_rows(self, copies, min_rows: int | None = None) -> None:
    """For each (source slot, destination slot, n): copies cache positions [0, n) (and a hybrid's recurrent
    state) of the source slot to the destination; batched per length bucket, padded to a power of two with
    scratch-to-scratch copies."""
    groups: dict[int, list] = {}
    for c in copies:
      groups.setdefault(self._length_bucket(c[2]), []).append(c)
    for length, rows in groups.items():
      bb = self._batch_bucket(len(rows), min_rows)
      s = np.array([q for q, _, _ in rows] + [0] * (bb - len(rows)), np.int32)
      d = np.array([r for _, r, _ in rows] + [0] * (bb - len(rows)), np.int32)
      self._cache = self._copy_fn(self._cache, jnp.asarray(s), jnp.asarray(d), length=length)

  def _chunk_len(self, remaining: int) -> int:
    """The chunk for a group's next ``remaining`` tokens: the smallest bucket that holds them, unless the next
    smaller bucket followed by the bucket of what is left is at most 3/4 of its size (a 259-token prompt runs
    as 256 + 16 slots instead of 512; 20 tokens stay one 32-slot chunk)."""
    c = _bucket(remaining, self.chunk_buckets)
    smaller = [b for b in self.chunk_buckets if b < c]
    if smaller and remaining > smaller[-1]:
      split = smaller[-1] + _bucket(remaining - smaller[-1], self.chunk_buckets)
      if 4 * split <= 3 * c:
        return smaller[-1]
    return c

  def _prefill_rows(self, slots: Sequence[int], starts: Sequence[int], suffixes: Sequence[Sequence[int]],
                    min_rows: int | None = None) -> None:
    """Writes ``suffixes[r]`` into cache slot ``slots[r]`` from position ``starts[r]``. Chunks of a bucketed
    length; rows are grouped by suffix-length bucket so a short next-turn suffix is never padded to a long
    one, and a chunk runs only the rows that still have tokens in it."""
    groups: dict[int, list[int]] = {}
    for i, x in enumerate(suffixes):
      if len(x):
        groups.setdefault(_bucket(len(x), self.chunk_buckets), []).append(i)
    for rows in groups.values():
      done_tokens = 0
      longest = max(len(suffixes[i]) for i in rows)
      while done_tokens < longest:
        active = [i for i in rows if len(suffixes[i]) > done_tokens]
        c = self._chunk_len(max(len(suffixes[i]) for i in active) - done_tokens)
        c = min(c, self.max_seq_len - max(int(starts[i]) + done_tokens for i in active))
        ba = self._batch_bucket(len(active), min_rows if min_rows is not None else self._prefill_floor(c))
        chunk = np.zeros((ba, c), np.int32)
        valid = np.zeros((ba,), np.int32)
        cstart = np.zeros((ba,), np.int32)
        slots_a = np.zeros((ba,), np.int32)  # padding rows write to the scratch slot 0
        for r, i in enumerate(active):
          piece = suffixes[i][done_tokens:done_tokens + c]
          chunk[r, :len(piece)] = piece
          valid[r] = len(piece)
          cstart[r] = starts[i] + done_tokens
          slots_a[r] = slots[i]
        length = self._length_bucket(int(cstart.max()) + c)
        if self._packed_prefill:
          tokens, to_bc, to_n = _pack_chunk(chunk, valid)
          self._cache = self._prefill_packed_fn(
              self._weights(), self._cache, jnp.asarray(slots_a), jnp.asarray(tokens), jnp.asarray(cstart),
              jnp.asarray(to_bc), jnp.asarray(to_n), chunk_shape=(ba, c), length=length)
        else:
          self._cache = self._prefill_fn(self._weights(), self._cache, jnp.asarray(slots_a), jnp.asarray(chunk),
                                         jnp.asarray(cstart), jnp.asarray(valid), length=length)
        done_tokens += c

  # -- continuous batching ------------------------------------------------------------------------------
  def submit(self, prompt: Sequence[int], params: SamplingParams, session_id: int | None = None,
             seed: int | None = None) -> int:
    """Queues one request and returns its id; ``poll`` advances every request in flight and returns those
    that finished. Requests enter and leave the decode batch independently (continuous batching): a caller
    that submits an episode's next turn as soon as its reply comes back never waits for the other episodes'
    replies. The reply's draws use ``jax.random.key(seed)`` (the row key ``generate`` gives a request with
    ``SamplingParams.seeds``; token t drawn with ``fold_in(row_key, t)``), or a split of the engine's key when
    ``seed`` is None, so a seeded request gets the same reply as through ``generate``. All requests in flight
    share temperature, top-p, top-k and stop tokens (per-request ``seed``/``max_tokens`` may differ)."""
    prompt = [int(t) for t in prompt]
    if params.seeds is not None or params.seed is not None:
      raise ValueError("submit takes its request's seed as the seed argument; pass params without seed/seeds")
    if not prompt:
      raise ValueError("empty prompt")
    if len(prompt) >= self.max_seq_len:
      raise ValueError(f"prompt of {len(prompt)} tokens does not fit max_seq_len={self.max_seq_len}")
    sig = (float(params.temperature), float(params.top_p), int(params.top_k), tuple(params.stop_token_ids))
    if self._stream and sig != self._stream_sig:
      raise ValueError(f"requests in flight sample with (temperature, top_p, top_k, stop ids) = "
                       f"{self._stream_sig}; this one asks for {sig}: poll them to completion first")
    if len(self._stream) >= self.max_slots:
      raise RuntimeError(f"JaxEngine: {len(self._stream)} requests in flight fill all max_slots={self.max_slots}")
    busy = {r.sid for r in self._stream}
    if session_id is not None and session_id in busy:
      raise ValueError(f"session {session_id} already has a request in flight")
    if seed is not None:
      key = seed_keys([seed])[0]
    else:
      self._key, key = jax.random.split(self._key)
    sid, sess = self._session(session_id, prompt, busy)
    self.stats["reused_tokens"] += sess.cached_len
    self.stats["prefill_tokens"] += len(prompt) - sess.cached_len
    rid = self._next_rid
    self._next_rid += 1
    budget = min(self.max_seq_len - len(prompt), params.max_tokens)
    self._stream.append(_StreamRow(rid, sid, sess, prompt,
                                   np.asarray(jax.random.key_data(key), np.uint32), budget))
    self._stream_sig = sig
    self._stream_params = params
    return rid

  def in_flight(self) -> int:
    return len(self._stream)

  def poll(self, min_finished: int = 1) -> list[tuple[int, Completion]]:
    """Advances the requests in flight until at least ``min_finished`` of them (or all, if fewer) finished;
    returns ``(request id, Completion)`` of every finished one (``[]`` when none is in flight).

    One poll: the new requests' prompt suffixes, all but their last token, are prefilled into their sessions'
    cache slots (``_prefill_rows``); then one decode kernel runs every request in flight, each feeding its
    pending token (the prompt's last token, or the last token it sampled) at its next position and sampling
    the next one, until ``min_finished`` rows have stopped (stop token or budget). Rows still going keep their
    pending token for the next poll, where newly submitted requests join them."""
    if not self._stream:
      return []
    want = max(1, min(int(min_finished), len(self._stream)))
    out: list[tuple[int, Completion]] = []
    while len(out) < want and self._stream:
      self._stream_prefill()
      out += self._stream_decode(want - len(out))
    return out

  def _stream_prefill(self) -> None:
    fresh = [r for r in self._stream if r.fresh]
    if fresh:
      # arrivals come one or two at a time under continuous batching: their prefill runs at its own power-of-two
      # batch (1, 2, 4 rows; each kernel compiles once), not padded to ``min_batch`` rows of real compute
      self._prefill_prompts([r.session.slot for r in fresh],
                            [min(r.session.cached_len, len(r.prompt) - 1) for r in fresh], [r.prompt for r in fresh],
                            min_rows=1, resident=True)
    for r in fresh:
      r.fresh = False
      r.session.tokens = list(r.prompt)
      r.session.cached_len = len(r.prompt) - 1  # the last prompt token is fed by the decode kernel

  def _stream_decode(self, want: int) -> list[tuple[int, Completion]]:
    """One decode kernel over every row in flight, exiting once ``want`` of them stopped."""
    params = self._stream_params
    rows = self._stream
    toks, lps, counts = self._run_decode(
        slots=[r.session.slot for r in rows], tok=[(r.gen[-1] if r.gen else r.prompt[-1]) for r in rows],
        pos=[r.session.cached_len for r in rows], left=[r.budget - len(r.gen) for r in rows],
        key_data=np.stack([r.key_data for r in rows]), offset=[len(r.gen) for r in rows], params=params,
        min_active=len(rows) - want)
    self.stats["stream_decodes"] += 1
    stops = set(params.stop_token_ids)
    finished, going = [], []
    for i, r in enumerate(rows):
      c = int(counts[i])
      r.gen += toks[i, :c].tolist()
      r.lps += lps[i, :c].tolist()
      r.session.cached_len += c  # fed tokens: the pending one and all sampled but the last
      if r.gen and (r.gen[-1] in stops or len(r.gen) >= r.budget):
        finish = "stop" if r.gen[-1] in stops else "length"
        finished.append((r.rid, Completion(token_ids=list(r.gen), logprobs=list(r.lps), finish_reason=finish)))
        self.stats["generated_tokens"] += len(r.gen)
        r.session.tokens = r.prompt + r.gen
        r.session.cached_len = len(r.session.tokens) - 1
      else:
        going.append(r)
    self._stream = going
    for r in rows:
      if r not in going and r.sid < 0:  # an anonymous request's session ends with it
        self.end_session(r.sid)
    return finished

  def update_weights(self, model) -> None:
    """Uses (a copy of) the given model's parameters from now on; cached sessions are invalidated. The copy
    keeps the engine valid when a train step later donates the trainer's parameter buffers."""
    if self._stream:
      raise RuntimeError(f"update_weights with {len(self._stream)} requests in flight: poll them first")
    _, params = nnx.split(model, nnx.Param)
    params = sampling_params(model, params, copy=True)
    if self.mesh is not None:
      from codjax.models.axes import PARAM_LOGICAL_AXES
      from codjax.parallel.sharding import state_shardings

      params = jax.device_put(params, state_shardings(params, self.mesh, PARAM_LOGICAL_AXES))
    self._params = params
    self._layers = self._split_weights(params)
    self._panels = self._panel_weights(self._layers)
    for s in self._sessions.values():
      s.cached_len = 0
    self._retired.clear()

  def close(self) -> None:
    self._sessions.clear()
    self._retired.clear()
    self._cache = None
