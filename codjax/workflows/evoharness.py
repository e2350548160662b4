"""The trainer's ``evoharness`` workflow: EvoHarness-RL's cost-aware GRPO with the BPE harness
(arXiv 2608.05446; docs/methods/evoharness.md).

* config: the ``evoharness`` block of an experiment (``evoharness_config``; fields of
  ``codjax.agents.evoharness.HarnessSettings``), environments with the household command interface
  (``alfworld_synth``).
* rollout: ``codjax.agents.evoharness.run_evoharness`` over the trainer's packs, K = ``data.repeats``
  trajectories per pack (16 tasks x 8 rollouts in the paper's recipe, B.5), every trajectory on a private copy
  of the shared Experience bank read from ``bank_path`` (read-only during the batch, B.4).
* score: GRPO over the K repeats of each (pack, position) on the task's cost-aware reward (B.3):
  A_i = (R_i - mean_j R_j) / (std_j R_j + 1e-6) (ddof 1; ``algorithm.grpo_normalize_std``), shared by every
  token of every turn of task i (verl-agent's per-turn samples with the trajectory's advantage). The KL to the
  SFT policy (0.01, B.5) is the loss config's ``kl_type='k1'``, ``kl_coef`` against the frozen reference.
* after every policy update (``after_step``): the batch's recall usage and notes are folded into the shared
  bank, its update counter u (the diversity weight's schedule, B.3) advances, the bank is consolidated (rule
  or LLM consolidator, B.4) and saved; ``harness/bank_log.jsonl`` gets one line of bank statistics per step.
* state: the bank is part of the trainer checkpoint (``state_dict`` / ``load_state_dict``), so a resumed run
  continues with the bank and the annealing schedule of its checkpoint step.
* summarize / table / compare / metrics: ``codjax.workflows.evoharness_summary``.
"""

from __future__ import annotations

import dataclasses
import json
import os

import ml_collections
import numpy as np

from codjax.agents.evoharness import HarnessSettings, HarnessTrajectory, run_evoharness, settings_from_config
from codjax.rl.advantages import grpo_advantages
from codjax.workflows import evoharness_summary
from codjax.workflows.registry import register_workflow


def evoharness_config(**overrides) -> ml_collections.ConfigDict:
  """The ``evoharness`` block of an experiment config (fields of ``HarnessSettings``; defaults are B.2-B.5)."""
  d = dataclasses.asdict(settings_from_config(overrides))
  d["modules"] = list(d["modules"])
  return ml_collections.ConfigDict(d)


def set_evoharness_loss(algorithm: ml_collections.ConfigDict, kl_coef: float = 0.01) -> ml_collections.ConfigDict:
  """EvoHarness-RL's loss (B.5, verl-agent GRPO): group-normalised advantages, PPO clip 0.2, token-mean
  aggregation, KL loss (``k1``, verl's ``kl``) with coefficient 0.01 to the SFT policy, no entropy term, no
  RED-Weight. Returns the block."""
  algorithm.update(dict(advantage="grpo", grpo_normalize_std=True, red_weight=False, loss="ppo", eps_low=0.2,
                        eps_high=0.2, dual_clip=0.0, aggregation="token-mean", kl_type="k1",
                        kl_coef=float(kl_coef), entropy_coef=0.0))
  return algorithm


def harness_settings(cfg) -> HarnessSettings:
  return settings_from_config(cfg.get("evoharness"))


def bank_path(cfg) -> str:
  """Where the shared Experience bank of a run lives."""
  p = harness_settings(cfg).bank_path
  return p or os.path.join(str(cfg.run_dir), "harness", "bank.json")


def _carry_path(cfg) -> str:
  """Evidence an LLM consolidation could not use, carried to the next window (B.4)."""
  return os.path.join(os.path.dirname(bank_path(cfg)), "llm_carry.json")


def load_bank(cfg):
  """The run's shared bank (an empty one before ``prepare`` wrote it)."""
  from codjax.agents.harness.experience import ExperienceBank

  path = bank_path(cfg)
  return ExperienceBank.load(path) if os.path.isfile(path) else ExperienceBank()


