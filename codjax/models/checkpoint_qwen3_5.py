"""Hugging Face checkpoint I/O for the Qwen3.5/3.6 hybrid (``codjax.models.qwen3_5.Qwen35``), dense or MoE.

``KEY_TABLE`` is the one declarative map between HF tensor names and codjax parameters. A row names the HF key
in the text layout (``Qwen3_5ForCausalLM`` / ``Qwen3_5MoeForCausalLM``: prefix ``model.``; ``{i}`` = the layer
index in the full model, ``{j}`` = the expert), the codjax parameter(s) the tensor holds (several where HF fuses
them into one tensor) and the layout change. codjax stacks the attention parameters per layer kind: the
full-attention ones (``*_a*``) over the full layers only and the linear ones (``*_r*``) over the linear layers
only, so model layer i is row ``cfg.full_layers.index(i)`` (or ``cfg.linear_layers.index(i)``) of its stack.

Layouts (HF linear weights are [out, in]; codjax keeps einsum layouts):

  q_proj      [N*2H, D]           per head the first H rows are the query, the next H the output gate
  in_proj_qkv [2*Hk*dk + Hv*dv, D] the q | k | v channels of the linear layer, each [heads*dim, D]
  conv1d      [X, 1, W]           the depthwise convolution over the same q | k | v channels
  experts     fused: gate_up_proj [E, 2F, D] (gate | up), down_proj [E, D, F];
              per expert: experts.{j}.{gate,up,down}_proj.weight (what transformers 5.19 saves)

Loading accepts the text layout and the vision-language layout (``Qwen3_5ForConditionalGeneration``: prefix
``model.language_model.``, a ``model.visual.*`` tower that is skipped, model_type ``qwen3_5`` / ``qwen3_5_moe``
with a ``text_config``); ``mtp.*`` (the multi-token-prediction head) is ignored. Either expert layout loads; the
fused layout is detected per checkpoint. As for Qwen3 (``codjax.models.checkpoint``), every parameter is
assembled per device shard from memory-mapped safetensors, one layer (and for per-expert checkpoints only the
shard's experts) at a time, with ``jax.make_array_from_callback``: no full host copy of the model is made.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Iterator, NamedTuple

import jax
import numpy as np
from flax import nnx

from codjax.models import qwen3_5
from codjax.models.config import Qwen35Config, config_from_pretrained_dir
from codjax.models.qwen3_5 import PARAM_LOGICAL_AXES, Qwen35, abstract_model
from codjax.models.safetensors_io import NP_DTYPES, SafetensorsIndex, check_load_args
from codjax.parallel.sharding import param_sharding

logger = logging.getLogger(__name__)

TEXT_PREFIX = "model."
VL_PREFIX = "model.language_model."
VISION_PREFIX = "model.visual."
MTP_PREFIX = "mtp."
EXPERT_LAYOUTS = ("fused", "per_expert")
#: the expert layout ``save_pretrained`` / ``hf_tensors`` write (transformers 5.19 saves per-expert tensors)
SAVE_EXPERT_LAYOUT = "per_expert"


@dataclasses.dataclass(frozen=True)
class KeyRule:
  """One row of the HF <-> codjax table for the hybrid."""

  hf: str  # HF name in the text layout; "{i}" = layer index in the full model, "{j}" = expert index
  params: tuple[str, ...]  # codjax parameters held by this one HF tensor (in HF's order)
  kind: str  # layout change, see ``_to_codjax``
  experts: str | None = None  # None, or the expert layout ("fused" / "per_expert") the row belongs to

  @property
  def stacked(self) -> bool:
    return "{i}" in self.hf

  @property
  def per_expert(self) -> bool:
    return "{j}" in self.hf


def _r(hf, params, kind, experts=None) -> KeyRule:
  return KeyRule(hf, (params,) if isinstance(params, str) else tuple(params), kind, experts)


_L = "model.layers.{i}."
KEY_TABLE: tuple[KeyRule, ...] = (
    _r("model.embed_tokens.weight", "embed_vd", "copy"),
    _r("model.norm.weight", "final_norm_d", "copy"),
    _r("lm_head.weight", "lm_head_dv", "t"),
    _r(_L + "input_layernorm.weight", "attn_norm_ld", "copy"),
    _r(_L + "post_attention_layernorm.weight", "mlp_norm_ld", "copy"),
    # full (gated softmax) attention layers
    _r(_L + "self_attn.q_proj.weight", ("q_adnh", "qgate_adnh"), "q_gate"),
    _r(_L + "self_attn.k_proj.weight", "k_adkh", "in_heads"),
    _r(_L + "self_attn.v_proj.weight", "v_adkh", "in_heads"),
    _r(_L + "self_attn.o_proj.weight", "o_anhd", "out_heads"),
    _r(_L + "self_attn.q_norm.weight", "q_norm_ah", "copy"),
    _r(_L + "self_attn.k_norm.weight", "k_norm_ah", "copy"),
    # linear (Gated DeltaNet) layers
    _r(_L + "linear_attn.in_proj_qkv.weight", ("lq_rdjc", "lk_rdjc", "lv_rdus"), "in_heads_cat"),
    _r(_L + "linear_attn.in_proj_z.weight", "lz_rdus", "in_heads"),
    _r(_L + "linear_attn.in_proj_b.weight", "lb_rdu", "t"),
    _r(_L + "linear_attn.in_proj_a.weight", "la_rdu", "t"),
    _r(_L + "linear_attn.conv1d.weight", ("conv_q_rjcw", "conv_k_rjcw", "conv_v_rusw"), "conv_cat"),
    _r(_L + "linear_attn.dt_bias", "dt_bias_ru", "copy"),
    _r(_L + "linear_attn.A_log", "a_log_ru", "copy"),
    _r(_L + "linear_attn.norm.weight", "lnorm_rs", "copy"),
    _r(_L + "linear_attn.out_proj.weight", "lo_rusd", "out_heads"),
    # dense MLP
    _r(_L + "mlp.gate_proj.weight", "gate_ldf", "t"),
    _r(_L + "mlp.up_proj.weight", "up_ldf", "t"),
    _r(_L + "mlp.down_proj.weight", "down_lfd", "t"),
    # mixture of experts
    _r(_L + "mlp.gate.weight", "router_lde", "t"),
    _r(_L + "mlp.experts.gate_up_proj", ("egate_ledf", "eup_ledf"), "experts_gate_up", "fused"),
    _r(_L + "mlp.experts.down_proj", "edown_lefd", "experts_down", "fused"),
    _r(_L + "mlp.experts.{j}.gate_proj.weight", "egate_ledf", "t", "per_expert"),
    _r(_L + "mlp.experts.{j}.up_proj.weight", "eup_ledf", "t", "per_expert"),
    _r(_L + "mlp.experts.{j}.down_proj.weight", "edown_lefd", "t", "per_expert"),
    _r(_L + "mlp.shared_expert.gate_proj.weight", "sgate_ldf", "t"),
    _r(_L + "mlp.shared_expert.up_proj.weight", "sup_ldf", "t"),
    _r(_L + "mlp.shared_expert.down_proj.weight", "sdown_lfd", "t"),
    _r(_L + "mlp.shared_expert_gate.weight", "shared_gate_ld", "row"),
)


# -- layout changes ----------------------------------------------------------------------------------------
def _hf_shape(kind: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
  """The HF tensor shape for codjax per-slice shapes ``shapes`` (one per parameter of the row)."""
  s = shapes[0]
  if kind == "copy":
    return s
  if kind == "t":
    return tuple(reversed(s))
  if kind == "row":  # [D] <- [1, D]
    return (1,) + s
  if kind == "in_heads":  # [D, X, H] <- [X*H, D]
    return (s[1] * s[2], s[0])
  if kind == "out_heads":  # [N, H, D] <- [D, N*H]
    return (s[2], s[0] * s[1])
  if kind == "q_gate":  # 2 x [D, N, H] <- [N*2H, D]
    return (s[1] * 2 * s[2], s[0])
  if kind == "in_heads_cat":  # [D, X_p, H_p] ... <- [sum X_p*H_p, D]
    return (sum(x[1] * x[2] for x in shapes), s[0])
  if kind == "conv_cat":  # [X_p, H_p, W] ... <- [sum X_p*H_p, 1, W]
    return (sum(x[0] * x[1] for x in shapes), 1, s[2])
  if kind == "experts_gate_up":  # 2 x [E, D, F] <- [E, 2F, D]
    return (s[0], 2 * s[2], s[1])
  if kind == "experts_down":  # [E, F, D] <- [E, D, F]
    return (s[0], s[2], s[1])
  raise ValueError(f"unknown layout kind {kind!r}")


def _to_codjax(kind: str, w: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
  """HF tensor -> the row's codjax per-slice arrays (shapes ``shapes``)."""
  if kind == "copy":
    return [w]
  if kind == "t":
    return [w.T]
  if kind == "row":
    return [w[0]]
  if kind in ("in_heads", "out_heads"):
    return [w.T.reshape(shapes[0])]
  if kind == "q_gate":
    d, n, h = shapes[0]
    w = w.reshape(n, 2, h, d)
    return [w[:, 0].transpose(2, 0, 1), w[:, 1].transpose(2, 0, 1)]
  if kind == "in_heads_cat":
    splits = np.cumsum([s[1] * s[2] for s in shapes])[:-1]
    return [p.T.reshape(s) for p, s in zip(np.split(w, splits, axis=0), shapes)]
  if kind == "conv_cat":
    splits = np.cumsum([s[0] * s[1] for s in shapes])[:-1]
    return [p[:, 0, :].reshape(s) for p, s in zip(np.split(w, splits, axis=0), shapes)]
  if kind == "experts_gate_up":
    f = shapes[0][2]
    return [w[:, :f].transpose(0, 2, 1), w[:, f:].transpose(0, 2, 1)]
  if kind == "experts_down":
    return [w.transpose(0, 2, 1)]
  raise ValueError(f"unknown layout kind {kind!r}")


