"""Qwen3.5/3.6 checkpoint I/O and numerical parity with transformers' torch fp32 implementation.

Random ``Qwen3_5ForCausalLM`` / ``Qwen3_5MoeForCausalLM`` models (linear and full layers mixed, GQA, partial
rotary, every norm / A_log / dt_bias / conv weight randomised) are saved by transformers and loaded by codjax.
"""

import json
import logging
import os

import jax
import numpy as np
import pytest
import torch
from flax import nnx
from jax.sharding import PartitionSpec as P
from safetensors.numpy import load_file, save_file
from transformers import (AutoModelForCausalLM, Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig,
                          Qwen3_5TextConfig)

from codjax.models import (Qwen35, abstract_model, config_from_hf_dict, from_pretrained, hf_tensors, preset,
                           save_pretrained)
from codjax.models import checkpoint_qwen3_5 as ckq
from codjax.models.qwen3_5 import PARAM_LOGICAL_AXES
from codjax.parallel import make_mesh

pytestmark = pytest.mark.slow  # transformers reference models and a few XLA compiles (~40 s on 2 cores)

# dense: 3 linear + 1 full as released (one scanned block of 4 layers); MoE: alternating (a scan over 2 blocks)
LAYERS = {"dense": ["linear_attention", "full_attention", "linear_attention", "linear_attention"],
          "moe": ["linear_attention", "full_attention", "linear_attention", "full_attention"]}
VOCAB, T, B = 300, 80, 4
# codjax compute overrides per kind: the MoE model runs the DeltaNet in chunks of 16 (five chunks for T = 80),
# the dense one in the default chunks of 64 (T = 80 crosses one chunk boundary)
OVERRIDES = {"dense": {}, "moe": {"delta_chunk_size": 16}}


def _hf_config(kind: str):
  common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                head_dim=32, layer_types=LAYERS[kind], linear_conv_kernel_dim=4, linear_key_head_dim=16,
                linear_value_head_dim=24, linear_num_key_heads=2, linear_num_value_heads=4, rms_norm_eps=1e-6,
                max_position_embeddings=512, initializer_range=0.04)
  if kind == "dense":
    cfg = Qwen3_5TextConfig(**common, intermediate_size=96, tie_word_embeddings=True,
                            rope_parameters={"rope_type": "default", "rope_theta": 10_000.0,
                                             "partial_rotary_factor": 0.25})
  else:
    cfg = Qwen3_5MoeTextConfig(**common, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=32,
                               shared_expert_intermediate_size=48, tie_word_embeddings=False,
                               rope_parameters={"rope_type": "default", "rope_theta": 50_000.0,
                                                "partial_rotary_factor": 0.5})
  cfg._attn_implementation = "eager"
  return cfg


def _randomize(model, seed: int):
  """HF's init leaves the (1 + w) norms at zero, the gated norm at one, dt_bias at one: randomise them all."""
  g = torch.Generator().manual_seed(seed)
  rnd = lambda p: torch.randn(p.shape, generator=g)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("A_log"):
        p.copy_(torch.log(0.5 + 3.5 * torch.rand(p.shape, generator=g)))
      elif name.endswith("dt_bias"):
        p.copy_(0.5 * rnd(p))
      elif name.endswith("linear_attn.norm.weight"):
        p.copy_(1.0 + 0.3 * rnd(p))
      elif p.ndim == 1:  # every (1 + w) RMSNorm: layer norms, q/k norms, final norm
        p.copy_(0.3 * rnd(p))
      elif "conv1d" in name:
        p.copy_(0.4 * rnd(p))
      elif name.endswith("mlp.gate.weight"):  # router
        p.copy_(0.3 * rnd(p))


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
  """kind -> (transformers model, its save_pretrained directory)."""
  out = {}
  for seed, kind in enumerate(("dense", "moe")):
    torch.manual_seed(seed)
    cls = Qwen3_5ForCausalLM if kind == "dense" else Qwen3_5MoeForCausalLM
    model = cls(_hf_config(kind)).eval()
    _randomize(model, seed + 10)
    path = tmp_path_factory.mktemp(kind) / "hf"
    model.save_pretrained(path)
    out[kind] = (model, str(path))
  return out


_JIT = {}


def _logits(model, ids, positions=None, segment_ids=None) -> np.ndarray:
  """The codjax model's logits under one jit per (config, call form); XLA compiles dominate this file's time, so
  tests reuse two forms: [1, T] without segment ids and [B, T] with them."""
  graphdef, state = nnx.split(model)
  key = (model.cfg, positions is None)
  if key not in _JIT:
    _JIT[key] = jax.jit(lambda s, i, p, sg: nnx.merge(graphdef, s)(i, p, sg))
  return np.asarray(_JIT[key](state, np.asarray(ids, np.int32), positions, segment_ids))


