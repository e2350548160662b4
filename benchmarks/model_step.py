"""Model throughput: codjax's jitted Qwen3 against transformers' Qwen3ForCausalLM + torch, same run.

Both sides hold exactly the same weights (the codjax model is written with ``save_pretrained`` and loaded by
``transformers``), the same batch, dtype and thread count. Two workloads:

* train: forward + backward of the mean next-token cross-entropy over a [B, T] batch,
  loss = -1/(B (T-1)) sum_{b, t<T-1} log softmax(z_{b,t})[x_{b,t+1}]; tokens/s = B T / step time.
  codjax: ``jax.jit(jax.value_and_grad(loss))`` over the parameter state, the loss written as
  logsumexp(z) - z[y], with the layers scanned (the default) and unrolled (``scan_layers=False``).
  torch: ``lm_head(model(x).last_hidden_state[:, :-1])`` -> ``F.cross_entropy`` -> ``backward()`` (grads
  reset to None before each step).
* decode: greedy KV-cache generation of N new tokens after a P-token prompt; tokens/s = B N / time.
  codjax: one jitted program (prefill with ``forward_cached``, then ``lax.fori_loop`` over the N-1 decode
  steps with ``forward_cached_unrolled`` on per-layer weight and cache slices, as ``JaxEngine`` decodes;
  argmax in the loop; no Python per token). torch: ``model.generate(do_sample=False, use_cache=True,
  min_new_tokens=N, max_new_tokens=N)`` and a hand-written ``past_key_values`` loop (the faster of the two
  is the peer). The prefill alone is timed too, so the decode-only rate B (N-1) / (t_gen - t_prefill) shows.

Each row prints the median wall and process-CPU seconds over interleaved rounds, tokens/s (wall), and the
torch/this time ratio for both clocks (> 1 means faster than the torch peer). A check column compares the two
sides' outputs (loss difference; greedy-token agreement).

  python benchmarks/model_step.py                       # defaults: hidden 512, 8 layers, seq 512, batch 4
  python benchmarks/model_step.py --parts=decode --new_tokens=64 --rounds=3

jax, torch and transformers are imported inside the functions, after ``common.pin_threads`` has set the
process's cores: threads that exist before that call would keep every core.
"""

from __future__ import annotations

import tempfile

from absl import app
from absl import flags

from codjax.train import host_allocator

from common import (HEADER, define_model_flags, greedy_programs, host_line, interleaved, jax_sync, no_sync,
                    pin_threads, print_table, row, set_torch_threads)

_M = define_model_flags(vocab_help="vocab_size (Qwen3's 151936 would make the lm_head ~3/4 of this model's FLOPs; "
                        "32k is a typical small-model vocabulary)", batch_help="batch size (train and decode)",
                        seq_help="train sequence length", prompt_default=128, prompt_help="decode prompt length",
                        warmup_help="untimed calls per side before timing (compilation)")
_DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "parameter and compute dtype")
_NEW = flags.DEFINE_integer("new_tokens", 128, "decode: new tokens per row")
_PARTS = flags.DEFINE_list("parts", ["train", "decode"], "workloads to run: train, decode")
_ATTN = flags.DEFINE_enum("attention", "blockwise", ["xla", "blockwise"], "codjax attention_impl of the model "
                          "(decode, prefill); the train part times both CPU choices (scanned layers) and this "
                          "one with unrolled layers (scan_layers=False)")


def build_models(dtype: str):
  """The codjax model and a transformers model holding the same weights."""
  import torch
  from transformers import Qwen3ForCausalLM

  from codjax.models import init_model, save_pretrained

  cfg = _M.qwen3_config(param_dtype=dtype, dtype=dtype, attention_impl=_ATTN.value,
                        max_position_embeddings=max(4096, _M.seq.value, _M.prompt.value + _NEW.value))
  ours = init_model(cfg, seed=_M.seed.value)
  with tempfile.TemporaryDirectory() as d:
    save_pretrained(ours, d)
    theirs = Qwen3ForCausalLM.from_pretrained(d, dtype=getattr(torch, dtype),
                                              attn_implementation=_M.torch_attn.value).eval()
  return cfg, ours, theirs