def _to_hf(kind: str, arrays: list[np.ndarray]) -> np.ndarray:
  """The row's codjax per-slice arrays -> HF tensor (inverse of ``_to_codjax``)."""
  a = arrays[0]
  if kind == "copy":
    out = a
  elif kind == "t":
    out = a.T
  elif kind == "row":
    out = a[None]
  elif kind == "in_heads":  # [D, X, H] -> [X*H, D]
    out = a.reshape(a.shape[0], -1).T
  elif kind == "out_heads":  # [N, H, D] -> [D, N*H]
    out = a.reshape(-1, a.shape[-1]).T
  elif kind == "q_gate":  # [D, N, H] x 2 -> [N, 2, H, D] -> [N*2H, D]
    q, g = arrays
    out = np.stack([q.transpose(1, 2, 0), g.transpose(1, 2, 0)], axis=1).reshape(-1, q.shape[0])
  elif kind == "in_heads_cat":
    out = np.concatenate([x.reshape(x.shape[0], -1).T for x in arrays], axis=0)
  elif kind == "conv_cat":  # [X, H, W] ... -> [sum X*H, 1, W]
    out = np.concatenate([x.reshape(-1, 1, x.shape[-1]) for x in arrays], axis=0)
  elif kind == "experts_gate_up":  # [E, D, F] x 2 -> [E, 2F, D]
    out = np.concatenate([x.transpose(0, 2, 1) for x in arrays], axis=1)
  elif kind == "experts_down":  # [E, F, D] -> [E, D, F]
    out = a.transpose(0, 2, 1)
  else:
    raise ValueError(f"unknown layout kind {kind!r}")
  return np.ascontiguousarray(out)


