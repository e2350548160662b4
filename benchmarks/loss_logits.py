"""The train step with the LM head at every position against the LM head at the loss tokens only
(``train.logits="loss_tokens"``: ``codjax.rl.batch.loss_index``, ``shifted_token_logprobs(index_bm=...)``).

A CoD episode's loss tokens are its replies, ~20 % of its tokens; the LM head and its softmax over the
vocabulary run on B x T rows for logprobs the loss reads at ~B x T / 5 of them. Workloads (same random weights
and batches for both settings, interleaved rounds, ``common.interleaved``):

* the main job's steps (``experiments/tiny_cod_frozenlake.py``: hidden 128, 3 layers, vocabulary 1,408): RL
  (224 episodes of ~185 tokens packed into 512-token rows, 4 microbatches, the last fifth of each episode in
  the loss) and SFT (16 one-episode rows of a bucketed length);
* the same SFT and RL batches on a 13M-parameter model with a 32,768-entry vocabulary (the rollout benchmark's
  ``mid``: hidden 256, 4 layers), and its SFT batch with Qwen3's 151,936-entry vocabulary.

The check column is the first step's loss with the index and its difference from the full step's (the same
math, other rounding).

  python benchmarks/loss_logits.py --rounds=5
"""

from __future__ import annotations

from absl import app
from absl import flags

from common import host_line, interleaved, jax_sync, pin_threads, print_table, synthetic_episodes

_ROUNDS = flags.DEFINE_integer("rounds", 5, "timed rounds per setting (interleaved)")
_WARMUP = flags.DEFINE_integer("warmup", 1, "untimed calls per setting before timing (compilation)")
_THREADS = flags.DEFINE_integer("threads", None, "cores (default: all available)")
_PARTS = flags.DEFINE_list("parts", ["tiny", "mid", "qwen_vocab"], "model shapes to time: tiny, mid, qwen_vocab")
_SEED = flags.DEFINE_integer("seed", 0, "weights and data seed")

TINY = dict(hidden_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            intermediate_size=384, tie_word_embeddings=True, vocab_size=1408)
MID = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
           intermediate_size=768, tie_word_embeddings=False, vocab_size=32768)


def main(_):
  pin_threads(_THREADS.value)
  import jax.numpy as jnp
  import numpy as np

  from codjax.models import init_model
  from codjax.models.config import Qwen3Config
  from codjax.rl.batch import assemble_batch
  from codjax.rl.losses import LossConfig
  from codjax.rl.train_step import OptimizerConfig, StepConfig, init_train_state, make_optimizer, make_train_step

  def rl_batch(rng, vocab):
    return assemble_batch(synthetic_episodes(rng, 224, 185, vocab), 512, pack=True, row_multiple=4,
                          with_loss_index=True)

  def sft_batch(rng, vocab, n=16):
    return assemble_batch(synthetic_episodes(rng, n, 178, vocab), 512, pack=False, bucket_len=True, num_rows=n,
                          with_loss_index=True)

  rng = np.random.default_rng(_SEED.value)
  workloads = []  # (label, shape, batch, stats, loss, microbatches)
  for part in _PARTS.value:
    if part == "tiny":
      b, st = rl_batch(rng, TINY["vocab_size"])
      workloads.append(("main job RL step, 0.6M params, V 1,408", TINY, b, st, "rec_oneside_nois", 4))
      b, st = sft_batch(rng, TINY["vocab_size"])
      workloads.append(("main job SFT step, 0.6M params, V 1,408", TINY, b, st, "sft", 1))
    elif part == "mid":
      b, st = rl_batch(rng, MID["vocab_size"])
      workloads.append(("RL step, 13M params, V 32,768", MID, b, st, "rec_oneside_nois", 4))
      b, st = sft_batch(rng, MID["vocab_size"])
      workloads.append(("SFT step, 13M params, V 32,768", MID, b, st, "sft", 1))
    elif part == "qwen_vocab":
      shape = dict(MID, vocab_size=151936)
      b, st = sft_batch(rng, shape["vocab_size"], n=8)
      workloads.append(("SFT step, hidden 256, V 151,936 (Qwen3)", shape, b, st, "sft", 1))
    else:
      raise ValueError(f"unknown part {part!r}")
  print(host_line())
  rows = []
  for label, shape, batch, st, loss, micro in workloads:
    rows_, t_ = batch["tokens"].shape
    desc = (f"{label}: {rows_} rows x {t_} (fill {st['fill']:.2f}), {int(st['loss_tokens'])} loss tokens, "
            f"index width {batch['loss_index'].shape[1]}")
    runners, first = {}, {}
    for setting in ("all", "loss_tokens"):
      b = {k: jnp.asarray(v) for k, v in batch.items() if setting == "loss_tokens" or k != "loss_index"}
      cfg = Qwen3Config(**shape, attention_impl="blockwise", scan_layers=False, max_position_embeddings=4096)
      opt = make_optimizer(OptimizerConfig(learning_rate=1e-4))
      graphdef, state = init_train_state(init_model(cfg, seed=_SEED.value), opt)
      step = make_train_step(graphdef, opt, StepConfig(loss=loss, loss_cfg=LossConfig(), num_microbatches=micro),
                             state, batch_fields=tuple(sorted(b)))
      box = {}
      box["state"], out = step(state, b)  # compiles; its loss is the check
      first[setting] = float(out["loss"])

      def run(step=step, box=box, b=b):
        box["state"], out = step(box["state"], b)
        return out

      runners[setting] = (run, jax_sync)
    times = interleaved(runners, _ROUNDS.value, _WARMUP.value)
    base = times["all"].wall_median
    for setting, t in times.items():
      rows.append([desc, setting, t.wall_median, t.cpu_median, st["tokens"] / t.wall_median, base / t.wall_median,
                   f"loss {first[setting]:.6f}, |diff| {abs(first[setting] - first['all']):.1e}"])
  print_table(("workload", "LM head at", "wall s", "CPU s", "tokens/s", "vs all (wall)", "check"), rows)


if __name__ == "__main__":
  app.run(main)
