"""Builds the configured rollout engine (JAX sampler or vLLM) for a training or evaluation run."""

from __future__ import annotations

import os
import tempfile


def build_engine(rollout_cfg, model, model_path: str | None, mesh=None, seed: int = 0):
  """``rollout_cfg.engine``: "jax" (KV-cache sampler on the trainer's devices) or "vllm" (in-process vLLM,
  which loads ``model_path`` and then receives the trainer's weights through ``update_weights``).

  ``rollout_cfg.max_slots`` bounds the sequences generated at once in both: the JAX engine's KV-cache slots,
  vLLM's ``max_num_seqs`` (its scheduler queues the rest)."""
  max_len = int(rollout_cfg.max_prompt_tokens) + int(rollout_cfg.max_response_tokens) + 1
  if rollout_cfg.engine == "jax":
    from codjax.rollout.jax_engine import JaxEngine

    return JaxEngine(model, max_slots=int(rollout_cfg.max_slots), max_seq_len=max_len, mesh=mesh, seed=seed)
  if rollout_cfg.engine == "vllm":
    from codjax.models import save_pretrained
    from codjax.rollout.vllm_engine import VllmEngine

    v = rollout_cfg.vllm
    if not model_path:
      model_path = tempfile.mkdtemp(prefix="codjax_vllm_init_")
      save_pretrained(model, os.path.join(model_path, "m"))
      model_path = os.path.join(model_path, "m")
    kw = dict(max_model_len=max_len, dtype=str(v.dtype), enforce_eager=bool(v.enforce_eager), seed=seed,
              tensor_parallel_size=int(v.tensor_parallel_size), max_num_seqs=int(rollout_cfg.max_slots))
    if v.gpu_memory_utilization:
      kw["gpu_memory_utilization"] = float(v.gpu_memory_utilization)
    engine = VllmEngine(model_path, **kw)
    engine.update_weights(model)
    return engine
  raise ValueError(f"unknown rollout engine {rollout_cfg.engine!r}")
