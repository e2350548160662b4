"""The main job's train steps under each model compute setting, against the setting it used before, same run.

The README's main job (``experiments/tiny_cod_frozenlake.py``) trains a 0.6M-parameter Qwen3 (hidden 128, 3
layers, 4/2 heads of 32, MLP 384, vocabulary 1,536, tied embeddings) with two jitted steps:

* RL: ``make_train_step`` with ``rec_oneside_nois`` on one CoD step's batch: 224 episodes (~185 tokens each,
  the last fifth of each in the loss) packed into 512-token rows (``assemble_batch(pack=True)``, ~96 rows),
  4 microbatches, as ``train.pack=True`` / ``train.num_microbatches=4`` run it;
* SFT: the ``sft`` loss on 16 one-episode rows of a bucketed length (``assemble_batch(pack=False,
  bucket_len=True)``), as ``codjax.train.sft`` runs it.

Each is timed with the four combinations of ``model.attention_impl`` (``xla``: dense masked attention;
``blockwise``: causal blocks with the hand-written backward) and ``model.scan_layers`` (scanned or unrolled
layers), on the same random weights and batches, interleaved (``common.interleaved``); the ratio column is
the time of ``xla, scanned`` (the main job's setting before 2026-12-05) over each row's time. The check column
is the first step's loss and its difference from that setting's (same math, other rounding).

  python benchmarks/demo_step.py --rounds=5 --warmup=2
"""

from __future__ import annotations

from absl import app
from absl import flags

from common import host_line, interleaved, jax_sync, pin_threads, print_table, synthetic_episodes

_ROUNDS = flags.DEFINE_integer("rounds", 5, "timed rounds per setting (interleaved)")
_WARMUP = flags.DEFINE_integer("warmup", 1, "untimed calls per setting before timing (compilation)")
_THREADS = flags.DEFINE_integer("threads", None, "cores (default: all available)")
_PARTS = flags.DEFINE_list("parts", ["rl", "sft"], "steps to time: rl, sft")
_SEED = flags.DEFINE_integer("seed", 0, "weights and data seed")

SETTINGS = (("xla", True), ("blockwise", True), ("xla", False), ("blockwise", False))


def main(_):
  pin_threads(_THREADS.value)
  import jax
  import jax.numpy as jnp
  import numpy as np

  from codjax.models import init_model
  from codjax.models.config import Qwen3Config
  from codjax.rl.batch import assemble_batch
  from codjax.rl.losses import LossConfig
  from codjax.rl.train_step import OptimizerConfig, StepConfig, init_train_state, make_optimizer, make_train_step
  from codjax.train.config import DEMO_TINY_SHAPE

  shape = dict(DEMO_TINY_SHAPE, vocab_size=1536)
  rng = np.random.default_rng(_SEED.value)
  workloads = []
  if "rl" in _PARTS.value:
    batch, st = assemble_batch(synthetic_episodes(rng, 224, 185, shape["vocab_size"]), 512, pack=True,
                               row_multiple=4)
    workloads.append((f"RL step, {int(st['rows'])} packed rows x 512 (fill {st['fill']:.2f}), 4 microbatches",
                      batch, "rec_oneside_nois", 4, int(st["tokens"])))
  if "sft" in _PARTS.value:
    batch, st = assemble_batch(synthetic_episodes(rng, 16, 178, shape["vocab_size"]), 512, pack=False,
                               bucket_len=True, num_rows=16)
    workloads.append((f"SFT step, 16 rows x {batch['tokens'].shape[1]}", batch, "sft", 1, int(st["tokens"])))
  print(host_line())
  rows = []
  for label, batch, loss, micro, tokens in workloads:
    dev_batch = {k: jnp.asarray(v) for k, v in batch.items()}
    runners, first_loss = {}, {}
    for attn, scan in SETTINGS:
      cfg = Qwen3Config(**shape, attention_impl=attn, scan_layers=scan, max_position_embeddings=4096)
      model = init_model(cfg, seed=_SEED.value)
      opt = make_optimizer(OptimizerConfig(learning_rate=1e-4))
      graphdef, state = init_train_state(model, opt)
      step = make_train_step(graphdef, opt, StepConfig(loss=loss, loss_cfg=LossConfig(), num_microbatches=micro),
                             state)
      key = f"{attn}, {'scanned' if scan else 'unrolled'}"
      box = {}
      box["state"], out = step(state, dev_batch)  # the first step (compiles; its loss is the check)
      first_loss[key] = float(out["loss"])

      def run(step=step, box=box):
        box["state"], out = step(box["state"], dev_batch)
        return out

      runners[key] = (run, jax_sync)
    times = interleaved(runners, _ROUNDS.value, _WARMUP.value)
    base = times["xla, scanned"]
    for key, t in times.items():
      rows.append([label, key, t.wall_median, t.cpu_median, tokens / t.wall_median, base.wall_median / t.wall_median,
                   f"loss {first_loss[key]:.6f}, |diff| {abs(first_loss[key] - first_loss['xla, scanned']):.1e}"])
  print_table(("workload", "model compute", "wall s", "CPU s", "tokens/s", "vs xla, scanned (wall)", "check"), rows)


if __name__ == "__main__":
  app.run(main)
