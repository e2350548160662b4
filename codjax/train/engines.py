"""Builds the configured rollout engine (JAX sampler, vLLM, or a fleet of vLLM servers) for a training or
evaluation run."""

from __future__ import annotations

import os
import tempfile


def build_engine(rollout_cfg, model, model_path: str | None, mesh=None, seed: int = 0):
  """``rollout_cfg.engine``: "jax" (KV-cache sampler on the trainer's devices; with ``rollout.jax_workers`` > 1,
  that many samplers side by side on one device, ``codjax.rollout.jax_workers``), "vllm" (in-process vLLM,
  which loads ``model_path`` and then receives the trainer's weights through ``update_weights``) or "fleet"
  (``codjax.rollout.fleet.FleetEngine`` over ``rollout.fleet.servers``, or over ``rollout.fleet.num_servers``
  servers it starts on ``model_path``; weights go through ``make_transport(rollout.fleet.transport)``, and the
  trainer's model is pushed once here, so every server starts from it whatever it loaded).

  ``rollout_cfg.max_slots`` bounds the sequences generated at once in the first two: the JAX engine's KV-cache
  slots, vLLM's ``max_num_seqs`` (its scheduler queues the rest). A fleet's servers batch and queue on their own
  (``--max-num-seqs`` in ``rollout.fleet.server_args``); ``rollout.fleet.max_concurrency`` bounds the requests
  in flight per server."""
  max_len = int(rollout_cfg.max_prompt_tokens) + int(rollout_cfg.max_response_tokens) + 1
  if rollout_cfg.engine == "jax":
    from codjax.rollout.jax_engine import JaxEngine

    workers = int(rollout_cfg.get("jax_workers", 1))
    if workers > 1:  # side-by-side engines on one host device (codjax.rollout.jax_workers)
      from codjax.rollout.jax_workers import JaxWorkers

      if mesh is not None and mesh.devices.size > 1:
        raise ValueError(f"rollout.jax_workers={workers} runs its engines on one device, but the mesh has "
                         f"{mesh.devices.size}: set rollout.jax_workers=1 to sample on the mesh")
      return JaxWorkers(model, workers=workers, max_slots=int(rollout_cfg.max_slots), max_seq_len=max_len,
                        seed=seed, kernels=str(rollout_cfg.jax_kernels))
    return JaxEngine(model, max_slots=int(rollout_cfg.max_slots), max_seq_len=max_len, mesh=mesh, seed=seed,
                     kernels=str(rollout_cfg.jax_kernels))
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
  if rollout_cfg.engine == "fleet":
    from codjax.rollout.fleet import FleetEngine
    from codjax.rollout.weight_sync import make_transport

    fl = rollout_cfg.fleet
    servers = [u.strip() for u in str(fl.servers).split(",") if u.strip()]
    num = int(fl.num_servers)
    if bool(servers) == bool(num):
      raise ValueError("rollout.engine='fleet' needs exactly one of rollout.fleet.servers (comma-separated base "
                       "URLs, e.g. http://127.0.0.1:8000/v1) and rollout.fleet.num_servers (servers to start)")
    if num and not model_path:
      raise ValueError("rollout.fleet.num_servers needs model.path: the started servers load that checkpoint")
    transport = make_transport(str(fl.transport), sync_dir=str(fl.sync_dir))
    try:
      engine = FleetEngine(servers, num_servers=num, model_path=model_path or None, transport=transport,
                           dtype=str(fl.dtype), max_model_len=max_len, seed=seed,
                           devices=[d for d in str(fl.devices).split(",") if d.strip()],
                           server_args=str(fl.server_args).split(), kv_cache_gib=float(fl.kv_cache_gib),
                           startup_timeout_s=float(fl.startup_timeout_s),
                           request_timeout_s=float(fl.request_timeout_s), max_concurrency=int(fl.max_concurrency),
                           logprobs_mode=str(fl.logprobs_mode))
    except BaseException:
      transport.close()
      raise
    try:
      engine.update_weights(model)
    except BaseException:
      engine.close()
      raise
    return engine
  raise ValueError(f"unknown rollout engine {rollout_cfg.engine!r}")
