"""SFT with ``train.logits="loss_tokens"``: the LM head only at the reply tokens trains the model the full
computation trains (``codjax.train.sft``, ``codjax.rl.batch.loss_index``)."""

import numpy as np
import pytest
from safetensors.numpy import load_file

from codjax.models import from_pretrained
from codjax.models.tokenizer import load_tokenizer
from codjax.parallel import mesh_from_config
from codjax.train.sft import run_sft
from codjax.workflows.packs import env_specs


@pytest.mark.slow  # two short SFT runs
def test_sft_with_the_index_trains_the_same_model(tmp_path, train_config, tiny_train_model):
  """``train.logits="loss_tokens"`` in SFT (``codjax.train.sft``): three steps give the weights of the full
  computation up to float rounding, and the weights do move."""
  weights = {}
  for logits in ("all", "loss_tokens"):
    cfg = train_config(tmp_path / logits, tiny_train_model, **{
        "sft.steps": 3, "sft.batch_size": 2, "sft.num_packs": 4, "sft.seq_len": 384, "sft.learning_rate": 1e-2,
        "sft.warmup_steps": 0, "sft.schedule": "constant", "log.tensorboard": False, "train.logits": logits})
    out = tmp_path / logits / "sft_model"
    run_sft(cfg, from_pretrained(str(tiny_train_model)), load_tokenizer(str(tiny_train_model)),
            env_specs(cfg.data.envs), mesh_from_config(cfg.mesh), str(out), str(tmp_path / logits))
    weights[logits] = load_file(str(out / "model.safetensors"))
  base = load_file(str(tiny_train_model / "model.safetensors"))
  assert max(float(np.abs(weights["all"][k] - base[k]).max()) for k in base) > 1e-3
  for k in base:
    np.testing.assert_allclose(weights["loss_tokens"][k], weights["all"][k], rtol=1e-3, atol=2e-5, err_msg=k)
