"""EvoHarness-RL (arXiv 2608.05446) on ALFWorld-style household tasks: Qwen3-8B, SFT on harness transcripts, then
cost-aware GRPO with KL to the SFT policy (orbit_evo.md B.5, the public ``configs/train/{common,alfworld}.yaml``).

Every number is cited; codjax's departures are stated:

* Environment: ``alfworld_synth``, the offline household environment (orbit_evo.md B.7 tier 2: ALFWorld's six
  task families, command language and text, generated procedurally, certified solvable within 70 steps),
  because ALFWorld's game files cannot be downloaded here. Train on its ``train`` split; validate on
  ``valid_seen`` and ``valid_unseen`` (ALFWorld's 140 / 134 games, B.5).
* SFT (stage 1, B.5): the codjax scripted teacher that uses the harness (``codjax.agents.harness.teacher``)
  instead of Claude Opus transcripts, on 500 training tasks, successful episodes only; full fine-tuning
  instead of LoRA r=64 (codjax has no LoRA); lr 1e-5 cosine with 10 % warmup, batch 16, 4096 tokens, 4 epochs.
* The Experience bank is seeded from the teacher's episodes (the paper seeds it from the SFT teacher's
  experience) and consolidated by the rule consolidator between batches (``evoharness.consolidator = "llm"``
  consolidates with the policy itself through the trainer's engine; the paper uses Claude Opus).

  python launch/plan_memory.py --config=experiments/evoharness_alfworld_qwen3_8b.py
  python launch/train.py --config=experiments/evoharness_alfworld_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B
"""

from codjax.train.config import base_config, env_entry
from codjax.train.evoharness_workflow import evoharness_config, set_evoharness_loss
from codjax.train.paper_configs import QWEN3_8B_PATH

UPDATES = 150  # common.yaml: trainer.total_epochs = 150 (one policy update per epoch = reset/batch; B.5)


def get_config():
  c = base_config()
  c.name = "evoharness_alfworld_qwen3_8b"
  c.workflow = "evoharness"
  c.run_dir = "runs/evoharness_alfworld_qwen3_8b"
  c.seed = 0
  c.model.path = QWEN3_8B_PATH  # B.5: Qwen3-8B (placeholder: --config.model.path=<HF dir of Qwen/Qwen3-8B>)
  c.model.arch = "qwen3-8b"
  c.model.param_dtype = "float32"  # master weights for lr-1e-6 updates (codjax/train/paper_configs.py)
  c.model.dtype = "bfloat16"
  c.model.remat = "full"
  c.model.attention_impl = "cudnn"
  c.model.vocab_chunks = 16
  c.model.enable_thinking = False  # the reply format carries its own <think>...</think> span (B.2)
  c.mesh.update(dict(data=1, fsdp=8, tensor=1))  # B.5: 8 GPUs
  c.data.envs = {"alfworld": env_entry("alfworld_synth", "train", split="train")}
  c.data.pack_size = 1  # one task per trajectory (EvoHarness); >1 = CoD packs with the bank as context
  c.data.packing = "cod"
  c.data.packs_per_step = 16  # B.5: 16 tasks x 8 rollouts per step (groups are contiguous rows)
  c.data.repeats = 8
  c.evoharness = evoharness_config(
      mode="inline", charge_meta_actions=True,  # B.2: training charges every meta action one turn of 70
      recall_top_k=3,  # B.2: top_k 3 in training
      consolidator="rule", seed_bank_packs=64,
      # B.3 defaults: success 10, lambda_eff 1.0, lambda_div_max 1.0, lambda_spam 0.1 (cap 10), lambda_inv 0.1;
      # diversity "verb_ratio" (common.yaml; the paper's text describes "bpe_coverage")
      success_reward=10.0, lambda_eff=1.0, lambda_div_max=1.0, lambda_spam=0.1, spam_cap=10, lambda_inv=0.1,
      diversity="verb_ratio", anneal_updates=UPDATES)  # B.3: U = trainer.total_epochs
  c.rollout.engine = "vllm"
  c.rollout.temperature = 1.0  # verl-agent's rollout temperature
  c.rollout.top_p = 1.0
  c.rollout.top_k = 0
  c.rollout.max_response_tokens = 512  # B.5: response <= 512 tokens per turn
  c.rollout.max_prompt_tokens = 12288 + 512  # B.5: prompt <= 12,288 tokens (plus the reply)
  c.rollout.max_slots = 128  # all 16 x 8 trajectories in flight
  c.rollout.sync_interval = 1
  c.rollout.vllm.update(dict(dtype="bfloat16", gpu_memory_utilization=0.4, tensor_parallel_size=1))
  set_evoharness_loss(c.algorithm, kl_coef=0.01)  # B.5: GRPO, KL loss 0.01 (type kl = k1) to the SFT policy
  c.optim.learning_rate = 1e-6  # B.5: lr 1e-6
  c.optim.schedule = "constant"
  c.optim.warmup_steps = 0
  c.optim.weight_decay = 0.01
  c.optim.max_grad_norm = 1.0
  c.train.seq_len = 12288 + 512  # one turn (its per-turn prompt and reply) per sequence
  c.train.pack = True
  c.train.num_microbatches = 64  # B.5: ppo micro batch 2 per GPU
  c.total_steps = UPDATES  # B.5: 150 policy updates
  c.sft.steps = 4 * 1153 // 16  # B.5: 4 epochs over ~1,153 next-action examples, batch 16 (288 steps)
  c.sft.batch_size = 16
  c.sft.learning_rate = 1e-5  # B.5: lr 1e-5 cosine, 10 % warmup
  c.sft.schedule = "cosine"
  c.sft.warmup_steps = 29
  c.sft.num_packs = 500  # B.5: the teacher ran on 500 training tasks (successful episodes kept)
  c.sft.seq_len = 4096  # B.5: max length 4096
  c.sft.num_microbatches = 8  # B.5: micro batch 2
  # B.5: validation on valid_seen (140 games) and valid_unseen (134), temperature 1.0, top-p 0.9
  c.eval.envs = {"seen": env_entry("alfworld_synth", "train", split="valid_seen"),
                 "unseen": env_entry("alfworld_synth", "train", split="valid_unseen")}
  c.eval.pack_size = 1
  c.eval.num_packs = 140
  c.eval.temperature = 1.0
  c.eval.top_p = 0.9
  c.eval.every = 25
  c.eval.at_start = True
  c.eval.at_end = True
  c.checkpoint.every = 25
  c.checkpoint.max_to_keep = 3
  c.checkpoint.export_hf = True
  c.log.tensorboard = True
  return c
