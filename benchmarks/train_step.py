"""RL train-step throughput against transformers + torch, and the memory of vocabulary-chunked logprobs.

Part 1 (speed). One full optimizer step on a [B, T] batch of right-padded rows (prompt tokens masked out of
the loss, one advantage per row, old logprobs = current logprobs + noise so the one-side mask clips some
tokens), with loss ``rec_oneside_nois`` aggregated token-mean:

  logp_t = log softmax(z_{t-1} / tau)[x_t],  rho_t = exp(clip(sg(logp_t) - old_t, -20, 20)),
  M_t = 1(A >= 0, rho_t <= 1 + eps_high) + 1(A <= 0, rho_t >= 1 - eps_low),
  L = -sum_t A_t M_t logp_t m_t / sum_t m_t,

then global-norm clipping at 1.0 and AdamW (0.9, 0.999, eps 1e-8, weight decay 0.01).
codjax: ``make_train_step`` (jitted, state donated) with each ``--vocab_chunks`` setting. torch: the same
loss written directly on ``Qwen3ForCausalLM`` (``lm_head`` of the hidden states of positions 0..T-2, full
[B, T-1, V] float32 log-softmax, gather), ``backward()``, ``clip_grad_norm_``, ``torch.optim.AdamW``. Same
weights (through ``save_pretrained``), same batch, same threads, interleaved rounds, median wall and
process-CPU seconds (see common.py); tokens/s counts all B T positions. The check column compares the first
step's loss and pre-clip gradient norm with torch's (both start from the same weights).

Part 2 (memory). XLA's compiled memory analysis (``jit(f).lower(...).compile().memory_analysis()``, nothing
is run) of the loss gradient through the logprob path at a large vocabulary: naive full [B, T, V] float32
logits against ``token_logprobs_and_entropy`` with C vocabulary chunks, and the whole train step (a 2-layer
model with that vocabulary) with ``vocab_chunks`` = C. Peak = arguments + outputs - aliased + temporaries.

  python benchmarks/train_step.py                    # speed at hidden 512 / 8 layers / vocab 32768 + memory
  python benchmarks/train_step.py --parts=memory --mem_vocab=151936 --mem_batch=4 --mem_seq=2048

jax, torch and transformers are imported inside the functions, after ``common.pin_threads`` has set the
process's cores: threads that exist before that call would keep every core.
"""

from __future__ import annotations

import tempfile

from absl import app
from absl import flags

from codjax.train import host_allocator

from common import (HEADER, define_model_flags, host_line, interleaved, jax_sync, mib, no_sync, pin_threads,
                    print_table, row, set_torch_threads)

_M = define_model_flags(vocab_help="vocab_size of the speed benchmark", batch_help="rows per step",
                        seq_help="tokens per row (rows are right-padded to this)", prompt_default=64,
                        prompt_help="leading tokens of each row excluded from the loss",
                        warmup_help="untimed steps per side before timing (compilation)")
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "rollout temperature tau")
_CHUNKS = flags.DEFINE_list("vocab_chunks", ["1", "8"], "codjax StepConfig.vocab_chunks settings to time")
_PARTS = flags.DEFINE_list("parts", ["speed", "memory"], "speed, memory")
_MEM_VOCAB = flags.DEFINE_integer("mem_vocab", 151936, "memory part: vocabulary (Qwen3's)")
_MEM_HIDDEN = flags.DEFINE_integer("mem_hidden", 256, "memory part: hidden size")
_MEM_BATCH = flags.DEFINE_integer("mem_batch", 4, "memory part: rows")
_MEM_SEQ = flags.DEFINE_integer("mem_seq", 1024, "memory part: tokens per row")
_MEM_CHUNKS = flags.DEFINE_list("mem_chunks", ["1", "8", "32", "128"], "memory part: vocabulary chunk counts")

EPS_LOW = EPS_HIGH = 0.2
LR = 1e-6


