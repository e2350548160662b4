"""HF checkpoint round trips and clear errors for bad checkpoints."""

import json
import os

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM
from transformers import Qwen3Config as HFConfig
from transformers import Qwen3ForCausalLM

from codjax.models import KEY_TABLE, abstract_model, from_pretrained, init_model, preset, save_pretrained
from codjax.models.checkpoint import expand_key_table
from codjax.models.qwen3 import PARAM_LOGICAL_AXES


def _ids(n=2, t=11):
  return np.random.default_rng(0).integers(0, 512, (n, t))


@pytest.mark.parametrize("tied", [True, False])
def test_save_pretrained_loads_in_transformers(tmp_path, tied):
  model = init_model(preset("tiny", tie_word_embeddings=tied), seed=5)
  save_pretrained(model, str(tmp_path / "ck"))
  hf = AutoModelForCausalLM.from_pretrained(str(tmp_path / "ck"), dtype=torch.float32).eval()
  ids = _ids()
  with torch.no_grad():
    ref = hf(torch.tensor(ids)).logits.numpy()
  np.testing.assert_allclose(np.asarray(model(jnp.asarray(ids))), ref, atol=1e-4)


def test_transformers_saved_loads_and_round_trip_is_bit_exact(tmp_path):
  torch.manual_seed(0)
  cfg = HFConfig(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, tie_word_embeddings=False, rope_theta=5e5)
  hf = Qwen3ForCausalLM(cfg).eval()
  hf.save_pretrained(tmp_path / "hf")
  ours = from_pretrained(str(tmp_path / "hf"))
  ids = _ids()
  with torch.no_grad():
    ref = hf(torch.tensor(ids)).logits.numpy()
  np.testing.assert_allclose(np.asarray(ours(jnp.asarray(ids))), ref, atol=1e-4)
  save_pretrained(ours, str(tmp_path / "ours"))
  a = load_file(str(tmp_path / "hf" / "model.safetensors"))
  b = load_file(str(tmp_path / "ours" / "model.safetensors"))
  assert set(a) == set(b)
  for k in a:
    assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
  assert json.load(open(tmp_path / "ours" / "config.json"))["rope_theta"] == 5e5


def test_sharded_index_checkpoint_round_trip(tmp_path):
  model = init_model(preset("tiny", tie_word_embeddings=False), seed=2)
  save_pretrained(model, str(tmp_path / "ck"), max_shard_bytes=200_000)
  files = os.listdir(tmp_path / "ck")
  assert "model.safetensors.index.json" in files and sum(f.endswith(".safetensors") for f in files) > 1
  loaded = from_pretrained(str(tmp_path / "ck"))
  for name in PARAM_LOGICAL_AXES:
    if hasattr(model, name):
      assert np.array_equal(np.asarray(getattr(model, name)[...]), np.asarray(getattr(loaded, name)[...])), name
  hf = AutoModelForCausalLM.from_pretrained(str(tmp_path / "ck"), dtype=torch.float32)
  with torch.no_grad():
    ref = hf(torch.tensor(_ids())).logits.numpy()
  np.testing.assert_allclose(np.asarray(loaded(jnp.asarray(_ids()))), ref, atol=1e-4)


def test_key_table_matches_model_shapes():
  for tied in (True, False):
    cfg = preset("tiny", tie_word_embeddings=tied)
    abstract = abstract_model(cfg)
    params = {r.param for _, r, _ in expand_key_table(cfg)}
    model_params = {n for n in PARAM_LOGICAL_AXES if hasattr(abstract, n)}
    assert params == model_params
  assert len({r.hf for r in KEY_TABLE}) == len(KEY_TABLE)


@pytest.fixture
def saved(tmp_path):
  model = init_model(preset("tiny", tie_word_embeddings=False), seed=0)
  save_pretrained(model, str(tmp_path / "ck"), max_shard_bytes=300_000)
  return tmp_path / "ck"


def test_missing_shard_is_a_clear_error(saved):
  shard = sorted(f for f in os.listdir(saved) if f.endswith(".safetensors"))[-1]
  os.remove(saved / shard)
  with pytest.raises(FileNotFoundError, match="missing shard"):
    from_pretrained(str(saved))


def test_truncated_safetensors_is_a_clear_error(saved):
  shard = sorted(f for f in os.listdir(saved) if f.endswith(".safetensors"))[0]
  data = (saved / shard).read_bytes()
  (saved / shard).write_bytes(data[: len(data) // 2])
  with pytest.raises(ValueError, match="truncated or corrupt"):
    from_pretrained(str(saved))


def test_unknown_architecture_and_rope_scaling_are_clear_errors(saved):
  cfg = json.load(open(saved / "config.json"))
  json.dump({**cfg, "model_type": "llama"}, open(saved / "config.json", "w"))
  with pytest.raises(ValueError, match="unsupported model_type 'llama'"):
    from_pretrained(str(saved))
  json.dump({**cfg, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, open(saved / "config.json", "w"))
  with pytest.raises(ValueError, match="unsupported rope_scaling"):
    from_pretrained(str(saved))


def test_wrong_shape_and_missing_dir_are_clear_errors(saved, tmp_path):
  cfg = json.load(open(saved / "config.json"))
  json.dump({**cfg, "intermediate_size": cfg["intermediate_size"] + 1}, open(saved / "config.json", "w"))
  with pytest.raises(ValueError, match="has shape"):
    from_pretrained(str(saved))
  with pytest.raises(FileNotFoundError):
    from_pretrained(str(tmp_path / "nope"))
  os.remove(saved / "config.json")
  with pytest.raises(FileNotFoundError, match="config.json"):
    from_pretrained(str(saved))