def _hf_logits(model, ids, attention_mask=None, position_ids=None) -> np.ndarray:
  with torch.no_grad():
    kw = {}
    if attention_mask is not None:
      kw["attention_mask"] = torch.tensor(attention_mask)
    if position_ids is not None:
      kw["position_ids"] = torch.tensor(position_ids)
    return model(torch.tensor(ids), **kw).logits.numpy()


def _load(kind, path, **kw):
  return from_pretrained(path, **OVERRIDES[kind], **kw)


def _params(model) -> dict[str, np.ndarray]:
  return {p: np.asarray(jax.device_get(getattr(model, p)[...])) for p in ckq.model_params(model.cfg)}


def _assert_same_params(a, b):
  pa, pb = _params(a), _params(b)
  assert set(pa) == set(pb)
  for name in pa:
    assert pa[name].dtype == pb[name].dtype and np.array_equal(pa[name], pb[name]), name


def _load_cfg(hf):
  """codjax's config of a transformers model (its config.json dict)."""
  return config_from_hf_dict(hf.config.to_dict())


# -- key table -----------------------------------------------------------------------------------------------
def test_key_table_covers_every_parameter_and_matches_transformers_shapes(ckpts):
  for kind, (hf, _) in ckpts.items():
    ours = abstract_model(_load_cfg(hf))
    entries = ckq.expand_key_table(ours.cfg)
    names = [e.hf_name for e in entries]
    assert len(names) == len(set(names))
    hf_shapes = {k: tuple(v.shape) for k, v in hf.state_dict().items()}
    if ours.cfg.tie_word_embeddings:
      hf_shapes.pop("lm_head.weight", None)
    # HF holds experts fused in memory and saves them per expert (what hf_tensors writes)
    saved = load_file(os.path.join(ckpts[kind][1], "model.safetensors"))
    assert set(names) == set(saved), kind
    shapes = {p: tuple(getattr(ours, p).shape) for p in ckq.model_params(ours.cfg)}
    for e in entries:
      assert ckq._hf_shape(e.rule.kind, ckq._slice_shapes(e.rule, shapes)) == saved[e.hf_name].shape, e.hf_name
    fused = [e for e in ckq.expand_key_table(ours.cfg, "fused") if e.rule.experts]
    for e in fused:
      assert ckq._hf_shape(e.rule.kind, ckq._slice_shapes(e.rule, shapes)) == hf_shapes[e.hf_name], e.hf_name
    assert {p for e in entries for p in e.rule.params} == {n for n in PARAM_LOGICAL_AXES if hasattr(ours, n)}
  # layer kinds other than 3 linear + 1 full, tied and untied
  for cfg in (preset("tiny-hybrid"), preset("tiny-hybrid-moe", tie_word_embeddings=False),
              preset("tiny-hybrid", layer_types=("full_attention",) * 4),
              preset("tiny-hybrid-moe", layer_types=("linear_attention",) * 4)):
    model = abstract_model(cfg)
    params = {p for e in ckq.expand_key_table(cfg) for p in e.rule.params}
    assert params == ckq.model_params(cfg) == {n for n in PARAM_LOGICAL_AXES if hasattr(model, n)}


# -- logits ------------------------------------------------------------------------------------------------
def _full_rows(ids):
  """Segment ids / positions of rows that each hold one sequence of T real tokens."""
  n = ids.shape[0]
  return np.broadcast_to(np.arange(T, dtype=np.int32), (n, T)), np.ones((n, T), np.int32)


@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_logits_match_transformers_plain_padded_and_packed(ckpts, kind):
  hf, path = ckpts[kind]
  ours = _load(kind, path)
  assert isinstance(ours, Qwen35) and ours.cfg.is_moe == (kind == "moe")
  rng = np.random.default_rng(0)

  # row 0 one full sequence, row 1 left-padded, row 2 right-padded, row 3 two packed sequences; pads hold
  # random tokens
  n_left, n_right, n_a = 57, 61, 30
  ids = rng.integers(0, VOCAB, (B, T))
  mask = np.ones((B, T), np.int32)
  mask[1, :T - n_left] = 0
  mask[2, n_right:] = 0
  seg = mask.copy()
  seg[3, n_a:] = 2
  pos = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
  pos[3] = np.concatenate([np.arange(n_a), np.arange(T - n_a)])
  got = _logits(ours, ids, pos, seg)

  assert np.abs(got[0] - _hf_logits(hf, ids[:1])[0]).max() <= 1e-4
  ref_pad = _hf_logits(hf, ids[1:3], attention_mask=mask[1:3], position_ids=pos[1:3])
  for b in (1, 2):
    real = mask[b] == 1
    assert np.abs(got[b][real] - ref_pad[b - 1][real]).max() <= 1e-4, b
  ref_a = _hf_logits(hf, ids[3:, :n_a])[0]
  ref_b = _hf_logits(hf, ids[3:, n_a:])[0]
  assert np.abs(got[3] - np.concatenate([ref_a, ref_b])).max() <= 1e-4
  # the second sequence really differs from what it would be unpacked-after-the-first (no leak)
  assert np.abs(_hf_logits(hf, ids[3:])[0, n_a:] - ref_b).max() > 1e-2

  if kind == "moe":  # the path without segment ids (plain causal attention, one DeltaNet segment)
    assert np.abs(_logits(ours, ids[:1]) - _hf_logits(hf, ids[:1])).max() <= 1e-4