def make_batch(rng, vocab: int, b: int, t: int, prompt: int):
  """Right-padded rows with per-row lengths in [t/2, t]; everything but the old logprobs."""
  import numpy as np

  lengths = rng.integers(t // 2, t + 1, b)
  lengths[0] = t
  valid = np.arange(t)[None] < lengths[:, None]
  mask = valid & (np.arange(t)[None] >= prompt)
  return {
      "tokens": np.where(valid, rng.integers(0, vocab, (b, t)), 0).astype(np.int32),
      "positions": np.broadcast_to(np.arange(t, dtype=np.int32), (b, t)).copy(),
      "segment_ids": valid.astype(np.int32),
      "loss_mask": mask.astype(np.float32),
      "advantages": np.repeat(rng.normal(size=(b, 1)), t, axis=1).astype(np.float32),
  }


def bench_speed(rng) -> list[list[object]]:
  import jax
  import jax.numpy as jnp
  import numpy as np
  import torch
  from transformers import Qwen3ForCausalLM

  from codjax.models import init_model, save_pretrained
  from codjax.rl.logprobs import shifted_token_logprobs
  from codjax.rl.losses import LossConfig
  from codjax.rl.train_step import OptimizerConfig, StepConfig, init_train_state, make_optimizer, make_train_step

  b, t, tau = _M.batch.value, _M.seq.value, _TEMPERATURE.value
  cfg = _M.qwen3_config(max_position_embeddings=max(4096, t))
  batch = make_batch(rng, cfg.vocab_size, b, t, _M.prompt.value)
  model = init_model(cfg, seed=_M.seed.value)
  with tempfile.TemporaryDirectory() as d:
    save_pretrained(model, d)
    theirs = Qwen3ForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation=_M.torch_attn.value)
  theirs.train()
  current, _ = jax.jit(lambda tok, pos, seg: shifted_token_logprobs(model, tok, pos, seg, temperature=tau))(
      batch["tokens"], batch["positions"], batch["segment_ids"])
  batch["old_logprobs"] = (np.asarray(current) + 0.2 * rng.normal(size=(b, t))).astype(np.float32)

  opt_cfg = OptimizerConfig(learning_rate=LR, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01, max_grad_norm=1.0)
  optimizer = make_optimizer(opt_cfg)
  jbatch = {k: jnp.asarray(v) for k, v in batch.items()}
  runners, first = {}, {}
  for chunks in (int(c) for c in _CHUNKS.value):
    graphdef, state = init_train_state(init_model(cfg, seed=_M.seed.value), optimizer)
    step_cfg = StepConfig(loss="rec_oneside_nois", loss_cfg=LossConfig(eps_low=EPS_LOW, eps_high=EPS_HIGH),
                          vocab_chunks=chunks, temperature=tau)
    step = make_train_step(graphdef, optimizer, step_cfg, state)
    holder = {"state": state}
    name = f"codjax vocab_chunks={chunks}"

    def run(step=step, holder=holder, name=name):
      holder["state"], metrics = step(holder["state"], jbatch)
      first.setdefault(name, metrics)
      return holder["state"], metrics

    runners[name] = (run, jax_sync)

  tb = {k: torch.as_tensor(v) for k, v in batch.items()}
  params = [p for p in theirs.parameters()]
  torch_opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
  tokens_l = tb["tokens"].long()
  adv, mask, old = tb["advantages"][:, 1:], tb["loss_mask"][:, 1:], tb["old_logprobs"][:, 1:]

  def torch_step():
    torch_opt.zero_grad(set_to_none=True)
    hidden = theirs.model(tokens_l, attention_mask=tb["segment_ids"].long()).last_hidden_state[:, :-1]
    logits = theirs.lm_head(hidden).float()
    logp = torch.log_softmax(logits / tau, dim=-1).gather(-1, tokens_l[:, 1:, None])[..., 0]
    ratio = torch.exp(torch.clamp(logp.detach() - old, -20.0, 20.0))
    keep = ((adv >= 0) & (ratio <= 1 + EPS_HIGH)) | ((adv <= 0) & (ratio >= 1 - EPS_LOW))
    loss = -(torch.where(keep, adv * logp, 0.0) * mask).sum() / mask.sum()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
    torch_opt.step()
    first.setdefault("torch", {"loss": loss.detach(), "grad_norm": norm})
    return loss

  runners["torch eager"] = (torch_step, no_sync)
  times = interleaved(runners, _M.rounds.value, _M.warmup.value)
  rows = []
  label = f"RL step B={b} T={t} V={cfg.vocab_size}"
  ref = first["torch"]
  for name, tm in times.items():
    check = ""
    if name != "torch eager":
      m = first[name]
      check = (f"|loss diff| {abs(float(m['loss']) - float(ref['loss'])):.1e}, grad norm "
               f"{float(m['grad_norm']):.4g} vs {float(ref['grad_norm']):.4g}, skipped {int(m['skipped'])}")
    rows.append(row(label, name, tm, times["torch eager"], b * t, check))
  return rows


def _peak(compiled) -> dict[str, float]:
  m = compiled.memory_analysis()
  peak = m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes
  return {"temp": m.temp_size_in_bytes, "args": m.argument_size_in_bytes, "out": m.output_size_in_bytes,
          "peak": peak}