class EvoHarnessWorkflowSpec:
  name = "evoharness"
  unit = "position"  # compare's per_position: the task's position in its pack

  def check_config(self, cfg) -> None:
    """Raises ValueError for settings this workflow cannot run."""
    harness_settings(cfg)
    if cfg.algorithm.advantage != "grpo":
      raise ValueError(f"workflow 'evoharness' needs algorithm.advantage='grpo', got {cfg.algorithm.advantage!r}")
    for label, e in cfg.data.envs.items():
      if e.name != "alfworld_synth":
        raise ValueError(f"workflow 'evoharness' runs the household environment 'alfworld_synth'; data.envs."
                         f"{label} is {e.name!r}")

  # -- rollouts -----------------------------------------------------------------------------------------
  def rollout(self, backend, packs, repeats, cfg, on_done=None, on_progress=None) -> list[HarnessTrajectory]:
    bank = load_bank(cfg)
    return run_evoharness(backend, packs, repeats, harness_settings(cfg), bank, bank.updates, on_done,
                          on_progress)

  def to_record(self, traj: HarnessTrajectory) -> dict:
    return traj.to_record()

  def from_record(self, rec: dict, pack, cfg) -> HarnessTrajectory:
    return HarnessTrajectory.from_record(rec, pack, harness_settings(cfg))

  def score(self, trajs, cfg):
    self.check_config(cfg)
    runs = [(t, r) for t in trajs for r in t.runs]
    if not runs:
      return []
    rewards = np.array([r.reward for _, r in runs], np.float64)
    keys = {}
    groups = np.array([keys.setdefault((t.pack.pack_id, r.position), len(keys)) for t, r in runs])
    adv = np.asarray(grpo_advantages(rewards, groups, normalize_std=bool(cfg.algorithm.grpo_normalize_std)))
    return [(ep, float(a)) for (_, r), a in zip(runs, adv) for ep in r.turns]

  def sft_episodes(self, traj: HarnessTrajectory) -> list:
    """The SFT transcript of a teacher trajectory: the turns of its successful tasks only (B.5: only the
    teacher's successful episodes are kept)."""
    return [ep for r in traj.runs if r.won for ep in r.turns]

  def metrics(self, trajs) -> dict:
    return evoharness_summary.step_metrics(trajs)

  def summarize(self, trajs) -> dict:
    return evoharness_summary.summarize(trajs)

  def table(self, results: dict) -> str:
    return evoharness_summary.format_table(results)

  def compare(self, before: dict, after: dict) -> dict:
    return evoharness_summary.compare(before, after)

  # -- the shared bank (trainer hooks) ----------------------------------------------------------------------
  def prepare(self, cfg) -> None:
    """Writes the run's initial bank if it has none: ``init_bank`` copied, else a bank consolidated from the
    scripted teacher's episodes on ``seed_bank_packs`` training packs (the paper seeds the bank from the SFT
    teacher's experience, B.5), else an empty bank. Called by the trainer before SFT, on process 0."""
    from codjax.agents.harness.experience import ExperienceBank

    path = bank_path(cfg)
    if os.path.isfile(path):
      return
    s = harness_settings(cfg)
    if s.init_bank:
      bank = ExperienceBank.load(s.init_bank)
    else:
      bank = ExperienceBank()
      if s.seed_bank_packs:
        bank = seed_bank(cfg, s.seed_bank_packs)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    bank.save(path)

  def after_step(self, trajs, cfg, step: int, generate=None) -> dict:
    """Folds the batch into the shared bank, advances u, consolidates, saves (module docstring). Returns the
    step's bank metrics."""
    s = harness_settings(cfg)
    bank = load_bank(cfg)
    merge_batch_usage(bank, trajs)
    bank.record_update(1)
    report = {}
    if s.consolidator != "none":
      report = consolidate_batch(bank, [r for t in trajs for r in t.runs], s.consolidator, generate,
                                 carry_path=_carry_path(cfg))
    path = bank_path(cfg)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    bank.save(path)
    stats = bank.stats()
    line = {"step": int(step), "updates": bank.updates, "stats": stats, "report": report}
    with open(os.path.join(os.path.dirname(path), "bank_log.jsonl"), "a") as f:
      f.write(json.dumps(line, default=str) + "\n")
    m = {f"bank/{k}": float(v) for k, v in stats.items() if isinstance(v, (int, float))}
    m.update({f"bank/ops/{k}": float(v) for k, v in report.get("applied", {}).items()})
    m["bank/rejected_ops"] = float(len(report.get("rejected", [])))
    return m

  def state_dict(self, cfg) -> dict:
    """The shared bank (JSON), stored in the trainer checkpoint's metadata."""
    carry = _carry_path(cfg)
    return {"bank": load_bank(cfg).to_json(),
            "llm_carry": json.load(open(carry)) if os.path.isfile(carry) else []}

  def load_state_dict(self, cfg, state: dict) -> None:
    """Restores the shared bank of a checkpoint (a resumed run continues its bank and annealing schedule)."""
    from codjax.agents.harness.experience import ExperienceBank

    bank = ExperienceBank.from_json(state["bank"])
    path = bank_path(cfg)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    bank.save(path)
    with open(_carry_path(cfg), "w") as f:
      json.dump(list(state.get("llm_carry", [])), f)
    # the steps after the checkpoint are re-run: their bank-log lines go (the log reads as one run)
    log = os.path.join(os.path.dirname(path), "bank_log.jsonl")
    if os.path.isfile(log):
      with open(log) as f:
        lines = [ln for ln in f if ln.strip()]
      keep = [ln for ln in lines if json.loads(ln).get("updates", 0) <= bank.updates]
      with open(log, "w") as f:
        f.writelines(keep)


