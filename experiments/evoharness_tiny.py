"""Tiny CPU EvoHarness-RL: household tasks, tiny Qwen3 -> SFT on harness transcripts -> cost-aware GRPO -> evaluation.

The two-stage recipe of orbit_evo.md B.5 at demo scale, on 2 CPU cores:

* **Environment**: ``alfworld_synth`` with its ``tiny`` preset (4-6 receptacles, 1-3 distractors, a 20-turn
  budget; the six ALFWorld task families), trained on the ``train`` split, evaluated on ``valid_seen`` and
  ``valid_unseen`` (held-out layouts and object/receptacle combinations).
* **Harness**: ``inline`` mode (EvoHarness-RL proper), every meta action charged one turn (the training
  config), recall top-k 3, the compact system prompt (``evoharness.compact_prompt``: the same protocol strings
  in three lines, since every turn re-reads the system prompt), a 6-entry history window (demo: shorter
  prompts; the paper's is 10).
* **SFT**: the scripted harness teacher (``codjax.agents.harness.teacher``; it solves every generated task
  with about 5 harness calls per episode) on 600 training tasks, its successful episodes only (B.5), with
  10 % of its turns random admissible commands (headroom for RL); 3,000 steps of 16 turns (~7 epochs of the
  7,232 transcribed turns): after 400 steps (loss 0.38) the model solved nothing, after 1,000 (loss ~0.1) 3 %,
  after 3,000 (loss ~0.06) 25 % seen / 22 % unseen, so GRPO starts with successes in its groups.
* **Bank**: seeded from the teacher's episodes on 32 training tasks (the paper seeds it from the SFT
  teacher's experience), rule-consolidated after every policy update.
* **RL**: GRPO with the group's std, PPO clip 0.2, KL 0.01 (k1) to the SFT policy (B.5), the cost-aware reward
  with the public config's weights (B.3), the diversity weight annealed over the run's own length
  (U = total_steps, as the public config's U = total_epochs). 4 tasks x 8 rollouts per step, 16 steps.
* **Evaluation**: 64 tasks of each validation split at temperature 1.0 / top-p 0.9 (B.5), at the start of RL and
  at the end, with the scripted teacher and the random player on the same tasks.

Demo-specific values say why.
"""

from codjax.train.config import DEMO_TINY_SHAPE, env_entry, tiny_demo_config
from codjax.train.evoharness_workflow import evoharness_config, set_evoharness_loss

STEPS = 16


def get_config():
  c = tiny_demo_config("evoharness_tiny", workflow="evoharness")
  # demo: the CoD demo's 0.6M-parameter shape; frequent phrases (labels, commands) become single tokens
  c.model.tiny.update(dict(DEMO_TINY_SHAPE, vocab_size=1024, phrase_merges=True, corpus_packs=120))
  c.data.envs = {"household": env_entry("alfworld_synth", "tiny", split="train", max_turns=20)}
  c.data.pack_size = 1  # one task per trajectory (EvoHarness)
  c.data.packing = "cod"
  c.data.repeats = 8  # B.5: 8 rollouts per task
  c.data.packs_per_step = 4  # demo: 4 tasks x 8 rollouts per step (paper: 16 x 8); ~2 min per step on 2 cores
  c.data.n_train, c.data.n_test = 50000, 2000
  c.evoharness = evoharness_config(mode="inline", charge_meta_actions=True, recall_top_k=3, history=6,
                                   compact_prompt=True, consolidator="rule", seed_bank_packs=32,
                                   anneal_updates=STEPS)
  c.rollout.temperature = 1.0
  c.rollout.top_p = 1.0
  c.rollout.max_response_tokens = 24  # demo: the teacher's replies are ~10 tokens
  c.rollout.max_prompt_tokens = 768
  c.rollout.max_slots = 192
  c.rollout.jax_kernels = "v1"  # the kernels of the README's recorded run: it reproduces bit for bit
  c.rollout.sync_interval = 1
  set_evoharness_loss(c.algorithm, kl_coef=0.01)  # B.5: GRPO + KL 0.01 to the SFT policy
  c.optim.learning_rate = 2e-4  # demo: tiny model from scratch (paper: 1e-6)
  c.optim.warmup_steps = 2
  c.train.seq_len = 768
  c.train.pack = True
  c.train.num_microbatches = 4
  c.sft.steps = 3000  # demo: the tiny model needs ~7 epochs to copy admissible commands (see the docstring)
  c.sft.batch_size = 16
  c.sft.learning_rate = 3e-3
  c.sft.warmup_steps = 50
  c.sft.num_packs = 600
  c.sft.seq_len = 768
  c.sft.expert_random_frac = 0.1
  # the plain teacher (~5 harness calls per episode); extra_calls=p makes it over-call (README "EvoHarness on
  # CPU": --config.sft.teacher_params.alfworld_synth.extra_calls=0.3, ~9 calls per episode)
  c.sft.teacher_params = {"alfworld_synth": {"extra_calls": 0.0}}
  c.total_steps = STEPS
  c.eval.envs = {"seen": env_entry("alfworld_synth", "tiny", split="valid_seen", max_turns=20),
                 "unseen": env_entry("alfworld_synth", "tiny", split="valid_unseen", max_turns=20)}
  c.eval.pack_size = 1
  c.eval.num_packs = 64
  c.eval.temperature = 1.0  # B.5 evaluation: temperature 1.0, top-p 0.9
  c.eval.top_p = 0.9
  c.eval.at_start = True
  c.eval.at_end = True
  c.eval.every = 0
  c.eval.baselines = ("expert", "random")
  c.checkpoint.every = 8
  c.checkpoint.max_to_keep = 1
  return c
