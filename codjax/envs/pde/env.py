"""PDE-Discovery environment: tasks, pack state, actions and reward (CoD paper Sec. 3.2.2).

Rules follow agentscope-ai/Trinity-RFT ``trinity/common/workflows/connect_the_dots/pde_discovery/`` (``workflow.py``,
``update_context_workflow.py``); docs/methods/cod.md.

Each pack hides one reaction term f (``model.sample_hidden``); the task at position k (1-based) observes
trajectory ``j = k - 1`` of ``u_t = u_xx + f(u)``, except that a task seed already seen earlier in the pack keeps
the trajectory index of its first occurrence (``helpers.first_positions``). So a cod pack of distinct task seeds
observes trajectories 0..S-1, and a Ralph pack (one task seed S times) observes trajectory 0 with the same sample
noise at every position: Trinity-RFT fixes ``task_idx = env_task_idx`` in both Ralph modes
(``connect_the_dots/cod_workflow.py``), so every repeat of "the same task" sees the same data.

Per task the agent has ``max_steps`` turns and ``point_budget`` sample points. Actions are one XML element
inside a unique ``<answer>`` block (root tag = action, attributes and children = arguments; ``dictionary``,
``candidate_equations``, ``uncertain_terms`` and ``point_grid`` are lists):

* ``sample_pde_data``: noisy ``u`` (sd ``noise_level``) and ``y`` (sd ``noise_level/4``) bilinearly
  interpolated from the cached dense simulation at the requested ``(x, t)``; noise RNG
  ``SeedSequence([task_seed, j + 1, sample_counter])`` (``j + 1 = k`` in a cod pack); stored as dataset
  ``ds_t{k}_{c}`` (k the position) in the pack state;
* ``summarize_pack_evidence``: the equations recorded by earlier tasks (shown only with
  ``reveal_equations="true"``);
* ``run_sparse_regression``: ``regression.sparse_regression`` on ``dataset_id`` (a dataset, ``merged_all``
  or ``merged_t{a}_t{b}``), in dictionary or candidate-equation mode;
* ``update_scientific_context``: submits ``preferred_equation`` (numeric coefficients only), allowed after one
  sample and one regression in this task and only if it equals a candidate scored by the latest regression;
  it ends the task, is scored, and is recorded as evidence for later tasks.

Argument errors cost the turn but do not end the task; format errors (no unique ``<answer>``, invalid XML, an
unknown action, non-dict arguments) end it with reward 0. Running out of turns gives reward 0. Reward:

    loss = ||c_pred - c_true||_1 / max(1e-8, ||c_true||_1) + max(0, |supp c_pred| - |supp c_true|),
    R = 1 / (1 + loss).

Datasets, evidence and the dense simulations live in a ``PdePackState`` created per ``sample_pack`` call.
The reward is never shown to the agent (``show_reward_in_update = False``). Presets (``train``, ``eval``) are in
``presets.py``.
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from typing import Any, Sequence

import numpy as np

from codjax.envs import cod_protocol
from codjax.envs.base import EnvFamily, StepResult, TaskEnv, Turn
from codjax.envs.helpers import config_from_preset, first_positions, pack_args
from codjax.envs.pde import dictionary, model, prompts, regression, solver
from codjax.envs.pde.presets import PRESETS
from codjax.envs.registry import register

FORMAT_ERROR = "Invalid format: expected exactly one XML action wrapped in <answer>...</answer>. Game over."
LIST_TAGS = ("dictionary", "candidate_equations", "uncertain_terms")
ACTIONS = ("sample_pde_data", "summarize_pack_evidence", "run_sparse_regression", "update_scientific_context")
MAX_ANSWER_CHARS = 20000
MAX_CANDIDATES = 8
MAX_UNCERTAIN = 4
_MERGED_RE = re.compile(r"merged_t(\d+)_t(\d+)")


def pde_reward(pred: np.ndarray, true: np.ndarray) -> float:
  """``1 / (1 + relative L1 error + extra-support penalty)`` (module docstring)."""
  rel = float(np.abs(pred - true).sum() / max(1e-8, float(np.abs(true).sum())))
  extra = max(0, int(np.count_nonzero(pred)) - int(np.count_nonzero(true)))
  return 1.0 / (1.0 + rel + extra)


@dataclasses.dataclass
class Dataset:
  position: int  # 1-based task position that sampled it
  x: np.ndarray
  t: np.ndarray
  u: np.ndarray
  y: np.ndarray


class PdePackState:
  """Mutable state of one CoD trajectory over a pack (never shared between ``sample_pack`` calls)."""

  def __init__(self):
    self.datasets: dict[str, Dataset] = {}
    self.evidence: list[dict[str, Any]] = []
    self.dense: dict[int, solver.LazyTrajectory] = {}


class ActionError(ValueError):
  """A well-formed action with bad arguments: reported, costs the turn, does not end the task."""


def parse_action(response: str) -> tuple[str, dict[str, Any]] | None:
  """``(action, args)`` from the unique ``<answer>`` block, or None on a format error."""
  inner = cod_protocol.extract_answer(response if isinstance(response, str) else "")
  if inner is None or len(inner) > MAX_ANSWER_CHARS or "<!" in inner or "<?" in inner:
    return None
  try:
    root = ET.fromstring(inner.strip())
  except ET.ParseError:
    return None
  if root.tag not in ACTIONS:
    return None
  args: dict[str, Any] = dict(root.attrib)
  for child in root:
    if child.tag == "point_grid":
      if any(len(p) for p in child):
        return None
      args["point_grid"] = [dict(p.attrib) for p in child]
    elif child.tag in LIST_TAGS:
      items = [(c.text or "").strip() for c in child if len(c) == 0]
      if len(items) != len(child):
        return None
      if not items and (child.text or "").strip():
        sep = r"[;\n]" if child.tag == "candidate_equations" else r"[,;\n]"
        items = [s.strip() for s in re.split(sep, child.text) if s.strip()]
      args[child.tag] = items
    elif len(child):
      return None
    else:
      args[child.tag] = (child.text or "").strip()
  return root.tag, args


def _float_arg(args: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
  raw = args.get(key, default)
  try:
    v = float(raw)
  except (TypeError, ValueError):
    raise ActionError(f"{key} must be a number, got {raw!r}") from None
  if not lo <= v <= hi:
    raise ActionError(f"{key} must be in [{lo:g}, {hi:g}], got {v:g}")
  return v


def _bool_arg(args: dict[str, Any], key: str) -> bool:
  raw = str(args.get(key, "false")).strip().lower()
  if raw not in ("true", "false", "1", "0", "yes", "no"):
    raise ActionError(f"{key} must be true or false, got {raw!r}")
  return raw in ("true", "1", "yes")


def _fmt(v: float) -> str:
  return f"{v:.4g}"


class PdeTaskEnv(TaskEnv):
  show_reward_in_update = False

  def __init__(self, cfg: model.PdeConfig, hidden: model.Hidden, state: PdePackState, position: int,
               num_tasks: int, task_seed: int, task_index: int | None = None):
    self._cfg, self._hidden, self._state = cfg, hidden, state
    self.position = position  # 1-based place in the pack (prompts, dataset ids, evidence)
    # 0-based trajectory this task observes (module docstring); the position's own one unless given
    self.task_index = position - 1 if task_index is None else task_index
    self._num = num_tasks
    self._seed = int(task_seed) % 2**64
    self.max_turns = cfg.max_steps
    self.step_count = 0
    self.budget = cfg.point_budget
    self._sample_counter = 0
    self._task_points: list[str] = []  # dataset ids sampled in this task
    self._latest: tuple[str, regression.RegressionResult] | None = None
    self._last_sample_summary = "no data sampled in this task"
    self._final_equation: str | None = None
    self._done = False
    self._last_feedback = ""

  # ----- observations
  def reset(self) -> tuple[str, str]:
    return prompts.system_prompt(self._cfg, self._num), self._observation("(no action yet)")

  def _observation(self, feedback: str) -> str:
    return prompts.user_prompt(
        position=self.position, num_tasks=self._num, step=self.step_count + 1, max_steps=self._cfg.max_steps,
        budget=self.budget, point_budget=self._cfg.point_budget, datasets=self._dataset_lines(),
        latest_error=self._latest[1].best.max_error if self._latest else None, evidence=self._state.evidence,
        can_sample=self.budget > 0, has_data=bool(self._state.datasets),
        can_update=bool(self._task_points) and self._latest is not None, feedback=feedback)

  def _dataset_lines(self) -> list[str]:
    lines = [f"{k} ({len(d.u)} points, task {d.position})" for k, d in self._state.datasets.items()]
    if self._state.datasets:
      total = sum(len(d.u) for d in self._state.datasets.values())
      lines.append(f"merged_all ({total} points); merged_t{{a}}_t{{b}} selects tasks a..b")
    return lines

  # ----- episode control
  def _result(self, feedback: str, reward: float, done: bool, format_error: bool = False) -> StepResult:
    self._last_feedback = feedback
    self._done = done
    obs = feedback if done else self._observation(feedback)
    return StepResult(obs, reward, done, {"feedback": feedback, "format_error": format_error,
                                          "raw_reward": reward})

  def step(self, action_text: str) -> StepResult:
    if self._done:
      return self._result("The task is already finished.", 0.0, True)
    self.step_count += 1
    parsed = parse_action(action_text)
    if parsed is None:
      return self._result(FORMAT_ERROR, 0.0, True, format_error=True)
    name, args = parsed
    handlers = {"sample_pde_data": self._sample_pde_data, "summarize_pack_evidence": self._summarize_pack_evidence,
                "run_sparse_regression": self._run_sparse_regression}
    try:
      if name == "update_scientific_context":
        return self._accept(self._check_update(args), args)
      feedback = handlers[name](args)
    except ActionError as e:
      feedback = f"Error: {e} (this used the turn; fix the arguments and try again)."
    if self.step_count >= self._cfg.max_steps:
      return self._result(f"{feedback}\nTask ended without update_scientific_context; no equation was recorded "
                          "for this task.", 0.0, True)
    return self._result(feedback, 0.0, False)

  # ----- actions
  def _dense(self) -> solver.LazyTrajectory:
    j = self.task_index
    if j not in self._state.dense:
      self._state.dense[j] = model.dense_trajectory(self._hidden, j, self._cfg.state_abs_limit)
    return self._state.dense[j]

  def _sample_pde_data(self, args: dict[str, Any]) -> str:
    pts = args.get("point_grid")
    if not isinstance(pts, list) or not pts:
      raise ActionError("point_grid must contain at least one <point x=\"..\" t=\"..\"/>")
    if len(pts) > self.budget:
      raise ActionError(f"{len(pts)} points requested but only {self.budget} remain in this task's budget")
    xs, ts = [], []
    for p in pts:
      try:
        x, t = float(p["x"]), float(p["t"])
      except (KeyError, TypeError, ValueError):
        raise ActionError("every point needs numeric x and t attributes") from None
      if not (0.0 < x < 1.0 and 0.0 <= t <= 1.0):
        raise ActionError(f"point (x={x:g}, t={t:g}) is outside 0 < x < 1, 0 <= t <= 1")
      xs.append(x)
      ts.append(t)
    x, t = np.array(xs), np.array(ts)
    u_clean, y_clean = self._dense().sample(x, t)
    self._sample_counter += 1
    rng = np.random.default_rng(np.random.SeedSequence([self._seed, self.task_index + 1, self._sample_counter]))
    u = u_clean + rng.normal(0.0, self._cfg.noise_level, len(x))
    y = y_clean + rng.normal(0.0, self._cfg.noise_level * 0.25, len(x))
    ds_id = f"ds_t{self.position}_{self._sample_counter}"
    self._state.datasets[ds_id] = Dataset(self.position, x, t, u, y)
    self._task_points.append(ds_id)
    self.budget -= len(x)
    task_u = np.concatenate([self._state.datasets[k].u for k in self._task_points])
    self._last_sample_summary = (f"{ds_id}: n={len(x)}, u-range [{_fmt(u.min())}, {_fmt(u.max())}]; this task "
                                 f"so far u-range [{_fmt(task_u.min())}, {_fmt(task_u.max())}]")
    rows = "\n".join(f"{a:.4f} | {b:.4f} | {c:.5f} | {d:.5f}" for a, b, c, d in zip(x, t, u, y))
    return (f"Sampled {len(x)} points. Dataset: {ds_id}. Point budget remaining: {self.budget}/"
            f"{self._cfg.point_budget}.\nRegion: x in [{_fmt(x.min())}, {_fmt(x.max())}], t in "
            f"[{_fmt(t.min())}, {_fmt(t.max())}]. Coverage: n={len(x)}, u-range [{_fmt(u.min())}, "
            f"{_fmt(u.max())}], x-span {_fmt(x.max() - x.min())}, t-span {_fmt(t.max() - t.min())}.\n"
            f"x | t | u | y\n{rows}")

  def _summarize_pack_evidence(self, args: dict[str, Any]) -> str:
    reveal = _bool_arg(args, "reveal_equations")
    ev = self._state.evidence
    if not ev:
      return "Pack evidence: no equation has been recorded by an earlier task yet."
    lines = [f"Pack evidence ({len(ev)} record{'s' if len(ev) != 1 else ''}):"]
    for i, e in enumerate(ev, start=1):
      eq = e["equation"] if reveal else "equation hidden (use reveal_equations=\"true\")"
      lines.append(f"H{i} (task {e['position']}): {eq} | {prompts.evidence_stats(e)}")
    return "\n".join(lines)

  def _select(self, dataset_id: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ds = self._state.datasets
    if dataset_id == "merged_all":
      chosen = list(ds.values())
    elif (m := _MERGED_RE.fullmatch(dataset_id)) is not None:
      a, b = int(m.group(1)), int(m.group(2))
      if a > b:
        raise ActionError(f"{dataset_id}: the first task index must not exceed the second")
      chosen = [d for d in ds.values() if a <= d.position <= b]
    elif dataset_id in ds:
      chosen = [ds[dataset_id]]
    else:
      known = ", ".join(list(ds) + ["merged_all"]) if ds else "none yet (sample first)"
      raise ActionError(f"unknown dataset {dataset_id!r}; available: {known}")
    if not chosen:
      raise ActionError(f"dataset {dataset_id!r} has no points")
    return tuple(np.concatenate([getattr(d, f) for d in chosen]) for f in ("x", "t", "u", "y"))

  def _run_sparse_regression(self, args: dict[str, Any]) -> str:
    dataset_id = str(args.get("dataset_id", "merged_all")).strip() or "merged_all"
    alpha = _float_arg(args, "alpha", 0.05, 0.0, 1e6)
    threshold = _float_arg(args, "threshold", 0.05, 0.0, 1e6)
    if "dictionary" in args and "candidate_equations" in args:
      raise ActionError("give either dictionary or candidate_equations, not both")
    supports = None
    if "candidate_equations" in args:
      eqs = args["candidate_equations"]
      if not 1 <= len(eqs) <= MAX_CANDIDATES:
        raise ActionError(f"candidate_equations must list 1 to {MAX_CANDIDATES} equations, got {len(eqs)}")
      supports = []
      for eq in eqs:
        try:
          c = dictionary.parse_equation(eq)
        except dictionary.EquationError as e:
          raise ActionError(f"candidate {eq!r}: {e}") from None
        if not np.any(c):
          raise ActionError(f"candidate {eq!r} has no nonzero term")
        supports.append(tuple(int(k) for k in np.flatnonzero(c)))
      terms = sorted({k for s in supports for k in s})
    elif "dictionary" in args:
      names = args["dictionary"]
      bad = [n for n in names if n not in dictionary.TERM_INDEX]
      if bad or not names:
        raise ActionError(f"dictionary terms must be chosen from the dictionary; unknown: {bad}" if bad
                          else "dictionary is empty")
      terms = sorted({dictionary.TERM_INDEX[n] for n in names})
    else:
      terms = list(range(dictionary.NUM_TERMS))
    x, t, u, y = self._select(dataset_id)
    try:
      res = regression.sparse_regression(u, y, terms, alpha=alpha, threshold=threshold,
                                         max_terms=self._cfg.max_reaction_terms, candidate_supports=supports,
                                         kappa_threshold=self._cfg.kappa_threshold)
    except (np.linalg.LinAlgError, ValueError) as e:
      raise ActionError(f"the regression failed: {e}") from None
    self._latest = (dataset_id, res)
    return prompts.regression_report(dataset_id, x, t, u, y, res, alpha, threshold, len(terms),
                                     None if supports is None else len(supports))

  def _accept(self, coefs: np.ndarray, args: dict[str, Any]) -> StepResult:
    """Scores an accepted submission, records it as pack evidence and ends the task."""
    _, res = self._latest
    cand = res.matches(coefs)
    task_u = np.concatenate([self._state.datasets[k].u for k in self._task_points])
    self._final_equation = dictionary.format_equation(coefs)
    self._state.evidence.append(dict(
        position=self.position, equation=self._final_equation,
        sampled_points=int(sum(len(self._state.datasets[k].u) for k in self._task_points)),
        u_span=(float(task_u.min()), float(task_u.max())), preferred_sampled_max_error=cand.max_error,
        relative_margin=res.margin, note=str(args.get("note", ""))[:500],
        uncertain_terms=list(args.get("uncertain_terms", []))))
    del self._state.evidence[:-self._num]
    fb = (f"Recorded the preferred equation {self._final_equation} for task {self.position}. The task is "
          "complete; later tasks will see this record as prior task evidence.")
    return self._result(fb, pde_reward(coefs, self._hidden.coefs), True)

  def _check_update(self, args: dict[str, Any]) -> np.ndarray:
    eq = args.get("preferred_equation")
    if not isinstance(eq, str) or not eq.strip():
      raise ActionError("preferred_equation is required")
    try:
      coefs = dictionary.parse_equation(eq)
    except dictionary.EquationError as e:
      raise ActionError(f"preferred_equation: {e}") from None
    uncertain = args.get("uncertain_terms", [])
    if not isinstance(uncertain, list) or len(uncertain) > MAX_UNCERTAIN:
      raise ActionError(f"uncertain_terms must list at most {MAX_UNCERTAIN} dictionary terms")
    bad = [n for n in uncertain if n not in dictionary.TERM_INDEX]
    if bad:
      raise ActionError(f"uncertain_terms must be dictionary terms; unknown: {bad}")
    if not self._task_points:
      raise ActionError("sample data in this task before submitting")
    if self._latest is None:
      raise ActionError("run a sparse regression in this task before submitting")
    if self._latest[1].matches(coefs) is None:
      raise ActionError("the equation must equal one of the candidates scored by your latest regression "
                        "(same terms and coefficients); copy it from the regression report")
    return coefs

  # ----- update-context material
  def final_feedback(self) -> str:
    lines = [self._last_feedback, f"Latest sampled data: {self._last_sample_summary}."]
    lines.append(f"Finalized equation: {self._final_equation or 'none (no update_scientific_context)'}.")
    if self._latest is not None:
      ds, res = self._latest
      margin = "n/a" if res.margin is None else _fmt(res.margin)
      lines.append(f"Latest regression ({ds}): best {dictionary.format_equation(res.best.coefs)} with max error "
                   f"{_fmt(res.best.max_error)}, relative margin {margin}.")
    return "\n".join(lines)

  def render_trajectory(self, system_prompt: str, turns: Sequence[Turn]) -> str:
    """Default rendering with ``Action feedback:`` blocks older than the previous step compressed."""
    keep_from = len(turns) - 2
    compressed = [Turn(prompts.compress_feedback(t.observation) if k < keep_from else t.observation, t.action)
                  for k, t in enumerate(turns)]
    return super().render_trajectory(system_prompt, compressed)


class PdeFamily(EnvFamily):
  name = "pde_discovery"

  def __init__(self, cfg: model.PdeConfig):
    cfg.validate()
    self.cfg = cfg

  def sample_pack(self, pack_seed: int, num_tasks: int, task_seeds: Sequence[int] | None = None):
    pack_seed, seeds = pack_args(pack_seed, num_tasks, task_seeds)
    hidden = model.sample_hidden(self.cfg, pack_seed % 2**64, num_tasks)
    state = PdePackState()
    return [PdeTaskEnv(self.cfg, hidden, state, i + 1, num_tasks, s, j)
            for i, (s, j) in enumerate(zip(seeds, first_positions(seeds)))]

  def update_protocol_reminder(self) -> str:
    return prompts.PROTOCOL_REMINDER


@register("pde_discovery")
def make_pde_discovery(preset: str = "train", **overrides: Any) -> PdeFamily:
  """``preset`` in {train, eval} (presets.py); any ``PdeConfig`` field may be overridden."""
  return PdeFamily(config_from_preset(model.PdeConfig, PRESETS, preset, overrides, env="pde_discovery"))
