"""The built-in JAX sampler: batched KV-cache sampling from a codjax Qwen3 or Qwen3.5/3.6 hybrid, with
per-session prefix reuse.

Memory layout: one KV cache (Qwen3: k^T ``[L, slots, K, H, S]``, v ``[L, slots, K, S, H]``: see
``codjax.models.qwen3.cached_attention``; the hybrid: the same for its full-attention layers, plus per slot the
convolution inputs and float32 recurrent state of every Gated DeltaNet layer). The engine reaches the cache
only through the model (``cache_take`` / ``cache_put`` / ``cache_layers`` / ``cache_stack``, and Qwen3's
``cache_take_layers`` / ``cache_put_layers`` / ``cache_put_span``, which gather each layer's window directly and
write back only the positions a call wrote), so one engine serves both. On the CPU backend the per-layer
weights the prefill and decode kernels take are made once per weight version (``_split_weights``), not sliced
out of the stacked weights inside every call (a copy there). A slot's recurrent state is always the state
after the session's ``cached_len`` tokens (a snapshot at the end of the last fed token: finished rows feed
nothing, chunk padding never enters it, a prefill from position 0 starts from zeros), which is what prefix
reuse needs. Slot 0 is scratch (padding rows of a bucketed batch write there); every session (an episode)
owns one slot while it is alive, and its tokens occupy cache positions ``[0, cached_len)`` of that slot. A
request whose prompt extends the session's history only prefills the new suffix (the next user turn), instead
of the whole conversation. With more live sessions
than slots, the least recently used session not in the current call loses its slot (LRU eviction) and is
re-prefilled when it comes back; ``stats["evictions"]`` counts it.

Each ``generate`` call:
  1. prefill every request's new tokens except the prompt's last one, in chunks of a bucketed length (jitted
     per (batch bucket, chunk bucket, length bucket); a chunk more than a quarter padding is split into the
     next smaller bucket and a short one; under ``Kernels.packed_prefill`` the chunk's valid tokens run
     packed through the row-wise products and only attention sees the padded chunk); requests prefilled from
     position 0 share their common prompt
     prefixes (the G repeats of a pack's first turn, a shared system prompt): computed once, then copied
     between cache slots (``stats["shared_tokens"]``);
  2. decode inside one jitted ``lax.while_loop`` (no Python loop over tokens): each iteration feeds every
     row's pending token (first the prompt's last token) and samples the next; rows stop on a stop token or
     their token budget; the loop exits when at most half of its power-of-two batch is still going, and those
     rows continue in the next, smaller batch (a "phase", starting from their last sampled token; a batch of
     ``min_batch`` rows, or the kernels' lower ``decode_floor``, runs to the end), so finished rows stop
     costing compute (``stats["decode_phases"]`` counts phases).
Continuous batching (``submit`` / ``poll``, driven by ``codjax.agents.episode.run_streaming``): requests
enter and leave the decode batch one by one. A request's prompt suffix except its last token is prefilled when
it joins; the same decode kernel then runs every request in flight and exits once a given number of rows
stopped, so the caller can step that episode's environment and submit its next turn while the others keep
their place. Same keys, same replies as ``generate`` with per-request seeds. Arrivals come one or two at a
time, so the within-call sharing above rarely sees two prompts together: a request that starts a session from
position 0 also copies the longest common prefix (at least the smallest chunk bucket) of any resident
session's cached history, or of an ended session's whose slot nobody took since (``_retired``), on models
whose cache rows can be cut at any position (``PREFIX_COPY``). ``generate`` keeps its within-call plan only:
its requests arrive together, and its recorded runs reproduce bit for bit.
Sampling keys are per row and per token, so a reply's draws depend on its own key alone, never on the other
requests of the call, their order, the batch size, the padding or the phases: request r has a row key,
``jax.random.key(params.seeds[r])`` with per-request seeds, else ``fold_in(call_key, r)`` (call_key =
``key(params.seed)``, or a split of the engine's own key when unseeded), and token t of its reply is drawn
with ``fold_in(row_key, t)``. The keys are traced kernel arguments (no recompiles when they change).
Request batches are padded to power-of-two buckets of at least ``min_batch`` rows (continuous batching's
prefills of arrivals, one or two at a time: at least 1) and chunk lengths to a fixed bucket list, so a new
prompt length does not trigger a recompile. Each kernel works on the cache positions ``[0, Lb)`` only, Lb
the bucket (a power of two >= 128, past 512 also 1.5x powers of two, capped at ``max_seq_len``: ``Kernels``)
of the furthest position the call writes: the
cost of a decode step (attention reads, the per-step cache update) scales with the conversations' length,
not with ``max_seq_len``. Parameters are a jit argument: ``update_weights`` swaps them without recompiling.
"""

from codjax.rollout.jax_engine.engine import JaxEngine, check_requests, sampling_params
from codjax.rollout.jax_engine.kernels import (CHUNK_BUCKETS, KERNELS, MIN_BATCH_BUCKET, Kernels, cpu_flags, cpu_has,
                                               decode_compiler_options)

__all__ = ["CHUNK_BUCKETS", "KERNELS", "MIN_BATCH_BUCKET", "JaxEngine", "Kernels", "check_requests", "cpu_flags",
           "cpu_has", "decode_compiler_options", "sampling_params"]
