"""SFT warm start on scripted-expert transcripts (the EvoHarness two-stage recipe, stage 1).

Transcripts are produced through the same workflow the policy later runs (``get_workflow(cfg.workflow).rollout`` over a
``TokenizingBackend`` around the expert), so every episode's tokens, chat layout and loss mask are exactly
what the RL rollouts will produce: the loss is cross-entropy on the expert's reply tokens (+ end of turn).
``expert_random_frac`` replaces that fraction of the expert's solve actions by uniformly random legal ones
(a weaker start that leaves RL headroom).
"""

from __future__ import annotations

import time

import jax
import numpy as np

from codjax.agents.episode import PolicyBackend
from codjax.agents.token_backend import TokenizingBackend
from codjax.common.metrics import MetricWriter, Progress
from codjax.envs.base import derive_seed
from codjax.parallel.mesh import batch_shards
from codjax.rl.batch import TrainSequence, assemble_batch, length_bucket
from codjax.rl.losses import LossConfig
from codjax.rl.train_step import (OptimizerConfig, StepConfig, device_batch, init_train_state, make_optimizer,
                                  make_train_step)
from codjax.train.config import logits_at_loss_tokens
from codjax.workflows.packs import PackSampler
from codjax.workflows.scripted import configured_teacher


def expert_transcripts(cfg, specs, tokenizer, num_packs: int, seed: int) -> tuple[list[TrainSequence], dict]:
  """Tokenized expert episodes over ``num_packs`` training packs, one repeat each, through the configured
  workflow (CoD: solve + update episodes; ORBIT: multi-episode conversations)."""
  from codjax.workflows import get_workflow

  workflow = get_workflow(str(cfg.workflow))

  sampler = PackSampler(specs, int(cfg.data.pack_size), str(cfg.data.packing), seed, int(cfg.data.n_train),
                        int(cfg.data.n_test), int(cfg.data.split_seed))
  packs = sampler.next_packs(num_packs)
  seqs, stats = [], {"episodes": 0, "truncated": 0}
  rewards = []
  by_env: dict[str, list] = {}
  for p in packs:
    by_env.setdefault(p.env_name, []).append(p)
  for env_name, env_packs in by_env.items():
    policy = configured_teacher(cfg, env_name, float(cfg.sft.expert_random_frac))
    backend = TokenizingBackend(PolicyBackend(policy, seed=seed), tokenizer,
                                max_prompt_tokens=int(cfg.rollout.max_prompt_tokens),
                                max_response_tokens=int(cfg.rollout.max_response_tokens),
                                template_kwargs={"enable_thinking": bool(cfg.model.enable_thinking)})
    trajs = workflow.rollout(backend, env_packs, 1, cfg)
    rewards.append(workflow.metrics(trajs))
    # a workflow may keep only some of a transcript (EvoHarness: the teacher's successful episodes, B.5)
    episodes_of = getattr(workflow, "sft_episodes", lambda t: t.episodes())
    for t in trajs:
      for ep in episodes_of(t):
        stats["episodes"] += 1
        stats["truncated"] += int(ep.truncated)
        if ep.num_loss_tokens:
          seqs.append(TrainSequence(ep.tokens, ep.loss_mask, [0.0] * len(ep.tokens), 1.0))
  stats["teacher_metrics"] = {k: float(np.mean([m[k] for m in rewards if k in m]))
                              for k in sorted({k for m in rewards for k in m})}
  stats["tokens"] = int(sum(len(s.tokens) for s in seqs))
  stats["loss_tokens"] = int(sum(int(np.sum(s.loss_mask)) for s in seqs))
  return seqs, stats


def bucketed_schedule(lengths: list[int], batch_size: int, max_len: int, rng: np.random.Generator,
                      row_multiple: int = 1) -> list[list[int]]:
  """One epoch of batches: sequences grouped by ``length_bucket``, shuffled within and across buckets."""
  groups: dict[int, list[int]] = {}
  for i, n in enumerate(lengths):
    groups.setdefault(length_bucket(n, max_len), []).append(i)
  batches = []
  for idx in groups.values():
    idx = [idx[j] for j in rng.permutation(len(idx))]
    batches += [idx[j:j + batch_size] for j in range(0, len(idx), batch_size)]
  return [batches[j] for j in rng.permutation(len(batches))]