# -- which tensors a config needs --------------------------------------------------------------------------
class Entry(NamedTuple):
  """One HF tensor a config needs: name (text layout), its rule, model layer i, stacked row k, expert j."""

  hf_name: str
  rule: KeyRule
  layer: int | None
  row: int | None
  expert: int | None


def layer_group(param: str) -> str:
  """The layer set a stacked parameter stacks over: ``full`` (A layers), ``linear`` (R) or ``all`` (L)."""
  if param in qwen3_5.FULL_AXES:
    return "full"
  if param in qwen3_5.LINEAR_AXES:
    return "linear"
  return "all"


def model_params(cfg: Qwen35Config) -> set[str]:
  """Names of the parameters a ``Qwen35`` built from ``cfg`` has."""
  out = {"embed_vd", "final_norm_d", "attn_norm_ld", "mlp_norm_ld"}
  if not cfg.tie_word_embeddings:
    out.add("lm_head_dv")
  if cfg.full_layers:
    out.update(qwen3_5.FULL_AXES)
  if cfg.linear_layers:
    out.update(qwen3_5.LINEAR_AXES)
  out.update(qwen3_5.MOE_AXES if cfg.is_moe else qwen3_5.DENSE_MLP_AXES)
  return out


def _group_layers(cfg: Qwen35Config, group: str) -> tuple[int, ...]:
  if group == "full":
    return cfg.full_layers
  if group == "linear":
    return cfg.linear_layers
  return tuple(range(cfg.num_hidden_layers))


