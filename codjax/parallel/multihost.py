"""Multi-controller (multi-host) helpers: every process runs the same program on its own devices.

A run over P processes (``jax.distributed``; ``codjax.parallel.mesh.maybe_initialize_distributed``) has one
global mesh over all devices; the train step is one SPMD program over it. What is host-local:

* **rollouts**: process p generates the contiguous block ``host_block(n, p, P)`` of the step's packs with an
  engine on its own devices (``local_mesh``), from a host copy of the global parameters
  (``host_local_copy``); the trajectories are exchanged as JSON records (``allgather_json``), so every
  process then holds all of them, in the single-process order, and builds the identical batch;
* **the batch** enters the step as global arrays built from that host array (``global_batch``): each process
  supplies only the rows of its own devices;
* **I/O**: only ``is_primary()`` (process 0) writes metrics, evaluations, exports and the config; checkpoints
  are written by orbax on every process (each its own shards), between ``barrier``s.

With one process every function here is the identity (or a no-op), so single-process runs are unchanged.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

import jax
import numpy as np

#: how long a barrier waits for the slowest process (an evaluation on process 0 can take a while)
BARRIER_TIMEOUT_S = int(os.environ.get("CODJAX_BARRIER_TIMEOUT_S", str(6 * 3600)))


def process_count() -> int:
  return jax.process_count()


def process_index() -> int:
  return jax.process_index()


def is_primary() -> bool:
  """True on the process that writes run files (process 0)."""
  return jax.process_index() == 0


_BARRIER_USES: dict[str, int] = {}


def barrier(name: str, timeout_s: int | None = None) -> None:
  """Blocks until every process reaches the barrier ``name`` (no-op with one process). Every process
  passes the same barriers in the same order, so the k-th use of a name is one barrier everywhere."""
  if jax.process_count() == 1:
    return
  k = _BARRIER_USES[name] = _BARRIER_USES.get(name, -1) + 1
  name = f"{name}/{k}"
  from jax._src import distributed

  client = distributed.global_state.client
  if client is None:  # initialized by a cluster environment without a coordination client: a device sync
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)
    return
  client.wait_at_barrier(f"codjax/{name}", int(1000 * (timeout_s or BARRIER_TIMEOUT_S)))


def host_block(n: int, index: int | None = None, count: int | None = None) -> slice:
  """The contiguous block of ``range(n)`` process ``index`` of ``count`` owns (``np.array_split`` sizes:
  the first ``n % count`` blocks get one more). Blocks in process order concatenate to ``range(n)``."""
  index = jax.process_index() if index is None else int(index)
  count = jax.process_count() if count is None else int(count)
  if not 0 <= index < count:
    raise ValueError(f"process index {index} out of range for {count} processes")
  base, extra = divmod(int(n), count)
  start = index * base + min(index, extra)
  return slice(start, start + base + (1 if index < extra else 0))


def allgather_bytes(data: bytes) -> list[bytes]:
  """Every process's ``data``, in process order, on every process (one process: ``[data]``)."""
  if jax.process_count() == 1:
    return [bytes(data)]
  from jax.experimental import multihost_utils

  n = np.array([len(data)], np.int64)
  sizes = np.asarray(multihost_utils.process_allgather(n)).reshape(-1)
  buf = np.zeros(int(max(1, sizes.max())), np.uint8)
  buf[:len(data)] = np.frombuffer(data, np.uint8)
  rows = np.asarray(multihost_utils.process_allgather(buf)).reshape(len(sizes), -1)
  return [rows[i, :int(s)].tobytes() for i, s in enumerate(sizes)]


def allgather_json(obj: Any) -> list[Any]:
  """Every process's JSON-serializable ``obj``, in process order, on every process."""
  return [json.loads(b.decode()) for b in allgather_bytes(json.dumps(obj).encode())]


def broadcast_json(obj: Any) -> Any:
  """Process 0's ``obj`` on every process."""
  return allgather_json(obj if is_primary() else None)[0]


def gather_blocks(items: list, n: int, produce: Callable[[list], list], encode: Callable[[Any], Any],
                  decode: Callable[[Any, int], Any], per_item: int = 1) -> list:
  """Runs ``produce`` on this process's block of ``items`` and returns every process's outputs, in the order
  a single process would produce them.

  ``produce(block)`` returns ``per_item`` outputs per item, item-major; ``encode(output)`` makes one JSON
  record of an output, ``decode(record, item_index)`` rebuilds it given the global index of its item.
  With one process this is ``produce(items)``."""
  if len(items) != n:
    raise ValueError(f"gather_blocks: {len(items)} items, expected {n}")
  if jax.process_count() == 1:
    return produce(items)
  blk = host_block(n)
  outs = produce(items[blk])
  if len(outs) != per_item * (blk.stop - blk.start):
    raise ValueError(f"gather_blocks: {len(outs)} outputs for {blk.stop - blk.start} items x {per_item}")
  got = allgather_json([encode(o) for o in outs])
  result = []
  for p, recs in enumerate(got):
    b = host_block(n, p)
    result += [decode(r, b.start + j // per_item) for j, r in enumerate(recs)]
  return result


def global_batch(batch: dict[str, np.ndarray], shardings: dict[str, jax.sharding.Sharding]) -> dict[str, jax.Array]:
  """Global arrays from a host array that every process holds in full; each process puts only the slices
  its own devices own (``jax.make_array_from_callback``)."""
  out = {}
  for k, v in batch.items():
    if isinstance(v, jax.Array) and not v.is_fully_addressable:  # already global (e.g. reference logprobs)
      out[k] = v
      continue
    v = np.asarray(v)
    out[k] = jax.make_array_from_callback(v.shape, shardings[k], lambda idx, v=v: v[idx])
  return out


def to_host(tree):
  """A pytree of (possibly non-fully-addressable) global arrays as full numpy arrays on every process.
  A collective: every process must call it."""
  if jax.process_count() == 1:
    return jax.tree.map(np.asarray, tree)
  from jax.experimental import multihost_utils

  return jax.tree.map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))


def host_local_copy(model):
  """The model with every parameter gathered into host memory (numpy), for an engine on this process's
  own devices. A collective with several processes; the model itself with one."""
  if jax.process_count() == 1:
    return model
  from flax import nnx

  graphdef, state = nnx.split(model)
  return nnx.merge(graphdef, to_host(state))


def local_mesh(mesh_cfg):
  """The mesh a host-local engine uses: this process's devices, ``tensor`` as configured (when it divides
  them), the rest over ``fsdp``. The global mesh itself with one process."""
  from codjax.parallel.mesh import make_mesh, mesh_from_config

  if jax.process_count() == 1:
    return mesh_from_config(mesh_cfg)
  local = jax.local_devices()
  tensor = int(mesh_cfg.tensor)
  if len(local) % tensor:
    tensor = 1
  return make_mesh(data=1, fsdp=-1, tensor=tensor, expert=1, devices=local)
