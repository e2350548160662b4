"""``JaxEngine``: the built-in sampler's API (construction and weight sharing, ``generate`` and its keys,
decode phases, weight updates); the package docstring describes the whole engine."""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from codjax.rollout.base import Completion, SamplingParams
from codjax.rollout.jax_engine.cache import CacheSlots, _cache_shardings, _Session
from codjax.rollout.jax_engine.kernels import CHUNK_BUCKETS, KERNELS, MIN_BATCH_BUCKET, _pow2, _round_up
from codjax.rollout.jax_engine.programs import KernelPrograms
from codjax.rollout.jax_engine.streaming import ContinuousBatching, _StreamRow
from codjax.rollout.sampling import indexed_keys, seed_keys


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


class JaxEngine(CacheSlots, KernelPrograms, ContinuousBatching):
  """KV-cache sampler over a codjax ``Qwen3`` (see the package docstring)."""

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

  def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               session_ids: Sequence[int] | None = None) -> list[Completion]:
    if not prompts:
      return []
    check_requests(prompts, session_ids)  # before the key split: a refused call leaves the engine's key as it was
    return self._generate_runs(prompts, params, session_ids, self.call_keys(params, len(prompts)))

  def call_keys(self, params: SamplingParams, n: int) -> np.ndarray:
    """The row keys ``generate`` gives a call of ``n`` requests (package docstring), as their key data (uint32
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
    """The row keys of the call's requests [start, start + n) (package docstring): per-request seeds, else
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