def bench_train(cfg, ours, theirs, rng) -> list[list[object]]:
  import jax
  import jax.numpy as jnp
  import torch
  import torch.nn.functional as F
  from flax import nnx

  from codjax.models import abstract_model

  b, t = _M.batch.value, _M.seq.value
  ids = rng.integers(0, cfg.vocab_size, (b, t))
  params = nnx.split(ours)[1]

  def make_step(impl: str, scan: bool):
    gdef = nnx.split(abstract_model(cfg.replace(attention_impl=impl, scan_layers=scan)))[0]  # same params

    def loss_fn(params, tokens):
      # Both sides drop the last position before the lm_head (slicing the [B, T, V] logits instead copies
      # them) and codjax writes the loss as logsumexp(z) - z[y]: on XLA CPU its backward is ~1.3x faster than
      # log_softmax + take_along_axis, whose gradient is also written in a transposed [V, B T] layout.
      model = nnx.merge(gdef, params)
      logits = model.logits(model.hidden_states(tokens)[:, :-1])
      picked = jnp.take_along_axis(logits, tokens[:, 1:, None], axis=-1)[..., 0]
      return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)

    return jax.jit(jax.value_and_grad(loss_fn))

  # both CPU attention choices with scanned layers, and the --attention choice with a Python loop over layers
  variants = [(_ATTN.value, False), (_ATTN.value, True)] + [(i, True) for i in ("blockwise", "xla")
                                                             if i != _ATTN.value]
  name = lambda impl, scan: f"{impl} attention, {'scanned' if scan else 'unrolled'} layers"  # noqa: E731
  steps = {name(*v): make_step(*v) for v in variants}
  tokens = jnp.asarray(ids, jnp.int32)
  ids_t = torch.tensor(ids)

  def torch_step():
    for p in theirs.parameters():
      p.grad = None
    logits = theirs.lm_head(theirs.model(ids_t).last_hidden_state[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids_t[:, 1:].reshape(-1))
    loss.backward()
    return loss

  runners = {f"codjax jit ({n})": ((lambda f=f: f(params, tokens)), jax_sync) for n, f in steps.items()}
  runners["torch eager"] = (torch_step, no_sync)
  times = interleaved(runners, _M.rounds.value, _M.warmup.value)
  ref = torch_step().item()
  label = f"train fwd+bwd B={b} T={t}"
  rows = []
  for n, f in steps.items():
    diff = abs(float(f(params, tokens)[0]) - ref)
    rows.append(row(label, f"codjax jit ({n})", times[f"codjax jit ({n})"], times["torch eager"], b * t,
                    f"|loss diff| {diff:.1e}"))
  return rows + [row(label, "torch eager", times["torch eager"], times["torch eager"], b * t)]


def bench_decode(cfg, ours, theirs, rng) -> list[list[object]]:
  import jax
  import jax.numpy as jnp
  import numpy as np
  import torch
  from flax import nnx

  b, p, n = _M.batch.value, _M.prompt.value, _NEW.value
  prompt = rng.integers(0, cfg.vocab_size, (b, p))
  graphdef, params = nnx.split(ours)

  jax_prefill, jax_generate = greedy_programs(graphdef, b, p, n)

  prompt_j = jnp.asarray(prompt, jnp.int32)
  prompt_t = torch.tensor(prompt)

  @torch.inference_mode()
  def torch_generate():
    return theirs.generate(prompt_t, attention_mask=torch.ones_like(prompt_t), do_sample=False,
                           use_cache=True, max_new_tokens=n, min_new_tokens=n, pad_token_id=0)[:, p:]

  @torch.inference_mode()
  def torch_loop():
    out = theirs(prompt_t, use_cache=True)
    past, tok = out.past_key_values, out.logits[:, -1].argmax(-1)
    toks = [tok]
    for _ in range(n - 1):
      out = theirs(tok[:, None], past_key_values=past, use_cache=True)
      past, tok = out.past_key_values, out.logits[:, -1].argmax(-1)
      toks.append(tok)
    return torch.stack(toks, 1)

  @torch.inference_mode()
  def torch_prefill():
    return theirs(prompt_t, use_cache=True).logits[:, -1].argmax(-1)

  times = interleaved({"codjax": (lambda: jax_generate(params, prompt_j), jax_sync),
                       "torch.generate": (torch_generate, no_sync),
                       "torch loop": (torch_loop, no_sync),
                       "codjax prefill": (lambda: jax_prefill(params, prompt_j), jax_sync),
                       "torch prefill": (torch_prefill, no_sync)}, _M.rounds.value, _M.warmup.value)
  ours_tok = np.asarray(jax_generate(params, prompt_j))
  agree = lambda x: f"tokens = codjax's: {np.mean(x == ours_tok):.0%}"  # noqa: E731
  # the peer is whichever torch decoder had the lower median wall time
  peer = min(times["torch.generate"], times["torch loop"], key=lambda tm: tm.wall_median)
  label = f"decode B={b} P={p} N={n}"
  rows = []
  for name, check in (("codjax", ""), ("torch.generate", agree(torch_generate().numpy())),
                      ("torch loop", agree(torch_loop().numpy()))):
    pre = times["codjax prefill" if name == "codjax" else "torch prefill"]
    decode_only = b * (n - 1) / max(times[name].wall_median - pre.wall_median, 1e-9)
    rows.append(row(label, name, times[name], peer, b * n,
                    f"decode steps alone {decode_only:,.0f} tok/s" + (f"; {check}" if check else "")))
  for name in ("codjax prefill", "torch prefill"):
    rows.append(row(f"prefill B={b} P={p}", name, times[name], times["torch prefill"], b * p))
  return rows


def main(argv):
  del argv
  threads = pin_threads(_M.threads.value)
  alloc = host_allocator.keep_freed_memory(_M.host_allocator.value)
  set_torch_threads(threads)
  import jax
  import numpy as np

  cfg, ours, theirs = build_models(_DTYPE.value)
  rng = np.random.default_rng(_M.seed.value)
  print(f"# jax {jax.__version__} ({jax.devices()[0].platform}), threads={threads}, dtype={_DTYPE.value}, "
        f"params={cfg.num_params() / 1e6:.1f}M (hidden {cfg.hidden_size}, layers {cfg.num_hidden_layers}, "
        f"heads {cfg.num_attention_heads}/{cfg.num_key_value_heads}x{cfg.head_dim}, mlp "
        f"{cfg.intermediate_size}, vocab {cfg.vocab_size}, tied={cfg.tie_word_embeddings}), "
        f"codjax attention_impl={cfg.attention_impl}, "
        f"rounds={_M.rounds.value} (median)")
  print(host_line() + f"; host allocator {_M.host_allocator.value}: {alloc[1]}")
  rows = []
  if "train" in _PARTS.value:
    rows += bench_train(cfg, ours, theirs, rng)
  if "decode" in _PARTS.value:
    rows += bench_decode(cfg, ours, theirs, rng)
  print_table(HEADER, rows)


if __name__ == "__main__":
  app.run(main)