# -- round trips -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_round_trip_through_transformers_is_bit_exact(ckpts, tmp_path, kind):
  hf, path = ckpts[kind]
  ours = _load(kind, path)
  out = str(tmp_path / "ours")
  save_pretrained(ours, out)
  # the codjax-written file holds exactly transformers' tensors
  a = load_file(os.path.join(path, "model.safetensors"))
  b = load_file(os.path.join(out, "model.safetensors"))
  assert set(a) == set(b)
  for k in a:
    assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
  assert [n for n, _ in hf_tensors(ours)] == [e.hf_name for e in ckq.expand_key_table(ours.cfg)]
  # transformers loads it and computes the same logits
  hf2 = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
  assert type(hf2) is type(hf)
  ids = np.random.default_rng(1).integers(0, VOCAB, (B, T))
  ref = _hf_logits(hf2, ids)
  assert np.array_equal(ref, _hf_logits(hf, ids))
  assert np.abs(_logits(ours, ids, *_full_rows(ids)) - ref).max() <= 1e-4
  # and codjax reads its own checkpoint back bit-exactly
  _assert_same_params(ours, _load(kind, out))


def test_fused_expert_layout_loads(ckpts, tmp_path):
  hf, path = ckpts["moe"]
  tensors = load_file(os.path.join(path, "model.safetensors"))
  cfg = _load_cfg(hf)
  fused = {}
  for k, v in tensors.items():
    if ".mlp.experts." not in k:
      fused[k] = v
  for i in range(cfg.num_hidden_layers):
    ex = lambda j, w: tensors[f"model.layers.{i}.mlp.experts.{j}.{w}_proj.weight"]
    e = range(cfg.num_experts)
    fused[f"model.layers.{i}.mlp.experts.gate_up_proj"] = np.stack(
        [np.concatenate([ex(j, "gate"), ex(j, "up")]) for j in e])
    fused[f"model.layers.{i}.mlp.experts.down_proj"] = np.stack([ex(j, "down") for j in e])
  d = tmp_path / "fused"
  d.mkdir()
  save_file(fused, str(d / "model.safetensors"), metadata={"format": "pt"})
  (d / "config.json").write_text(open(os.path.join(path, "config.json")).read())
  _assert_same_params(_load("moe", path), _load("moe", str(d)))
  # transformers reads the fused layout the same way (the layout is HF's, not ours)
  hf2 = AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32, attn_implementation="eager").eval()
  ids = np.random.default_rng(2).integers(0, VOCAB, (1, 12))
  assert np.array_equal(_hf_logits(hf2, ids), _hf_logits(hf, ids))


