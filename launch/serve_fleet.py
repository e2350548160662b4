"""Starts a fleet of vLLM OpenAI-compatible servers on this host for the trainer's ``rollout.engine='fleet'``.

The servers are started as ``codjax.rollout.fleet.FleetEngine`` starts them (``VllmServer`` processes, each in
its own process group, launched together and waited for together; ``VLLM_SERVER_DEV_MODE=1`` for the weight
routes, ``--logprobs-mode``, ``--enforce-eager`` and no chunked prefill on CPU). Once all are healthy it prints
one line per server, its base URL first, then a ready-to-paste trainer flag:

  http://127.0.0.1:41235/v1  # server 0, pid 8675, log /tmp/vllm_server_x.log
  --config.rollout.fleet.servers=http://127.0.0.1:41235/v1,http://127.0.0.1:41239/v1

and stays up until Ctrl-C or SIGTERM, then stops every server (SIGTERM to each process group, SIGKILL after
30 s). Every ``--check_every_s`` seconds it reports servers whose process has exited (the trainer's fleet
fails over from them on its own).

  python launch/serve_fleet.py --model_path=CKPT --num_servers=2 --dtype=float32 --max_model_len=4608
  python launch/serve_fleet.py --model_path=Qwen/Qwen3-8B --num_servers=4 --devices=4,5,6,7 --dtype=bfloat16 \\
      --transport=nccl --host=0.0.0.0 --server_args="--gpu-memory-utilization 0.85"   # GPUs 4-7, other hosts too

The trainer must sync weights into the servers (``update_weights``), so they should load the checkpoint the
trainer starts from (or one of the same architecture) and have a ``--max_model_len`` of at least
``rollout.max_prompt_tokens + rollout.max_response_tokens + 1``. With ``--host=0.0.0.0`` the printed URLs name
``--advertise_host`` (default: this machine's host name) so other hosts can reach them. A ``--max_model_len``
above the checkpoint's ``max_position_embeddings`` is refused before any server starts (vLLM would refuse it
in each server; ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` lets it through, as in vLLM).
"""

from __future__ import annotations

import os
import socket
import sys
import time

from absl import app, flags

from codjax.common import cli, interrupts

_MODEL = flags.DEFINE_string("model_path", None, "HF checkpoint directory or hub id the servers load", required=True)
_NUM = flags.DEFINE_integer("num_servers", 1, "servers to start")
_DTYPE = flags.DEFINE_enum("dtype", "auto", ["auto", "float32", "bfloat16", "float16"], "vLLM --dtype")
_MAX_LEN = flags.DEFINE_integer("max_model_len", None, "vLLM --max-model-len (default: the model's)")
_DEVICES = flags.DEFINE_list("devices", [], "one CUDA device per server (CUDA_VISIBLE_DEVICES), e.g. 4,5,6,7")
_ARGS = flags.DEFINE_string("server_args", "", "extra vLLM flags, space-separated")
_KV = flags.DEFINE_float("kv_cache_gib", 1.0, "VLLM_CPU_KVCACHE_SPACE of each server (CPU builds)")
_LOGPROBS = flags.DEFINE_enum("logprobs_mode", "processed_logprobs", ["processed_logprobs", "raw_logprobs"],
                              "vLLM --logprobs-mode (processed: the sampling distribution, what the losses need)")
_SEED = flags.DEFINE_integer("seed", 0, "vLLM --seed")
_TRANSPORT = flags.DEFINE_enum("transport", "auto", ["auto", "checkpoint", "nccl", "ipc"], "the trainer's "
                               "rollout.fleet.transport: the servers get the flags it needs (NCCL / IPC: vLLM's "
                               "--weight-transfer-config)")
_HOST = flags.DEFINE_string("host", "127.0.0.1", "address the servers listen on (0.0.0.0: all interfaces)")
_ADVERTISE = flags.DEFINE_string("advertise_host", "", "host name printed in the URLs (default: --host, or this "
                                 "machine's name for 0.0.0.0)")
