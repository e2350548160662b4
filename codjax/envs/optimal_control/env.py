"""OptimalControl: steer hidden 1-D linear dynamics with one scalar feedback law (CoD paper Sec. 3.2.2).

Rules follow agentscope-ai/Trinity-RFT ``trinity/common/workflows/connect_the_dots/optimalcontrol/`` (``env.py``,
``workflow.py``); docs/methods/cod.md.

Hidden per pack (``random.Random(pack_seed)``): ``a ~ U(0.55, 1.20)`` and ``b`` uniform on
``[-1.5, -0.35] U [0.35, 1.5]`` (the sign must be inferred). The dynamics are

    v_{t+1} = a v_t + b u_t (+ eps_t),   x_{t+1} = x_t + v_{t+1},   u_t = clip(policy(state), -1, 1),

with optional Gaussian process noise eps (off by default). Each task draws ``x0, v0, x_target`` from its
task seed (``v_target = 0``). The agent answers once with
``<answer><action_expression>EXPR</action_expression></answer>``; EXPR is evaluated by the AST-whitelist
evaluator ``codjax.envs.safe_expr`` at every step on ``x, v, t, x_target, v_target, horizon`` and
``remaining_steps = max(1, T - t)``. The loss and reward are

    L = (x_T - x_target)^2 + 2 (v_T - v_target)^2 + 0.03 sum_{t<T} u_t^2,    R = 1 / (1 + L),

with R = -0.1 for a format or parse failure (code fences, text after ``</answer>``, a wrong tag, a rejected
expression) and R = 0 when the expression fails at run time. The feedback is the rollout table; with
``include_previous_control_policy`` later tasks also show the pack's most recent successfully executed law
(environment-provided memory kept in per-``sample_pack`` state).
"""

from __future__ import annotations

import dataclasses
import html
import math
import random
import re
from typing import Any, Sequence

from codjax.envs import safe_expr
from codjax.envs.base import HINT_SECTION_MARKER, LENGTH_SECTION_MARKER, EnvFamily, StepResult, TaskEnv, Turn
from codjax.envs.cod_protocol import extract_answer
from codjax.envs.helpers import config_from_preset, pack_args
from codjax.envs.optimal_control.presets import PRESETS
from codjax.envs.registry import register

