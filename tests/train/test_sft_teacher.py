"""SFT transcripts come from the configured teacher: ``sft.teacher_params`` reach the expert's constructor."""

import re

from codjax.models.tokenizer import load_tokenizer
from codjax.train.sft import expert_transcripts
from codjax.workflows.packs import env_specs


def _assistant_texts(cfg, tok):
  seqs, stats = expert_transcripts(cfg, env_specs(cfg.data.envs), tok, num_packs=3, seed=5)
  assert stats["episodes"] == 3 * (2 * cfg.data.pack_size - 1)
  texts = []
  for s in seqs:
    ids = [t for t, m in zip(s.tokens, s.loss_mask) if m]
    texts.append(tok.decode(ids))
  return " ".join(texts)


def test_teacher_params_choose_the_scratchpad_style(tmp_path, tiny_train_model, train_config):
  tok = load_tokenizer(str(tiny_train_model))
  pairs = _assistant_texts(train_config(tmp_path / "a", tiny_train_model), tok)
  slots = _assistant_texts(train_config(tmp_path / "b", tiny_train_model, **{
      "sft.teacher_params": {"frozenlake_obscure": {"know_style": "slots"}}}), tok)
  assert "know Up=" not in pairs and re.search(r"know (none|[1-4]=)", pairs)
  assert slots.count("know Up=") >= 3 and "Down=" in slots
  # a known direction is walked as "go <Dir>=<k>" and answered with that same k
  for d, k, a in re.findall(r"go (Up|Down|Left|Right)=([1-4])\s*<answer>Direction ([1-4])", slots):
    assert k == a
