"""SFT clips its gradient with ``sft.max_grad_norm``, not with the RL step's ``optim.max_grad_norm``.

A tight RL clip (the main job's RL phase clips at a few hundredths, where SFT gradients are ~1) must leave the
SFT warm start as it was: two SFT runs with the same data and seeds, one with a 1e-12 RL clip, give the same
SFT model, and only a 1e-12 SFT clip freezes it (Adam's update of a 1e-12-norm gradient is ~lr * 1e-12 / eps).
"""

import numpy as np
import pytest
from safetensors.numpy import load_file

from codjax.models import from_pretrained
from codjax.models.tokenizer import load_tokenizer
from codjax.parallel import mesh_from_config
from codjax.train.sft import run_sft
from codjax.workflows.packs import env_specs

pytestmark = pytest.mark.slow  # three short SFT runs (~40 s): training runs belong to the slow part

_SFT = {"sft.steps": 3, "sft.batch_size": 2, "sft.num_packs": 4, "sft.seq_len": 384, "sft.learning_rate": 1e-2,
        "sft.warmup_steps": 0, "sft.schedule": "constant", "log.tensorboard": False,
        "optim.weight_decay": 0.0}  # no decay: a frozen model stays exactly frozen


def _sft_weights(tmp_path, name, train_config, model_dir, **over):
  cfg = train_config(tmp_path / name, model_dir, **_SFT, **over)
  out = tmp_path / name / "sft_model"
  base = from_pretrained(str(model_dir))
  _, stats = run_sft(cfg, base, load_tokenizer(str(model_dir)), env_specs(cfg.data.envs), mesh_from_config(cfg.mesh),
                     str(out), str(tmp_path / name))
  assert stats["loss_tokens"] > 0
  return load_file(str(out / "model.safetensors"))


def test_sft_uses_its_own_gradient_clip(tmp_path, train_config, tiny_train_model):
  base = load_file(str(tiny_train_model / "model.safetensors"))
  plain = _sft_weights(tmp_path, "plain", train_config, tiny_train_model)
  rl_clip = _sft_weights(tmp_path, "rl_clip", train_config, tiny_train_model, **{"optim.max_grad_norm": 1e-12})
  sft_clip = _sft_weights(tmp_path, "sft_clip", train_config, tiny_train_model, **{"sft.max_grad_norm": 1e-12})
  assert plain.keys() == rl_clip.keys() == sft_clip.keys() == base.keys()
  moved = max(float(np.abs(plain[k] - base[k]).max()) for k in base)
  assert moved > 1e-3  # three steps at lr 1e-2 move the weights
  for k in base:
    np.testing.assert_array_equal(rl_clip[k], plain[k], err_msg=k)  # the RL clip does not touch SFT
    assert float(np.abs(sft_clip[k] - base[k]).max()) < 1e-6, k  # the SFT clip does
