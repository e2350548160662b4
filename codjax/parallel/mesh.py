"""Device meshes over the axes (data, fsdp, tensor, expert) and multi-host initialization.

The batch is split over data x fsdp x expert (``batch_shards``): outside the mixture-of-experts layers the
expert axis is one more data-parallel axis (MaxText-style); expert weights are split over it on their
expert dimension (``codjax.parallel.sharding.DEFAULT_RULES``).

A config's mesh names its axis sizes for the machine it was written for (the papers' 8 or 24 GPUs). On a
machine with fewer devices, training refuses in one line (``make_mesh``'s error names the setting): the mesh
sets how the batch is split and padded, so running another one silently would change the run. Evaluation,
whose results do not depend on the layout, falls back instead (``fallback_mesh_sizes``): every device present
on ``fsdp``, said in one printed line.
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
                     f"{len(devices)} available: set the mesh for this machine, e.g. --config.mesh.data=1 "
                     "--config.mesh.fsdp=-1 --config.mesh.tensor=1 --config.mesh.expert=1 (every device on fsdp)")
  arr = np.array(devices, dtype=object).reshape(sizes)
  return Mesh(arr, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


def mesh_from_config(mesh_cfg, devices=None) -> Mesh:
  """Builds the mesh from a config block with fields data, fsdp, tensor and optionally expert (default 1)."""
  return make_mesh(**config_mesh_sizes(mesh_cfg), devices=devices)


def config_mesh_sizes(mesh_cfg) -> dict[str, int]:
  """The block's axis sizes as written (-1 kept; an absent ``expert`` is 1)."""
  get = mesh_cfg.get if hasattr(mesh_cfg, "get") else lambda k, d=None: getattr(mesh_cfg, k, d)
  return {ax: int(get(ax, 1) if ax == "expert" else get(ax)) for ax in MESH_AXES}


def fallback_mesh_sizes(mesh_cfg, n_devices: int) -> tuple[dict[str, int], str]:
  """The mesh to use for the config block on ``n_devices`` devices, and a line to print when it is not the
  config's own ('' when it is).

  A block whose fixed sizes fit ``n_devices`` (their product equals it, or divides it when one axis is -1) is
  used as written; otherwise every device goes on ``fsdp`` (data=1 fsdp=n_devices tensor=1 expert=1). For
  evaluation only (module docstring)."""
  sizes = config_mesh_sizes(mesh_cfg)
  known = int(np.prod([s for s in sizes.values() if s != -1]))
  if -1 in sizes.values() and n_devices % known == 0:
    return {ax: (n_devices // known if s == -1 else s) for ax, s in sizes.items()}, ""
  if -1 not in sizes.values() and known == n_devices:
    return sizes, ""
  used = {"data": 1, "fsdp": n_devices, "tensor": 1, "expert": 1}
  named = " ".join(f"{a}={s}" for a, s in sizes.items())
  return used, (f"mesh: the config's {named} does not fit the {n_devices} device(s) present; using data=1 "
                f"fsdp={n_devices} tensor=1 expert=1 instead (--config.mesh.* sets another)")


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
