"""The Qwen3.6 presets against the published config.json files and parameter counts.

Independent references: the ``config.json`` text (as published, parsed by ``config_from_hf_dict``), transformers'
own ``Qwen3_5*ForCausalLM`` / ``Qwen3_5*ForConditionalGeneration`` built on the meta device (parameter counts
without memory), and the published sizes:

* Qwen3.6-27B: ``model.safetensors.index.json`` total_size 55.56 GB in bfloat16 (about 27.78e9 parameters; the
  model card says "27B"). The checkpoint holds the text decoder, the vision tower (27 ViT blocks of width 1152
  and a merger into 5120) and one multi-token-prediction (MTP) layer; codjax's decoder is the first of the three,
  so text = 27.78e9 - vision - MTP = 26.90e9.
* Qwen3.6-35B-A3B: "35B in total and 3B activated" (model card); text decoder 34.66e9 + vision 0.45e9 + MTP
  0.84e9 = 35.95e9, and 3.45e9 parameters per token (top-8 of 256 experts, the embedding and head included).
"""

import pytest

from codjax.models.config import (ALL_PRESETS, HYBRID_PRESETS, Qwen35Config, config_from_hf_dict, preset)

_LAYERS_27B = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 16

# text_config of Qwen/Qwen3.6-27B's config.json as published (w32zhong/qwen3.6-fp8-config-fix, config.json, a copy
# of Qwen/Qwen3.6-27B-FP8's; the quantization block and the vision_config are left out here)
PUBLISHED_27B = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "tie_word_embeddings": False,
    "image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053,
    "vision_end_token_id": 248054,
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "bos_token_id": 248044,
        "dtype": "bfloat16", "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256,
        "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 17408,
        "layer_types": _LAYERS_27B, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
        "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_value_head_dim": 128,
        "mamba_ssm_dtype": "float32", "max_position_embeddings": 262144, "model_type": "qwen3_5_text",
        "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False, "num_attention_heads": 24,
        "num_hidden_layers": 64, "num_key_value_heads": 4, "output_gate_type": "swish", "pad_token_id": None,
        "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-06,
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
                            "rope_theta": 10000000, "rope_type": "default"},
        "tie_word_embeddings": False, "use_cache": True, "vocab_size": 248320},
}
VISION_27B = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, in_channels=3, patch_size=16,
                  spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=5120, num_position_embeddings=2304)

# text_config of Qwen/Qwen3.6-35B-A3B's config.json (values as listed by the HF-snapshot inventory found with the
# search tool and THUDM/slime scripts/models/qwen3.5-35B-A3B.sh; full_attention_interval instead of layer_types)
PUBLISHED_35B = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen3_5_moe_text", "attn_output_gate": True, "bos_token_id": 248044, "eos_token_id": 248044,
        "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
        "linear_num_value_heads": 32, "linear_value_head_dim": 128, "max_position_embeddings": 262144,
        "moe_intermediate_size": 512, "mtp_num_hidden_layers": 1, "num_attention_heads": 16, "num_experts": 256,
        "num_experts_per_tok": 8, "num_hidden_layers": 40, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
                            "rope_theta": 10000000, "rope_type": "default"},
        "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
        "vocab_size": 248320},
}


def _architecture(cfg: Qwen35Config) -> dict:
  skip = {"param_dtype", "dtype", "attention_impl", "remat", "scan_layers", "delta_chunk_size", "moe_impl"}
  return {k: v for k, v in cfg.__dict__.items() if k not in skip}


@pytest.mark.parametrize("name,published", [("qwen3.6-27b", PUBLISHED_27B), ("qwen3.6-35b-a3b", PUBLISHED_35B)])
def test_presets_equal_the_published_config(name, published):
  assert name in HYBRID_PRESETS and name in ALL_PRESETS
  cfg = preset(name)
  assert isinstance(cfg, Qwen35Config)
  assert _architecture(config_from_hf_dict(published)) == _architecture(cfg)
  assert cfg.model_type == published["model_type"]
  assert cfg.layer_period == 4 and cfg.full_layers == tuple(range(3, cfg.num_hidden_layers, 4))
  assert cfg.rotary_dim == 64  # "Rotary Position Embedding Dimension: 64" (model card)


