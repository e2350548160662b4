"""Weight sync to vLLM servers (``codjax.rollout.weight_sync``).

* The round protocol against local HTTP servers that record what they receive: every server is paused, gets
  the transfer, a prefix-cache reset, the version and a resume, in that order; a server that fails is reported
  (and still resumed), a dead one does not stop the others; the checkpoint the servers reload holds the model.
* ``JaxWeightSource``, the tensors vLLM's NCCL / IPC trainer engines send: HF names, order and values equal to
  the host export the disk sync writes, metadata equal to what iteration yields, vLLM's own group-order check
  passes, and an in-process vLLM that reloads from the source samples exactly as after the tested sync path.
"""

import http.server
import json
import threading
import urllib.parse

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from codjax.models import from_pretrained
from codjax.rollout.vllm_server import free_port
from codjax.rollout.weight_sync import CheckpointTransport, hf_device_tensors, make_transport, make_weight_source


class _Recorder(http.server.BaseHTTPRequestHandler):
  """Records (path, query, json body); answers 500 on the paths in ``server.fail_paths``."""

  def do_POST(self):  # noqa: N802
    url = urllib.parse.urlparse(self.path)
    n = int(self.headers.get("Content-Length") or 0)
    body = json.loads(self.rfile.read(n)) if n else None
    self.server.calls.append((url.path, dict(urllib.parse.parse_qsl(url.query)), body))
    code = 500 if url.path in self.server.fail_paths else 200
    out = json.dumps({"ok": code == 200}).encode()
    self.send_response(code)
    self.send_header("Content-Type", "application/json")
    self.send_header("Content-Length", str(len(out)))
    self.end_headers()
    self.wfile.write(out)

  def log_message(self, *args):
    pass


@pytest.fixture
def recorders():
  servers = []

  def make(fail_paths=()):
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    s.calls, s.fail_paths = [], set(fail_paths)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    servers.append(s)
    return s, f"http://127.0.0.1:{s.server_address[1]}"

  yield make
  for s in servers:
    s.shutdown()
    s.server_close()


def test_checkpoint_round_reaches_every_server_in_order(recorders, tiny_ckpt, tmp_path):
  model = from_pretrained(tiny_ckpt, dtype="float32")
  (a, url_a), (b, url_b) = recorders(), recorders()
  bad, url_bad = recorders(fail_paths={"/collective_rpc"})
  dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
  transport = CheckpointTransport(str(tmp_path / "sync"), timeout_s=5)
  report = transport.push(model, [url_a, url_b + "/", url_bad, dead], version=3)

  sync_dir = str(tmp_path / "sync")
  want = [("/pause", {"mode": "wait"}, None),
          ("/collective_rpc", {}, {"method": "reload_weights", "kwargs": {"weights_path": sync_dir}}),
          ("/reset_prefix_cache", {}, None),
          ("/update_weight_version", {}, {"new_version": "3"}),
          ("/resume", {}, None)]
  assert a.calls == want and b.calls == want
  # the server whose transfer failed is reported and resumed, never told the new version
  assert [c[0] for c in bad.calls] == ["/pause", "/collective_rpc", "/resume"]
  assert set(report.failed) == {url_bad, dead}
  assert "HTTP 500" in report.failed[url_bad] and "ConnectionError" in report.failed[dead]
  assert set(report.per_server_s) == {url_a, url_b} and report.version == 3 and not report.ok
  # what the servers reload is the model: read back independently through the HF loader
  back = from_pretrained(sync_dir, dtype="float32")
  for x, y in zip(jax.tree.leaves(nnx.state(model)), jax.tree.leaves(nnx.state(back))):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  transport.close()


def test_make_transport_names_and_errors(tmp_path):
  assert make_transport("auto", cpu=True).name == "checkpoint"
  assert make_transport("auto", cpu=False).name == "nccl"
  assert make_transport("nccl").server_args() == ["--weight-transfer-config", '{"backend": "nccl"}']
  assert make_transport("checkpoint", sync_dir=str(tmp_path)).sync_dir == str(tmp_path)
  with pytest.raises(ValueError, match="weight transport must be one of"):
    make_transport("rsync")