def run_sft(cfg, model, tokenizer, specs, mesh, out_dir: str, log_dir: str):
  """Trains ``model`` with the SFT loss for ``cfg.sft.steps`` steps; saves it to ``out_dir`` (HF format).

  Returns the trained model and a stats dict."""
  from codjax.models import save_pretrained
  from codjax.models.axes import PARAM_LOGICAL_AXES
  from codjax.parallel.sharding import state_shardings
  from flax import nnx

  s = cfg.sft
  t0 = time.perf_counter()
  seqs, stats = expert_transcripts(cfg, specs, tokenizer, int(s.num_packs), derive_seed(cfg.seed, 5))
  stats["data_s"] = time.perf_counter() - t0
  if not seqs:
    raise ValueError(f"SFT has no transcripts: the teacher's {stats['episodes']} episodes on {s.num_packs} packs left no "
                     f"training tokens (teacher metrics {stats['teacher_metrics']}); a workflow that keeps only "
                     "successful episodes needs a teacher that succeeds within the environment's budget")
  tm = stats["teacher_metrics"]
  shown = {k: round(v, 3) for k, v in tm.items() if k.startswith(("reward/", "success/", "reward_mean"))}
  print(f"[sft] {len(seqs)} expert episodes, {stats['tokens']} tokens ({stats['loss_tokens']} targets), "
        f"teacher {shown}", flush=True)
  opt = make_optimizer(OptimizerConfig(learning_rate=float(s.learning_rate), warmup_steps=int(s.warmup_steps),
                                       schedule=str(s.schedule), total_steps=int(s.steps),
                                       weight_decay=float(cfg.optim.weight_decay),
                                       max_grad_norm=float(s.max_grad_norm)))
  graphdef, state = init_train_state(model, opt)
  state = jax.device_put(state, state_shardings(state, mesh, PARAM_LOGICAL_AXES))
  step_cfg = StepConfig(loss="sft", loss_cfg=LossConfig(), num_microbatches=int(s.num_microbatches),
                        vocab_chunks=int(cfg.model.vocab_chunks), temperature=1.0)
  shards = batch_shards(mesh)
  rng = np.random.default_rng(derive_seed(cfg.seed, 6))
  pos = 0
  writer = MetricWriter(log_dir, name="sft", tensorboard=bool(cfg.log.tensorboard), enabled=jax.process_index() == 0)
  bar = Progress(int(s.steps), 0, enabled=bool(cfg.log.progress), desc="sft")
  t_train = time.perf_counter()
  tokens = 0
  bar_pos = 0
  # length-bucketed batches of one episode per row: attention cost follows each episode's own length
  row_multiple = int(s.num_microbatches) * shards
  num_rows = -(-int(s.batch_size) // row_multiple) * row_multiple
  schedule = bucketed_schedule([len(x.tokens) for x in seqs], int(s.batch_size), int(s.seq_len), rng,
                               row_multiple=row_multiple)
  step_fn = None
  for step in range(int(s.steps)):
    if pos >= len(schedule):
      schedule = bucketed_schedule([len(x.tokens) for x in seqs], int(s.batch_size), int(s.seq_len), rng,
                                   row_multiple=row_multiple)
      pos = 0
    chunk = [seqs[i] for i in schedule[pos]]
    pos += 1
    batch, bstats = assemble_batch(chunk, int(s.seq_len), pack=False, bucket_len=True, num_rows=num_rows,
                                   with_loss_index=logits_at_loss_tokens(cfg))
    if step_fn is None:
      step_fn = make_train_step(graphdef, opt, step_cfg, state, mesh, batch_fields=tuple(sorted(batch)))
    state, out = step_fn(state, device_batch(batch, mesh))
    tokens += bstats["tokens"]
    if (step + 1) % int(s.log_every) == 0 or step + 1 == int(s.steps):
      out = {k: float(v) for k, v in jax.device_get(out).items()}
      el = time.perf_counter() - t_train
      row = {"sft/loss": out["loss"], "sft/grad_norm": out["grad_norm"], "sft/tok_per_s": tokens / el,
             "sft/elapsed_s": el, "sft/truncated_sequences": bstats["truncated_sequences"], "sft/fill": bstats["fill"]}
      writer.write(step + 1, row)
      bar.update({"loss": out["loss"], "tok_per_s": tokens / el}, keys=("loss", "tok_per_s"),
                 n=(step + 1) - bar_pos)
      bar_pos = step + 1
  bar.close()
  writer.close()
  jax.block_until_ready(state.params)
  stats["train_s"] = time.perf_counter() - t_train
  stats["tok_per_s"] = tokens / max(stats["train_s"], 1e-9)
  trained = nnx.merge(graphdef, state.params)
  save_pretrained(trained, out_dir, tokenizer=tokenizer)
  return trained, stats