def merge_batch_usage(bank, trajs) -> int:
  """Adds every trajectory's recall hits (onto entries still in ``bank``) and its notes (while the buffer has
  room, B.2: at most ``bank.max_notes``) to the shared bank. Returns the number of notes taken over."""
  taken = 0
  for t in trajs:
    for entry_id, hits in t.usage.items():
      live = bank.entry(entry_id)
      if live is not None:
        live["usage_count"] += int(hits)
        live["last_used"] = bank.meta["tick"]
    for note in t.new_notes:
      if len(bank.notes) < bank.max_notes:
        bank.notes.append(note)
        taken += 1
  return taken


def consolidate_batch(bank, runs, kind: str, generate=None, carry_path: str = "") -> dict:
  """One consolidation window (B.4) over a batch's finished tasks: ``rule`` (``RuleConsolidator``) or ``llm``
  (``LLMConsolidator`` over ``generate``; evidence a failed call could not use is carried to the next window
  through ``carry_path``). Returns the consolidator's report."""
  from codjax.agents.evoharness import episode_record_of
  from codjax.agents.harness.consolidate import EpisodeRecord, LLMConsolidator, RuleConsolidator

  records = [episode_record_of(r) for r in runs]
  if kind == "rule":
    return RuleConsolidator().consolidate(bank, records)
  if kind != "llm":
    raise ValueError(f"unknown consolidator {kind!r}")
  if generate is None:
    raise ValueError("the llm consolidator needs a generate function (the trainer's policy or a served model)")
  carry = []
  if carry_path and os.path.isfile(carry_path):
    try:
      carry = [EpisodeRecord(**r) for r in json.load(open(carry_path))]
    except (ValueError, TypeError) as e:
      raise ValueError(f"{carry_path}: unreadable carried evidence ({e})") from None
  cons = LLMConsolidator(generate, carry=carry)
  report = cons.consolidate(bank, records)
  if carry_path:
    with open(carry_path, "w") as f:
      json.dump([dataclasses.asdict(r) for r in cons.carry], f)
  return report


def seed_bank(cfg, num_packs: int):
  """A bank consolidated (rule consolidator) from the scripted teacher's episodes on training packs."""
  from codjax.agents.episode import PolicyBackend
  from codjax.agents.harness.experience import ExperienceBank
  from codjax.envs.base import derive_seed
  from codjax.workflows.packs import PackSampler, env_specs
  from codjax.workflows.scripted import configured_teacher

  bank = ExperienceBank()
  specs = env_specs(cfg.data.envs)
  sampler = PackSampler(specs, int(cfg.data.pack_size), str(cfg.data.packing), derive_seed(cfg.seed, 71),
                        int(cfg.data.n_train), int(cfg.data.n_test), int(cfg.data.split_seed))
  packs = sampler.next_packs(int(num_packs))
  s = dataclasses.replace(harness_settings(cfg), mode="inline")
  runs = []
  for spec in specs:
    ps = [p for p in packs if p.env_name == spec.name]
    if ps:
      trajs = run_evoharness(PolicyBackend(configured_teacher(cfg, spec.name), int(cfg.seed)), ps, 1, s, bank, 0)
      runs += [r for t in trajs for r in t.runs]
  consolidate_batch(bank, runs, "rule")
  return bank


register_workflow(EvoHarnessWorkflowSpec())
