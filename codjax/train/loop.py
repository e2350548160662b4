"""CoD-Train: the outer loop (CoD paper, Sec. 3.1 and Appendix A; docs/methods/cod.md).

  packs (PackSampler) -> CoD rollouts with the engine (G repeats per pack, lock-step episodes)
  -> per-episode scores (CoD per-position credit or GRPO) -> RED-Weight -> [B, T] batch
  -> jitted train step -> weight sync every ``sync_interval`` steps -> metrics / eval / checkpoint

Synchronous (``rollout.mode = "sync"``): each step's rollout uses the engine's current weights, which lag the
trainer by at most ``sync_interval - 1`` steps (the staleness bound). Sampling keys are a function of (seed,
step), the pack stream of its saved position, so ``resume`` continues a run exactly.

Asynchronous (``rollout.mode = "async"``, ``codjax.train.async_rollouts``): a producer thread rolls out batch i
(the i-th draw of packs, sampling keys from (seed, i)) with the newest published policy version while the
trainer trains on the batches already finished; ``rollout.max_staleness`` bounds the versions a trained batch
lags (``stale_policy`` wait: the producer waits; drop: stale batches are dropped and counted). With
``max_staleness = 0`` and ``wait`` it is the synchronous loop step for step. A checkpoint records the task
source's position after the last TRAINED batch (not the producer's), so a resumed run trains every pack once:
the producer restarts there with the checkpointed policy (queued, untrained batches are discarded and drawn
again). With ``max_staleness = 0`` the resume is exact; with ``k > 0`` the packs, their order and their sampling
seeds continue exactly, but the policy version a batch is sampled with depends on timing (the first batches
after a resume use the restored policy, as if the producer had just caught up). Not supported in async mode:
several processes, workflows with ``after_step`` (EvoHarness), task sources with ``observe`` (lineages).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from codjax.agents.token_backend import EngineBackend
from codjax.common import interrupts
from codjax.common.metrics import MetricWriter, Progress
from codjax.envs.base import derive_seed
from codjax.eval.runner import evaluate_engine, template_kwargs
from codjax.models import from_pretrained, save_pretrained
from codjax.models.axes import PARAM_LOGICAL_AXES
from codjax.models.tokenizer import load_tokenizer
from codjax.parallel import batch_shards, maybe_initialize_distributed, mesh_from_config
from codjax.parallel import multihost
from codjax.parallel.sharding import state_shardings
from codjax.rl.batch import TrainSequence, assemble_batch
from codjax.rl.train_step import device_batch, init_train_state, make_optimizer, make_train_step
from codjax.rollout.base import SamplingParams
from codjax.train.async_rollouts import AsyncRollouts, InterruptibleEngine, episodes_of, staleness_summary
from codjax.train.checkpoint import Checkpointer, committed_steps
from codjax.train.config import logits_at_loss_tokens, model_compute_overrides, validate
from codjax.train.config import optimizer_config, step_config  # noqa: F401  (also this module's API)
from codjax.train.engines import build_engine
from codjax.train.host_rollouts import rollout_on_hosts
from codjax.train.reference import build_reference
from codjax.workflows import get_workflow
from codjax.workflows.credit import apply_red
from codjax.workflows.packs import PackSampler, env_specs


def make_task_source(cfg, specs):
  """The training packs' source: the configured environments' pack stream, or evolved lineages through the
  Evolution-Lineage (or random) scheduler when ``data.lineages.dir`` is set (``codjax.evolve.task_source``)."""
  d = cfg.data
  if "lineages" in d and d.lineages.dir:
    from codjax.evolve.lineage import load_lineages
    from codjax.evolve.task_source import LineageTaskSource

    li = d.lineages
    return LineageTaskSource(load_lineages(str(li.dir)), scheduler=str(li.scheduler), pack_size=int(d.pack_size),
                             tau=float(li.tau), stuck_limit=int(li.stuck_limit), seed=int(cfg.seed))
  return PackSampler(specs, int(d.pack_size), str(d.packing), int(cfg.seed), int(d.n_train), int(d.n_test),
                     int(d.split_seed))


def episodes_to_sequences(scored) -> tuple[list[TrainSequence], list]:
  """Training sequences of the episodes with loss tokens, and those episodes (same order)."""
  kept = [(ep, score) for ep, score in scored if ep.num_loss_tokens > 0]
  return [TrainSequence(ep.tokens, ep.loss_mask, ep.logprobs, score) for ep, score in kept], [ep for ep, _ in kept]


# what the training progress bar shows after each step; with a lineage task source also the scheduler's figures
# (the Environment Evolution paper's Figure 5: partially solved groups, pass rate, the batch's mean generation)
PROGRESS_KEYS = ("reward_mean", "loss", "tok_per_s")
SCHEDULER_KEYS = ("sched/partial_groups", "sched/pass_rate", "sched/batch_generation")


def ensure_model_dir(cfg) -> str:
  """Returns the HF directory to load: ``model.path``, or with ``model.make_tiny`` the random tiny checkpoint of
  the config's generating settings, written first when absent (``codjax.train.base_model``: its directory, the
  record of what generated it, the refusal of a model generated with other settings). Raises
  ``BaseModelError`` (a ValueError naming ``model.path``) when the model is missing or is another one."""
  from codjax.train.base_model import resolve_base_model

  return resolve_base_model(cfg)


def async_unsupported(cfg, workflow) -> str | None:
  """Why ``rollout.mode = "async"`` cannot run this configuration, or None when it can."""
  if multihost.process_count() > 1:
    return (f"{multihost.process_count()} processes: the asynchronous loop runs in one process (each process "
            "would need its own producer and a shared queue)")
  if hasattr(workflow, "after_step"):
    return (f"workflow {cfg.workflow!r} changes its state between batches (after_step), which the batches the "
            "producer has already rolled out would not see")
  if "lineages" in cfg.data and cfg.data.lineages.dir:
    return ("data.lineages.dir: the lineage scheduler learns from each trained batch (observe), so the packs it "
            "draws would depend on how far the producer ran ahead")
  return None


def run_config_record(cfg, model_path: str) -> dict:
  """The run's ``config.json``: the config with ``model.path`` set to the model the run started from, and
  ``base_model``: that path and, for a generated model, what generated it (``codjax.train.base_model``)."""
  from codjax.train.base_model import read_record

  out = json.loads(cfg.to_json_best_effort())
  out["model"]["path"] = model_path
  out["base_model"] = {"path": model_path, "generated_by": read_record(model_path) if cfg.model.make_tiny else None}
  return out


class RunDirInUse(ValueError):
  """A fresh (not resumed) run was pointed at a run directory that holds another run's checkpoints."""


