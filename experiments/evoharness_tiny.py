"""Tiny CPU EvoHarness-RL: household tasks, tiny Qwen3 -> SFT on harness transcripts -> cost-aware GRPO -> evaluation.

The two-stage recipe of EvoHarness-RL (arXiv 2608.05446; EvoHarnessRL/EvoHarness-RL ``configs/train/common.yaml``,
``configs/train/alfworld.yaml``) at demo scale, on 2 CPU cores: the offline household environment
``alfworld_synth`` (``tiny`` preset: 4-6 receptacles, 1-3 distractors, a 20-turn budget, ALFWorld's six task
families), SFT on the scripted harness teacher's successful episodes (``codjax.agents.harness.teacher``), a bank
seeded from the teacher's episodes and rule-consolidated after every policy update, then GRPO with the cost-aware
reward and a KL term to the SFT policy; evaluation on 64 ``valid_seen`` and 64 ``valid_unseen`` tasks before and
after RL, beside the scripted teacher and a random player. Each value cites the public recipe or says why the demo
differs.

  python launch/train.py --config=experiments/evoharness_tiny.py

Method: docs/methods/evoharness.md. Measurements: docs/results.md.
"""

from codjax.train.config import DEMO_TINY_SHAPE, env_entry, tiny_demo_config
from codjax.workflows.evoharness import evoharness_config, set_evoharness_loss

STEPS = 16  # demo: 16 policy updates (~2 min each on 2 cores)


def get_config():
  c = tiny_demo_config("evoharness_tiny", workflow="evoharness")
  # demo: the CoD demo's 0.6M-parameter shape; frequent phrases (labels, commands) become single tokens
  c.model.tiny.update(dict(DEMO_TINY_SHAPE, vocab_size=1024, phrase_merges=True, corpus_packs=120))
  # demo: small households with a 20-turn budget (ALFWorld's: 70)
  c.data.envs = {"household": env_entry("alfworld_synth", "tiny", split="train", max_turns=20)}
  c.data.pack_size = 1  # one task per trajectory, as in EvoHarness-RL
  c.data.packing = "cod"
  c.data.repeats = 8  # EvoHarness-RL common.yaml: env.rollout.n = 8 rollouts per task
  c.data.packs_per_step = 4  # demo: 4 tasks x 8 rollouts per step (alfworld.yaml: 16 tasks)
  c.data.n_train, c.data.n_test = 50000, 2000  # demo: generated task pool
  # common.yaml: inline mode, every meta action charged, recall top-k 3; demo: a 6-entry history (EvoHarness-RL:
  # 10) and the compact system prompt (same protocol strings), a seed bank from 32 teacher episodes, U = STEPS
  c.evoharness = evoharness_config(mode="inline", charge_meta_actions=True, recall_top_k=3, history=6,
                                   compact_prompt=True, consolidator="rule", seed_bank_packs=32,
                                   anneal_updates=STEPS)
  c.rollout.temperature = 1.0  # verl-agent's rollout temperature 1.0
  c.rollout.top_p = 1.0  # no truncation in training rollouts
  c.rollout.max_response_tokens = 24  # demo: the teacher's replies are ~10 tokens (alfworld.yaml: 512)
  c.rollout.max_prompt_tokens = 768  # demo: one turn's compact view (alfworld.yaml: 12,288)
  c.rollout.max_slots = 192  # demo: episodes sampled at once on CPU
  c.rollout.jax_kernels = "v1"  # demo: the kernels of the README's recorded run, which reproduces bit for bit
  c.rollout.sync_interval = 1  # on-policy: one update per batch
  set_evoharness_loss(c.algorithm, kl_coef=0.01)  # common.yaml: GRPO, KL loss 0.01 to the SFT policy
  c.optim.learning_rate = 2e-4  # demo: tiny model from scratch (common.yaml: 1e-6)
  c.optim.warmup_steps = 2  # demo
  c.train.seq_len = 768  # demo: as rollout.max_prompt_tokens
  c.train.pack = True  # demo: several turns per row
  c.train.num_microbatches = 4  # demo: peak memory
  c.sft.steps = 3000  # demo: ~7 epochs, what the tiny model needs to copy admissible commands
  c.sft.batch_size = 16  # EvoHarness-RL scripts/sft.sh: batch 16
  c.sft.learning_rate = 3e-3  # demo: tiny model from scratch (scripts/sft.sh: 1e-5, LoRA)
  c.sft.warmup_steps = 50  # demo
  c.sft.num_packs = 600  # demo: 600 teacher tasks (configs/sft/alfworld.yaml: 500 games)
  c.sft.seq_len = 768  # demo: as train.seq_len
  c.sft.expert_random_frac = 0.1  # demo: headroom for RL: 10 % of the teacher's turns are random commands
  # demo: the plain teacher (~5 harness calls per episode); extra_calls=p makes it over-call (README)
  c.sft.teacher_params = {"alfworld_synth": {"extra_calls": 0.0}}
  c.total_steps = STEPS  # demo (common.yaml: 150 updates)
  c.eval.envs = {"seen": env_entry("alfworld_synth", "tiny", split="valid_seen", max_turns=20),
                 "unseen": env_entry("alfworld_synth", "tiny", split="valid_unseen", max_turns=20)}
  c.eval.pack_size = 1  # one task per trajectory
  c.eval.num_packs = 64  # demo: 64 tasks per split (ALFWorld: 140 seen / 134 unseen)
  c.eval.temperature = 1.0  # EvoHarness-RL configs/eval/alfworld.yaml: temperature 1.0
  c.eval.top_p = 0.9  # configs/eval/alfworld.yaml: top-p 0.9
  c.eval.at_start = True  # demo: before RL, for the paired RL effect
  c.eval.at_end = True
  c.eval.every = 0
  c.eval.baselines = ("expert", "random")  # the scripted teacher and the random player on the same tasks
  c.checkpoint.every = 8  # demo
  c.checkpoint.max_to_keep = 1  # demo
  return c