@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_vision_language_layout_loads_with_log_lines(ckpts, tmp_path, caplog, kind):
  hf, path = ckpts[kind]
  tensors = load_file(os.path.join(path, "model.safetensors"))
  vl = {(k.replace("model.", "model.language_model.", 1) if k.startswith("model.") else k): v
        for k, v in tensors.items()}
  vl["model.visual.blocks.0.attn.qkv.weight"] = np.ones((12, 4), np.float32)
  vl["mtp.fc.weight"] = np.ones((64, 128), np.float32)
  names = sorted(vl)
  d = tmp_path / "vl"
  d.mkdir()
  # a two-file checkpoint with an index, as released checkpoints are
  halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
            "model-00002-of-00002.safetensors": names[len(names) // 2:]}
  for fname, keys in halves.items():
    save_file({k: vl[k] for k in keys}, str(d / fname), metadata={"format": "pt"})
  json.dump({"metadata": {}, "weight_map": {k: f for f, ks in halves.items() for k in ks}},
            open(d / "model.safetensors.index.json", "w"))
  text = json.load(open(os.path.join(path, "config.json")))
  arch = "Qwen3_5MoeForConditionalGeneration" if kind == "moe" else "Qwen3_5ForConditionalGeneration"
  top = {"model_type": "qwen3_5_moe" if kind == "moe" else "qwen3_5", "architectures": [arch],
         "text_config": text, "vision_config": {"depth": 1, "hidden_size": 4},
         "tie_word_embeddings": text["tie_word_embeddings"]}
  json.dump(top, open(d / "config.json", "w"))
  with caplog.at_level(logging.INFO, logger=ckq.__name__):
    loaded = _load(kind, str(d))
  msgs = [r.getMessage() for r in caplog.records if r.name == ckq.__name__]
  assert sum("skipping 1 vision-tower tensors" in m for m in msgs) == 1, msgs
  assert sum("ignoring 1 multi-token-prediction tensors" in m for m in msgs) == 1, msgs
  assert not [r for r in caplog.records if r.name == ckq.__name__ and r.levelno >= logging.WARNING]
  _assert_same_params(_load(kind, path), loaded)


# -- sharded loading -----------------------------------------------------------------------------------------
def test_sharded_load_equals_unsharded(ckpts):
  if jax.device_count() < 8:
    pytest.fail("tests need XLA_FLAGS=--xla_force_host_platform_device_count=8 (set in tests/conftest.py)")
  _, path = ckpts["moe"]
  mesh = make_mesh(data=1, fsdp=2, tensor=2, expert=2)
  sharded = _load("moe", path, mesh=mesh)
  plain = _load("moe", path)
  _assert_same_params(plain, sharded)
  lv = sharded.lv_rdus[...]  # [R, D, Hv, dv]: D over fsdp, value heads over tensor
  assert lv.sharding.spec == P(None, "fsdp", "tensor", None)
  assert len(lv.addressable_shards) == 8 and lv.addressable_shards[0].data.shape == (2, 32, 2, 24)
  eg = sharded.egate_ledf[...]  # [L, E, D, F]: experts over expert, D over fsdp, F over tensor
  assert eg.sharding.spec == P(None, "expert", "fsdp", "tensor")
  assert eg.addressable_shards[0].data.shape == (4, 3, 32, 16)
  assert sharded.q_adnh[...].sharding.spec == P(None, "fsdp", "tensor", None)
  assert sharded.conv_v_rusw[...].sharding.spec == P(None, "tensor", None, None)


# -- errors --------------------------------------------------------------------------------------------------
@pytest.fixture
def moe_copy(ckpts, tmp_path):
  _, path = ckpts["moe"]
  d = tmp_path / "ck"
  d.mkdir()
  for f in ("model.safetensors", "config.json"):
    (d / f).write_bytes(open(os.path.join(path, f), "rb").read())
  return d


def _rewrite(d, fn):
  tensors = load_file(str(d / "model.safetensors"))
  fn(tensors)
  save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})


def test_missing_tensor_is_a_clear_error(moe_copy):
  _rewrite(moe_copy, lambda t: t.pop("model.layers.2.linear_attn.conv1d.weight"))
  with pytest.raises(ValueError, match=r"has no tensor 'model.layers.2.linear_attn.conv1d.weight'"):
    from_pretrained(str(moe_copy))


def test_missing_experts_is_a_clear_error(moe_copy):
  _rewrite(moe_copy, lambda t: [t.pop(k) for k in list(t) if ".experts." in k])
  with pytest.raises(ValueError, match="routed-expert"):
    from_pretrained(str(moe_copy))


def test_wrong_shape_is_a_clear_error(moe_copy):
  def shrink(t):
    k = "model.layers.1.self_attn.q_proj.weight"
    t[k] = t[k][:-32]
  _rewrite(moe_copy, shrink)
  with pytest.raises(ValueError, match=r"'model.layers.1.self_attn.q_proj.weight' has shape \(224, 64\), "
                                       r"expected \(256, 64\)"):
    from_pretrained(str(moe_copy))


def test_config_mismatch_and_unknown_model_type_are_clear_errors(moe_copy):
  cfg = json.load(open(moe_copy / "config.json"))
  json.dump({**cfg, "linear_value_head_dim": 16}, open(moe_copy / "config.json", "w"))
  with pytest.raises(ValueError, match="in_proj_qkv.weight' has shape"):
    from_pretrained(str(moe_copy))
  json.dump({**cfg, "model_type": "qwen3_next"}, open(moe_copy / "config.json", "w"))
  with pytest.raises(ValueError, match="unsupported model_type 'qwen3_next'"):
    from_pretrained(str(moe_copy))
  with pytest.raises(ValueError, match="not a Qwen3.5"):
    json.dump({**cfg, "model_type": "qwen3", "intermediate_size": 96}, open(moe_copy / "config.json", "w"))
    ckq.from_pretrained(str(moe_copy))


def test_truncated_file_is_a_clear_error(moe_copy):
  data = (moe_copy / "model.safetensors").read_bytes()
  (moe_copy / "model.safetensors").write_bytes(data[: len(data) // 2])
  with pytest.raises(ValueError, match="truncated or corrupt"):
    from_pretrained(str(moe_copy))
