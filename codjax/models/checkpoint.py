"""Hugging Face checkpoint I/O: ``from_pretrained`` / ``save_pretrained`` through one key table.

``KEY_TABLE`` is the single declarative map between HF tensor names and codjax parameters. Each row names
the HF key pattern (``{i}`` = layer), the codjax parameter (layer params are stacked on a leading axis) and
the layout change: HF linear weights are [out, in]; codjax keeps einsum layouts ([D, N, H], [N, H, D],
[D, F], ...). Loading places every tensor straight into its (optionally sharded) layout with
``jax.make_array_from_callback``: each device shard is assembled from memory-mapped safetensors one layer at
a time, so no full host copy of a large model is ever made.

``from_pretrained`` picks the architecture from config.json's ``model_type`` (Qwen3, or the Qwen3.5/3.6 hybrid
whose key table lives in ``codjax.models.checkpoint_qwen3_5``); ``hf_tensors`` and ``save_pretrained`` dispatch
on the model's type.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Iterator

import jax
import numpy as np
from flax import nnx
from safetensors.numpy import save_file

from codjax.models.config import Qwen3Config, read_hf_config
from codjax.models.qwen3 import PARAM_LOGICAL_AXES, Qwen3, abstract_model
from codjax.models.safetensors_io import NP_DTYPES, SafetensorsIndex, check_load_args
from codjax.parallel.sharding import param_sharding

if TYPE_CHECKING:
  from codjax.models.qwen3_5 import Qwen35



@dataclasses.dataclass(frozen=True)
class KeyRule:
  """One row of the HF <-> codjax table."""

  hf: str  # HF name; "{i}" is the layer index for stacked params
  param: str  # codjax parameter name
  kind: str  # layout change: "copy" | "t" (transpose 2-D) | "in_heads" ([H*X, D] -> [D, X, H]) | "out_heads"

  @property
  def stacked(self) -> bool:
    return "{i}" in self.hf


KEY_TABLE: tuple[KeyRule, ...] = (
    KeyRule("model.embed_tokens.weight", "embed_vd", "copy"),
    KeyRule("model.norm.weight", "final_norm_d", "copy"),
    KeyRule("lm_head.weight", "lm_head_dv", "t"),
    KeyRule("model.layers.{i}.input_layernorm.weight", "attn_norm_ld", "copy"),
    KeyRule("model.layers.{i}.self_attn.q_proj.weight", "q_ldnh", "in_heads"),
    KeyRule("model.layers.{i}.self_attn.k_proj.weight", "k_ldkh", "in_heads"),
    KeyRule("model.layers.{i}.self_attn.v_proj.weight", "v_ldkh", "in_heads"),
    KeyRule("model.layers.{i}.self_attn.o_proj.weight", "o_lnhd", "out_heads"),
    KeyRule("model.layers.{i}.self_attn.q_norm.weight", "q_norm_lh", "copy"),
    KeyRule("model.layers.{i}.self_attn.k_norm.weight", "k_norm_lh", "copy"),
    KeyRule("model.layers.{i}.post_attention_layernorm.weight", "mlp_norm_ld", "copy"),
    KeyRule("model.layers.{i}.mlp.gate_proj.weight", "gate_ldf", "t"),
    KeyRule("model.layers.{i}.mlp.up_proj.weight", "up_ldf", "t"),
    KeyRule("model.layers.{i}.mlp.down_proj.weight", "down_lfd", "t"),
)


def _to_codjax(kind: str, w: np.ndarray, target_shape: tuple[int, ...]) -> np.ndarray:
  """HF tensor -> codjax layout (``target_shape`` is the per-layer codjax shape)."""
  if kind == "copy":
    return w
  if kind == "t":
    return w.T
  if kind == "in_heads":  # [X*H, D] -> [D, X, H]
    return w.T.reshape(target_shape)
  if kind == "out_heads":  # [D, N*H] -> [N, H, D]
    return w.T.reshape(target_shape)
  raise ValueError(kind)


def _to_hf(kind: str, w: np.ndarray) -> np.ndarray:
  """codjax layout (per layer) -> HF tensor."""
  if kind == "copy":
    return w
  if kind == "t":
    return np.ascontiguousarray(w.T)
  if kind == "in_heads":  # [D, X, H] -> [X*H, D]
    return np.ascontiguousarray(w.reshape(w.shape[0], -1).T)
  if kind == "out_heads":  # [N, H, D] -> [D, N*H]
    return np.ascontiguousarray(w.reshape(-1, w.shape[-1]).T)
  raise ValueError(kind)


def _hf_shape(kind: str, per_layer_shape: tuple[int, ...]) -> tuple[int, ...]:
  if kind == "copy":
    return per_layer_shape
  if kind == "t":
    return tuple(reversed(per_layer_shape))
  if kind == "in_heads":
    d, x, h = per_layer_shape
    return (x * h, d)
  if kind == "out_heads":
    n, h, d = per_layer_shape
    return (d, n * h)
  raise ValueError(kind)


def expand_key_table(cfg: Qwen3Config) -> list[tuple[str, KeyRule, int | None]]:
  """Every HF tensor the config needs: (hf_name, rule, layer index or None)."""
  out = []
  for rule in KEY_TABLE:
    if rule.param == "lm_head_dv" and cfg.tie_word_embeddings:
      continue
    if rule.stacked:
      out.extend((rule.hf.format(i=i), rule, i) for i in range(cfg.num_hidden_layers))
    else:
      out.append((rule.hf, rule, None))
  return out


def from_pretrained(path: str, dtype: str | None = None, mesh: jax.sharding.Mesh | None = None,
                    rules=None, param_dtype: str | None = None, **config_overrides) -> Qwen3 | Qwen35:
  """Loads a local HF checkpoint directory (config.json + safetensors) into a codjax model: a ``Qwen3`` for
  model_type ``qwen3``, a ``codjax.models.qwen3_5.Qwen35`` for the Qwen3.5/3.6 types (``qwen3_5``,
  ``qwen3_5_moe`` and their ``*_text`` forms; ``codjax.models.checkpoint_qwen3_5``).

  ``dtype`` sets the compute dtype ("float32", "bfloat16") and, unless ``param_dtype`` is given, the
  parameter dtype too (fp32 master weights with bf16 compute: ``param_dtype="float32", dtype="bfloat16"``);
  ``mesh`` places every tensor
  straight into its sharded layout (logical-axis ``rules`` default to ``codjax.parallel.DEFAULT_RULES``).
  Raises ``FileNotFoundError``/``ValueError`` with the offending file or tensor for missing files, shape
  mismatches, unsupported ``model_type`` or ``rope_scaling``, and truncated safetensors.
  """
  config_overrides = check_load_args(path, dtype, param_dtype, config_overrides)
  hf_cfg = read_hf_config(path)
  if hf_cfg.get("model_type") != "qwen3":
    from codjax.models import checkpoint_qwen3_5
    from codjax.models.config import config_from_hf_dict

    cfg = config_from_hf_dict(hf_cfg, **config_overrides)  # unknown model types raise here
    return checkpoint_qwen3_5.load_params(path, cfg, mesh, rules)
  cfg = Qwen3Config.from_hf_dict(hf_cfg, **config_overrides)
  index = SafetensorsIndex(path)
  abstract = abstract_model(cfg)
  graphdef, abs_state = nnx.split(abstract)

  by_param: dict[str, list[tuple[str, KeyRule, int | None]]] = {}
  for hf_name, rule, layer in expand_key_table(cfg):
    if hf_name not in index:
      raise ValueError(f"checkpoint {path!r} has no tensor {hf_name!r} required by the config")
    by_param.setdefault(rule.param, []).append((hf_name, rule, layer))

  np_dtype = NP_DTYPES[cfg.param_dtype]
  cache: dict[str, np.ndarray] = {}

  def load_layer(hf_name: str, rule: KeyRule, per_layer_shape) -> np.ndarray:
    if hf_name in cache:
      return cache[hf_name]
    w = index.get(hf_name)
    want = _hf_shape(rule.kind, per_layer_shape)
    if tuple(w.shape) != want:
      raise ValueError(f"tensor {hf_name!r} has shape {tuple(w.shape)}, expected {want} for this config")
    out = _to_codjax(rule.kind, w, per_layer_shape).astype(np_dtype)
    cache.clear()  # keep at most one layer tensor on the host
    cache[hf_name] = out
    return out

  values = {}
  for name, entries in by_param.items():
    abs_leaf = getattr(abstract, name)
    shape = tuple(abs_leaf.shape)
    sharding = param_sharding(name, shape, mesh, PARAM_LOGICAL_AXES, rules)
    stacked = entries[0][1].stacked
    per_layer_shape = shape[1:] if stacked else shape

    def callback(index_tuple, entries=entries, stacked=stacked, per_layer_shape=per_layer_shape):
      if not stacked:
        hf_name, rule, _ = entries[0]
        return load_layer(hf_name, rule, per_layer_shape)[index_tuple]
      lsl, rest = index_tuple[0], index_tuple[1:]
      layers = range(*lsl.indices(len(entries)))
      return np.stack([load_layer(entries[i][0], entries[i][1], per_layer_shape)[rest] for i in layers])

    values[name] = jax.make_array_from_callback(shape, sharding, callback)
  for name in values:
    getattr(abs_state, name).value = values[name]
  return nnx.merge(graphdef, abs_state)


def hf_tensors(model: Qwen3 | Qwen35) -> Iterator[tuple[str, np.ndarray]]:
  """Yields (HF name, host numpy tensor) for every parameter, one tensor at a time (for vLLM sync too); a
  ``Qwen35`` yields its text layout (``codjax.models.checkpoint_qwen3_5.hf_tensors``)."""
  if not isinstance(model, Qwen3):
    from codjax.models import checkpoint_qwen3_5

    yield from checkpoint_qwen3_5.hf_tensors(model)
    return
  cfg = model.cfg
  host_cache: dict[str, np.ndarray] = {}
  for hf_name, rule, layer in expand_key_table(cfg):
    if rule.param not in host_cache:
      host_cache.clear()
      host_cache[rule.param] = np.asarray(jax.device_get(getattr(model, rule.param)[...]))
    w = host_cache[rule.param]
    yield hf_name, _to_hf(rule.kind, w[layer] if layer is not None else w)


def save_pretrained(model: Qwen3 | Qwen35, path: str, max_shard_bytes: int = 4 * 1024**3,
                    tokenizer=None) -> None:
  """Writes config.json (``model.cfg.to_hf_dict()``) + safetensors (sharded with an index past
  ``max_shard_bytes``) that transformers and vLLM load, for a ``Qwen3`` or a ``Qwen35`` (text layout:
  ``Qwen3_5ForCausalLM`` / ``Qwen3_5MoeForCausalLM``). The write goes to a temporary directory first and is
  renamed into place.

  A model spread over several processes (``jax.distributed``: some parameter not fully addressable) is
  saved collectively: every process must call this; the parameters are gathered, process 0 writes, and all
  return once the directory is in place. A process-local model is written by whoever calls this."""
  if jax.process_count() > 1 and not all(getattr(x, "is_fully_addressable", True)
                                         for x in jax.tree.leaves(nnx.state(model))):
    from codjax.parallel import multihost

    host_model = multihost.host_local_copy(model)
    try:
      if multihost.is_primary():
        _write_pretrained(host_model, path, max_shard_bytes, tokenizer)
    finally:
      multihost.barrier("save_pretrained")
    return
  _write_pretrained(model, path, max_shard_bytes, tokenizer)


def _write_pretrained(model, path: str, max_shard_bytes: int, tokenizer) -> None:
  import shutil
  import tempfile

  cfg = model.cfg
  parent = os.path.dirname(os.path.abspath(path)) or "."
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=".tmp_save_", dir=parent)
  try:
    shards: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for name, w in hf_tensors(model):
      if size and size + w.nbytes > max_shard_bytes:
        shards.append({})
        size = 0
      shards[-1][name] = w
      size += w.nbytes
    if len(shards) == 1:
      save_file(shards[0], os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    else:
      weight_map = {}
      n = len(shards)
      for k, shard in enumerate(shards):
        fname = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        save_file(shard, os.path.join(tmp, fname), metadata={"format": "pt"})
        weight_map.update({name: fname for name in shard})
      total = sum(w.nbytes for s in shards for w in s.values())
      with open(os.path.join(tmp, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(tmp, "config.json"), "w") as f:
      json.dump(cfg.to_hf_dict(), f, indent=2)
    gen = {"do_sample": True, "temperature": 1.0}
    if cfg.eos_token_id is not None:
      gen["eos_token_id"] = cfg.eos_token_id
    with open(os.path.join(tmp, "generation_config.json"), "w") as f:
      json.dump(gen, f, indent=2)
    if tokenizer is not None:
      tokenizer.save_pretrained(tmp)
    if os.path.isdir(path):
      # keep files we did not write (e.g. a tokenizer) but replace weights/config
      for fn in os.listdir(path):
        if not os.path.exists(os.path.join(tmp, fn)) and not fn.startswith("model"):
          src = os.path.join(path, fn)
          if os.path.isfile(src):
            shutil.copy2(src, os.path.join(tmp, fn))
      old = path + ".old"
      shutil.rmtree(old, ignore_errors=True)
      os.rename(path, old)
      os.rename(tmp, path)
      shutil.rmtree(old, ignore_errors=True)
    else:
      os.rename(tmp, path)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
