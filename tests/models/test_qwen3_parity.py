"""Numerical proof that codjax's Qwen3 is the Hugging Face Qwen3 (torch fp32 reference)."""

import numpy as np
import jax.numpy as jnp
import pytest
import torch
from transformers import Qwen3Config as HFConfig
from transformers import Qwen3ForCausalLM

from codjax.models import from_pretrained

pytestmark = pytest.mark.slow  # numerics against transformers (~20 s)

CASES = {
    # name: (heads, kv_heads, head_dim, hidden, tied, rope_theta)
    "mha_tied": (4, 4, 32, 128, True, 10_000.0),
    "gqa_untied": (4, 2, 32, 128, False, 1_000_000.0),
    "mqa_headdim_ne_hidden_over_heads": (4, 1, 48, 96, False, 12_345.0),
}


def _hf_model(tmp_path, heads, kv, head_dim, hidden, tied, theta, seed=0):
  torch.manual_seed(seed)
  cfg = HFConfig(vocab_size=300, hidden_size=hidden, intermediate_size=2 * hidden + 8, num_hidden_layers=2,
                 num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim, rope_theta=theta,
                 max_position_embeddings=256, tie_word_embeddings=tied, rms_norm_eps=1e-6)
  model = Qwen3ForCausalLM(cfg).eval()
  # non-trivial norm weights so q_norm/k_norm/RMSNorm scaling is exercised
  with torch.no_grad():
    for name, p in model.named_parameters():
      if "norm" in name:
        p.copy_(1.0 + 0.2 * torch.randn_like(p))
  path = tmp_path / "hf"
  model.save_pretrained(path, safe_serialization=True)
  return model, str(path)


@pytest.mark.parametrize("case", sorted(CASES))
def test_logit_parity_with_transformers(tmp_path, case):
  model, path = _hf_model(tmp_path, *CASES[case])
  ours = from_pretrained(path, dtype="float32")
  rng = np.random.default_rng(0)
  ids = rng.integers(0, 300, size=(3, 17))
  with torch.no_grad():
    ref = model(torch.tensor(ids)).logits.numpy()
  got = np.asarray(ours(jnp.asarray(ids)))
  assert np.abs(ref - got).max() <= 1e-4


@pytest.mark.parametrize("side", ["left", "right"])
def test_logit_parity_with_padding(tmp_path, side):
  model, path = _hf_model(tmp_path, *CASES["gqa_untied"])
  ours = from_pretrained(path, dtype="float32")
  rng = np.random.default_rng(1)
  lengths = [13, 7, 10]
  t = max(lengths)
  ids = np.zeros((3, t), np.int64)
  attn = np.zeros((3, t), np.int64)
  for b, n in enumerate(lengths):
    sl = slice(t - n, t) if side == "left" else slice(0, n)
    ids[b, sl] = rng.integers(1, 300, n)
    attn[b, sl] = 1
  pos = np.clip(np.cumsum(attn, axis=1) - 1, 0, None)
  with torch.no_grad():
    ref = model(torch.tensor(ids), attention_mask=torch.tensor(attn), position_ids=torch.tensor(pos)).logits.numpy()
  got = np.asarray(ours(jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(attn)))
  valid = attn.astype(bool)
  assert np.abs(ref[valid] - got[valid]).max() <= 1e-4


def test_packed_segments_equal_separate_sequences(tmp_path):
  model, path = _hf_model(tmp_path, *CASES["gqa_untied"])
  ours = from_pretrained(path, dtype="float32")
  rng = np.random.default_rng(2)
  a, b = rng.integers(0, 300, 9), rng.integers(0, 300, 6)
  packed = np.concatenate([a, b, [0, 0]])[None]
  seg = np.array([[1] * 9 + [2] * 6 + [0, 0]])
  pos = np.array([list(range(9)) + list(range(6)) + [0, 0]])
  got = np.asarray(ours(jnp.asarray(packed), jnp.asarray(pos), jnp.asarray(seg)))[0]
  with torch.no_grad():
    ra = model(torch.tensor(a[None])).logits.numpy()[0]
    rb = model(torch.tensor(b[None])).logits.numpy()[0]
  assert np.abs(got[:9] - ra).max() <= 1e-4
  assert np.abs(got[9:15] - rb).max() <= 1e-4


def test_bf16_forward_close_to_fp32(tmp_path):
  _, path = _hf_model(tmp_path, *CASES["gqa_untied"])
  ids = jnp.asarray(np.random.default_rng(3).integers(0, 300, (2, 12)))
  f32 = np.asarray(from_pretrained(path, dtype="float32")(ids))
  b16 = from_pretrained(path, dtype="bfloat16")
  assert b16.q_ldnh[...].dtype == jnp.bfloat16
  out = np.asarray(b16(ids))
  assert out.dtype == np.float32
  assert np.abs(out - f32).max() < 0.1 * np.abs(f32).max()