class Trainer:
  """Holds the model, optimizer, engine and run directory of one CoD-Train run."""

  def __init__(self, config: ml_collections.ConfigDict, resume: bool = False, model_path: str | None = None):
    self.cfg = cfg = validate(config)
    maybe_initialize_distributed()
    self.mesh = mesh_from_config(cfg.mesh)
    self.run_dir = os.path.abspath(cfg.run_dir)
    if not resume and (steps := committed_steps(os.path.join(self.run_dir, "checkpoints"))):
      # before anything is written: a fresh run here would overwrite config.json and metrics.jsonl and fail at
      # its first save (orbax refuses an existing step) after minutes of work
      raise RunDirInUse(f"run_dir {self.run_dir} already holds the checkpoints of a run (steps {steps}): pass "
                        "--resume (Trainer(..., resume=True)) to continue it, or choose another run_dir")
    self.workflow = get_workflow(str(cfg.workflow))
    self.async_mode = str(cfg.rollout.mode) == "async"
    if self.async_mode and (why := async_unsupported(cfg, self.workflow)):
      raise ValueError(f"rollout.mode='async' is not supported with {why}; use rollout.mode='sync'")
    m = cfg.model
    # the model before the run directory: a missing model, or a generated one with other settings, is refused
    # before anything is written there
    self.model_path = model_path or (ensure_model_dir(cfg) if m.path or m.make_tiny else "")
    if not self.model_path:
      raise ValueError("training needs a tokenizer: set model.path to an HF directory, or model.make_tiny=True "
                       "(model.preset alone only serves shape planning)")
    self.base_model_path = self.model_path
    os.makedirs(self.run_dir, exist_ok=True)
    if multihost.is_primary():  # run files: process 0 only (codjax.parallel.multihost)
      with open(os.path.join(self.run_dir, "config.json"), "w") as f:
        json.dump(run_config_record(cfg, self.model_path), f, indent=2)
    if hasattr(self.workflow, "prepare"):  # workflow state the rollouts read (EvoHarness: the initial bank)
      if multihost.is_primary():
        self.workflow.prepare(cfg)
      multihost.barrier("workflow_prepare")
    over = model_compute_overrides(m)
    self.sft_stats = None
    if cfg.sft.steps > 0 and not model_path:
      self.model_path, self.sft_stats = self.warm_start(self.model_path, over)
    self.tokenizer = load_tokenizer(self.model_path)
    self.model = from_pretrained(self.model_path, dtype=m.dtype, mesh=self.mesh, **over)
    # the frozen KL reference (kl_coef > 0 only): a copy of the model RL starts from, or ref_model_path
    self.reference = build_reference(cfg, self.model, self.mesh)
    self.optimizer = make_optimizer(optimizer_config(cfg.optim, cfg.total_steps))
    self.graphdef, state = init_train_state(self.model, self.optimizer)
    self.state = jax.device_put(state, state_shardings(state, self.mesh, PARAM_LOGICAL_AXES))
    self.step_cfg = step_config(cfg)
    self._step_fns: dict[tuple, object] = {}
    self.specs = env_specs(cfg.data.envs)
    self.sampler = make_task_source(cfg, self.specs)
    # with several processes each one samples its share of the packs on its own devices (local mesh)
    self.engine = build_engine(cfg.rollout, multihost.host_local_copy(self.model), self.model_path,
                               self.mesh if multihost.process_count() == 1 else multihost.local_mesh(cfg.mesh),
                               seed=cfg.seed)
    r = cfg.rollout
    self.params = SamplingParams(temperature=float(r.temperature), top_p=float(r.top_p), top_k=int(r.top_k),
                                 max_tokens=int(r.max_response_tokens))
    self.template_kwargs = template_kwargs(cfg)  # Qwen3's enable_thinking (T1: off), as in evaluation
    # several processes sample disjoint packs, so a reply's seed must not depend on the call it shares
    # (seed_by="episode"); one process keeps the configured seeding
    seed_by = "episode" if multihost.process_count() > 1 else str(r.seed_by)
    # async: the producer's rollouts go through a wrapper that aborts them when the producer is stopped
    self._guard = InterruptibleEngine(self.engine) if self.async_mode else None
    self.backend = EngineBackend(self._guard or self.engine, self.tokenizer, self.params, seed_by=seed_by,
                                 seed=int(cfg.seed) if seed_by == "episode" else None,
                                 max_prompt_tokens=int(r.max_prompt_tokens), template_kwargs=self.template_kwargs)
    self.ckpt = Checkpointer(os.path.join(self.run_dir, "checkpoints"), int(cfg.checkpoint.max_to_keep))
    self.teachers = None
    if cfg.algorithm.loss == "opd":
      from codjax.train.teachers import TeacherPool

      self._label_of_family = {id(s.family): s.label for s in self.specs}
      self.teachers = TeacherPool(dict(cfg.algorithm.teachers), dtype=m.dtype, mesh=self.mesh,
                                  temperature=float(r.temperature), vocab_chunks=int(m.vocab_chunks),
                                  seq_len=int(cfg.train.seq_len))
    self.step = 0
    self.last_sync = 0
    self._engine_model = None
    # async: the producer (started by the first train step), the task source's state after the last trained
    # batch, the index of the batch after it, and the batches/episodes dropped as too stale (whole run)
    self.producer: AsyncRollouts | None = None
    self._next_batch = 0
    self._dropped = {"batches": 0, "episodes": 0}
    self._last_step_end: float | None = None
    if resume:
      self._restore()
    self._consumed_sampler = self.sampler.state() if self.async_mode else None
    # a resumed run re-runs the steps after its checkpoint: their old metric lines are dropped (all lines
    # when no checkpoint was restored), so metrics.jsonl reads as one uninterrupted run
    self.writer = MetricWriter(self.run_dir, tensorboard=bool(cfg.log.tensorboard),
                               keep_through=(self.step if self.step > 0 else -1) if resume else None,
                               enabled=multihost.is_primary())

  def warm_start(self, base_path: str, over: dict) -> tuple[str, dict | None]:
    """SFT stage: trains the base model on expert transcripts once; later runs (and resumes) reuse it."""
    from codjax.train.sft import run_sft

    out = os.path.join(self.run_dir, "sft_model")
    stats_path = os.path.join(self.run_dir, "sft_stats.json")
    if multihost.broadcast_json(os.path.isfile(os.path.join(out, "config.json"))):
      stats = json.load(open(stats_path)) if os.path.isfile(stats_path) else None
      return out, stats
    tok = load_tokenizer(base_path)
    base = from_pretrained(base_path, dtype=self.cfg.model.dtype, mesh=self.mesh, **over)
    _, stats = run_sft(self.cfg, base, tok, env_specs(self.cfg.data.envs), self.mesh, out, self.run_dir)
    if multihost.is_primary():
      with open(stats_path, "w") as f:
        json.dump(stats, f, indent=2)
    print(f"[sft] done: {self.cfg.sft.steps} steps in {stats['train_s']:.0f} s ({stats['tok_per_s']:.0f} tok/s)",
          flush=True)
    return out, stats

  # -- state ------------------------------------------------------------------------------------------
  def current_model(self):
    return nnx.merge(self.graphdef, self.state.params)

  def _restore(self) -> None:
    """Continues from the newest readable checkpoint (unreadable newer steps are quarantined). When the
    engine lagged the trainer at that step, its sampling weights come from the same orbax step."""
    got = self.ckpt.restore_latest(self.state, engine_target=self._engine_target)
    if got is None:
      logging.info("no checkpoint in %s; starting from scratch", self.ckpt.directory)
      return
    meta = got.meta
    if meta.get("seed") != self.cfg.seed:
      raise ValueError(f"checkpoint was written with seed {meta.get('seed')}, config has {self.cfg.seed}")
    self.state = jax.device_put(got.state, state_shardings(got.state, self.mesh, PARAM_LOGICAL_AXES))
    self.step = int(meta["step"])
    self.last_sync = int(meta["last_sync"])
    self.sampler.restore(meta["sampler"])
    if self.async_mode:  # the producer starts from here with the restored policy (version `step`)
      a = meta.get("async", {})
      self._next_batch = int(a.get("next_batch", self.step))
      self._dropped = {"batches": int(a.get("dropped_batches", 0)), "episodes": int(a.get("dropped_episodes", 0))}
      self.last_sync = self.step
    if "workflow_state" in meta and hasattr(self.workflow, "load_state_dict"):
      if multihost.is_primary():
        self.workflow.load_state_dict(self.cfg, meta["workflow_state"])
      multihost.barrier("workflow_restore")
    if self.async_mode:
      pass  # the producer applies the restored params before its first batch
    elif got.engine is None:
      self.sync_weights()  # the next step would sync anyway
    else:
      # the engine sampled from the weights of step `last_sync`, stored in this checkpoint step
      self._engine_model = nnx.merge(self.graphdef, got.engine)
      self.engine.update_weights(multihost.host_local_copy(self._engine_model))
    logging.info("resumed from checkpoint step %d (engine weights of step %d)", got.step, self.last_sync)

  def _engine_target(self, meta: dict):
    """The params pytree a checkpoint with this ``meta`` must also hold for the engine, or None. The engine
    lags when ``0 < step - last_sync < sync_interval``: the next step samples from the weights of step
    ``last_sync``, which only the checkpoint holds. Otherwise the next step syncs (or the engine already
    holds the state's weights), so none are needed."""
    lag = int(meta["step"]) - int(meta["last_sync"])
    return self.state.params if 0 < lag < self.cfg.rollout.sync_interval else None

  def _needs_sync(self) -> bool:
    return self._engine_model is None or self.step - self.last_sync >= self.cfg.rollout.sync_interval

  def save(self) -> None:
    if self.async_mode:  # the position after the last trained batch, not the producer's
      meta = {"step": self.step, "last_sync": self.step, "sampler": self._consumed_sampler, "seed": self.cfg.seed,
              "async": {"next_batch": self._next_batch, "dropped_batches": self._dropped["batches"],
                        "dropped_episodes": self._dropped["episodes"]}}
    else:
      meta = {"step": self.step, "last_sync": self.last_sync, "sampler": self.sampler.state(), "seed": self.cfg.seed}
    if hasattr(self.workflow, "state_dict"):  # the workflow's own state (EvoHarness: the Experience bank)
      meta["workflow_state"] = multihost.broadcast_json(
          self.workflow.state_dict(self.cfg) if multihost.is_primary() else None)
    # the weights the engine samples from, when the next step would still use them: one orbax step holds
    # state, meta and these, so a restored step never pairs with another step's engine weights
    lags = self._engine_model is not None and self._engine_target(meta) is not None
    engine = nnx.state(self._engine_model, nnx.Param) if lags else None
    self.ckpt.save(self.step, self.state, meta, engine_params=engine)
    if self.cfg.checkpoint.export_hf:
      self.export_hf(os.path.join(self.run_dir, "hf", f"step_{self.step}"))

  def export_hf(self, path: str) -> str:
    save_pretrained(self.current_model(), path, tokenizer=self.tokenizer)
    return path

  def sync_weights(self) -> None:
    """Pushes the current params to the engine. A copy is kept (the train step donates its buffers) when
    the engine lags the trainer (sync_interval > 1), so a checkpoint can record the sampling policy."""
    model = self.current_model()
    self.engine.update_weights(multihost.host_local_copy(model))
    if self.cfg.rollout.sync_interval > 1:
      graphdef, params = nnx.split(model)
      self._engine_model = nnx.merge(graphdef, jax.tree.map(jnp.copy, params))
    else:
      self._engine_model = model  # never read after the next step (which always syncs again)
    self.last_sync = self.step

  def _step_fn(self, batch):
    key = tuple(sorted(batch))
    if key not in self._step_fns:
      self._step_fns[key] = make_train_step(self.graphdef, self.optimizer, self.step_cfg, self.state, self.mesh,
                                            batch_fields=key)
    return self._step_fns[key]

  # -- one RL step ------------------------------------------------------------------------------------
  def train_step(self) -> dict:
    """One RL step: roll out (sync) or take the producer's next batch (async), score, train; its metrics
    (with the engine's own counters when it has them: a fleet's live servers, failovers, sync time)."""
    m = self._train_step_async() if self.async_mode else self._train_step_sync()
    engine_stats = getattr(self.engine, "stats", None)
    if callable(engine_stats):  # FleetEngine.stats(); (JaxEngine.stats is its own dict of counters, not logged)
      m.update(engine_stats())
    return m

  def _train_step_sync(self) -> dict:
    cfg = self.cfg
    t_sync = 0.0
    if self._needs_sync():
      t0 = time.perf_counter()
      self.sync_weights()
      t_sync = time.perf_counter() - t0
    t0 = time.perf_counter()
    packs = self.sampler.next_packs(int(cfg.data.packs_per_step))
    self.backend.reseed(derive_seed(cfg.seed, self.step))
    trajs = self.rollout(packs)
    t_roll = time.perf_counter() - t0
    for ep in episodes_of(trajs):
      ep.policy_version = self.last_sync
    m = self._learn(packs, trajs, t_roll)
    m["staleness"] = float(self.step - 1 - self.last_sync)
    m["time/sync_s"] = t_sync
    return m

  def _produce(self, index: int) -> tuple[list, dict, list]:
    """Producer thread: batch ``index``'s packs, the task source's state after them, and their rollouts with
    the engine's current weights (sampling keys from (seed, index), as the synchronous step ``index``)."""
    packs = self.sampler.next_packs(int(self.cfg.data.packs_per_step))
    state = self.sampler.state()
    self.backend.reseed(derive_seed(self.cfg.seed, index))
    return packs, state, self.rollout(packs)

  def _published_params(self):
    """A copy of the current model (the next train step donates the state's buffers)."""
    return nnx.merge(self.graphdef, jax.tree.map(jnp.copy, self.state.params))

  def _start_producer(self) -> AsyncRollouts:
    r = self.cfg.rollout
    if int(r.max_staleness) == 0 and str(r.stale_policy) == "drop":
      logging.warning("rollout.stale_policy='drop' with max_staleness=0: every batch the producer starts before "
                      "the previous step's weights are published is dropped; 'wait' is the synchronous loop")
    self.producer = AsyncRollouts(
        self._produce, lambda model: self.engine.update_weights(model), version=self.step,
        model=self._published_params(), first_batch=self._next_batch, max_staleness=int(r.max_staleness),
        stale_policy=str(r.stale_policy), interrupt=self._guard.stop_event, on_abandon=self._guard.end_live_sessions)
    self._last_step_end = self.producer.started_at
    return self.producer

  def stop_producer(self) -> None:
    """Stops the producer (async); its queued, untrained batches are discarded and the task source goes back
    to the position after the last trained batch, so a later step (or a resume) draws them again."""
    if self.producer is None:
      return
    stopped = self.producer.close()
    self.producer = None
    if stopped:
      self.sampler.restore(self._consumed_sampler)

  def _train_step_async(self) -> dict:
    t_start = time.perf_counter()
    producer = self.producer or self._start_producer()
    got = producer.take(self.step)
    b = got.batch
    self._dropped["batches"] += got.dropped_batches
    self._dropped["episodes"] += got.dropped_episodes
    version = b.version
    m = self._learn(b.packs, b.trajs, b.rollout_s)
    # self.step is now the new version; the batch's packs are consumed
    self._consumed_sampler, self._next_batch, self.last_sync = b.sampler_state, b.index + 1, self.step
    producer.publish(self.step, self._published_params())
    stale_mean, stale_max = staleness_summary(got.staleness)
    m["staleness"] = float(self.step - 1 - version)
    m["time/sync_s"] = b.sync_s
    t_end = time.perf_counter()
    wall = t_end - t_start
    m["time/step_s"] = wall
    m["time/trainer_idle_s"] = got.idle_s
    m["async/staleness"], m["async/staleness_max"] = stale_mean, stale_max
    m["async/policy_version"] = float(version)
    m["async/batch_index"] = float(b.index)
    m["async/queue_depth"] = float(got.queue_depth)
    m["async/dropped_batches"] = float(self._dropped["batches"])
    m["async/dropped_episodes"] = float(self._dropped["episodes"])
    m["async/trainer_idle_frac"] = got.idle_s / max(wall, 1e-9)
    since = self._last_step_end if self._last_step_end is not None else t_start
    m["async/producer_busy_frac"] = producer.busy_seconds(since, t_end) / max(t_end - since, 1e-9)
    self._last_step_end = t_end
    return m

  def _learn(self, packs, trajs, t_roll: float) -> dict:
    """Scores ``trajs`` (the rollouts of ``packs``), trains one step on them (``self.step`` += 1); the metrics
    of the step but ``staleness`` and the sync time."""
    cfg = self.cfg
    a = cfg.algorithm
    scored = self.workflow.score(trajs, cfg)
    temp = None
    if a.red_weight:
      scored, temp = apply_red(scored, a.red_t_min, a.red_t_max, a.red_max_iter, a.red_tol)
    seqs, eps = episodes_to_sequences(scored)
    if self.teachers is not None:
      from codjax.train.teachers import attach_teacher_logprobs

      label_of_pack = {p.pack_id: self._label_of_family[id(p.family)] for p in packs}
      attach_teacher_logprobs(self.teachers, seqs, [label_of_pack[ep.pack_id] for ep in eps])
    shards = batch_shards(self.mesh)
    batch, bstats = assemble_batch(seqs, int(cfg.train.seq_len), pack=bool(cfg.train.pack),
                                   row_multiple=int(cfg.train.num_microbatches) * shards,
                                   bucket_len=not cfg.train.pack, with_teacher=self.teachers is not None,
                                   with_loss_index=logits_at_loss_tokens(cfg))
    t_ref = 0.0
    if self.reference is not None:  # log pi_ref of every loss token, for the KL term
      t0 = time.perf_counter()
      batch["ref_logprobs"] = jax.block_until_ready(
          self.reference.logprobs(batch, num_chunks=int(cfg.train.num_microbatches)))
      t_ref = time.perf_counter() - t0
    t1 = time.perf_counter()
    self.state, out = self._step_fn(batch)(self.state, device_batch(batch, self.mesh))
    out = {k: float(v) for k, v in jax.device_get(out).items()}
    t_train = time.perf_counter() - t1
    self.step += 1
    m = self.workflow.metrics(trajs)
    if hasattr(self.sampler, "observe"):  # evolved lineages: pass rates -> the scheduler (Eq. 2)
      m.update(self.sampler.observe(packs, trajs))
    if hasattr(self.workflow, "after_step"):  # between batches (EvoHarness: bank usage, u, consolidation)
      m.update(self._after_step(trajs))
    m.update({f"train/{k}": v for k, v in out.items()})
    m.update({f"batch/{k}": v for k, v in bstats.items() if k != "layout"})
    m["red_temperature"] = float(temp) if temp is not None else 0.0
    m["red_active"] = float(temp is not None)
    m["advantage_abs_mean"] = float(np.mean([abs(s) for _, s in scored])) if scored else 0.0
    m["time/rollout_s"], m["time/train_s"] = t_roll, t_train
    if self.reference is not None:
      m["time/reference_s"] = t_ref
    m["tok_per_s"] = bstats["tokens"] / max(t_train, 1e-9)
    m["rollout_gen_tok_per_s"] = m["generated_tokens"] / max(t_roll, 1e-9)
    m["loss"] = out["loss"]
    return m

  def _after_step(self, trajs) -> dict:
    """The workflow's ``after_step`` on process 0 (the others wait), with ``generate``: prompts -> replies of
    the current sampling policy through the trainer's backend (an LLM consolidator that is the policy itself)."""
    out = None
    if multihost.is_primary():
      out = self.workflow.after_step(trajs, self.cfg, self.step, generate=self.generate)
    if multihost.process_count() > 1:
      multihost.barrier("after_step")
      out = multihost.broadcast_json(out)
    return out

  def generate(self, prompts: list[str]) -> list[str]:
    """Single-turn replies of the current sampling policy to ``prompts`` (one user message each)."""
    from codjax.agents.episode import Episode

    eps = [Episode(kind="generate", position=i, env_name="generate", messages=[{"role": "user", "content": p}])
           for i, p in enumerate(prompts)]
    try:
      return list(self.backend.respond(eps))
    finally:
      for e in eps:
        self.backend.release(e)

  def rollout(self, packs) -> list:
    """The workflow's trajectories of ``packs`` (pack-major, ``data.repeats`` per pack); with several
    processes each rolls out its block of packs and all get every trajectory (``host_rollouts``)."""
    return rollout_on_hosts(self.workflow, self.backend, packs, int(self.cfg.data.repeats), self.cfg)

  # -- evaluation -------------------------------------------------------------------------------------
  def evaluate(self, tag: str | None = None) -> dict:
    """Evaluates the current parameters through the one evaluation path (``codjax.eval.runner``); writes
    ``eval/<tag>.json`` (``{"step", "results"}``), logs flat ``eval/<label>/<metric>`` values, prints the table.
    Async: the producer is held at a batch boundary meanwhile and re-applies its newest policy afterwards."""
    with self.producer.paused() if self.producer is not None else contextlib.nullcontext():
      self.engine.update_weights(multihost.host_local_copy(self.current_model()))  # evaluate the current policy
      tag = tag or f"step_{self.step}"
      results = None
      if multihost.is_primary():  # with several processes process 0 evaluates (its engine holds the policy too)
        results = evaluate_engine(self.cfg, self.engine, self.tokenizer,
                                  progress=bool(self.cfg.log.progress)).results
        self._write_eval(tag, results)
      if multihost.process_count() > 1:
        multihost.barrier("evaluate")
        results = multihost.broadcast_json(results)
      if self._engine_model is not None and self.cfg.rollout.sync_interval > 1:
        # back to the (possibly stale) sampling policy
        self.engine.update_weights(multihost.host_local_copy(self._engine_model))
    flat = {}
    for label, r in results.items():
      for name, v in r.items():
        if isinstance(v, (int, float)):
          flat[f"eval/{label}/{name}"] = v
        elif isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
          flat.update({f"eval/{label}/{name}/{k}": x for k, x in enumerate(v)})
    self.writer.write(self.step, flat)
    if multihost.is_primary():
      print(f"\n[eval {tag}]\n" + self.workflow.table({f"{label} ({tag})": r for label, r in results.items()}),
            flush=True)
    return results

  def evaluate_baselines(self) -> dict:
    """Evaluates the scripted policies of ``eval.baselines`` on the evaluation packs (same packs and seeds as
    the model's evaluations); writes ``eval/baselines/<kind>.json`` and prints their table. ``expert`` is the
    configured expert (``sft.teacher_params``), ``teacher`` the SFT teacher (``sft.expert_random_frac`` of
    its moves random), ``random`` the environment's random player."""
    from codjax.agents.episode import PolicyBackend
    from codjax.eval.runner import run_evaluation, token_counting_backend
    from codjax.workflows.scripted import scripted_policy

    cfg, out = self.cfg, {}
    if not multihost.is_primary():  # scripted players: process 0 alone writes their files
      multihost.barrier("baselines")
      return out
    for kind in cfg.eval.baselines:
      frac = float(cfg.sft.expert_random_frac) if kind == "teacher" else 0.0

      def backend_for(spec, kind=kind, frac=frac):
        policy = scripted_policy(cfg, spec.name, kind, frac)
        return token_counting_backend(cfg, PolicyBackend(policy, seed=int(cfg.seed)), self.tokenizer)

      results = run_evaluation(cfg, backend_for, progress=bool(cfg.log.progress)).results
      os.makedirs(os.path.join(self.run_dir, "eval", "baselines"), exist_ok=True)
      with open(os.path.join(self.run_dir, "eval", "baselines", f"{kind}.json"), "w") as f:
        json.dump({"step": 0, "policy": kind, "results": results}, f, indent=2)
      out[kind] = results
    if out:
      print("\n[eval baselines]\n" + self.workflow.table({f"{label} ({kind})": r for kind, res in out.items()
                                                          for label, r in res.items()}), flush=True)
    multihost.barrier("baselines")
    return out

  # -- the whole run ----------------------------------------------------------------------------------
  def run(self) -> dict | None:
    cfg = self.cfg
    if self.step == 0 and cfg.eval.num_packs:
      self.evaluate_baselines()
    if cfg.eval.at_start and self.step == 0 and cfg.eval.num_packs:
      self.evaluate("start")
    bar = Progress(cfg.total_steps, self.step, enabled=bool(cfg.log.progress) and multihost.is_primary())
    periodic = None  # (step, results) of the newest ``eval.every`` evaluation of this process
    while self.step < cfg.total_steps:
      m = self.train_step()
      if self.step % cfg.log.every == 0 or self.step == cfg.total_steps:
        self.writer.write(self.step, m)
      bar.update(m, keys=PROGRESS_KEYS + tuple(k for k in SCHEDULER_KEYS if k in m))
      if cfg.checkpoint.every and self.step % cfg.checkpoint.every == 0:
        self.save()
      if cfg.eval.every and self.step % cfg.eval.every == 0 and cfg.eval.num_packs:
        periodic = (self.step, self.evaluate())
      interrupts.check()  # a SIGTERM whose exception a gc callback dropped (codjax.common.interrupts)
    bar.close()
    self.stop_producer()  # async: no rollouts past the last step
    final = None
    if cfg.eval.at_end and cfg.eval.num_packs:
      if periodic is not None and periodic[0] == self.step:
        # the periodic evaluation just ran on these weights; evaluation seeds do not depend on the step, so a
        # second pass would repeat it exactly: it is the final one
        final = self._reuse_as_final(periodic[1])
      else:
        final = self.evaluate("final")
      self._report_improvement(final)
    if cfg.checkpoint.every or cfg.checkpoint.export_hf:
      if self.step not in self.ckpt.steps():
        self.save()
    return final

  def _write_eval(self, tag: str, results: dict, **extra) -> None:
    """``eval/<tag>.json``: ``{"step", "results", **extra}`` (process 0 only)."""
    if multihost.is_primary():
      os.makedirs(os.path.join(self.run_dir, "eval"), exist_ok=True)
      with open(os.path.join(self.run_dir, "eval", f"{tag}.json"), "w") as f:
        json.dump({"step": self.step, "results": results, **extra}, f, indent=2)

  def _reuse_as_final(self, results: dict) -> dict:
    """Writes ``eval/final.json`` from the evaluation of ``step_<step>`` (same weights, same seeds)."""
    self._write_eval("final", results, same_as=f"step_{self.step}")
    if multihost.is_primary():
      print(f"\n[eval final] = [eval step_{self.step}] (the same weights and evaluation seeds)", flush=True)
    return results

  def _report_improvement(self, final: dict) -> None:
    """Prints (and saves) the paired change of the evaluation from the start of RL to the end: the
    workflow's ``compare`` (CoD: mean solve reward per position; ORBIT: success count and per episode)."""
    start_path = os.path.join(self.run_dir, "eval", "start.json")
    if not multihost.is_primary() or not os.path.isfile(start_path):
      return
    start = json.load(open(start_path))["results"]
    rows = {}
    for label, r in final.items():
      if label not in start:
        continue
      c = self.workflow.compare(start[label], r)
      rows[label] = c
      per = " ".join(f"{m:+.3f}+-{se:.3f}" for m, se in c["per_position"])
      print(f"[RL effect] {label}: {c['metric']} {c['before']:.3f} -> {c['after']:.3f} (paired diff {c['mean']:+.3f} "
            f"+- {c['se']:.3f}, {c['mean'] / max(c['se'], 1e-12):+.1f} s.e.; per {self.workflow.unit} {per})",
            flush=True)
    with open(os.path.join(self.run_dir, "eval", "rl_effect.json"), "w") as f:
      json.dump(rows, f, indent=2)

  def close(self) -> None:
    """Stops the producer (async), then closes the metric files, the checkpointer and the engine."""
    producer, self.producer = self.producer, None
    stopped = producer.close() if producer is not None else True
    self.writer.close()
    self.ckpt.close()
    if stopped:  # a producer that did not stop may still be using the engine
      self.engine.close()
