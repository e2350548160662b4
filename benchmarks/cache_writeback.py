"""The JAX sampler's cache write-back: a call's whole window against only the positions it wrote.

Every prefill and decode call of ``JaxEngine`` gathers its rows' window of keys and values out of the engine's
cache (``Qwen3.cache_take_layers``) and writes it back when it is done (``JaxEngine._write_back``): either the
whole window (``Qwen3.cache_put_layers``: restack, then one scatter) or only the n positions the call wrote
(``Qwen3.cache_put_span``: one scatter of [L, K, H, n] / [L, K, n, H] blocks per cache). Both leave the same
cache bits (tests/models/test_kv_cache.py). This script times one jitted take + write-back of the rollout
benchmark's mid model's cache shape (6 layers, 2 key/value heads of 64, 2,048 positions, 9 slots) per (rows,
window), the cache donated as in the engine, interleaved, minimum over rounds, and checks that both give the
same cache.

  python benchmarks/cache_writeback.py
  python benchmarks/cache_writeback.py --rows=8 --windows=256,640,768 --span=64
"""

from __future__ import annotations

import time

from absl import app
from absl import flags

from common import print_table
from codjax.train import host_allocator

_ROWS = flags.DEFINE_list("rows", ["2", "8"], "rows per call")
_WINDOWS = flags.DEFINE_list("windows", ["256", "512", "640", "768"], "window positions per call")
_SPAN = flags.DEFINE_integer("span", 64, "positions a call wrote (a decode call's max_new)")
_ROUNDS = flags.DEFINE_integer("rounds", 10, "timed calls per variant (minimum reported)")
_HOST_ALLOCATOR = host_allocator.define_flag()

LAYERS, SLOTS, KV_HEADS, HEAD_DIM, MAX_LEN = 6, 9, 2, 64, 2048


def main(argv):
  del argv
  alloc = host_allocator.keep_freed_memory(_HOST_ALLOCATOR.value)
  import jax
  import jax.numpy as jnp
  import numpy as np

  from codjax.models.qwen3 import Qwen3, flat_kv

  print(f"host allocator: {alloc[1]}; cache k^T {(LAYERS, SLOTS, KV_HEADS, HEAD_DIM, MAX_LEN)}, span {_SPAN.value}")
  rng = np.random.default_rng(0)
  n = _SPAN.value
  rows_out = []
  for rows in map(int, _ROWS.value):
    for window in map(int, _WINDOWS.value):
      if not n <= window or rows >= SLOTS:
        raise ValueError(f"need span <= window and rows < {SLOTS}, got span {n}, window {window}, rows {rows}")
      slots = jnp.arange(1, rows + 1, dtype=jnp.int32)
      starts = jnp.asarray(rng.integers(0, window - n + 1, rows), jnp.int32)

      def take_put(cache, slots, starts, whole: bool):
        layers = [flat_kv(cache[0][l][slots, :, :, :window], cache[1][l][slots, :, :window])
                  for l in range(LAYERS)]
        layers = jax.lax.optimization_barrier(layers)  # the window is materialized, as a call's loop needs it
        # what a call does to its window: new values at its span (here: the span's old values + 1)
        s_x = jnp.repeat(jnp.clip(starts, 0, window - n), KV_HEADS)
        pos_x = jnp.arange(window)[None, :]
        inside = (pos_x >= s_x[:, None]) & (pos_x < s_x[:, None] + n)
        layers = [(jnp.where(inside[:, None, :], k + 1, k), jnp.where(inside[:, :, None], v + 1, v))
                  for k, v in layers]
        if whole:
          return Qwen3.cache_put_layers(cache, layers, slots, window)
        return Qwen3.cache_put_span(cache, layers, slots, starts, n)

      ref = (rng.standard_normal((LAYERS, SLOTS, KV_HEADS, HEAD_DIM, MAX_LEN)).astype(np.float32),
             rng.standard_normal((LAYERS, SLOTS, KV_HEADS, MAX_LEN, HEAD_DIM)).astype(np.float32))
      fns = {name: jax.jit(lambda c, s, st, whole=whole: take_put(c, s, st, whole), donate_argnums=0)
             for name, whole in (("whole window", True), ("span", False))}
      # one call of each from the same cache (their results compared), then warm-ups on their own caches
      outs = {name: jax.tree.map(np.asarray, fn(tuple(map(jnp.asarray, ref)), slots, starts))
              for name, fn in fns.items()}
      caches = {name: fn(tuple(map(jnp.asarray, ref)), slots, starts) for name, fn in fns.items()}
      best = {name: float("inf") for name in fns}
      same = all(np.array_equal(a, b) for a, b in zip(outs["whole window"], outs["span"]))
      for r in range(_ROUNDS.value):
        for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
          t0 = time.perf_counter()
          caches[name] = jax.block_until_ready(fns[name](caches[name], slots, starts))
          best[name] = min(best[name], time.perf_counter() - t0)
      rows_out.append([rows, window, 1e3 * best["whole window"], 1e3 * best["span"],
                       best["whole window"] / best["span"], "same" if same else "DIFFERENT"])
  print_table(("rows", "window", "whole window ms", "span ms", "ratio", "cache bits"), rows_out)


if __name__ == "__main__":
  app.run(main)
