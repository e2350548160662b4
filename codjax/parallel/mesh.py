"""Device meshes over the axes (data, fsdp, tensor, expert) and multi-host initialization.

The batch is split over data x fsdp x expert (``batch_shards``): outside the mixture-of-experts layers the
expert axis is one more data-parallel axis (MaxText-style); expert weights are split over it on their
expert dimension (``codjax.parallel.sharding.DEFAULT_RULES``).
"""

from __future__ import annotations

import os

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

MESH_AXES = ("data", "fsdp", "tensor", "expert")


def make_mesh(data: int = 1, fsdp: int = -1, tensor: int = 1, expert: int = 1, devices=None) -> Mesh:
  """A (data, fsdp, tensor, expert) mesh over ``devices`` (default: all). One axis may be -1 (fill the rest).

  Axis types are ``Auto`` (jax 0.10's ``jax.make_mesh`` defaults to Explicit, which rejects sharded
  contractions in plain jnp code).
  """
  devices = list(jax.devices() if devices is None else devices)
  sizes = [data, fsdp, tensor, expert]
  named = " ".join(f"{a}={s}" for a, s in zip(MESH_AXES, sizes))
  if sum(s == -1 for s in sizes) > 1:
    raise ValueError(f"at most one mesh axis may be -1, got {named}")
  known = int(np.prod([s for s in sizes if s != -1]))
  if any(s == 0 or s < -1 for s in sizes):
    raise ValueError(f"mesh axis sizes must be positive or -1, got {sizes}")
  if -1 in sizes:
    if len(devices) % known:
      raise ValueError(f"{len(devices)} devices cannot be split into {named}")
    sizes[sizes.index(-1)] = len(devices) // known
  if int(np.prod(sizes)) != len(devices):
    raise ValueError(f"mesh {dict(zip(MESH_AXES, sizes))} needs {int(np.prod(sizes))} devices, "
                     f"{len(devices)} available")
  arr = np.array(devices, dtype=object).reshape(sizes)
  return Mesh(arr, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def mesh_from_config(mesh_cfg, devices=None) -> Mesh:
  """Builds the mesh from a config block with fields data, fsdp, tensor and optionally expert (default 1)."""
  expert = mesh_cfg.get("expert", 1) if hasattr(mesh_cfg, "get") else getattr(mesh_cfg, "expert", 1)
  return make_mesh(int(mesh_cfg.data), int(mesh_cfg.fsdp), int(mesh_cfg.tensor), int(expert), devices)


def batch_shards(mesh) -> int:
  """The number of ways the batch is split: data * fsdp * expert (an axis the mesh lacks counts 1)."""
  return int(np.prod([mesh.shape.get(a, 1) for a in ("data", "fsdp", "expert")]))


def maybe_initialize_distributed() -> bool:
  """Calls ``jax.distributed.initialize()`` when launched multi-host; returns True if it did (or had).

  Multi-host is detected from the standard coordinator variables (``JAX_COORDINATOR_ADDRESS`` with
  ``JAX_NUM_PROCESSES``/``JAX_PROCESS_ID``) or a cluster environment jax auto-detects (SLURM, Open MPI);
  single-process runs are left alone. On CPU (``JAX_PLATFORMS=cpu``: tests, ``launch/multiprocess.py``)
  the cross-process collectives are gloo's. Must run before anything touches a JAX device; calling it again
  is a no-op.
  """
  if jax.distributed.is_initialized():
    return True
  addr = os.environ.get("JAX_COORDINATOR_ADDRESS")
  nproc = int(os.environ.get("JAX_NUM_PROCESSES", "1"))
  cluster = int(os.environ.get("SLURM_NTASKS", "1")) > 1 or int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) > 1
  if not (addr and nproc > 1) and not cluster:
    return False
  if os.environ.get("JAX_PLATFORMS", "").split(",")[0] == "cpu":
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
  if addr and nproc > 1:
    if "JAX_PROCESS_ID" not in os.environ:
      raise ValueError("JAX_COORDINATOR_ADDRESS and JAX_NUM_PROCESSES are set but JAX_PROCESS_ID is not: every "
                       "process needs its id (0 .. JAX_NUM_PROCESSES-1)")
    jax.distributed.initialize(coordinator_address=addr, num_processes=nproc,
                               process_id=int(os.environ["JAX_PROCESS_ID"]))
  else:
    jax.distributed.initialize()
  return True
