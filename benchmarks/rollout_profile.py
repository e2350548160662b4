"""Where the JAX engine's time goes on `benchmarks/rollout.py`'s workload (one model config).

Two views, each printed as a table:

* ``--what=round``: one CoD rollout round (after a warm-up round that compiles), every jitted engine call timed with
  ``block_until_ready``: prefill calls (rows, chunk, window, real tokens, seconds), copies, decode calls and steps,
  and the rest (Python, environments, tokenizer).
* ``--what=rows``: the decode loop's time per step for 1, 2, 4 and 8 rows at the given windows (48 steps a call,
  best of ``--profile_rounds``).

  python benchmarks/rollout_profile.py --configs=mid --what=round
  python benchmarks/rollout_profile.py --configs=mid --what=rows --windows=256,768

The checkpoints are the rollout benchmark's (``--ckpt_dir``, built if missing). Profiles only: the engine's
public results are checked by tests/rollout/test_jax_engine.py.
"""

import collections
import tempfile
import time

from absl import app, flags

import rollout as rb  # the rollout benchmark's flags (--configs, --ckpt_dir, --max_tokens) and workload
from common import interleaved, jax_sync, print_table

_WHAT = flags.DEFINE_enum("what", "round", ["round", "rows"], "round: one rollout round by call; rows: decode steps")
_WINDOWS = flags.DEFINE_list("windows", ["256", "768"], "decode windows for --what=rows")
_PROFILE_ROUNDS = flags.DEFINE_integer("profile_rounds", 2, "timed calls per (window, rows) for --what=rows")
_STREAM = flags.DEFINE_bool("stream", False, "--what=round: run the round under continuous batching (the benchmark's "
                            "jax_stream engine) instead of lock step")
_KERNELS = flags.DEFINE_string("kernels", None, "the engine's kernel set (codjax.rollout.jax_engine.KERNELS; "
                               "default: the engine's default)")
STEPS = 48
ROWS = (1, 2, 4, 8)


def _engine(name: str):
  _, tok, model = rb.load_config(name, rb._CKPT_DIR.value or tempfile.mkdtemp(prefix="codjax_rollout_profile_"))
  return rb.new_jax_engine(model, **({"kernels": _KERNELS.value} if _KERNELS.value else {})), tok


def profile_round(name: str) -> None:
  import numpy as np

  eng, tok = _engine(name)
  seconds, calls, decodes, prefills = collections.Counter(), collections.Counter(), collections.Counter(), []

  def timed_call(kind, fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = jax_sync(fn(*args, **kwargs))
    dt = time.perf_counter() - t0
    seconds[kind] += dt
    calls[kind] += 1
    return out, dt

  prefill_fn, packed_fn, copy_fn, decode_fn = eng._prefill_fn, eng._prefill_packed_fn, eng._copy_fn, eng._decode_fn

  def prefill(params, cache, slots, chunk, start, valid, length):
    out, dt = timed_call("prefill", prefill_fn, params, cache, slots, chunk, start, valid, length=length)
    n = chunk.shape[0] * chunk.shape[1]
    prefills.append((chunk.shape[0], chunk.shape[1], length, n, int(np.asarray(valid).sum()), dt))
    return out

  def packed(params, cache, slots, tokens, start, to_bc, to_n, chunk_shape, length):
    out, dt = timed_call("prefill", packed_fn, params, cache, slots, tokens, start, to_bc, to_n,
                         chunk_shape=chunk_shape, length=length)
    to_bc, to_n = np.asarray(to_bc), np.asarray(to_n)
    real = int((to_n[to_bc] == np.arange(to_bc.size)).sum())  # a slot is real iff its packed token maps back
    prefills.append((chunk_shape[0], chunk_shape[1], length, tokens.shape[1], real, dt))
    return out

  def copy(cache, src, dst, length):
    return timed_call("copy", copy_fn, cache, src, dst, length=length)[0]

  def decode(*sig):
    fn = decode_fn(*sig)

    def call(*args):
      out, _ = timed_call("decode", fn, *args)
      decodes[(sig[0], sig[-1])] += 1
      calls["decode steps"] += int(np.asarray(out[3]).max())
      return out
    return call

  eng._prefill_fn, eng._prefill_packed_fn, eng._copy_fn, eng._decode_fn = prefill, packed, copy, decode
  runner = rb.Streaming(eng) if _STREAM.value else eng
  rb.rollout(runner, tok)  # warm-up: compiles
  seconds.clear(), calls.clear(), decodes.clear(), prefills.clear()
  t0 = time.perf_counter()
  gen, replies = rb.rollout(runner, tok)
  wall = time.perf_counter() - t0
  steps = calls["decode steps"]
  print(f"\n{name}: {wall:.2f} s per round, {gen} generated tokens in {replies} replies, {steps} decode steps "
        f"({seconds['decode'] / max(1, steps) * 1e3:.2f} ms each)")
  print_table(("part", "seconds", "calls"), [(k, seconds[k], calls[k]) for k in ("prefill", "copy", "decode")]
              + [("other (Python, environments, tokenizer)", wall - sum(seconds.values()), "")])
  print("\ndecode calls by (rows, window):", dict(sorted(decodes.items())))
  real, run = sum(p[4] for p in prefills), sum(p[3] for p in prefills)
  slots = sum(p[0] * p[1] for p in prefills)
  print(f"\nprefill: {real} real tokens in {slots} token slots ({1 - real / max(1, slots):.0%} padding); the "
        f"products ran {run} token rows (packed prefill: the valid tokens rounded up per call)")
  print_table(("rows", "chunk", "window", "token rows run", "real tokens", "seconds"), prefills)


def profile_rows(name: str) -> None:
  import jax.numpy as jnp

  eng, _ = _engine(name)

  def runner(window: int, b: int):
    fn = eng._decode_fn(b, 64, 0, False, 1, window)
    rest = (jnp.arange(b, dtype=jnp.int32), jnp.ones(b, jnp.int32), jnp.full(b, window - 64, jnp.int32),
            jnp.full(b, STEPS, jnp.int32), jnp.array([-1], jnp.int32), jnp.zeros((b, 2), jnp.uint32),
            jnp.zeros(b, jnp.int32), jnp.float32(1.0), jnp.float32(1.0), jnp.int32(0))

    def run():  # the cache is donated: every call continues on the one it returned
      out = fn(eng._decode_weights(b), eng._cache, *rest)
      eng._cache = out[0]
      return out
    return run, jax_sync

  windows = [int(w) for w in _WINDOWS.value]
  times = interleaved({(w, b): runner(w, b) for w in windows for b in ROWS}, _PROFILE_ROUNDS.value)
  print(f"\n{name}: decode ms per step ({STEPS} steps a call, best of {_PROFILE_ROUNDS.value})")
  print_table(("window",) + tuple(f"{b} rows" for b in ROWS),
              [(w,) + tuple(min(times[(w, b)].wall) / STEPS * 1e3 for b in ROWS) for w in windows])


def main(_):
  print("host allocator:", rb.host_allocator.keep_freed_memory(rb._HOST_ALLOCATOR.value)[1])
  for name in rb._CONFIGS.value:
    (profile_round if _WHAT.value == "round" else profile_rows)(name)


if __name__ == "__main__":
  app.run(main)