def bench_memory() -> list[list[object]]:
  import jax
  import jax.numpy as jnp

  from codjax.models import Qwen3Config, init_model
  from codjax.rl.logprobs import token_logprobs_and_entropy
  from codjax.rl.train_step import OptimizerConfig, StepConfig, init_train_state, make_optimizer, make_train_step

  b, t, d, v = _MEM_BATCH.value, _MEM_SEQ.value, _MEM_HIDDEN.value, _MEM_VOCAB.value
  chunks = [int(c) for c in _MEM_CHUNKS.value]
  h = jax.ShapeDtypeStruct((b, t, d), jnp.float32)
  w = jax.ShapeDtypeStruct((d, v), jnp.float32)
  y = jax.ShapeDtypeStruct((b, t), jnp.int32)
  full_logits = b * t * v * 4
  rows = []

  def naive(h, w, y):
    z = jnp.einsum("BTD,DV->BTV", h, w) / _TEMPERATURE.value
    lse = jax.nn.logsumexp(z, axis=-1)
    logp = jnp.take_along_axis(z, y[..., None], axis=-1)[..., 0] - lse
    ent = lse - jnp.sum(jax.nn.softmax(z, axis=-1) * z, axis=-1)
    return logp, ent

  def chunked(c):
    return lambda h, w, y: token_logprobs_and_entropy(h, w, y, temperature=_TEMPERATURE.value, num_chunks=c)

  def grad_of(fn):
    # d/d(h, w) of a token-weighted logp sum, entropy as a stopped metric (what the train step does)
    def loss(h, w, y):
      logp, ent = fn(h, w, y)
      return jnp.sum(logp) + jax.lax.stop_gradient(jnp.sum(ent))
    return jax.grad(loss, argnums=(0, 1))

  base = None
  for name, fn in [("naive full logits", naive)] + [(f"chunked C={c}", chunked(c)) for c in chunks]:
    p = _peak(jax.jit(grad_of(fn)).lower(h, w, y).compile())
    base = base or p["peak"]
    rows.append([f"logprob grad B={b} T={t} D={d} V={v}", name, mib(p["temp"]), mib(p["args"] + p["out"]),
                 mib(p["peak"]), p["peak"] / base, p["temp"] / full_logits])

  cfg = Qwen3Config(vocab_size=v, hidden_size=d, intermediate_size=3 * d, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=64, tie_word_embeddings=True,
                    max_position_embeddings=max(4096, t))
  optimizer = make_optimizer(OptimizerConfig(learning_rate=LR))
  graphdef, state = init_train_state(init_model(cfg), optimizer)
  state_shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
  batch = {k: jax.ShapeDtypeStruct((b, t), jnp.int32 if k in ("tokens", "positions", "segment_ids") else
                                   jnp.float32)
           for k in ("tokens", "positions", "segment_ids", "loss_mask", "advantages", "old_logprobs")}
  base = None
  for c in chunks:
    step = make_train_step(graphdef, optimizer, StepConfig(loss="rec_oneside_nois", vocab_chunks=c), state)
    p = _peak(step.lower(state_shapes, batch).compile())
    base = base or p["peak"]
    rows.append([f"train step B={b} T={t} D={d} V={v} L=2", f"vocab_chunks={c}", mib(p["temp"]),
                 mib(p["args"] + p["out"]), mib(p["peak"]), p["peak"] / base, p["temp"] / full_logits])
  return rows


def main(argv):
  del argv
  threads = pin_threads(_M.threads.value)
  alloc = host_allocator.keep_freed_memory(_M.host_allocator.value)
  set_torch_threads(threads)
  import jax
  import numpy as np

  rng = np.random.default_rng(_M.seed.value)
  print(f"# jax {jax.__version__} ({jax.devices()[0].platform}), threads={threads}, rounds={_M.rounds.value} "
        f"(median); model hidden {_M.hidden.value}, layers {_M.layers.value}, heads {_M.heads.value}/"
        f"{_M.kv_heads.value}x{_M.head_dim.value}, mlp {_M.mlp.value}, vocab {_M.vocab.value}, tied={_M.tied.value}, fp32")
  import torch  # noqa: F401  (loaded for host_line's torch CPU capability)

  print(host_line() + f"; host allocator {_M.host_allocator.value}: {alloc[1]}")
  if "speed" in _PARTS.value:
    print_table(HEADER, bench_speed(rng))
  if "memory" in _PARTS.value:
    print()
    print_table(["compiled program", "logprob path", "temp MiB", "args+out MiB", "peak MiB", "peak vs naive / C=1",
                 "temp / one [B,T,V] f32"], bench_memory())


if __name__ == "__main__":
  app.run(main)
