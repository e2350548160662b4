"""Tokenizers: loading a local HF tokenizer, building a small offline byte-level BPE, and chat rendering.

The chat format is Qwen's: ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message and
``<|im_start|>assistant\\n`` as the generation prompt; ``<|im_end|>`` ends an assistant turn (EOS) and
``<|endoftext|>`` pads.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Sequence

IM_START, IM_END, ENDOFTEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]

QWEN_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def load_tokenizer(path: str):
  """``transformers.AutoTokenizer`` from a local directory (offline), with a clear error if missing."""
  if not os.path.isdir(path):
    raise FileNotFoundError(f"tokenizer directory {path!r} does not exist")
  if not any(os.path.isfile(os.path.join(path, f)) for f in ("tokenizer.json", "tokenizer_config.json")):
    raise FileNotFoundError(f"no tokenizer.json / tokenizer_config.json in {path!r}")
  from transformers import AutoTokenizer

  tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
  if tok.eos_token_id is None:
    raise ValueError(f"tokenizer in {path!r} defines no EOS token")
  if tok.pad_token_id is None:
    tok.pad_token = tok.eos_token
  return tok


DEFAULT_ISOLATE = r"\d|\n"


def build_bpe_tokenizer(corpus: Iterable[str], vocab_size: int = 512, phrase_merges: bool = False,
                        isolate: str = ""):
  r"""Trains a byte-level BPE (offline) and wraps it as a ``PreTrainedTokenizerFast`` with Qwen's chat
  template, EOS ``<|im_end|>`` and pad ``<|endoftext|>``. Any text round-trips (byte-level alphabet).

  ``phrase_merges``: merges may span spaces (digits and newlines stay single pre-tokens, tokens are at most
  24 bytes), so the fixed phrases of a narrow corpus (prompts, feedback lines) become a few tokens each.
  For tiny CPU demos, where tokens per episode set the training cost; about 2x fewer tokens than
  word-level BPE on FrozenLake transcripts. ``isolate`` (phrase merges only) is the regex of pre-tokens that
  never merge with their neighbours (default ``\d|\n``: digits and newlines). A demo that needs a word to
  be the same single token wherever it occurs (``Up`` in ``Up=3`` and in ``go Up``, so that a small model
  can look it up by copying) lists it here, e.g. ``\d|\n|=|\b(?:Up|Down)\b``."""
  from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
  from transformers import PreTrainedTokenizerFast

  if vocab_size < 256 + len(SPECIAL_TOKENS):
    raise ValueError(f"vocab_size must be >= {256 + len(SPECIAL_TOKENS)} for a byte-level BPE, got {vocab_size}")
  if isolate and not phrase_merges:
    raise ValueError("isolate applies to phrase_merges tokenizers only")
  if isolate:
    try:
      re.compile(isolate)
    except re.error as e:
      raise ValueError(f"isolate is not a valid regex: {isolate!r} ({e})") from None
  tok = Tokenizer(models.BPE())
  if phrase_merges:
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(isolate or DEFAULT_ISOLATE), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
  else:
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  tok.post_processor = processors.ByteLevel(trim_offsets=False)
  trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
                                max_token_length=24 if phrase_merges else None)
  tok.train_from_iterator(corpus, trainer=trainer)
  fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=IM_END, pad_token=ENDOFTEXT,
                                 additional_special_tokens=[IM_START])
  fast.chat_template = QWEN_CHAT_TEMPLATE
  return fast


def render_chat(tokenizer, messages: Sequence[dict], add_generation_prompt: bool = False, **kw) -> str:
  return tokenizer.apply_chat_template(list(messages), tokenize=False,
                                       add_generation_prompt=add_generation_prompt, **kw)


def encode_chat(tokenizer, messages: Sequence[dict], add_generation_prompt: bool = False, **kw) -> list[int]:
  text = render_chat(tokenizer, messages, add_generation_prompt, **kw)
  return tokenizer.encode(text, add_special_tokens=False)


class ChatDeltaRenderer:
  """Renders the tokens that follow an assistant turn: the separator after ``<|im_end|>``, the next user
  turn(s) and the generation prompt, using the tokenizer's own chat template.

  The delta is computed as ``render([sys, *new_msgs], gen=True) - render([sys])`` with a fixed probe system
  message, so earlier turns are never re-rendered or re-tokenized (token in, token out).
  """

  _PROBE = [{"role": "system", "content": "x"}]

  def __init__(self, tokenizer, **template_kwargs):
    self.tok = tokenizer
    self.kw = template_kwargs
    base = render_chat(tokenizer, self._PROBE, False, **template_kwargs)
    self._base = base
    # what the template writes right after an assistant's end-of-turn token
    with_asst = render_chat(tokenizer, self._PROBE + [{"role": "assistant", "content": "y"}], False,
                            **template_kwargs)
    eos = tokenizer.eos_token
    self.after_eos = with_asst.split("y" + eos, 1)[1] if ("y" + eos) in with_asst else ""

  def delta_text(self, new_messages: Sequence[dict], after_assistant: bool = True) -> str:
    """Text that follows the conversation so far: (separator after EOS) + new turns + generation prompt."""
    full = render_chat(self.tok, self._PROBE + list(new_messages), True, **self.kw)
    if not full.startswith(self._base):
      raise ValueError("chat template renders earlier messages differently when more are added; "
                       "token-in/token-out rendering needs a prefix-stable template")
    return (self.after_eos if after_assistant else "") + full[len(self._base):]

  def delta_ids(self, new_messages: Sequence[dict], after_assistant: bool = True) -> list[int]:
    return self.tok.encode(self.delta_text(new_messages, after_assistant), add_special_tokens=False)
