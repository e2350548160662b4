"""EvoHarness-RL (arXiv 2608.05446) on ALFWorld-style household tasks: Qwen3-8B, SFT on harness transcripts, then
cost-aware GRPO with KL to the SFT policy.

Sources: the authors' public code, EvoHarnessRL/EvoHarness-RL: ``configs/train/common.yaml`` and
``configs/train/alfworld.yaml`` (GRPO), ``scripts/sft.sh`` (SFT, README "Supervised initialization"),
``configs/sft/alfworld.yaml`` (the teacher run). codjax's departures:

* Environment: ``alfworld_synth``, codjax's offline household environment (ALFWorld's six task families,
  command language and text, generated procedurally, certified solvable within 70 steps), because ALFWorld's
  game files come only from a separate download (``alfworld-download``), unavailable offline. Train on its
  ``train`` split; validate on ``valid_seen`` and ``valid_unseen`` (ALFWorld's 140 / 134 games).
* SFT: the codjax scripted teacher that uses the harness (``codjax.agents.harness.teacher``) instead of the
  paper's Claude Opus transcripts, on 500 training tasks, successful episodes only; full fine-tuning instead of
  LoRA r=64 (codjax has no LoRA); lr 1e-5 cosine with 10 % warmup, batch 16, 4096 tokens, 4 epochs.
* The Experience bank is seeded from the teacher's episodes (the paper seeds it from the SFT teacher's
  experience) and consolidated by the rule consolidator between batches (``evoharness.consolidator = "llm"``
  consolidates with the policy itself through the trainer's engine; the paper uses Claude Opus).

  python launch/plan_memory.py --config=experiments/evoharness_alfworld_qwen3_8b.py
  python launch/train.py --config=experiments/evoharness_alfworld_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B

Method: docs/methods/evoharness.md. Results: docs/results.md.
"""

from codjax.train.config import base_config, env_entry
from codjax.train.paper_configs import QWEN3_8B_PATH
from codjax.workflows.evoharness import evoharness_config, set_evoharness_loss

UPDATES = 150  # common.yaml: trainer.total_epochs = 150 (one policy update per epoch, i.e. per reset/batch)


