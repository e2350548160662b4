"""``FleetEngine``: N OpenAI-compatible vLLM servers behind the ``RolloutEngine`` seam.

The servers are given as base URLs (``http://host:8000/v1``, started elsewhere, e.g. by
``launch/serve_fleet.py``) or started here: ``num_servers`` ``VllmServer`` processes on ``model_path``, launched
together and waited for together. Started servers get ``VLLM_SERVER_DEV_MODE=1`` (the RL and dev routes the
weight transport drives), ``--logprobs-mode <logprobs_mode>`` (``processed_logprobs``: logprobs of the sampling
distribution, what the losses need), ``--enforce-eager`` on CPU, chunked prefill off on CPU (``VllmServer``),
``VLLM_CPU_KVCACHE_SPACE=<kv_cache_gib>``, the flags the weight transport needs (its ``server_args()``) and,
per server, ``CUDA_VISIBLE_DEVICES`` from ``devices``. The fleet
owns them: ``close()`` (idempotent) stops their process groups, and so does an ``atexit`` hook, so a trainer
stopped by Ctrl-C (``KeyboardInterrupt``) leaves no server behind. Servers given by URL are never stopped.

Token in, token out. ``generate(prompts, params, session_ids)`` sends every prompt through the ``/completions``
route of one server (one ``OpenAIEngine`` per server): prompt token ids in, sampled token ids and their logprobs
out, one ``Completion`` per prompt in input order. Request i carries the seed ``params.stream_seeds(n)[i]`` of
the whole call, whichever server serves it, so a seeded call gives the same samples on any split of the fleet.
The requests of different servers run concurrently.

Session affinity. The first request of a session id goes to the live server with the fewest active sessions
(ties: the lowest server index); every later request of that session goes to the same server, which holds its
prefix in its cache; ``end_session`` releases it. Requests without a session id go round-robin over the live
servers.

Failover. A server is dead when a request to it fails for good and it does not answer: ``ServerGone`` from its
``OpenAIEngine`` (connection refused or reset, or 5xx, and its ``/models`` probe failed too), or any other
failure (a request that timed out: a hung server) followed by a failed ``GET {root}/health`` probe
(``health_timeout_s``). A dead server is out of the fleet for good: its sessions are reassigned to the live
servers (fewest sessions first), and every request of the current call that it had not answered is re-issued
on a live server with the same seed. Results of a group (one call's requests to one server) count only when
the whole group answered, so each prompt gets exactly one completion: nothing is lost and nothing is counted
twice. A failure of a server that is still healthy (e.g. a prompt longer than the model's context) is raised
as it is, after the call's other groups end. When no live server remains, ``FleetError`` names every server
and why it died. A hung server is found only when a request to it times out (``request_timeout_s`` per
attempt, ``max_retries`` retries); ``check_health()`` probes every server on demand.

Weights. ``update_weights(model)`` hands the model to the weight transport
(``codjax.rollout.weight_sync``: ``push(model, root_urls, version) -> SyncReport``), which pauses generation
on each live server, transfers the weights, resets the prefix cache, stamps the version and resumes. A server
the push failed on is probed: an unhealthy one is marked dead; a healthy one gets one more push, and is marked
dead if that fails too (it would sample from stale weights). Then every live server must report the new
version on ``GET {root}/weight_info``; one that does not is marked dead. ``policy_version`` counts the syncs
and ``last_sync`` is the last ``SyncReport``.

``stats()`` returns the counters a trainer logs (``fleet/...``: live servers, failovers, re-issued requests,
requests served and active sessions per server index, policy version, last sync time).

    with FleetEngine(num_servers=2, model_path=ckpt, transport=make_transport("checkpoint"), dtype="float32",
                     max_model_len=1024) as fleet:
      completions = fleet.generate(prompts, SamplingParams(temperature=1.0, max_tokens=64, seed=0),
                                   session_ids=episode_ids)
"""

from __future__ import annotations

import atexit
import concurrent.futures
import dataclasses
import itertools
import os
import threading
import urllib.parse
from typing import Any, Mapping, Sequence

import requests

