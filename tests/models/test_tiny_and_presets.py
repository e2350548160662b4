"""Presets hold the official numbers; the tiny checkpoint + tokenizer load offline in transformers."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from codjax.models import preset
from codjax.models.tokenizer import ChatDeltaRenderer, encode_chat, load_tokenizer

pytestmark = pytest.mark.slow  # tokenizer training and launcher subprocesses (~25 s)


def test_presets_official_numbers():
  p8 = preset("qwen3-8b")
  assert (p8.hidden_size, p8.intermediate_size, p8.num_hidden_layers, p8.num_attention_heads,
          p8.num_key_value_heads, p8.head_dim, p8.vocab_size, p8.tie_word_embeddings) == (
              4096, 12288, 36, 32, 8, 128, 151936, False)
  assert 8.1e9 < p8.num_params() < 8.3e9  # Qwen3-8B: 8.2B parameters
  assert 0.59e9 < preset("qwen3-0.6b").num_params() < 0.61e9  # 0.6B (tied)
  assert 32.6e9 < preset("qwen3-32b").num_params() < 32.9e9
  assert preset("qwen3-4b").tie_word_embeddings and not preset("qwen3-14b").tie_word_embeddings
  with pytest.raises(ValueError, match="unknown model preset"):
    preset("qwen3-9b")
  with pytest.raises(ValueError, match="multiple of"):
    preset("tiny", num_attention_heads=3)
  with pytest.raises(ValueError, match="attention_impl"):
    preset("tiny", attention_impl="flash")


def test_tiny_checkpoint_loads_offline_and_generates(tiny_ckpt):
  tok = AutoTokenizer.from_pretrained(tiny_ckpt)
  assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
  msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go <answer>Direction 2</answer> é ✓"}]
  text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
  assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n")
  assert text.endswith("<|im_start|>assistant\n")
  ids = tok.encode(text, add_special_tokens=False)
  assert tok.decode(ids) == text
  model = AutoModelForCausalLM.from_pretrained(tiny_ckpt, dtype=torch.float32)
  assert model.config.head_dim >= 32
  out = model.generate(torch.tensor([ids]), max_new_tokens=5, do_sample=False)
  assert out.shape[1] == len(ids) + 5


def test_chat_delta_renderer_is_token_in_token_out(tiny_ckpt):
  tok = load_tokenizer(tiny_ckpt)
  r = ChatDeltaRenderer(tok)
  msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "u1"}]
  ids = encode_chat(tok, msgs, add_generation_prompt=True)
  reply = "I go <answer>Direction 1</answer>"
  ids += tok.encode(reply, add_special_tokens=False) + [tok.eos_token_id]
  msgs += [{"role": "assistant", "content": reply}, {"role": "user", "content": "u2 (row=1, col=2)"}]
  ids += r.delta_ids(msgs[-1:])
  assert ids == encode_chat(tok, msgs, add_generation_prompt=True)


def test_make_tiny_model_script(tmp_path):
  out = tmp_path / "m"
  subprocess.run([sys.executable, "launch/make_tiny_model.py", f"--out={out}", "--hidden_size=64",
                  "--num_layers=1", "--vocab_size=300"], check=True, capture_output=True)
  model = AutoModelForCausalLM.from_pretrained(out)
  assert model.config.num_hidden_layers == 1 and model.config.hidden_size == 64
  assert np.isfinite(model(torch.tensor([[1, 2, 3]])).logits.detach().numpy()).all()


def test_make_tiny_model_script_with_isolated_pre_tokens(tmp_path):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("".join(f"know Up={k % 4 + 1} Left=?; go Up={k % 4 + 1}\n" for k in range(300)))
  out = tmp_path / "m"
  subprocess.run([sys.executable, "launch/make_tiny_model.py", f"--out={out}", "--hidden_size=64", "--num_layers=1",
                  "--vocab_size=300", f"--corpus={corpus}", "--phrase_merges", r"--isolate=Up=[1-4]|Left=\?|\n"],
                 check=True, capture_output=True)
  tok = AutoTokenizer.from_pretrained(out)
  pieces = [tok.decode([i]) for i in tok.encode("know Up=3 Left=?; go Up=3", add_special_tokens=False)]
  assert pieces.count("Up=3") == 2 and "Left=?" in pieces