def get_config():
  c = base_config()
  c.name = "evoharness_alfworld_qwen3_8b"
  c.workflow = "evoharness"
  c.run_dir = "runs/evoharness_alfworld_qwen3_8b"
  c.seed = 0
  c.model.path = QWEN3_8B_PATH  # alfworld.yaml: Qwen3-8B (placeholder: --config.model.path=<HF dir of Qwen/Qwen3-8B>)
  c.model.arch = "qwen3-8b"
  c.model.param_dtype = "float32"  # codjax: master weights for lr-1e-6 updates (codjax/train/paper_configs.py)
  c.model.dtype = "bfloat16"  # codjax: bfloat16 compute
  c.model.remat = "full"  # common.yaml: gradient checkpointing
  c.model.attention_impl = "cudnn"  # codjax: flash attention on GPU
  c.model.vocab_chunks = 16  # codjax: logprobs in vocabulary chunks
  c.model.enable_thinking = False  # the reply format carries its own <think>...</think> span
  c.mesh.update(dict(data=1, fsdp=8, tensor=1))  # common.yaml: 8 GPUs on one node
  c.data.envs = {"alfworld": env_entry("alfworld_synth", "train", split="train")}  # alfworld.yaml: train split
  c.data.pack_size = 1  # one task per trajectory (EvoHarness); >1 = CoD packs with the bank as context
  c.data.packing = "cod"
  c.data.packs_per_step = 16  # alfworld.yaml: train_batch_size 16 tasks per step
  c.data.repeats = 8  # common.yaml: env.rollout.n = 8 rollouts per task (groups are contiguous rows)
  c.evoharness = evoharness_config(
      mode="inline", charge_meta_actions=True,  # common.yaml: inline, every meta action costs a turn of the 70
      recall_top_k=3,  # common.yaml: recall_top_k 3
      consolidator="rule", seed_bank_packs=64,  # codjax: rule consolidator, bank seeded from 64 teacher episodes
      # common.yaml reward_shaping: success 10, lambda_eff 1.0, lambda_div_max 1.0, lambda_spam 0.1 (cap 10),
      # lambda_invalid 0.1, div_reward verb_ratio (the paper's text describes bpe_coverage)
      success_reward=10.0, lambda_eff=1.0, lambda_div_max=1.0, lambda_spam=0.1, spam_cap=10, lambda_inv=0.1,
      diversity="verb_ratio", anneal_updates=UPDATES)  # diversity weight annealed over U = trainer.total_epochs
  c.rollout.engine = "vllm"  # common.yaml: vLLM rollouts
  c.rollout.temperature = 1.0  # verl-agent's rollout temperature
  c.rollout.top_p = 1.0
  c.rollout.top_k = 0
  c.rollout.max_response_tokens = 512  # alfworld.yaml: max_response_length 512 per turn
  c.rollout.max_prompt_tokens = 12288 + 512  # alfworld.yaml: max_prompt_length 12,288 (plus the reply)
  c.rollout.max_slots = 128  # all 16 x 8 trajectories in flight
  c.rollout.sync_interval = 1  # on-policy: one update per batch
  c.rollout.vllm.update(dict(dtype="bfloat16", gpu_memory_utilization=0.4, tensor_parallel_size=1))
  set_evoharness_loss(c.algorithm, kl_coef=0.01)  # common.yaml: GRPO, KL loss 0.01 (alfworld.yaml: type kl = k1)
  c.optim.learning_rate = 1e-6  # common.yaml: lr 1e-6
  c.optim.schedule = "constant"
  c.optim.warmup_steps = 0
  c.optim.weight_decay = 0.01  # verl's AdamW default
  c.optim.max_grad_norm = 1.0  # verl's default grad clip
  c.train.seq_len = 12288 + 512  # one turn (its per-turn prompt and reply) per sequence
  c.train.pack = True
  c.train.num_microbatches = 64  # alfworld.yaml: ppo_micro_batch_size_per_gpu 2
  c.total_steps = UPDATES  # common.yaml: 150 policy updates
  # scripts/sft.sh: 4 epochs, batch 16, over the paper's 1,153 next-action examples (288 steps)
  c.sft.steps = 4 * 1153 // 16
  c.sft.batch_size = 16  # scripts/sft.sh: batch 16
  c.sft.learning_rate = 1e-5  # scripts/sft.sh: lr 1e-5 cosine, 10 % warmup
  c.sft.schedule = "cosine"
  c.sft.warmup_steps = 29  # 10 % of 288 steps
  c.sft.num_packs = 500  # configs/sft/alfworld.yaml: the teacher runs 500 training games (successes kept)
  c.sft.seq_len = 4096  # scripts/sft.sh: max length 4096
  c.sft.num_microbatches = 8  # scripts/sft.sh: micro batch 2 per GPU
  # configs/eval/alfworld.yaml: valid_seen (140 games) and valid_unseen (134), temperature 1.0, top-p 0.9
  c.eval.envs = {"seen": env_entry("alfworld_synth", "train", split="valid_seen"),
                 "unseen": env_entry("alfworld_synth", "train", split="valid_unseen")}
  c.eval.pack_size = 1
  c.eval.num_packs = 140
  c.eval.temperature = 1.0
  c.eval.top_p = 0.9
  c.eval.every = 25  # codjax: validation every 25 updates (common.yaml: test_freq 5)
  c.eval.at_start = True  # common.yaml: val_before_train
  c.eval.at_end = True
  c.checkpoint.every = 25  # codjax: every 25 updates (common.yaml: save_freq 5)
  c.checkpoint.max_to_keep = 3
  c.checkpoint.export_hf = True
  c.log.tensorboard = True
  return c