def expand_key_table(cfg: Qwen35Config, expert_layout: str = SAVE_EXPERT_LAYOUT) -> list[Entry]:
  """Every HF tensor (text layout) the config needs, layer by layer: globals first, then for each model layer
  its rows in table order (per-expert rows expert by expert)."""
  if expert_layout not in EXPERT_LAYOUTS:
    raise ValueError(f"expert_layout must be one of {EXPERT_LAYOUTS}, got {expert_layout!r}")
  have = model_params(cfg)
  rules = [r for r in KEY_TABLE if all(p in have for p in r.params) and r.experts in (None, expert_layout)]
  out = [Entry(r.hf, r, None, None, None) for r in rules if not r.stacked]
  rows = {g: {i: k for k, i in enumerate(_group_layers(cfg, g))} for g in ("full", "linear", "all")}
  for i in range(cfg.num_hidden_layers):
    for r in rules:
      if not r.stacked:
        continue
      row = rows[layer_group(r.params[0])].get(i)
      if row is None:  # a full-attention row at a linear layer or the reverse
        continue
      if r.per_expert:
        out.extend(Entry(r.hf.format(i=i, j=j), r, i, row, j) for j in range(cfg.num_experts))
      else:
        out.append(Entry(r.hf.format(i=i), r, i, row, None))
  return out


def _slice_shapes(rule: KeyRule, shapes: dict[str, tuple[int, ...]]) -> list[tuple[int, ...]]:
  """Per-slice codjax shapes of the row's parameters (without the stacked layer axis and, for per-expert rows,
  the expert axis)."""
  cut = int(rule.stacked) + int(rule.per_expert)
  return [tuple(shapes[p][cut:]) for p in rule.params]


def _source_name(name: str, prefix: str) -> str:
  """Text-layout name -> the name in a checkpoint whose decoder lives under ``prefix``."""
  if prefix != TEXT_PREFIX and name.startswith(TEXT_PREFIX):
    return prefix + name[len(TEXT_PREFIX):]
  return name


def _detect_expert_layout(cfg: Qwen35Config, names, prefix: str, path: str) -> str:
  if not cfg.is_moe:
    return SAVE_EXPERT_LAYOUT
  fused = _source_name("model.layers.0.mlp.experts.gate_up_proj", prefix)
  split = _source_name("model.layers.0.mlp.experts.0.gate_proj.weight", prefix)
  if fused in names:
    return "fused"
  if split in names:
    return "per_expert"
  raise ValueError(f"checkpoint {path!r} has no routed-expert weights for layer 0: neither {fused!r} (fused "
                   f"layout) nor {split!r} (per-expert layout)")


# -- loading -----------------------------------------------------------------------------------------------
def from_pretrained(path: str, dtype: str | None = None, mesh: jax.sharding.Mesh | None = None, rules=None,
                    param_dtype: str | None = None, **config_overrides) -> Qwen35:
  """Loads a local Qwen3.5/3.6 checkpoint (text or vision-language layout, dense or MoE) into a ``Qwen35``.

  Arguments as ``codjax.models.checkpoint.from_pretrained`` (which dispatches here on config.json's
  model_type); ``config_overrides`` set codjax compute fields such as ``delta_chunk_size`` or ``moe_impl``.
  """
  overrides = check_load_args(path, dtype, param_dtype, config_overrides)
  cfg = config_from_pretrained_dir(path, **overrides)
  if not isinstance(cfg, Qwen35Config):
    raise ValueError(f"{path!r} is not a Qwen3.5/3.6 checkpoint (model_type of its config.json: "
                     f"{type(cfg).__name__}); use codjax.models.from_pretrained")
  return load_params(path, cfg, mesh, rules)


