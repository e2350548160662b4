"""Phrase-merge BPE with isolated pre-tokens: the words a tiny demo looks up stay single, identical tokens."""

import pytest

from codjax.models.tokenizer import build_bpe_tokenizer

ISOLATE = r"\d|\n|=|\?|\b(?:Up|Down|Left|Right)\b"


def _corpus():
  lines = []
  for k in range(200):
    d = ("Up", "Down", "Left", "Right")[k % 4]
    lines.append(f"know Up={k % 4 + 1} Down=? Left=? Right={(k + 1) % 4 + 1}; go {d}={k % 4 + 1}\n"
                 f"<answer>Direction {k % 4 + 1}</answer>")
  return lines


def _pieces(tok, text):
  return [tok.decode([i]) for i in tok.encode(text, add_special_tokens=False)]


def test_isolated_words_are_the_same_token_in_every_context():
  tok = build_bpe_tokenizer(_corpus(), vocab_size=600, phrase_merges=True, isolate=ISOLATE)
  pieces = _pieces(tok, "know Up=3 Down=? Left=? Right=4; go Up=3")
  assert pieces.count("Up") == 2 and pieces.count("=") == 5 and pieces.count("3") == 2
  assert "Right" in pieces and "?" in pieces
  # the default phrase-merge pre-tokenizer glues words to their neighbours on the same corpus
  plain = _pieces(build_bpe_tokenizer(_corpus(), vocab_size=600, phrase_merges=True), "know Up=3 Down=?; go Up=3")
  assert plain.count("Up") < 2
  assert tok.decode(tok.encode("know Up=3; go Left=2", add_special_tokens=False)) == "know Up=3; go Left=2"


def test_isolate_needs_phrase_merges_and_a_valid_regex():
  with pytest.raises(ValueError, match="phrase_merges"):
    build_bpe_tokenizer(_corpus(), vocab_size=600, isolate=ISOLATE)
  with pytest.raises(ValueError, match="not a valid regex"):
    build_bpe_tokenizer(_corpus(), vocab_size=600, phrase_merges=True, isolate="(unclosed")


def test_demo_tokenizer_keeps_slots_and_moves_whole():
  """The tiny demo's pre-tokens (experiments/tiny_cod_frozenlake.py): every slot and move feedback is one token,
  so the scratchpad, the hint and the answer digit are one-token copies for a small model."""
  from codjax.agents.cod import run_text_packs
  from codjax.envs.experts import make_policy
  from codjax.train.config import load_experiment
  from codjax.workflows.packs import env_specs

  exp = load_experiment("experiments/tiny_cod_frozenlake.py")
  cfg = exp.get_config()
  spec = env_specs(cfg.data.envs)[0]
  trajs = run_text_packs(make_policy(spec.name, "expert", **cfg.sft.teacher_params[spec.name]), spec.family,
                         range(40), 4, env_name=spec.name, seed=0)
  corpus = [m["content"] for t in trajs for ep in t.episodes() for m in ep.messages]
  tok = build_bpe_tokenizer(corpus, vocab_size=1536, phrase_merges=True, isolate=cfg.model.tiny.isolate)
  pieces = _pieces(tok, "know Up=3 Down=? Left=? Right=4; go Right=4\n<answer>Direction 4</answer>")
  assert {"Up=3", "Down=?", "Left=?", "Right=4"} <= set(pieces) and pieces.count("Right=4") == 2
  assert "D3: moved up" in _pieces(tok, "D3: moved up to (1,0)")
