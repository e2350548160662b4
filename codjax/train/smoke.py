"""The smoke preset: any experiment shrunk to a run of about a minute on 2 CPU cores that still goes through every
stage it has (tiny model, SFT warm start, evaluation before RL, RL steps, periodic and final evaluation,
checkpoint), to check a config or a change before the real run.

  python launch/train.py --config=experiments/<name>.py --smoke       # also launch/sft.py, launch/rl_seeds.py

``smoke_overrides(cfg)`` lists the changes as dotted fields (what ``--config.a.b=value`` would set); sizes only
shrink, so an override given on the command line that is already smaller stays. Warm-ups and data sizes follow
the shrunk step counts (a cosine schedule needs more steps than warm-up steps). A smoke run writes to
``<run_dir>_smoke`` (and a generated tiny model to its own directory), never into the real run's files.
"""

from __future__ import annotations

import ml_collections

from codjax.train.config import override

SUFFIX = "_smoke"
RL_STEPS = 2  # RL steps of a smoke run (an experiment without RL keeps 0)
SFT_STEPS = 4  # SFT steps (an experiment without an SFT warm start keeps 0)
SFT_BATCH = 4
SFT_PACKS = 8  # expert packs of the SFT transcripts
PACKS_PER_STEP = 2
REPEATS = 2  # the smallest group a CoD or GRPO baseline takes
EVAL_PACKS = 2
MAX_RESPONSE_TOKENS = 16
MAX_SLOTS = 64
CORPUS_PACKS = 20  # packs of the tiny tokenizer's corpus
SEED_BANK_PACKS = 4  # EvoHarness: teacher packs seeding the bank


def smoke_overrides(cfg: ml_collections.ConfigDict) -> dict:
  """The smoke preset's changes to ``cfg`` as ``{"a.b": value}`` (module docstring); ``cfg`` is not changed."""
  o: dict = {}
  if not str(cfg.run_dir).rstrip("/").endswith(SUFFIX):
    o["run_dir"] = str(cfg.run_dir).rstrip("/") + SUFFIX
  if not str(cfg.name).endswith(SUFFIX):
    o["name"] = str(cfg.name) + SUFFIX
  steps = min(int(cfg.total_steps), RL_STEPS)
  o["total_steps"] = steps
  o["optim.warmup_steps"] = min(int(cfg.optim.warmup_steps), max(steps - 1, 0))
  o["data.packs_per_step"] = min(int(cfg.data.packs_per_step), PACKS_PER_STEP)
  o["data.repeats"] = min(int(cfg.data.repeats), REPEATS)
  r = cfg.rollout
  o["rollout.max_response_tokens"] = min(int(r.max_response_tokens), MAX_RESPONSE_TOKENS)
  o["rollout.max_slots"] = max(min(int(r.max_slots), MAX_SLOTS), int(r.jax_workers))
  ev = cfg.eval
  o["eval.num_packs"] = min(int(ev.num_packs), EVAL_PACKS)
  if int(ev.every) > 0 and steps > 0:
    o["eval.every"] = min(int(ev.every), steps)
  if int(cfg.checkpoint.every) > 0 and steps > 0:
    o["checkpoint.every"] = min(int(cfg.checkpoint.every), steps)
  s = cfg.sft
  if int(s.steps) > 0:
    sft_steps = min(int(s.steps), SFT_STEPS)
    o["sft.steps"] = sft_steps
    o["sft.warmup_steps"] = min(int(s.warmup_steps), sft_steps - 1)
    o["sft.batch_size"] = min(int(s.batch_size), SFT_BATCH)
    o["sft.num_packs"] = min(int(s.num_packs), SFT_PACKS)
    o["sft.log_every"] = min(int(s.log_every), sft_steps)
  m = cfg.model
  if m.make_tiny:
    o["model.tiny.corpus_packs"] = min(int(m.tiny.corpus_packs), CORPUS_PACKS)
    if m.path:  # a set path holds the real run's model: the smoke model goes to a directory of its own
      o["model.path"] = ""
  if "evoharness" in cfg and "seed_bank_packs" in cfg.evoharness:
    o["evoharness.seed_bank_packs"] = min(int(cfg.evoharness.seed_bank_packs), SEED_BANK_PACKS)
  return o


def apply_smoke(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Applies ``smoke_overrides`` to ``cfg`` in place and returns it."""
  return override(cfg, smoke_overrides(cfg))