from codjax.rollout.base import Completion, SamplingParams
from codjax.rollout.openai_engine import OpenAIEngine, ServerGone
from codjax.rollout.vllm_server import VllmServer, VllmServerError, is_cpu_vllm
from codjax.rollout.weight_sync import weight_version

LOGPROBS_MODES = ("processed_logprobs", "raw_logprobs")
HEALTH_TIMEOUT_S = 5.0
_DISCOVERY_TIMEOUT_S = 10.0


class FleetError(RuntimeError):
  """The fleet cannot serve: no live server is left (the message names every server and why it died), or its
  servers could not be started or reached."""


def split_base_url(url: str) -> tuple[str, str]:
  """(base_url, root_url) of a server URL: ``http://host:8000/v1`` -> (that, ``http://host:8000``). A URL
  without a path gets ``/v1`` appended. Raises ``ValueError`` for anything else."""
  if not isinstance(url, str):
    raise ValueError(f"a server URL must be a string, got {url!r}")
  u = url.strip().rstrip("/")
  parts = urllib.parse.urlsplit(u)
  if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
    raise ValueError(f"server URL {url!r} is not an http(s) base URL like http://127.0.0.1:8000/v1")
  try:
    parts.port  # noqa: B018 - raises ValueError for a malformed port
  except ValueError as e:
    raise ValueError(f"server URL {url!r} has an invalid port: {e}") from None
  if not parts.path:
    return u + "/v1", u
  if not parts.path.endswith("/v1"):
    raise ValueError(f"server URL {url!r} must end with the OpenAI API prefix /v1 (e.g. http://127.0.0.1:8000/v1)")
  return u, u[:-len("/v1")]


@dataclasses.dataclass(eq=False)
class FleetServer:
  """One member of the fleet: its URLs, client, process (when the fleet started it) and state."""
  index: int
  base_url: str
  root_url: str
  engine: OpenAIEngine | None = None
  process: VllmServer | None = None
  alive: bool = True
  dead_reason: str = ""
  sessions: set = dataclasses.field(default_factory=set)
  served: int = 0  # completions this server delivered (re-issued ones count once, where they succeeded)

  @property
  def name(self) -> str:
    return f"server {self.index} ({self.base_url})"