def load_params(path: str, cfg: Qwen35Config, mesh: jax.sharding.Mesh | None = None, rules=None) -> Qwen35:
  """The checkpoint's tensors placed (optionally sharded over ``mesh``) into a ``Qwen35`` of config ``cfg``."""

  index = SafetensorsIndex(path)
  names = index.names
  prefix = VL_PREFIX if any(n.startswith(VL_PREFIX) for n in names) else TEXT_PREFIX
  vision = sum(n.startswith(VISION_PREFIX) for n in names)
  mtp = sum(n.startswith(MTP_PREFIX) for n in names)
  if vision:
    logger.info("skipping %d vision-tower tensors (%s*): codjax loads the text decoder only", vision, VISION_PREFIX)
  if mtp:
    logger.info("ignoring %d multi-token-prediction tensors (%s*): codjax has no MTP head", mtp, MTP_PREFIX)
  layout = _detect_expert_layout(cfg, names, prefix, path)
  entries = expand_key_table(cfg, layout)
  for e in entries:
    if _source_name(e.hf_name, prefix) not in index:
      raise ValueError(f"checkpoint {path!r} has no tensor {_source_name(e.hf_name, prefix)!r} required by the "
                       "config")
  used = {_source_name(e.hf_name, prefix) for e in entries}
  unused = sorted(n for n in names if n not in used and not n.startswith((VISION_PREFIX, MTP_PREFIX)))
  if unused:
    logger.warning("checkpoint %r: %d tensors not used by the model, e.g. %s", path, len(unused), unused[:5])

  abstract = abstract_model(cfg)
  graphdef, abs_state = nnx.split(abstract)
  shapes = {p: tuple(getattr(abstract, p).shape) for p in model_params(cfg)}
  np_dtype = NP_DTYPES[cfg.param_dtype]
  # param -> row (None for unstacked) -> its entries (one, or one per expert)
  by_param: dict[str, dict[int | None, list[Entry]]] = {}
  for e in entries:
    for p in e.rule.params:
      by_param.setdefault(p, {}).setdefault(e.row, []).append(e)
  cache: dict[str, list[np.ndarray]] = {}

  def converted(e: Entry) -> list[np.ndarray]:
    """The codjax per-slice arrays of one HF tensor (at most one kept on the host)."""
    name = _source_name(e.hf_name, prefix)
    if name in cache:
      return cache[name]
    w = index.get(name)
    slice_shapes = _slice_shapes(e.rule, shapes)
    want = _hf_shape(e.rule.kind, slice_shapes)
    if tuple(w.shape) != want:
      raise ValueError(f"tensor {name!r} has shape {tuple(w.shape)}, expected {want} for this config")
    out = [x.astype(np_dtype) for x in _to_codjax(e.rule.kind, w, slice_shapes)]
    cache.clear()
    cache[name] = out
    return out

  def piece(param: str, row: int | None, rest: tuple) -> np.ndarray:
    """``param[row][rest]`` read from the checkpoint (per-expert rows: only the experts in ``rest[0]``)."""
    group = by_param[param][row]
    rule = group[0].rule
    k = rule.params.index(param)
    if not rule.per_expert:
      return converted(group[0])[k][rest]
    experts = range(*rest[0].indices(len(group)))
    return np.stack([converted(group[j])[k][rest[1:]] for j in experts])

  values = {}
  for param, rows in by_param.items():
    shape = shapes[param]
    sharding = param_sharding(param, shape, mesh, PARAM_LOGICAL_AXES, rules)
    stacked = None not in rows

    def callback(index_tuple, param=param, stacked=stacked, n=shape[0]):
      if not stacked:
        return piece(param, None, tuple(index_tuple))
      lsl, rest = index_tuple[0], tuple(index_tuple[1:])
      return np.stack([piece(param, r, rest) for r in range(*lsl.indices(n))])

    values[param] = jax.make_array_from_callback(shape, sharding, callback)
  for name, value in values.items():
    getattr(abs_state, name).value = value
  return nnx.merge(graphdef, abs_state)


# -- saving ------------------------------------------------------------------------------------------------
def hf_tensors(model: Qwen35, expert_layout: str = SAVE_EXPERT_LAYOUT) -> Iterator[tuple[str, np.ndarray]]:
  """Yields (HF name, host numpy tensor) in the text layout, one tensor at a time; at most one layer's slices
  of the parameters of the current HF tensor are on the host."""
  cfg = model.cfg
  host: dict[tuple[str, int | None], np.ndarray] = {}
  current = None
  for e in expand_key_table(cfg, expert_layout):
    if e.layer != current:
      host.clear()
      current = e.layer
    arrays = []
    for p in e.rule.params:
      key = (p, e.row)
      if key not in host:
        value = getattr(model, p)[...]
        host[key] = np.asarray(jax.device_get(value if e.row is None else value[e.row]))
      arrays.append(host[key] if e.expert is None else host[key][e.expert])
    yield e.hf_name, _to_hf(e.rule.kind, arrays)
