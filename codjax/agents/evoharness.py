"""EvoHarness-RL rollouts: the household agent with the Belief/Progress/Experience harness.

EvoHarness-RL (arXiv 2608.05446); what codjax implements of it and where it departs: docs/methods/evoharness.md.

One *trajectory* is one repeat of one pack: the pack's tasks (household goals in one house, drawn by the
environment family) are solved in order. Every model call is its own single-turn ``Episode`` (kind
``"harness"``) whose prompt is the public code's per-turn context: the mode's system prompt and ONE user message
rendering the objective, the current observation, the admissible commands, the last history entries and the
harness views (``codjax.agents.harness.render``). Prompts therefore stay bounded over a 70-turn task, and
every turn's tokens are recorded by the token backend exactly as generated.

A reply is parsed by ``codjax.agents.harness.actions.parse_action``:

* an environment command that is admissible steps the environment (``TaskEnv.step_command``) and the
  harness observes the (command, feedback) pair (Belief and Progress update silently);
* a command that is not admissible is an invalid turn: the environment is not stepped and the observation
  stays (the reward's I);
* a meta action (``track``/``commit``/``recall``/``note``) goes to the harness; a meta action the mode or an
  ablation disables, or a malformed one, is an invalid turn;
* a reply without exactly one non-empty ``<action>`` tag is malformed: an invalid turn.

Budget: every turn counts toward the environment's ``max_turns`` (T_max, 70 for ALFWorld) when
``charge_meta_actions`` (training, as in the paper and EvoHarnessRL/EvoHarness-RL ``configs/train/common.yaml``);
otherwise (its ``configs/eval/alfworld.yaml``) meta actions are free and only the other turns count,
with a hard cap of ``free_meta_cap * T_max`` model calls so a policy that only calls the harness still ends.
A task ends when it is won or its budget is spent; its cost-aware reward (``codjax.agents.harness.reward``) is
paid once, on its last turn, and every turn of the task carries it (``Episode.reward``).

Experience. A trajectory works on a private copy of the shared bank taken at the start of the batch (the
bank is read-only during a batch, as in the paper): recalls count usage and notes are buffered on the copy, and the
trainer folds both back into the shared bank before consolidating (``merge_batch_usage``). With
``bank_in_pack`` and packs of several tasks (CoD packs using the harness as their context mechanism), the
private copy is consolidated by the rule consolidator after every task, so later tasks of the pack recall
what earlier ones found: the bank plays the role CoD's hint plays.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from codjax.agents.cod import Pack
from codjax.agents.episode import Backend, Episode, Workflow, episode_from_record, episode_record, run_repeats
from codjax.agents.harness.actions import META_VERBS

MODES = ("env_only", "always_on", "inline")
MODULES = ("belief", "progress", "experience")
CONSOLIDATORS = ("rule", "llm", "none")
DIVERSITY = ("verb_ratio", "bpe_coverage")


@dataclasses.dataclass(frozen=True)
class HarnessSettings:
  """The ``evoharness`` block of an experiment (validated; defaults: the public configs/train/*.yaml)."""

  mode: str = "inline"  # env_only (ReAct baseline) | always_on (panels every turn) | inline (EvoHarness-RL)
  modules: tuple[str, ...] = MODULES  # module ablations remove one (its verb then fails as invalid)
  charge_meta_actions: bool = True  # training: a meta action costs a turn; the public eval config: free
  free_meta_cap: int = 2  # with free meta actions, at most free_meta_cap * T_max model calls per task
  recall_top_k: int = 3  # 3 in training (public configs/train/common.yaml)
  history: int = 10  # PREVIOUS ACTION(S) entries shown
  bank_in_pack: bool = True  # packs of several tasks: consolidate the private bank between tasks
  compact_prompt: bool = False  # a few-line system prompt (tiny CPU demos), same protocol strings
  # the shared bank between batches
  consolidator: str = "rule"  # rule | llm (the policy itself through the trainer's engine) | none
  bank_path: str = ""  # "" = <run_dir>/harness/bank.json
  init_bank: str = ""  # a bank file to start from ("" = a bank seeded from the scripted teacher, or empty)
  seed_bank_packs: int = 16  # training packs the scripted teacher plays to seed the initial bank (0 = empty)
  # the cost-aware reward (codjax.agents.harness.reward)
  success_reward: float = 10.0
  lambda_eff: float = 1.0
  lambda_div_max: float = 1.0
  lambda_spam: float = 0.1
  lambda_inv: float = 0.1
  spam_cap: int = 10
  diversity: str = "verb_ratio"  # the public config's default; "bpe_coverage": share of the 4 meta verbs used
  anneal_updates: int = 150  # U of the cosine-annealed diversity weight (trainer.total_epochs)

  def __post_init__(self):
    if self.mode not in MODES:
      raise ValueError(f"evoharness.mode must be one of {MODES}, got {self.mode!r}")
    mods = tuple(self.modules)
    if not set(mods) <= set(MODULES) or len(set(mods)) != len(mods):
      raise ValueError(f"evoharness.modules must be distinct names from {MODULES}, got {self.modules!r}")
    object.__setattr__(self, "modules", mods)
    for name in ("charge_meta_actions", "bank_in_pack", "compact_prompt"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"evoharness.{name} must be a bool, got {getattr(self, name)!r}")
    for name, lo in (("free_meta_cap", 1), ("recall_top_k", 1), ("history", 1), ("spam_cap", 0),
                     ("seed_bank_packs", 0), ("anneal_updates", 1)):
      v = getattr(self, name)
      if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise ValueError(f"evoharness.{name} must be an int >= {lo}, got {v!r}")
    for name in ("success_reward", "lambda_eff", "lambda_div_max", "lambda_spam", "lambda_inv"):
      v = getattr(self, name)
      if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
        raise ValueError(f"evoharness.{name} must be a number >= 0, got {v!r}")
    if self.consolidator not in CONSOLIDATORS:
      raise ValueError(f"evoharness.consolidator must be one of {CONSOLIDATORS}, got {self.consolidator!r}")
    if self.diversity not in DIVERSITY:
      raise ValueError(f"evoharness.diversity must be one of {DIVERSITY}, got {self.diversity!r}")
    for name in ("bank_path", "init_bank"):
      if not isinstance(getattr(self, name), str):
        raise ValueError(f"evoharness.{name} must be a string, got {getattr(self, name)!r}")


def settings_from_config(block: Any) -> HarnessSettings:
  """``HarnessSettings`` from a config block with the same field names (dict or ConfigDict; missing = default)."""
  fields = {f.name for f in dataclasses.fields(HarnessSettings)}
  values = dict(block) if block is not None else {}
  unknown = sorted(set(values) - fields)
  if unknown:
    raise ValueError(f"unknown evoharness setting(s) {unknown}; known: {sorted(fields)}")
  if "modules" in values:
    values["modules"] = tuple(values["modules"])
  return HarnessSettings(**values)


@dataclasses.dataclass
class TaskRun:
  """One task of a trajectory: its turns (one single-turn ``Episode`` each) and outcome."""

  position: int
  family: str
  objective: str
  turns: list[Episode] = dataclasses.field(default_factory=list)
  actions: list[str] = dataclasses.field(default_factory=list)  # normalised action text ("" if malformed)
  kinds: list[str] = dataclasses.field(default_factory=list)  # env | meta | invalid | malformed
  verbs: list[str] = dataclasses.field(default_factory=list)  # leading verb ("" if malformed)
  won: bool = False
  env_steps: int = 0
  invalid: int = 0
  budget_used: int = 0
  truncated: bool = False  # the prompt budget ran out before the task ended
  reward: float = 0.0
  reward_terms: dict[str, float] = dataclasses.field(default_factory=dict)

  @property
  def num_turns(self) -> int:
    return len(self.turns)

  def meta_calls(self) -> dict[str, int]:
    """Valid and invalid meta calls per verb."""
    out = {v: 0 for v in META_VERBS}
    for verb, kind in zip(self.verbs, self.kinds):
      if verb in out and kind in ("meta", "invalid"):
        out[verb] += 1
    return out

  def to_record(self) -> dict:
    d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "turns"}
    d["turns"] = [episode_record(e) for e in self.turns]
    return d

  @classmethod
  def from_record(cls, rec: dict) -> "TaskRun":
    rec = dict(rec)
    turns = [episode_from_record(e) for e in rec.pop("turns")]
    return cls(turns=turns, **rec)


@dataclasses.dataclass
class HarnessTrajectory:
  """One repeat of one pack: its task runs in order."""

  pack: Pack
  repeat_id: int
  runs: list[TaskRun]
  settings: HarnessSettings
  updates: int = 0  # u, the policy updates the bank had seen (the diversity weight's schedule)
  usage: dict[str, int] = dataclasses.field(default_factory=dict)  # recall hits per bank entry id
  new_notes: list[str] = dataclasses.field(default_factory=list)  # "[task_type] text" notes written

  def episodes(self) -> list[Episode]:
    """Training sequences: every turn of every task."""
    return [e for r in self.runs for e in r.turns]

  @property
  def reward(self) -> float:
    return float(sum(r.reward for r in self.runs))

  @property
  def success_count(self) -> int:
    return int(sum(r.won for r in self.runs))

  def to_record(self) -> dict:
    return {"repeat_id": self.repeat_id, "updates": self.updates, "runs": [r.to_record() for r in self.runs],
            "usage": dict(self.usage), "new_notes": list(self.new_notes)}

  @classmethod
  def from_record(cls, rec: dict, pack: Pack, settings: HarnessSettings) -> "HarnessTrajectory":
    return cls(pack, int(rec["repeat_id"]), [TaskRun.from_record(r) for r in rec["runs"]], settings,
               int(rec.get("updates", 0)), {str(k): int(v) for k, v in rec.get("usage", {}).items()},
               [str(n) for n in rec.get("new_notes", [])])


class HarnessWorkflow(Workflow):
  """The state machine of one trajectory (module docstring)."""

  def __init__(self, pack: Pack, repeat_id: int, settings: HarnessSettings, bank, updates: int):
    from codjax.agents.harness import render

    self.pack, self.repeat_id, self.settings, self.updates = pack, repeat_id, settings, int(updates)
    self.bank = bank.snapshot() if bank is not None else None  # private: recall hits count here
    self.new_notes: list[str] = []
    self.envs = pack.family.sample_pack(pack.pack_seed, pack.size, task_seeds=list(pack.task_seeds))
    if len(self.envs) != pack.size:
      raise RuntimeError(f"{pack.env_name}.sample_pack returned {len(self.envs)} tasks, expected {pack.size}")
    for env in self.envs:
      if not hasattr(env, "step_command"):
        raise ValueError(f"environment {pack.env_name!r} has no step_command: the harness workflow needs the "
                         "household environment (alfworld_synth) or another with its command interface")
    self.system_prompt = render.system_prompt(settings.mode, settings.modules, settings.charge_meta_actions,
                                              compact=settings.compact_prompt)
    self.runs: list[TaskRun] = []
    self._episode: Episode | None = None
    self._start_task(0)

  # -- tasks ---------------------------------------------------------------------------------------------
  def _start_task(self, k: int) -> None:
    from codjax.agents.harness.workspace import Harness

    env = self.envs[k]
    env.reset()
    s = self.settings
    self.env = env
    self.harness = Harness(env.objective, bank=self.bank, mode=s.mode, modules=s.modules,
                           charge_meta_actions=s.charge_meta_actions, recall_top_k=s.recall_top_k,
                           initial_observation=env.initial_observation)
    self.observation = env.initial_observation
    self.admissible = list(env.admissible_commands())
    self.history: list[tuple[str, str]] = []  # (action text, annotation)
    self.run = TaskRun(position=k, family=str(env.task_family), objective=str(env.objective))
    self.runs.append(self.run)
    self._new_turn()

  def _new_turn(self) -> None:
    from codjax.agents.harness import render

    run = self.run
    ep = Episode(kind="harness", position=run.position, pack_id=self.pack.pack_id, repeat_id=self.repeat_id,
                 env_name=self.pack.env_name, num_turns=run.num_turns)  # num_turns: the turn index (sampling seed)
    ep.add_message("system", self.system_prompt)
    ep.add_message("user", render.user_message(self.harness, objective=run.objective, observation=self.observation,
                                               admissible=self.admissible, history=self.history,
                                               window=self.settings.history))
    run.turns.append(ep)
    self._episode = ep

  @property
  def t_max(self) -> int:
    return int(self.env.max_turns)

  def _budget_spent(self) -> bool:
    run = self.run
    if run.budget_used >= self.t_max:
      return True
    return not self.settings.charge_meta_actions and run.num_turns >= self.settings.free_meta_cap * self.t_max

  # -- Workflow --------------------------------------------------------------------------------------------
  def active_episode(self) -> Episode | None:
    return self._episode

  def on_response(self, text: str) -> None:
    from codjax.agents.harness.actions import parse_action

    ep, run = self._episode, self.run
    if ep.budget_exhausted:  # the prompt did not fit: the task ends, failed
      ep.messages.pop()
      ep.num_turns -= 1
      run.truncated = True
      run.turns.pop()
      self._end_task()
      return
    parsed = parse_action(text)
    charged = True
    if parsed.kind == "malformed":
      run.kinds.append("malformed")
      run.actions.append("")
      run.verbs.append("")
      run.invalid += 1
      self.history.append(("(malformed reply)", "invalid format"))
      self.harness.last_result = f"Invalid reply: {parsed.reason}. Answer with exactly one <action>...</action>."
    elif parsed.kind == "meta":
      res = self.harness.apply_meta(parsed)
      run.actions.append(parsed.text)
      run.verbs.append(parsed.verb)
      run.kinds.append("meta" if res.valid else "invalid")
      run.invalid += int(not res.valid)
      charged = self.settings.charge_meta_actions
      self.history.append((parsed.text, res.annotation))
      if res.valid and parsed.verb == "note" and res.annotation == "noted":
        self.new_notes.append(f"[{self.harness.task_type}] {parsed.arg}")
    else:
      cmd = parsed.text
      run.actions.append(cmd)
      run.verbs.append(parsed.verb)
      if cmd in self.admissible:
        res = self.env.step_command(cmd)
        run.kinds.append("env")
        run.env_steps += 1
        self.harness.observe_env(cmd, res.feedback, bool(res.won))
        self.observation = res.feedback
        self.admissible = list(res.admissible)
        run.won = bool(res.won)
        self.history.append((cmd, ""))
      else:
        run.kinds.append("invalid")
        run.invalid += 1
        self.history.append((cmd, "not admissible"))
        self.harness.last_result = f"'{cmd}' is not an admissible command; nothing happened."
    run.budget_used += int(charged)
    if run.won or self._budget_spent():
      self._end_task()
    else:
      self._new_turn()

  def _end_task(self) -> None:
    run, s = self.run, self.settings
    terms = task_reward(run, s, self.t_max, self.updates)
    run.reward, run.reward_terms = float(terms.total), terms.as_dict()
    for ep in run.turns:
      ep.reward = run.reward
      ep.raw_reward = float(run.won)
      ep.done = True
      ep.info.update(won=run.won, family=run.family)
    k = run.position + 1
    if s.bank_in_pack and self.bank is not None and k < self.pack.size:
      from codjax.agents.harness.consolidate import RuleConsolidator

      RuleConsolidator().consolidate(self.bank, [episode_record_of(run)])
    if k < self.pack.size:
      self._start_task(k)
    else:
      self._episode = None

  def result(self) -> HarnessTrajectory:
    usage = dict(getattr(self.bank, "_hits", {}) or {}) if self.bank is not None else {}
    return HarnessTrajectory(self.pack, self.repeat_id, self.runs, self.settings, self.updates, usage,
                             list(self.new_notes))


def reward_config(settings: HarnessSettings, t_max: int):
  """The reward's weights (``RewardConfig``) for a task with turn budget ``t_max``."""
  from codjax.agents.harness.reward import RewardConfig

  s = settings
  return RewardConfig(success=float(s.success_reward), lambda_eff=float(s.lambda_eff),
                      lambda_div_max=float(s.lambda_div_max), lambda_spam=float(s.lambda_spam),
                      lambda_inv=float(s.lambda_inv), spam_cap=int(s.spam_cap), anneal_updates=int(s.anneal_updates),
                      max_turns=int(t_max), diversity=s.diversity)


def task_reward(run: TaskRun, settings: HarnessSettings, t_max: int, updates: int):
  """The cost-aware reward of one finished task (``RewardTerms``): every turn's action, meta included."""
  from codjax.agents.harness.reward import trajectory_reward

  return trajectory_reward(list(run.actions), bool(run.won), int(run.invalid), int(updates),
                           reward_config(settings, t_max))


def episode_record_of(run: TaskRun):
  """A finished task as consolidation evidence (``codjax.agents.harness.consolidate.EpisodeRecord``)."""
  from codjax.agents.harness.consolidate import EpisodeRecord

  return EpisodeRecord(objective=run.objective, task_type=run.family, won=bool(run.won),
                       actions=tuple(a for a in run.actions if a))


def run_evoharness(backend: Backend, packs: Sequence[Pack], repeats: int, settings: HarnessSettings, bank=None,
                   updates: int = 0, on_done=None, on_progress=None) -> list[HarnessTrajectory]:
  """Rolls out ``repeats`` trajectories of every pack in lock step, each on a private copy of ``bank``;
  returns them pack-major (trajectory ``k * repeats + g`` is repeat g of ``packs[k]``)."""
  return run_repeats(backend, packs, repeats, lambda p, g: HarnessWorkflow(p, g, settings, bank, updates), on_done,
                     on_progress)