PARSE_FAILURE_REWARD = -0.1
VARIABLES = frozenset({"x", "v", "t", "x_target", "v_target", "horizon", "remaining_steps"})
_EXPR_RE = re.compile(r"^\s*<action_expression>(.*)</action_expression>\s*$", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class ControlConfig:
  horizon: int = 12
  x0_max: float = 2.0
  v0_max: float = 1.5
  target_max: float = 8.0
  a_min: float = 0.55
  a_max: float = 1.20
  b_abs_min: float = 0.35
  b_abs_max: float = 1.5
  control_penalty: float = 0.03
  velocity_weight: float = 2.0
  process_noise_std: float = 0.0
  include_previous_control_policy: bool = True

  def validate(self) -> None:
    if not isinstance(self.horizon, int) or isinstance(self.horizon, bool) or not 1 <= self.horizon <= 64:
      raise ValueError(f"horizon must be an int in [1, 64], got {self.horizon!r}")
    for name in ("x0_max", "v0_max", "target_max", "control_penalty", "velocity_weight", "process_noise_std"):
      v = getattr(self, name)
      if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    if not 0 < self.a_min <= self.a_max:
      raise ValueError(f"need 0 < a_min <= a_max, got {self.a_min!r}, {self.a_max!r}")
    if not 0 < self.b_abs_min <= self.b_abs_max:
      raise ValueError(f"need 0 < b_abs_min <= b_abs_max, got {self.b_abs_min!r}, {self.b_abs_max!r}")
    if not isinstance(self.include_previous_control_policy, bool):
      raise ValueError("include_previous_control_policy must be a bool")


@dataclasses.dataclass(frozen=True)
class Dynamics:
  a: float
  b: float


def sample_dynamics(pack_seed: int, cfg: ControlConfig) -> Dynamics:
  """The pack's hidden (a, b): ``a`` uniform, ``b`` uniform over the two-sided magnitude band."""
  rng = random.Random(int(pack_seed))
  a = rng.uniform(cfg.a_min, cfg.a_max)
  width = cfg.b_abs_max - cfg.b_abs_min
  s = rng.uniform(0.0, 2.0 * width)
  b = -cfg.b_abs_max + s if s < width else cfg.b_abs_min + (s - width)
  return Dynamics(a, b)


@dataclasses.dataclass(frozen=True)
class ControlTask:
  x0: float
  v0: float
  x_target: float
  v_target: float
  horizon: int


def sample_task(task_seed: int, cfg: ControlConfig) -> ControlTask:
  rng = random.Random(int(task_seed))
  x0 = rng.uniform(-cfg.x0_max, cfg.x0_max)
  v0 = rng.uniform(-cfg.v0_max, cfg.v0_max)
  xt = rng.uniform(-cfg.target_max, cfg.target_max)
  return ControlTask(x0, v0, xt, 0.0, cfg.horizon)


@dataclasses.dataclass
class Rollout:
  xs: list[float]  # x_0..x_T (shorter if the policy failed)
  vs: list[float]
  us: list[float]  # applied (clipped) controls u_0..u_{T-1}
  error: str | None = None  # runtime failure of the expression

  def loss(self, task: ControlTask, cfg: ControlConfig) -> float:
    dx = self.xs[-1] - task.x_target
    dv = self.vs[-1] - task.v_target
    return dx * dx + cfg.velocity_weight * dv * dv + cfg.control_penalty * sum(u * u for u in self.us)


def simulate(expr: safe_expr.Expr, dyn: Dynamics, task: ControlTask, noise_std: float = 0.0,
             noise_seed: int = 0) -> Rollout:
  """Runs the closed loop; stops at the first runtime failure of the expression."""
  noise = random.Random(int(noise_seed) ^ 0x5DEECE66D) if noise_std > 0 else None
  x, v = task.x0, task.v0
  out = Rollout([x], [v], [])
  for t in range(task.horizon):
    env = {"x": x, "v": v, "t": float(t), "x_target": task.x_target, "v_target": task.v_target,
           "horizon": float(task.horizon), "remaining_steps": float(max(1, task.horizon - t))}
    try:
      u = min(1.0, max(-1.0, expr.value(env)))
    except safe_expr.ExprError as e:
      out.error = f"step t={t}: {e}"
      return out
    v = dyn.a * v + dyn.b * u + (noise.gauss(0.0, noise_std) if noise else 0.0)
    x = x + v
    if not (math.isfinite(x) and math.isfinite(v)):
      out.error = f"step t={t}: the state became non-finite"
      return out
    out.us.append(u)
    out.xs.append(x)
    out.vs.append(v)
  return out


def rollout_table(r: Rollout) -> str:
  lines = ["t | x_t | v_t | u_t"]
  for t, (x, v) in enumerate(zip(r.xs, r.vs)):
    u = f"{r.us[t]:.3f}" if t < len(r.us) else "--"
    lines.append(f"{t} | {x:.3f} | {v:.3f} | {u}")
  return "\n".join(lines)


def parse_submission(response: str) -> tuple[str | None, str]:
  """Returns ``(expression_text, "")`` or ``(None, reason)`` following the response contract."""
  if "```" in response:
    return None, "Markdown code fences are not allowed"
  inner = extract_answer(response)
  if inner is None:
    return None, "expected exactly one <answer>...</answer> block"
  if response[response.index("</answer>") + len("</answer>"):].strip():
    return None, "nothing may follow </answer>"
  m = _EXPR_RE.match(inner)
  if m is None or "<action_expression>" in m.group(1) or "</action_expression>" in m.group(1):
    return None, "the answer must be exactly one <action_expression>...</action_expression> element"
  text = html.unescape(m.group(1)).strip()
  if not text:
    return None, "the action expression is empty"
  return text, ""


def _system_prompt(cfg: ControlConfig) -> str:
  return (
      "You control a one-dimensional system whose parameters are hidden. The state is a position x and a "
      "velocity v; at every step t your control u_t is clipped to [-1, 1] and the system moves as\n"
      "  v_{t+1} = a * v_t + b * u_t\n  x_{t+1} = x_t + v_{t+1}\n"
      f"The constants a and b are unknown but fixed for every task in this stream: a lies in "
      f"[{cfg.a_min:g}, {cfg.a_max:g}] and |b| lies in [{cfg.b_abs_min:g}, {cfg.b_abs_max:g}], with the "
      "sign of b to be inferred (b < 0 means a positive u pushes the velocity down).\n\n"
      f"Objective after T steps: L = (x_T - x_target)^2 + {cfg.velocity_weight:g} * (v_T - v_target)^2 + "
      f"{cfg.control_penalty:g} * sum_t u_t^2, and your reward is R = 1 / (1 + L).\n\n"
      "You submit one feedback law: a single expression that is evaluated at every step t = 0..T-1 and "
      "returns u_t. It may use the variables x, v, t, x_target, v_target, horizon and "
      "remaining_steps (= max(1, horizon - t)); numbers; + - * / **; comparisons; and, or, not; "
      "'A if C else B'; and the functions abs, min, max, pow, clip(x, lo, hi), ifelse(cond, a, b) and "
      "lt, le, gt, ge, eq, ne (e.g. lt(t, 3) is t < 3). Nothing else is allowed.\n"
      "Examples:\n"
      "<answer><action_expression>clip(0.4 * (x_target - x) - 0.9 * v, -1, 1)</action_expression></answer>\n"
      "<answer><action_expression>ifelse(lt(t, 2), 0.5, -0.3 * v)</action_expression></answer>\n\n"
      "After the rollout you see the whole trajectory, which reveals how the system responds.\n"
      "Response contract: reason briefly, then end with exactly one <answer><action_expression>..."
      "</action_expression></answer> block. Write nothing after </answer> and do not use code fences.")


class ControlPackState:
  """Mutable state of one CoD trajectory over a pack: the most recent successfully executed law."""

  def __init__(self):
    self.previous: dict[str, Any] | None = None


class ControlTaskEnv(TaskEnv):
  max_turns = 1

  def __init__(self, cfg: ControlConfig, dyn: Dynamics, task: ControlTask, state: ControlPackState,
               position: int, num_tasks: int, task_seed: int):
    self._cfg, self._dyn, self.task, self._state = cfg, dyn, task, state
    self._pos, self._num, self._seed = position, num_tasks, task_seed
    self._last_feedback = ""
    self._done = False

  def reset(self) -> tuple[str, str]:
    t = self.task
    lines = [f"Task {self._pos + 1}/{self._num}",
             f"Initial state: x0 = {t.x0:.3f}, v0 = {t.v0:.3f}",
             f"Target state: x_target = {t.x_target:.3f}, v_target = {t.v_target:.3f}",
             f"The rollout has {t.horizon} steps (t = 0..{t.horizon - 1}); the loss is measured at "
             f"t = {t.horizon}."]
    prev = self._state.previous if self._cfg.include_previous_control_policy else None
    if prev is not None:
      lines += ["", "Controller evidence from an earlier task:",
                f"<answer><action_expression>{html.escape(prev['expr'], quote=False)}</action_expression>"
                "</answer>",
                f"It ran from x0 = {prev['x0']:.3f}, v0 = {prev['v0']:.3f} toward x_target = "
                f"{prev['x_target']:.3f}, v_target = {prev['v_target']:.3f} over {prev['horizon']} steps, "
                f"completed all steps, and scored R = {prev['reward']:.3f} with terminal residuals "
                f"x_T - x_target = {prev['dx']:+.3f}, v_T - v_target = {prev['dv']:+.3f}."]
    lines += ["", "Think briefly, then end with exactly one <answer><action_expression>...</action_expression>"
              "</answer> submission."]
    return _system_prompt(self._cfg), "\n".join(lines)

  def _finish(self, reward: float, feedback: str, format_error: bool) -> StepResult:
    self._done = True
    self._last_feedback = feedback
    return StepResult(feedback, reward, True,
                      {"feedback": feedback, "format_error": format_error, "raw_reward": reward})

  def step(self, action_text: str) -> StepResult:
    if self._done:
      return self._finish(0.0, "The task is already finished.", False)
    text, why = parse_submission(action_text if isinstance(action_text, str) else "")
    if text is None:
      return self._finish(PARSE_FAILURE_REWARD, f"Invalid format: {why}. Reward: {PARSE_FAILURE_REWARD}.",
                          True)
    try:
      expr = safe_expr.parse(text, VARIABLES)
    except safe_expr.ExprError as e:
      return self._finish(PARSE_FAILURE_REWARD,
                          f"Invalid format: the expression was rejected ({e}). Reward: {PARSE_FAILURE_REWARD}.",
                          True)
    r = simulate(expr, self._dyn, self.task, self._cfg.process_noise_std, self._seed)
    head = "The environment executed the submitted policy under the fixed hidden dynamics."
    if r.error is not None:
      return self._finish(0.0, f"{head}\nThe policy failed at {r.error}. Reward: 0.\n{rollout_table(r)}", False)
    loss = r.loss(self.task, self._cfg)
    reward = 1.0 / (1.0 + loss)
    t = self.task
    self._state.previous = dict(expr=text, x0=t.x0, v0=t.v0, x_target=t.x_target, v_target=t.v_target,
                                horizon=t.horizon, reward=reward, dx=r.xs[-1] - t.x_target,
                                dv=r.vs[-1] - t.v_target)
    fb = (f"{head}\n{rollout_table(r)}\nTerminal state: x_T = {r.xs[-1]:.3f}, v_T = {r.vs[-1]:.3f}; "
          f"target: x = {t.x_target:.3f}, v = {t.v_target:.3f}.\nL = {loss:.4f}, R = {reward:.4f}")
    return self._finish(reward, fb, False)

  def render_trajectory(self, system_prompt: str, turns: Sequence[Turn]) -> str:
    """``System / Task / Submitted action expression`` (the raw response when nothing parsed), as
    Trinity-RFT's ``optimalcontrol/workflow.py`` renders it."""
    sys_text = system_prompt.split(HINT_SECTION_MARKER)[0].split(LENGTH_SECTION_MARKER)[0]
    task = turns[0].observation if turns else ""
    response = turns[0].action if turns else ""
    expr, _ = parse_submission(response)
    head = f"System:\n{sys_text}\n\n" if sys_text else ""  # "" (compact protocol): no System block
    return (f"{head}Task:\n{task}\n\nSubmitted action expression:\n"
            f"{expr if expr is not None else response}")


class ControlFamily(EnvFamily):
  name = "optimal_control"

  def __init__(self, cfg: ControlConfig):
    cfg.validate()
    self.cfg = cfg

  def sample_pack(self, pack_seed: int, num_tasks: int, task_seeds: Sequence[int] | None = None):
    pack_seed, seeds = pack_args(pack_seed, num_tasks, task_seeds)
    dyn = sample_dynamics(pack_seed, self.cfg)
    state = ControlPackState()
    return [ControlTaskEnv(self.cfg, dyn, sample_task(s, self.cfg), state, i, num_tasks, s)
            for i, s in enumerate(seeds)]


@register("optimal_control")
def make_optimal_control(preset: str = "hard", **overrides: Any) -> ControlFamily:
  """``preset`` in {easy, medium, hard} (presets.py); any ``ControlConfig`` field may be overridden."""
  return ControlFamily(config_from_preset(ControlConfig, PRESETS, preset, overrides, env="optimal_control"))
