"""Trainer.export_hf after a train step: every tensor of the written safetensors equals the trainer's parameter
under the HF key table (codjax/models/checkpoint.py, restated here): HF linear weights are [out, in], codjax
keeps einsum layouts, layer params are stacked on a leading axis:

  model.embed_tokens.weight                 = embed_vd                          [V, D]
  model.norm.weight                         = final_norm_d                      [D]
  lm_head.weight                            = lm_head_dv^T                      [V, D]   (untied only)
  model.layers.{i}.input_layernorm.weight   = attn_norm_ld[i]                   [D]
  model.layers.{i}.self_attn.{q,k,v}_proj   = x_ld?h[i] as [D, X*H], transposed [X*H, D] (row x*H + h)
  model.layers.{i}.self_attn.o_proj.weight  = o_lnhd[i] as [N*H, D], transposed [D, N*H]
  model.layers.{i}.self_attn.{q,k}_norm     = {q,k}_norm_lh[i]                  [H]
  model.layers.{i}.post_attention_layernorm = mlp_norm_ld[i]                    [D]
  model.layers.{i}.mlp.{gate,up}_proj       = {gate,up}_ldf[i]^T                [F, D]
  model.layers.{i}.mlp.down_proj.weight     = down_lfd[i]^T                     [D, F]

and transformers, loading the export, computes the trainer model's logits.
"""

import dataclasses
import os

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file

from codjax.models import from_pretrained, init_model, save_pretrained
from codjax.models.tokenizer import load_tokenizer
from codjax.train.loop import Trainer

pytestmark = pytest.mark.slow  # a trainer step and a transformers forward (~25 s)

LAYERS = 2


@pytest.fixture(scope="module")
def untied_model_dir(tiny_train_model, tmp_path_factory):
  """The trainer tests' tiny model and tokenizer, with an untied output head and two layers (so the
  lm_head row and the layer index of the table are both exercised)."""
  cfg = dataclasses.replace(from_pretrained(str(tiny_train_model), dtype="float32").cfg, tie_word_embeddings=False,
                            num_hidden_layers=LAYERS)
  out = str(tmp_path_factory.mktemp("export") / "untied")
  save_pretrained(init_model(cfg, seed=4), out, tokenizer=load_tokenizer(str(tiny_train_model)))
  return out


def _expected_hf_tensors(p: dict) -> dict:
  d = p["embed_vd"].shape[1]
  want = {"model.embed_tokens.weight": p["embed_vd"], "model.norm.weight": p["final_norm_d"],
          "lm_head.weight": p["lm_head_dv"].T}
  for i in range(LAYERS):
    pre = f"model.layers.{i}."
    want |= {
        pre + "input_layernorm.weight": p["attn_norm_ld"][i],
        pre + "self_attn.q_proj.weight": p["q_ldnh"][i].reshape(d, -1).T,
        pre + "self_attn.k_proj.weight": p["k_ldkh"][i].reshape(d, -1).T,
        pre + "self_attn.v_proj.weight": p["v_ldkh"][i].reshape(d, -1).T,
        pre + "self_attn.o_proj.weight": p["o_lnhd"][i].reshape(-1, d).T,
        pre + "self_attn.q_norm.weight": p["q_norm_lh"][i],
        pre + "self_attn.k_norm.weight": p["k_norm_lh"][i],
        pre + "post_attention_layernorm.weight": p["mlp_norm_ld"][i],
        pre + "mlp.gate_proj.weight": p["gate_ldf"][i].T,
        pre + "mlp.up_proj.weight": p["up_ldf"][i].T,
        pre + "mlp.down_proj.weight": p["down_lfd"][i].T,
    }
  return want


def test_export_equals_trainer_params_weight_by_weight(tmp_path, untied_model_dir, train_config):
  import torch
  from transformers import AutoModelForCausalLM

  cfg = train_config(tmp_path / "run", untied_model_dir, **{"total_steps": 1, "checkpoint.every": 0,
                                                            "model.make_tiny": False})  # an exported model
  t = Trainer(cfg)
  try:
    t.run()
    assert t.step == 1
    out = t.export_hf(str(tmp_path / "hf"))
    params = {k: np.asarray(v) for k, v in nnx.to_pure_dict(t.state.params).items()}
    ids = t.tokenizer.encode("Direction 1 <answer>Direction 3</answer> row col", add_special_tokens=False)
    want_logits = np.asarray(t.current_model()(jnp.asarray([ids])))[0]
  finally:
    t.close()
  assert params["q_ldnh"].shape[0] == LAYERS and params["q_ldnh"].dtype == np.float32
  got = load_file(os.path.join(out, "model.safetensors"))
  want = _expected_hf_tensors(params)
  assert sorted(got) == sorted(want)
  for name, w in want.items():
    assert got[name].shape == w.shape and got[name].dtype == np.float32, name
    np.testing.assert_array_equal(got[name], w, err_msg=name)
  # the export holds the trained weights, not the initial ones: every tensor moved in the step
  init = load_file(os.path.join(untied_model_dir, "model.safetensors"))
  assert sorted(init) == sorted(got)
  for name in got:
    assert not np.array_equal(init[name], got[name]), f"{name} did not change in the train step"
  # and transformers reads it as the same function
  hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
  with torch.no_grad():
    logits = hf(torch.tensor([ids])).logits[0].numpy()
  np.testing.assert_allclose(logits, want_logits, atol=1e-4, rtol=1e-4)
  assert os.path.isfile(os.path.join(out, "tokenizer_config.json"))