def _hf_text_model(cfg: Qwen35Config):
  import torch
  from transformers import (Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig, Qwen3_5TextConfig)

  d = {k: v for k, v in cfg.to_hf_dict().items() if k not in ("architectures", "model_type", "torch_dtype")}
  with torch.device("meta"):
    return (Qwen3_5MoeForCausalLM(Qwen3_5MoeTextConfig(**d)) if cfg.is_moe
            else Qwen3_5ForCausalLM(Qwen3_5TextConfig(**d)))


def _vision_params(v: dict) -> int:
  """Parameters of the Qwen3.5 vision tower (ViT blocks with LayerNorm + biased linears, patch merger)."""
  c, h, f = v["in_channels"], v["hidden_size"], v["intermediate_size"]
  patch = c * v["temporal_patch_size"] * v["patch_size"] ** 2 * h + h
  pos = v["num_position_embeddings"] * h
  block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h)
  m = h * v["spatial_merge_size"] ** 2
  merger = 2 * h + (m * m + m) + (m * v["out_hidden_size"] + v["out_hidden_size"])
  return patch + pos + v["depth"] * block + merger


def _mtp_params(cfg: Qwen35Config) -> int:
  """One MTP layer: fc [2D -> D], two input norms, a full-attention decoder layer with the model's MLP, a norm."""
  d, n, k, h = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
  attn = d * 2 * n * h + 2 * d * k * h + n * h * d + 2 * h
  if cfg.is_moe:
    e, fm, fs = cfg.num_experts, cfg.moe_intermediate_size, cfg.shared_expert_intermediate_size
    mlp = d * e + e * 3 * d * fm + 3 * d * fs + d
  else:
    mlp = 3 * d * cfg.intermediate_size
  return 2 * d * d + 2 * d + attn + mlp + 2 * d + d


@pytest.mark.slow
def test_27b_text_parameters_match_transformers_and_the_published_checkpoint_size():
  cfg = preset("qwen3.6-27b")
  hf = sum(p.numel() for p in _hf_text_model(cfg).parameters())
  assert cfg.num_params() == hf == 26_895_998_464
  vision = _vision_params(VISION_27B)
  # the vision tower as transformers builds it (meta device) agrees with the hand count
  import torch
  from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

  with torch.device("meta"):
    full = Qwen3_5ForConditionalGeneration(Qwen3_5Config(text_config=PUBLISHED_27B["text_config"],
                                                         vision_config=VISION_27B))
  assert sum(p.numel() for p in full.parameters()) == hf + vision
  total = cfg.num_params() + vision + _mtp_params(cfg)  # what the safetensors hold
  assert abs(total * 2 / 1e9 - 55.56) < 0.005  # bf16 bytes: model.safetensors.index.json total_size 55.56 GB
  assert 26.8e9 < cfg.num_params() < 27.0e9 and cfg.num_active_params() == cfg.num_params()


@pytest.mark.slow
def test_35b_a3b_total_and_active_parameters():
  cfg = preset("qwen3.6-35b-a3b")
  hf = sum(p.numel() for p in _hf_text_model(cfg).parameters())
  assert cfg.num_params() == hf == 34_660_610_688
  vision = _vision_params({**VISION_27B, "out_hidden_size": 2048})
  total = cfg.num_params() + vision + _mtp_params(cfg)
  assert 35.0e9 < total < 36.0e9  # "35B in total"
  # per token: everything except 248 of the 256 experts in each of the 40 layers
  d, f = cfg.hidden_size, cfg.moe_intermediate_size
  active = cfg.num_params() - 40 * (256 - 8) * 3 * d * f
  assert cfg.num_active_params() == active == 3_454_988_928
  # "3B activated": 3.45e9 with the untied embedding and head (2 x 248320 x 2048 = 1.02e9), 2.44e9 without
  assert 2.9e9 < active < 3.5e9 and 2.4e9 < active - 2 * 248320 * 2048 < 2.5e9


def test_hybrid_presets_keep_the_layer_pattern_at_another_depth():
  cfg = preset("qwen3.6-35b-a3b", num_hidden_layers=8)
  assert cfg.full_layers == (3, 7) and cfg.is_moe and cfg.layer_period == 4
  with pytest.raises(ValueError, match="layer_types"):
    preset("qwen3.6-27b", num_hidden_layers=8, layer_types=("linear_attention",) * 4)