class FleetEngine:
  """A fleet of vLLM servers as one ``RolloutEngine`` (see the module docstring).

  Args: ``servers`` (base URLs of running servers) or ``num_servers`` (start that many on ``model_path``),
  exactly one of the two; ``transport`` (``WeightTransport`` for ``update_weights``; None: the fleet cannot
  sync weights); ``model`` (the served model name in requests; None: ``model_path`` for started servers, else
  asked from each server's ``/v1/models``); for started servers ``dtype``, ``max_model_len``, ``seed``,
  ``devices`` (one CUDA device string per server, or empty), ``server_args`` (extra vLLM flags),
  ``server_env`` (environment overrides for all servers, or one mapping per server), ``kv_cache_gib``,
  ``startup_timeout_s``, ``log_dir`` (server logs; None: temporary files), ``cpu`` (None: detect vllm-cpu),
  ``host`` (the address they listen on; ``0.0.0.0`` serves other hosts too);
  for requests ``request_timeout_s`` (per attempt), ``max_retries``, ``max_concurrency`` (requests in flight
  per server), ``health_timeout_s`` (the ``/health`` probe), ``extra_body`` (merged into every request).
  The fleet owns the transport once constructed (``close()`` closes it); a constructor that raises stops the
  servers it started and leaves the transport to the caller.
  """

  def __init__(self, servers: Sequence[str] = (), *, num_servers: int = 0, model_path: str | None = None,
               model: str | None = None, transport=None, dtype: str = "auto", max_model_len: int | None = None,
               seed: int | None = 0, devices: Sequence[str] = (), server_args: Sequence[str] = (),
               server_env: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None,
               kv_cache_gib: float = 1, startup_timeout_s: float = 900.0, request_timeout_s: float = 300.0,
               max_retries: int = 2, max_concurrency: int = 64, health_timeout_s: float = HEALTH_TIMEOUT_S,
               logprobs_mode: str = "processed_logprobs", extra_body: dict[str, Any] | None = None,
               log_dir: str | None = None, cpu: bool | None = None, host: str = "127.0.0.1"):
    if isinstance(servers, str):
      servers = [u for u in servers.split(",") if u.strip()]
    servers = list(servers)
    if not isinstance(num_servers, int) or isinstance(num_servers, bool) or num_servers < 0:
      raise ValueError(f"num_servers must be an int >= 0, got {num_servers!r}")
    if bool(servers) == bool(num_servers):
      raise ValueError("FleetEngine needs exactly one of servers (base URLs of running vLLM servers, e.g. "
                       f"http://127.0.0.1:8000/v1) and num_servers (servers to start); got servers={servers!r}, "
                       f"num_servers={num_servers}")
    urls = [split_base_url(u) for u in servers]
    if len({root for _, root in urls}) != len(urls):
      raise ValueError(f"servers lists a server twice: {servers!r}")
    if num_servers and not model_path:
      raise ValueError("num_servers needs model_path (the checkpoint the servers load)")
    if request_timeout_s <= 0 or startup_timeout_s <= 0 or health_timeout_s <= 0:
      raise ValueError("request_timeout_s, startup_timeout_s and health_timeout_s must be > 0")
    if not isinstance(max_concurrency, int) or max_concurrency < 1:
      raise ValueError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
    if logprobs_mode not in LOGPROBS_MODES:
      raise ValueError(f"logprobs_mode must be one of {LOGPROBS_MODES}, got {logprobs_mode!r}")
    devices = [str(d).strip() for d in devices]
    if devices and len(devices) != num_servers:
      raise ValueError(f"devices names {len(devices)} devices for {num_servers} started servers (one each)")
    if isinstance(server_args, str):
      server_args = server_args.split()
    server_args = list(server_args)
    if any(a.split("=", 1)[0] == "--logprobs-mode" for a in server_args):
      raise ValueError("server_args may not set --logprobs-mode: it is the fleet's logprobs_mode")
    if server_env is None or isinstance(server_env, Mapping):
      server_env = [dict(server_env or {})] * max(num_servers, 1)
    server_env = [dict(e) for e in server_env]
    if num_servers and len(server_env) != num_servers:
      raise ValueError(f"server_env has {len(server_env)} mappings for {num_servers} servers")
    if kv_cache_gib <= 0:
      raise ValueError(f"kv_cache_gib must be > 0, got {kv_cache_gib!r}")

    self.transport = transport
    self.request_timeout_s = float(request_timeout_s)
    self.max_retries = int(max_retries)
    self.max_concurrency = max_concurrency
    self.health_timeout_s = float(health_timeout_s)
    self.extra_body = dict(extra_body or {})
    self.owned = bool(num_servers)
    self.policy_version = 0
    self.last_sync = None  # the SyncReport of the last update_weights
    self.failovers = 0  # servers found dead
    self.reissued = 0  # requests re-issued on another server after theirs died
    self._lock = threading.RLock()
    self._sync_lock = threading.Lock()
    self._session_server: dict[Any, FleetServer] = {}
    self._rr = itertools.count()
    self._closed = False
    self.members: list[FleetServer] = []
    atexit.register(self.close)  # before anything is started: an interrupted startup is cleaned up too
    try:
      if self.owned:
        self._start(num_servers, model_path, dtype=dtype, max_model_len=max_model_len, seed=seed, devices=devices,
                    server_args=server_args, server_env=server_env, kv_cache_gib=kv_cache_gib,
                    startup_timeout_s=float(startup_timeout_s), logprobs_mode=logprobs_mode, log_dir=log_dir,
                    cpu=cpu, host=host)
        names = [model or model_path] * num_servers
      else:
        self.members = [FleetServer(i, base, root) for i, (base, root) in enumerate(urls)]
        names = [model] * len(urls) if model else self._discover_models()
      for m, name in zip(self.members, names):
        m.engine = OpenAIEngine(m.base_url, name, max_concurrency=max_concurrency, timeout_s=self.request_timeout_s,
                                max_retries=self.max_retries, extra_body=self.extra_body)
      self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=4 * len(self.members),
                                                         thread_name_prefix="fleet")
    except BaseException:
      self.transport = None  # the caller's again: close() stops what was started, not the transport
      self.close()
      raise

  # -- startup -----------------------------------------------------------------------------------------

  def _start(self, n: int, model_path: str, *, dtype, max_model_len, seed, devices, server_args, server_env,
             kv_cache_gib, startup_timeout_s, logprobs_mode, log_dir, cpu, host) -> None:
    """Starts ``n`` servers at once, then waits for all of them to answer ``/health``."""
    cpu = is_cpu_vllm() if cpu is None else bool(cpu)
    args = list(server_args)
    if cpu and "--enforce-eager" not in args:
      args.append("--enforce-eager")  # CPU graphs: slow to capture, no faster here
    args += ["--logprobs-mode", logprobs_mode]
    if self.transport is not None and hasattr(self.transport, "server_args"):
      args += list(self.transport.server_args())  # e.g. vLLM's --weight-transfer-config for NCCL / IPC
    for i in range(n):
      env = {"VLLM_SERVER_DEV_MODE": "1", "VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}", **server_env[i]}
      if devices:
        env["CUDA_VISIBLE_DEVICES"] = devices[i]
      log = os.path.join(log_dir, f"vllm_server_{i}.log") if log_dir else None
      if log_dir:
        os.makedirs(log_dir, exist_ok=True)
      proc = VllmServer(model_path, dtype=dtype, max_model_len=max_model_len, seed=seed, host=host, extra_args=args,
                        env=env, log_path=log, cpu=cpu)
      self.members.append(FleetServer(i, proc.base_url, proc.root_url, process=proc))
      proc.start()
    errors = {}

    def wait(m: FleetServer) -> None:
      try:
        m.process.wait_healthy(startup_timeout_s)
      except VllmServerError as e:
        errors[m.index] = str(e)

    threads = [threading.Thread(target=wait, args=(m,), daemon=True) for m in self.members]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    if errors:
      detail = "\n".join(f"--- server {i} ({self.members[i].base_url}): {e}" for i, e in sorted(errors.items()))
      raise FleetError(f"{len(errors)} of {n} vLLM servers did not start ({model_path}):\n{detail}")

  def _discover_models(self) -> list[str]:
    """The served model name of each given server (``GET {base}/models``); every server must answer."""
    names, errors = [], []
    for m in self.members:
      url = f"{m.base_url}/models"
      try:
        r = requests.get(url, timeout=_DISCOVERY_TIMEOUT_S)
        r.raise_for_status()
        names.append(str(r.json()["data"][0]["id"]))
      except (requests.RequestException, ValueError, KeyError, IndexError, TypeError) as e:
        errors.append(f"{m.name}: GET {url} failed: {type(e).__name__}: {e}")
    if errors:
      raise FleetError("rollout fleet: cannot reach the given servers (is a vLLM OpenAI server running there?):\n"
                       + "\n".join(errors))
    return names

  # -- membership --------------------------------------------------------------------------------------

  @property
  def live_servers(self) -> list[str]:
    """Base URLs of the live servers, in server order."""
    with self._lock:
      return [m.base_url for m in self.members if m.alive]

  @property
  def base_urls(self) -> list[str]:
    return [m.base_url for m in self.members]

  def server_of(self, session_id) -> str | None:
    """The base URL of the server a session is assigned to (None: not assigned)."""
    with self._lock:
      m = self._session_server.get(session_id)
      return m.base_url if m is not None else None

  def _live(self) -> list[FleetServer]:
    return [m for m in self.members if m.alive]

  def _no_live_error(self) -> FleetError:
    detail = "\n".join(f"  {m.name}: {m.dead_reason}" for m in self.members)
    return FleetError(f"no live vLLM server left in the rollout fleet ({len(self.members)} servers, all dead):\n"
                      f"{detail}")

  def _least_sessions(self) -> FleetServer:
    live = self._live()
    if not live:
      raise self._no_live_error()
    return min(live, key=lambda m: (len(m.sessions), m.index))

  def _mark_dead(self, m: FleetServer, reason: str) -> None:
    """Takes ``m`` out of the fleet for good: its sessions move to the live servers (fewest sessions first),
    its client stops; a server the fleet started is killed (a hung process holds memory and devices)."""
    with self._lock:
      if not m.alive:
        return
      m.alive = False
      m.dead_reason = reason
      self.failovers += 1
      try:
        moved = sorted(m.sessions)
      except TypeError:  # mixed id types: any fixed order
        moved = sorted(m.sessions, key=repr)
      m.sessions = set()
      for sid in moved:
        del self._session_server[sid]
        if self._live():
          self._assign(sid)
    if m.engine is not None:
      m.engine.close()
    if m.process is not None:
      m.process.kill()

  def _assign(self, sid) -> FleetServer:
    target = self._least_sessions()
    target.sessions.add(sid)
    self._session_server[sid] = target
    return target

  def _route(self, indices: Sequence[int], session_ids) -> dict[FleetServer, list[int]]:
    """Server of each request (under the lock): its session's server, a new session's least-loaded server, or
    round-robin for requests without a session."""
    groups: dict[FleetServer, list[int]] = {}
    for i in indices:
      sid = session_ids[i] if session_ids is not None else None
      if sid is None:
        live = self._live()
        if not live:
          raise self._no_live_error()
        m = live[next(self._rr) % len(live)]
      else:
        m = self._session_server.get(sid)
        if m is None or not m.alive:
          m = self._assign(sid)
      groups.setdefault(m, []).append(i)
    return groups

  # -- health ------------------------------------------------------------------------------------------

  def _probe(self, m: FleetServer) -> str | None:
    """Why ``m`` looks dead (``GET {root}/health`` failed or answered non-200), or None when healthy."""
    url = f"{m.root_url}/health"
    try:
      r = requests.get(url, timeout=self.health_timeout_s)
    except requests.RequestException as e:
      return f"GET {url}: {type(e).__name__}: {e}"
    r.close()
    return None if r.status_code == 200 else f"GET {url} -> HTTP {r.status_code}"

  def check_health(self) -> dict[str, bool]:
    """Probes every live server (``GET {root}/health``, concurrently) and marks dead the ones that fail;
    returns base URL -> alive for every server."""
    with self._lock:
      live = self._live()
    if live:
      with concurrent.futures.ThreadPoolExecutor(max_workers=len(live)) as pool:
        probes = list(pool.map(self._probe, live))
      for m, why in zip(live, probes):
        if why is not None:
          self._mark_dead(m, f"health check failed: {why}")
    with self._lock:
      return {m.base_url: m.alive for m in self.members}

  # -- generation --------------------------------------------------------------------------------------

  def _run_group(self, m: FleetServer, prompts, params: SamplingParams, seeds) -> list[Completion]:
    sub = dataclasses.replace(params, seed=None, seeds=None if seeds[0] is None else tuple(seeds))
    return m.engine.generate(prompts, sub)

  def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               session_ids: Sequence[Any] | None = None) -> list[Completion]:
    """One completion per prompt, in input order (see the module docstring for routing and failover)."""
    if self._closed:
      raise RuntimeError("FleetEngine is closed")
    n = len(prompts)
    if session_ids is not None and len(session_ids) != n:
      raise ValueError(f"session_ids has {len(session_ids)} entries for {n} prompts")
    if n == 0:
      return []
    seeds = params.stream_seeds(n)
    results: list[Completion | None] = [None] * n
    futures: dict[concurrent.futures.Future, tuple[FleetServer, list[int]]] = {}

    def submit(indices):
      with self._lock:
        groups = self._route(indices, session_ids)
      for m, idx in groups.items():
        f = self._pool.submit(self._run_group, m, [prompts[i] for i in idx], params, [seeds[i] for i in idx])
        futures[f] = (m, idx)

    submit(range(n))
    error: BaseException | None = None
    try:
      while futures:
        done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
        for f in done:
          m, idx = futures.pop(f)
          try:
            comps = f.result()
          except Exception as e:  # noqa: BLE001 - sorted below: a dead server's group is re-issued
            if m.alive and isinstance(e, ServerGone):
              self._mark_dead(m, f"gone: {e}")
            elif m.alive:  # a timeout (a hung server?) or any other failure: dead only if /health fails too
              why = self._probe(m)
              if why is None:  # the server is healthy: the request's own failure
                error = error or e
                continue
              self._mark_dead(m, f"request failed ({type(e).__name__}: {e}) and the health probe failed ({why})")
          else:
            with self._lock:
              m.served += len(idx)
            for i, c in zip(idx, comps):
              results[i] = c
            continue
          # m is dead: the whole group goes to the live servers, same seeds
          with self._lock:
            self.reissued += len(idx)
          if error is None:
            submit(idx)
    finally:
      for f in futures:  # an interrupted call (Ctrl-C): drop what has not started
        f.cancel()
    if error is not None:
      raise error
    return results

  def end_session(self, session_id) -> None:
    with self._lock:
      m = self._session_server.pop(session_id, None)
      if m is not None:
        m.sessions.discard(session_id)

  # -- weights -----------------------------------------------------------------------------------------

  def update_weights(self, model) -> None:
    """Pushes ``model`` to every live server through the transport as version ``policy_version + 1``; servers
    the push or the version check failed on are marked dead (see the module docstring)."""
    if self.transport is None:
      raise RuntimeError("FleetEngine has no weight transport (pass transport=make_transport(...))")
    with self._sync_lock:
      with self._lock:
        live = self._live()
        if not live:
          raise self._no_live_error()
      version = self.policy_version + 1
      report = self.transport.push(model, [m.root_url for m in live], version)
      by_root = {m.root_url: m for m in live}
      retry = []
      for root, err in report.failed.items():
        m = by_root[root]
        why = self._probe(m)
        if why is not None:
          self._mark_dead(m, f"weight sync to version {version} failed ({err}) and the health probe failed ({why})")
        else:
          retry.append(m)
      if retry:
        again = self.transport.push(model, [m.root_url for m in retry], version)
        for root, err in again.failed.items():
          self._mark_dead(by_root[root], f"weight sync to version {version} failed twice (last: {err})")
        report.per_server_s.update(again.per_server_s)
        report.seconds += again.seconds
        report.failed = dict(again.failed)
      for m in [m for m in live if m.alive]:
        got = weight_version(m.root_url, self.health_timeout_s)
        if got != str(version):
          self._mark_dead(m, f"reports weight version {got!r} after the sync to version {version}")
      self.policy_version = version
      self.last_sync = report
      if not self._live():
        raise self._no_live_error()

  # -- stats and lifecycle -----------------------------------------------------------------------------

  def stats(self) -> dict[str, float]:
    """Counters for the trainer's metrics (numbers only)."""
    with self._lock:
      out = {"fleet/servers": float(len(self.members)), "fleet/live_servers": float(len(self._live())),
             "fleet/failovers": float(self.failovers), "fleet/reissued_requests": float(self.reissued),
             "fleet/policy_version": float(self.policy_version)}
      if self.last_sync is not None:
        out["fleet/sync_s"] = float(self.last_sync.seconds)
      for m in self.members:
        out[f"fleet/requests/{m.index}"] = float(m.served)
        out[f"fleet/sessions/{m.index}"] = float(len(m.sessions))
      return out

  def close(self) -> None:
    """Stops the clients and, when the fleet started its servers, their process groups (concurrently).
    Idempotent; also runs at interpreter exit."""
    if self._closed:
      return
    self._closed = True
    atexit.unregister(self.close)
    pool = getattr(self, "_pool", None)
    if pool is not None:
      pool.shutdown(wait=False, cancel_futures=True)
    for m in self.members:
      if m.engine is not None:
        m.engine.close()
    procs = [m.process for m in self.members if m.process is not None]
    threads = [threading.Thread(target=p.stop, daemon=True) for p in procs]
    try:
      for t in threads:
        t.start()
    except RuntimeError:  # no new threads at interpreter shutdown: stop the rest one by one
      pass
    for t, p in zip(threads, procs):
      if t.ident is not None:
        t.join()
      else:
        p.stop()
    if self.transport is not None and hasattr(self.transport, "close"):
      self.transport.close()

  def __enter__(self) -> "FleetEngine":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
