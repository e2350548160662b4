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

``define_model_flags`` defines, once, the command line the model benchmarks (``model_step.py``,
``train_step.py``) share: the Qwen3 shape of the benchmarked model, batch, sequence and prompt lengths, rounds,
threads, the torch attention implementation, the seed and the host allocator.
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

from absl import flags


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
  from codjax.rollout.jax_engine import cpu_flags

  model, flags = platform.processor() or "?", cpu_flags()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, val = line.partition(":")
        if key.strip() == "model name":
          model = val.strip()
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


@dataclasses.dataclass(frozen=True)
class ModelFlags:
  """The flags ``define_model_flags`` defines (absl ``FlagHolder``s; read ``.value`` after parsing)."""

  hidden: flags.FlagHolder
  layers: flags.FlagHolder
  heads: flags.FlagHolder
  kv_heads: flags.FlagHolder
  head_dim: flags.FlagHolder
  mlp: flags.FlagHolder
  vocab: flags.FlagHolder
  tied: flags.FlagHolder
  batch: flags.FlagHolder
  seq: flags.FlagHolder
  prompt: flags.FlagHolder
  rounds: flags.FlagHolder
  warmup: flags.FlagHolder
  threads: flags.FlagHolder
  torch_attn: flags.FlagHolder
  seed: flags.FlagHolder
  host_allocator: flags.FlagHolder

  def qwen3_config(self, **overrides):
    """The benchmarked model's ``Qwen3Config`` (rope theta 1e6 as Qwen3) with ``overrides`` (dtypes, attention,
    max_position_embeddings). Imports codjax's model lazily, after ``pin_threads``."""
    from codjax.models import Qwen3Config

    return Qwen3Config(vocab_size=self.vocab.value, hidden_size=self.hidden.value, intermediate_size=self.mlp.value,
                       num_hidden_layers=self.layers.value, num_attention_heads=self.heads.value,
                       num_key_value_heads=self.kv_heads.value, head_dim=self.head_dim.value,
                       rope_theta=1_000_000.0, tie_word_embeddings=self.tied.value, **overrides)


def define_model_flags(*, vocab_help: str, batch_help: str, seq_help: str, prompt_default: int, prompt_help: str,
                       warmup_help: str) -> ModelFlags:
  """Defines the model benchmarks' shared flags (module docstring); the help texts that differ between the
  scripts, and the prompt length's default, are arguments. The flags are listed under the calling script in
  ``--help`` (absl's module of a flag is where it was defined, unless told otherwise)."""
  from codjax.train import host_allocator

  caller = sys._getframe(1).f_globals.get("__name__", "")
  kw = {"module_name": sys.argv[0] if caller == "__main__" else caller}
  return ModelFlags(
      hidden=flags.DEFINE_integer("hidden", 512, "hidden_size", **kw),
      layers=flags.DEFINE_integer("layers", 8, "num_hidden_layers", **kw),
      heads=flags.DEFINE_integer("heads", 8, "num_attention_heads", **kw),
      kv_heads=flags.DEFINE_integer("kv_heads", 4, "num_key_value_heads", **kw),
      head_dim=flags.DEFINE_integer("head_dim", 64, "head_dim", **kw),
      mlp=flags.DEFINE_integer("mlp", 1536, "intermediate_size", **kw),
      vocab=flags.DEFINE_integer("vocab", 32768, vocab_help, **kw),
      tied=flags.DEFINE_bool("tied", True, "tie the lm_head to the embedding (as Qwen3 <= 4B does)", **kw),
      batch=flags.DEFINE_integer("batch", 4, batch_help, **kw),
      seq=flags.DEFINE_integer("seq", 512, seq_help, **kw),
      prompt=flags.DEFINE_integer("prompt", prompt_default, prompt_help, **kw),
      rounds=flags.DEFINE_integer("rounds", 5, "timed rounds per side (interleaved)", **kw),
      warmup=flags.DEFINE_integer("warmup", 1, warmup_help, **kw),
      threads=flags.DEFINE_integer("threads", None, "cores for both frameworks (default: all available)", **kw),
      torch_attn=flags.DEFINE_string("torch_attn", "sdpa", "transformers attn_implementation", **kw),
      seed=flags.DEFINE_integer("seed", 0, "weights and data seed", **kw),
      host_allocator=host_allocator.define_flag(),  # applies to both frameworks (same process)
  )


def greedy_programs(graphdef, batch: int, prompt_len: int, new_tokens: int):
  """Two jitted programs of ``(params, prompt [B, P] int32)`` for a codjax decoder (Qwen3 or Qwen35):
  ``prefill`` returns the first greedy token [B]; ``generate`` returns all ``new_tokens`` greedy tokens
  [B, N] from one prefill and a ``lax.fori_loop`` over the rest, decoding as ``JaxEngine`` does (per-layer
  weights and caches split once outside the token loop, ``decode_head`` / ``decode_logits`` for the
  vocabulary projection)."""
  import jax
  import jax.numpy as jnp
  from flax import nnx

  b, p, n = batch, prompt_len, new_tokens

  def first_token(model, prompt_bp):
    cache = model.init_cache(b, p + n)
    hid, cache = model.forward_cached(prompt_bp, jnp.zeros((b,), jnp.int32), cache)
    return jnp.argmax(model.logits(hid[:, -1]), axis=-1).astype(jnp.int32), cache

  @jax.jit
  def prefill(params, prompt_bp):
    return first_token(nnx.merge(graphdef, params), prompt_bp)[0]

  @jax.jit
  def generate(params, prompt_bp):
    model = nnx.merge(graphdef, params)
    tok, cache = first_token(model, prompt_bp)
    out = jnp.zeros((b, n), jnp.int32).at[:, 0].set(tok)
    layers, caches, head = model.split_layers(), model.cache_layers(cache), model.decode_head()

    def body(i, carry):
      out, tok, caches = carry
      hid, caches = model.forward_cached_unrolled(tok[:, None], jnp.full((b,), p + i - 1, jnp.int32), layers,
                                                  caches)
      tok = jnp.argmax(model.decode_logits(hid[:, 0], head), axis=-1).astype(jnp.int32)
      return out.at[:, i].set(tok), tok, caches

    return jax.lax.fori_loop(1, n, body, (out, tok, caches))[0]

  return prefill, generate


def synthetic_episodes(rng, n: int, mean_len: int, vocab: int):
  """``n`` synthetic episodes of ~``mean_len`` tokens (the main job's lengths), the last fifth in the loss."""
  import numpy as np

  from codjax.rl.batch import TrainSequence

  out = []
  for _ in range(n):
    length = int(np.clip(rng.normal(mean_len, 0.35 * mean_len), 40, 500))
    mask = np.zeros(length, np.float32)
    mask[int(0.8 * length):] = 1
    out.append(TrainSequence(tokens=rng.integers(0, vocab, length).tolist(), loss_mask=mask,
                             old_logprobs=np.full(length, -1.0, np.float32), advantage=float(rng.normal())))
  return out
