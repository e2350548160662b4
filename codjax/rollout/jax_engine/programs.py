"""The JAX engine's jitted programs: prefill chunks (scanned, unrolled or packed), cache-row copies and the
decode loop, the per-layer weights and column panels they read, and the shapes (batch buckets, windows) each call
runs at. A mixin of ``JaxEngine``: it reads the engine's model, cache, weights and kernel choice."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from codjax.rollout.base import SamplingParams
from codjax.rollout.jax_engine import kernels
from codjax.rollout.jax_engine.kernels import KERNELS, MIN_LENGTH_BUCKET, Kernels, _length_bucket, _pow2, _round_up
from codjax.rollout.sampling import sample_tokens, token_keys


class KernelPrograms:
  """The engine's kernels and their shapes (``JaxEngine`` mixes this in)."""

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
    if k.decode_panels_if is not None and not kernels.cpu_has(k.decode_panels_if):
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
    (2026-12-06; benchmarks/README.md)."""
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
      options = kernels.decode_compiler_options(self._kernels, jax.default_backend())
      # setdefault: engines sharing the table (``share_with``) from several threads keep one program per signature
      self._decode_fns.setdefault(sig, jax.jit(functools.partial(self._decode_impl, max_new=max_new, top_k=top_k,
                                                                 greedy=greedy, length=length), donate_argnums=(1,),
                                               compiler_options=options or None))
    return self._decode_fns[sig]