def test_nccl_transport_refuses_a_cpu_trainer_clearly(tiny_ckpt):
  model = from_pretrained(tiny_ckpt, dtype="float32")
  with pytest.raises(RuntimeError, match="needs the trainer on CUDA GPUs"):
    make_transport("nccl").push(model, ["http://127.0.0.1:1"], version=1)


@pytest.mark.parametrize("which", ["tiny_ckpt", "peaked_ckpt"])  # tied and untied output head
def test_device_tensors_equal_the_host_export(which, request):
  from codjax.rollout.vllm_engine import _sync_tensors

  model = from_pretrained(request.getfixturevalue(which), dtype="float32")
  host = list(_sync_tensors(model))
  dev = list(hf_device_tensors(model))
  assert [n for n, _ in dev] == [n for n, _ in host]
  by_layer = dict(hf_device_tensors(model, layerwise=True))
  assert sorted(by_layer) == sorted(n for n, _ in host)
  for name, h in host:
    np.testing.assert_array_equal(np.asarray(by_layer[name]), h, err_msg=name)
  assert ("lm_head.weight" in dict(host))
  for (name, d), (_, h) in zip(dev, host):
    assert isinstance(d, jax.Array), name
    np.testing.assert_array_equal(np.asarray(d), h, err_msg=name)


def test_weight_source_metadata_groups_and_fresh_passes(peaked_ckpt):
  model = from_pretrained(peaked_ckpt, dtype="float32")
  current = {"m": model}
  source = make_weight_source(lambda: current["m"])
  meta = source.metadata()
  pairs = list(source)
  assert [m.name for m in meta] == [n for n, _ in pairs]
  # layer by layer, exactly vLLM's own partition of these names flattened
  from vllm.distributed.weight_transfer.base import layerwise_groups

  names = [n for n, _ in pairs]
  assert names == [n for g in layerwise_groups(names) for n in g]
  layers = [next((int(p) for p in n.split(".") if p.isdigit()), None) for n in names]
  assert [x for x in layers if x is not None] == sorted(x for x in layers if x is not None)
  assert [(m.dtype, m.shape) for m in meta] == [(t.dtype, tuple(t.shape)) for _, t in pairs]
  groups = list(source.iter_groups())  # vLLM's own check that iteration follows metadata order
  assert sum(len(names) for names, _ in groups) == len(meta)
  # every pass reads the current model: a new model is what the next round sends
  graphdef, state = nnx.split(model)
  current["m"] = nnx.merge(graphdef, jax.tree.map(lambda x: x * 2, state))
  for (name, t0), (_, t1) in zip(pairs, source):
    np.testing.assert_allclose(t1.numpy(), 2 * t0.numpy(), rtol=0, atol=0, err_msg=name)


@pytest.mark.slow
def test_in_process_vllm_reloaded_from_the_source_samples_as_after_the_tested_sync(peaked_ckpt):
  from codjax.rollout.base import SamplingParams
  from codjax.rollout.vllm_engine import VllmEngine

  model = from_pretrained(peaked_ckpt, dtype="float32")
  graphdef, state = nnx.split(model)
  rng = np.random.default_rng(4)
  new = nnx.merge(graphdef, jax.tree.map(
      lambda x: x * jnp.asarray(1 + 0.3 * rng.standard_normal(x.shape), x.dtype), state))
  prompts = [[5, 9, 40, 7], [300, 12, 3, 3, 3, 77]]
  params = SamplingParams(temperature=1.0, max_tokens=12, seed=2)
  with VllmEngine(peaked_ckpt, max_model_len=128, dtype="float32", seed=0) as engine:
    base = engine.generate(prompts, params)
    engine.update_weights(new)  # the tested host-iterator sync
    want = engine.generate(prompts, params)
    engine.update_weights(model)
    assert [c.token_ids for c in engine.generate(prompts, params)] == [c.token_ids for c in base]
    engine._llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(make_weight_source(lambda: new))})
    engine._llm.reset_prefix_cache()
    got = engine.generate(prompts, params)
  assert [c.token_ids for c in got] == [c.token_ids for c in want]
  assert [c.logprobs for c in got] == [c.logprobs for c in want]
  assert [c.token_ids for c in want] != [c.token_ids for c in base]
