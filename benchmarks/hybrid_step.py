"""Model throughput of the Qwen3.5/3.6 hybrid: codjax's jitted ``Qwen35`` against transformers'
``Qwen3_5ForCausalLM`` / ``Qwen3_5MoeForCausalLM`` + torch, same run.

The model is ``preset("tiny-hybrid")`` (``--moe``: ``preset("tiny-hybrid-moe")``) with its shape overridden by
the flags: by default hidden 256, 8 layers (3 Gated DeltaNet + 1 gated full attention, repeating), 8 query /
2 kv heads of 64 (rotary on 0.25 of it), linear heads 4 key / 8 value of dim 64, MLP 768, vocab 32768,
untied; ``--moe`` replaces the MLP by 8 experts top-2 of width 256 plus a shared expert of 256. Both sides
hold exactly the same weights (codjax ``save_pretrained`` -> transformers ``from_pretrained``, float32,
``--torch_attn`` attention), the same batch and thread count. Two workloads, as ``model_step.py``:

* train: forward + backward of the mean next-token cross-entropy over a [B, T] batch,
  loss = -1/(B (T-1)) sum_{b, t<T-1} log softmax(z_{b,t})[x_{b,t+1}]; tokens/s = B T / step time.
  codjax: ``jax.jit(jax.value_and_grad(loss))`` over the parameter state (the loss as logsumexp(z) - z[y] of
  the lm_head applied to the hidden states without the last position), the Gated DeltaNet in its chunked form
  (``--delta_chunk`` tokens per chunk), layers scanned over blocks of 4 (``--unrolled`` adds a row with
  ``scan_layers=False``). torch: ``lm_head(model.model(x).last_hidden_state[:, :-1])`` -> ``F.cross_entropy``
  -> ``backward()``; on CPU transformers runs its own ``torch_chunk_gated_delta_rule`` and
  ``causal_conv1d`` fallbacks (the fla / causal-conv1d kernels are CUDA-only). For MoE models both sides
  leave the router's load-balancing term out. Check: |loss difference|.
* decode: greedy generation of N new tokens after a P-token prompt for B rows; tokens/s = B N / time.
  codjax: ``JaxEngine.generate`` with ``SamplingParams(temperature=0, max_tokens=N)`` on a warm engine
  (bucketed prefill, then one jitted ``lax.while_loop`` over tokens with ``forward_cached_unrolled``), and a
  single jitted program (prefill with ``forward_cached``, then ``lax.fori_loop`` over the N-1 decode steps on
  per-layer weight and cache slices, ``split_layers`` / ``cache_layers``). torch: ``model.generate(
  do_sample=False, use_cache=True, min_new_tokens=N, max_new_tokens=N)``, which decodes its linear layers
  with ``torch_recurrent_gated_delta_rule``. The prompt pass alone is timed too (codjax ``forward_cached``;
  torch ``model(prompt, use_cache=True, logits_to_keep=1)``), so the decode-only rate
  B (N-1) / (t_gen - t_prefill) shows. Check: fraction of greedy tokens equal to the engine's.

Each row prints the median wall and process-CPU seconds over interleaved rounds, tokens/s (wall), and the
torch/this time ratio for both clocks (> 1 means faster than the torch peer). Flags shared with the other
model benchmarks come from ``common.define_model_flags`` (their defaults reset to this model's shape).

  python benchmarks/hybrid_step.py --rounds=3                # dense: train + decode
  python benchmarks/hybrid_step.py --rounds=3 --moe          # MoE variant
  python benchmarks/hybrid_step.py --parts=decode --new_tokens=64 --rounds=3

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

_M = define_model_flags(vocab_help="vocab_size", batch_help="batch size (train and decode)",
                        seq_help="train sequence length", prompt_default=128, prompt_help="decode prompt length",
                        warmup_help="untimed calls per side before timing (compilation)")
# this benchmark's model shape (the shared flags default to model_step's Qwen3)
for _name, _value in (("hidden", 256), ("kv_heads", 2), ("mlp", 768), ("tied", False)):
  flags.FLAGS.set_default(_name, _value)
_LIN_K = flags.DEFINE_integer("linear_key_heads", 4, "linear_num_key_heads (Gated DeltaNet)")
_LIN_V = flags.DEFINE_integer("linear_value_heads", 8, "linear_num_value_heads (Gated DeltaNet)")
_LIN_DIM = flags.DEFINE_integer("linear_head_dim", 64, "linear_key_head_dim = linear_value_head_dim")
_MOE = flags.DEFINE_bool("moe", False, "benchmark the MoE variant (qwen3_5_moe) instead of the dense one")
_EXPERTS = flags.DEFINE_integer("experts", 8, "MoE: num_experts")
_TOP_K = flags.DEFINE_integer("top_k", 2, "MoE: num_experts_per_tok")
_MOE_MLP = flags.DEFINE_integer("moe_mlp", 256, "MoE: moe_intermediate_size")
_SHARED_MLP = flags.DEFINE_integer("shared_mlp", 256, "MoE: shared_expert_intermediate_size")
_MOE_IMPL = flags.DEFINE_enum("moe_impl", "auto", ["auto", "blocked", "dense", "ragged"],
                              "codjax Qwen35Config.moe_impl")
_CHUNK = flags.DEFINE_integer("delta_chunk", 64, "codjax delta_chunk_size (tokens per chunk of the DeltaNet)")
_ATTN = flags.DEFINE_enum("attention", "blockwise", ["xla", "blockwise"], "codjax attention_impl of the full "
                          "attention layers (full-sequence forward)")
_UNROLLED = flags.DEFINE_bool("unrolled", False, "train: also time codjax with scan_layers=False")
_NEW = flags.DEFINE_integer("new_tokens", 128, "decode: new tokens per row")
_PARTS = flags.DEFINE_list("parts", ["train", "decode"], "workloads to run: train, decode")


def hybrid_config(**overrides):
  """The benchmarked ``Qwen35Config`` from the flags (``overrides``: compute fields)."""
  from codjax.models import preset

  shape = dict(vocab_size=_M.vocab.value, hidden_size=_M.hidden.value, num_hidden_layers=_M.layers.value,
               num_attention_heads=_M.heads.value, num_key_value_heads=_M.kv_heads.value,
               head_dim=_M.head_dim.value, linear_num_key_heads=_LIN_K.value,
               linear_num_value_heads=_LIN_V.value, linear_key_head_dim=_LIN_DIM.value,
               linear_value_head_dim=_LIN_DIM.value, tie_word_embeddings=_M.tied.value,
               max_position_embeddings=max(4096, _M.seq.value, _M.prompt.value + _NEW.value),
               delta_chunk_size=_CHUNK.value, attention_impl=_ATTN.value)
  if _MOE.value:
    shape.update(num_experts=_EXPERTS.value, num_experts_per_tok=_TOP_K.value, moe_intermediate_size=_MOE_MLP.value,
                 shared_expert_intermediate_size=_SHARED_MLP.value, moe_impl=_MOE_IMPL.value)
    return preset("tiny-hybrid-moe", **shape, **overrides)
  return preset("tiny-hybrid", intermediate_size=_M.mlp.value, **shape, **overrides)


def build_models():
  """The codjax model and a transformers model holding the same weights (float32)."""
  import torch
  from transformers import Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM

  from codjax.models import init_model, save_pretrained

  cfg = hybrid_config()
  ours = init_model(cfg, seed=_M.seed.value)
  cls = Qwen3_5MoeForCausalLM if cfg.is_moe else Qwen3_5ForCausalLM
  with tempfile.TemporaryDirectory() as d:
    save_pretrained(ours, d)
    theirs = cls.from_pretrained(d, dtype=torch.float32, attn_implementation=_M.torch_attn.value).eval()
  return cfg, ours, theirs


def _family(cfg) -> str:
  return "MoE" if cfg.is_moe else "dense"


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

  def make_step(scan: bool):
    gdef = nnx.split(abstract_model(cfg.replace(scan_layers=scan)))[0]  # same parameter tree

    def loss_fn(params, tokens):
      model = nnx.merge(gdef, params)
      logits = model.logits(model.hidden_states(tokens)[:, :-1])
      picked = jnp.take_along_axis(logits, tokens[:, 1:, None], axis=-1)[..., 0]
      return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)

    return jax.jit(jax.value_and_grad(loss_fn))

  steps = {"scanned layers": make_step(True)}
  if _UNROLLED.value:
    steps["unrolled layers"] = make_step(False)
  tokens = jnp.asarray(ids, jnp.int32)
  ids_t = torch.tensor(ids)

  def torch_step():
    for p in theirs.parameters():
      p.grad = None
    logits = theirs.lm_head(theirs.model(ids_t).last_hidden_state[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids_t[:, 1:].reshape(-1))
    loss.backward()
    return loss

  name = lambda n: f"codjax jit ({n}, chunk {cfg.delta_chunk_size})"  # noqa: E731
  runners = {name(n): ((lambda f=f: f(params, tokens)), jax_sync) for n, f in steps.items()}
  runners["torch eager"] = (torch_step, no_sync)
  times = interleaved(runners, _M.rounds.value, _M.warmup.value)
  ref = torch_step().item()
  label = f"train fwd+bwd {_family(cfg)} B={b} T={t}"
  rows = []
  for n, f in steps.items():
    diff = abs(float(f(params, tokens)[0]) - ref)
    rows.append(row(label, name(n), times[name(n)], times["torch eager"], b * t, f"|loss diff| {diff:.1e}"))
  return rows + [row(label, "torch eager", times["torch eager"], times["torch eager"], b * t)]


def bench_decode(cfg, ours, theirs, rng) -> list[list[object]]:
  import jax
  import jax.numpy as jnp
  import numpy as np
  import torch
  from flax import nnx

  from codjax.rollout import JaxEngine
  from codjax.rollout.base import SamplingParams

  b, p, n = _M.batch.value, _M.prompt.value, _NEW.value
  prompt = rng.integers(0, cfg.vocab_size, (b, p))
  graphdef, params = nnx.split(ours)

  engine = JaxEngine(ours, max_slots=b, max_seq_len=p + n, seed=_M.seed.value)
  greedy = SamplingParams(temperature=0.0, max_tokens=n)
  prompt_rows = [list(map(int, r)) for r in prompt]

  def engine_generate():
    return np.array([c.token_ids for c in engine.generate(prompt_rows, greedy)])

  jax_prefill, jax_generate = greedy_programs(graphdef, b, p, n)

  prompt_j = jnp.asarray(prompt, jnp.int32)
  prompt_t = torch.tensor(prompt)

  @torch.inference_mode()
  def torch_generate():
    return theirs.generate(prompt_t, attention_mask=torch.ones_like(prompt_t), do_sample=False,
                           use_cache=True, max_new_tokens=n, min_new_tokens=n, pad_token_id=0)[:, p:]

  @torch.inference_mode()
  def torch_prefill():
    return theirs(prompt_t, use_cache=True, logits_to_keep=1).logits[:, -1].argmax(-1)

  times = interleaved({"codjax JaxEngine": (engine_generate, no_sync),
                       "codjax jit loop": (lambda: jax_generate(params, prompt_j), jax_sync),
                       "torch.generate": (torch_generate, no_sync),
                       "codjax prefill": (lambda: jax_prefill(params, prompt_j), jax_sync),
                       "torch prefill": (torch_prefill, no_sync)}, _M.rounds.value, _M.warmup.value)
  ref = engine_generate()
  agree = lambda x: f"tokens = engine's: {np.mean(np.asarray(x) == ref):.0%}"  # noqa: E731
  peer = times["torch.generate"]
  label = f"decode {_family(cfg)} B={b} P={p} N={n}"
  rows = []
  for name, check in (("codjax JaxEngine", ""), ("codjax jit loop", agree(jax_generate(params, prompt_j))),
                      ("torch.generate", agree(torch_generate().numpy()))):
    pre = times["torch prefill" if name.startswith("torch") else "codjax prefill"]
    decode_only = b * (n - 1) / max(times[name].wall_median - pre.wall_median, 1e-9)
    rows.append(row(label, name, times[name], peer, b * n,
                    f"decode steps alone {decode_only:,.0f} tok/s" + (f"; {check}" if check else "")))
  first = (np.asarray(jax_prefill(params, prompt_j)) == torch_prefill().numpy()).mean()
  for name in ("codjax prefill", "torch prefill"):
    rows.append(row(f"prefill {_family(cfg)} B={b} P={p}", name, times[name], times["torch prefill"], b * p,
                    f"first token = torch's: {first:.0%}" if name == "codjax prefill" else ""))
  return rows


def main(argv):
  del argv
  threads = pin_threads(_M.threads.value)
  alloc = host_allocator.keep_freed_memory(_M.host_allocator.value)
  set_torch_threads(threads)
  import jax
  import numpy as np

  cfg, ours, theirs = build_models()
  rng = np.random.default_rng(_M.seed.value)
  kinds = "".join("F" if k == "full_attention" else "L" for k in cfg.layer_types)
  mlp = (f"{cfg.num_experts} experts top-{cfg.num_experts_per_tok} x {cfg.moe_intermediate_size} + shared "
         f"{cfg.shared_expert_intermediate_size}, moe_impl={cfg.moe_impl}" if cfg.is_moe
         else f"mlp {cfg.intermediate_size}")
  print(f"# jax {jax.__version__} ({jax.devices()[0].platform}), threads={threads}, dtype=float32, "
        f"params={cfg.num_params() / 1e6:.1f}M (active {cfg.num_active_params() / 1e6:.1f}M; hidden "
        f"{cfg.hidden_size}, layers {kinds}, heads {cfg.num_attention_heads}/{cfg.num_key_value_heads}x"
        f"{cfg.head_dim}, linear heads {cfg.linear_num_key_heads}/{cfg.linear_num_value_heads}x"
        f"{cfg.linear_key_head_dim}, {mlp}, vocab {cfg.vocab_size}, tied={cfg.tie_word_embeddings}), codjax "
        f"attention_impl={cfg.attention_impl}, delta_chunk_size={cfg.delta_chunk_size}, torch "
        f"attn_implementation={_M.torch_attn.value}, rounds={_M.rounds.value} (median)")
  print(host_line() + f"; host allocator {_M.host_allocator.value}: {alloc[1]}")
  rows = []
  if "train" in _PARTS.value:
    rows += bench_train(cfg, ours, theirs, rng)
  if "decode" in _PARTS.value:
    rows += bench_decode(cfg, ours, theirs, rng)
  print_table(HEADER, rows)


if __name__ == "__main__":
  app.run(main)