_TIMEOUT = flags.DEFINE_float("startup_timeout_s", 900.0, "seconds for all servers to become healthy")
_LOG_DIR = flags.DEFINE_string("server_log_dir", "", "server logs go here (default: temporary files)")
_CHECK = flags.DEFINE_float("check_every_s", 10.0, "seconds between checks that the server processes still run")


def advertised(url: str, host: str, advertise: str) -> str:
  """``url`` with the listening address replaced by the name other hosts use."""
  name = advertise or (socket.gethostname() if host in ("0.0.0.0", "::") else "")
  return url.replace(f"//{host}:", f"//{name}:", 1) if name else url


def check_max_model_len(model_path: str, max_model_len: int | None) -> None:
  """Refuses a ``max_model_len`` above a local checkpoint's ``max_position_embeddings`` (a hub id is not
  read: vLLM checks it when it loads)."""
  if max_model_len is None:
    return
  if max_model_len < 1:
    raise ValueError(f"--max_model_len must be >= 1, got {max_model_len}")
  if os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "") not in ("", "0"):
    return
  if not os.path.isfile(os.path.join(model_path, "config.json")):
    return
  from codjax.models.config import config_from_pretrained_dir

  limit = int(config_from_pretrained_dir(model_path).max_position_embeddings)
  if max_model_len > limit:
    raise ValueError(f"--max_model_len={max_model_len} exceeds the model's max_position_embeddings ({limit}, "
                     f"{os.path.join(model_path, 'config.json')}): use --max_model_len={limit} or less (or "
                     "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to go past it at vLLM's risk)")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if _NUM.value < 1:
    raise app.UsageError("--num_servers must be >= 1")
  if _CHECK.value <= 0:
    raise app.UsageError("--check_every_s must be > 0")
  check_max_model_len(_MODEL.value, _MAX_LEN.value)
  interrupts.install()  # stop the servers on a scheduler's stop too
  from codjax.rollout.fleet import FleetEngine
  from codjax.rollout.weight_sync import make_transport

  transport = make_transport(_TRANSPORT.value)  # only asked for the server flags it needs
  extra = _ARGS.value.split() + transport.server_args()
  transport.close()
  fleet = None
  try:
    print(f"starting {_NUM.value} vLLM server(s) on {_MODEL.value} ...", flush=True)
    t0 = time.perf_counter()
    fleet = FleetEngine(num_servers=_NUM.value, model_path=_MODEL.value, dtype=_DTYPE.value,
                        max_model_len=_MAX_LEN.value, seed=_SEED.value, devices=_DEVICES.value,
                        server_args=extra, kv_cache_gib=_KV.value, startup_timeout_s=_TIMEOUT.value,
                        logprobs_mode=_LOGPROBS.value, log_dir=_LOG_DIR.value or None, host=_HOST.value)
    urls = [advertised(m.base_url, _HOST.value, _ADVERTISE.value) for m in fleet.members]
    print(f"{len(urls)} server(s) healthy after {time.perf_counter() - t0:.0f} s:", flush=True)
    for m, url in zip(fleet.members, urls):
      print(f"{url}  # server {m.index}, pid {m.process.proc.pid}, log {m.process.log_path}", flush=True)
    print(f"--config.rollout.fleet.servers={','.join(urls)}", flush=True)
    print("serving; Ctrl-C or SIGTERM stops the servers", flush=True)
    reported = set()
    while True:
      time.sleep(_CHECK.value)
      interrupts.check()  # a SIGTERM whose exception a gc callback dropped
      for m in fleet.members:
        if not m.process.running and m.index not in reported:
          reported.add(m.index)
          print(f"server {m.index} ({m.base_url}) exited with {m.process.proc.returncode}; log {m.process.log_path}",
                file=sys.stderr, flush=True)
  except KeyboardInterrupt as e:
    print(f"stopping the servers ({e or 'KeyboardInterrupt'}) ...", file=sys.stderr, flush=True)
  finally:
    if fleet is not None:
      fleet.close()
  print("all servers stopped", flush=True)


if __name__ == "__main__":
  cli.run(main)
