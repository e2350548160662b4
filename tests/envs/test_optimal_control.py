"""OptimalControl: hidden dynamics, simulator and reward on hand-computed cases, format rules, pack state,
rendering, and the expert (identification, planning, hint effect)."""

import random

import numpy as np
import pytest

from codjax.agents.cod import run_text_packs
from codjax.envs import make, safe_expr
from codjax.envs.base import Turn
from codjax.envs.experts import make_policy
from codjax.envs.optimal_control import env as oc
from codjax.envs.optimal_control import expert as oce


def submit(expr: str) -> str:
  return f"Reasoning.\n<answer><action_expression>{expr}</action_expression></answer>"


def test_presets_and_validation():
  assert make("optimal_control").cfg.horizon == 12
  easy = make("optimal_control", preset="easy")
  assert (easy.cfg.horizon, easy.cfg.x0_max, easy.cfg.v0_max, easy.cfg.target_max) == (8, 1.0, 0.5, 3.0)
  med = make("optimal_control", preset="medium", horizon=5)
  assert (med.cfg.horizon, med.cfg.target_max) == (5, 5.0)
  for bad in [dict(preset="insane"), dict(horizon=0), dict(horizon=2.5), dict(a_min=2.0, a_max=1.0),
              dict(b_abs_min=-1.0), dict(control_penalty=-1), dict(velocity_weight=float("nan")),
              dict(include_previous_control_policy="yes"), dict(bogus=1)]:
    with pytest.raises(ValueError):
      make("optimal_control", **bad)


def test_hidden_dynamics_ranges_and_both_signs():
  cfg = oc.ControlConfig()
  dyns = [oc.sample_dynamics(s, cfg) for s in range(400)]
  a = np.array([d.a for d in dyns])
  b = np.array([d.b for d in dyns])
  assert a.min() >= 0.55 and a.max() <= 1.2
  assert np.all((np.abs(b) >= 0.35) & (np.abs(b) <= 1.5))
  assert 0.35 < np.mean(b > 0) < 0.65
  assert oc.sample_dynamics(7, cfg) == oc.sample_dynamics(7, cfg)


def test_simulator_and_reward_hand_computed():
  cfg = oc.ControlConfig(horizon=2)
  dyn = oc.Dynamics(0.5, 1.0)
  task = oc.ControlTask(x0=0.0, v0=0.0, x_target=2.5, v_target=0.0, horizon=2)
  r = oc.simulate(safe_expr.parse("5", oc.VARIABLES), dyn, task)  # clipped to u = 1
  assert r.us == [1.0, 1.0]
  assert r.vs == pytest.approx([0.0, 1.0, 1.5])  # v1 = 1, v2 = 0.5 * 1 + 1
  assert r.xs == pytest.approx([0.0, 1.0, 2.5])
  assert r.loss(task, cfg) == pytest.approx(0.0 + 2 * 1.5**2 + 0.03 * 2)
  # the policy sees t, remaining_steps and the targets
  r2 = oc.simulate(safe_expr.parse("ifelse(lt(t, 1), -0.5, remaining_steps / 10 + x_target - 2.5)",
                                   oc.VARIABLES), dyn, task)
  assert r2.us == pytest.approx([-0.5, 0.1])
  assert r2.vs == pytest.approx([0.0, -0.5, -0.15])


def test_step_reward_feedback_and_evidence():
  fam = make("optimal_control", preset="easy")
  envs = fam.sample_pack(3, 3)
  dyn = oc.sample_dynamics(3, fam.cfg)
  system, obs = envs[0].reset()
  assert "x0 =" in obs and "Controller evidence" not in obs and "a and b are unknown" in system
  res = envs[0].step(submit("clip(0.3 * (x_target - x) - 0.5 * v, -1, 1)"))
  t = envs[0].task
  expected = oc.simulate(safe_expr.parse("clip(0.3 * (x_target - x) - 0.5 * v, -1, 1)", oc.VARIABLES), dyn, t)
  assert res.done and not res.info["format_error"]
  assert res.reward == pytest.approx(1 / (1 + expected.loss(t, fam.cfg)))
  fb = res.info["feedback"]
  assert fb.startswith("The environment executed the submitted policy under the fixed hidden dynamics.")
  assert "t | x_t | v_t | u_t" in fb and fb.count("\n") >= fam.cfg.horizon + 2
  assert f"{fam.cfg.horizon} | " in fb and " | --" in fb
  # later tasks of this pack see the law as evidence; a fresh sample_pack call (another repeat) does not
  _, obs1 = envs[1].reset()
  assert "Controller evidence from an earlier task" in obs1 and "0.3 * (x_target - x)" in obs1
  _, obs_other = fam.sample_pack(3, 3)[1].reset()
  assert "Controller evidence" not in obs_other
  _, obs_other_pack = make("optimal_control", preset="easy").sample_pack(4, 3)[1].reset()
  assert "Controller evidence" not in obs_other_pack
  off = make("optimal_control", preset="easy", include_previous_control_policy=False).sample_pack(3, 2)
  off[0].reset()
  off[0].step(submit("0"))
  assert "Controller evidence" not in off[1].reset()[1]


@pytest.mark.parametrize("text", [
    "```\n<answer><action_expression>0</action_expression></answer>\n```",
    "<answer><action_expression>0</action_expression></answer> trailing",
    "<answer><action>0</action></answer>",
    "<answer><action_expression>0</action_expression><action_expression>1</action_expression></answer>",
    "no answer at all",
    "<answer><action_expression>x.real</action_expression></answer>",
    "<answer><action_expression>__import__('os')</action_expression></answer>",
    "<answer><action_expression>   </action_expression></answer>",
])
def test_format_failures_cost_point_one(text):
  env = make("optimal_control").sample_pack(1, 1)[0]
  env.reset()
  res = env.step(text)
  assert res.done and res.info["format_error"] and res.reward == -0.1 == res.info["raw_reward"]


@pytest.mark.parametrize("expr,where", [("1 / (t - 3)", "t=3"), ("9**9**9", "t=0"), ("x < 100", "t=0")])
def test_runtime_failure_scores_zero_and_records_no_evidence(expr, where):
  envs = make("optimal_control").sample_pack(1, 2)
  envs[0].reset()
  res = envs[0].step(submit(expr))
  assert res.done and not res.info["format_error"] and res.reward == 0.0
  assert f"failed at step {where}" in res.info["feedback"]
  assert "Controller evidence" not in envs[1].reset()[1]


def test_xml_escaped_comparisons_are_accepted():
  env = make("optimal_control").sample_pack(1, 1)[0]
  env.reset()
  res = env.step(submit("1 if t &lt; 2 else -1"))
  assert not res.info["format_error"] and "| 1.000" in res.info["feedback"]


def test_render_trajectory():
  env = make("optimal_control").sample_pack(1, 1)[0]
  system, obs = env.reset()
  text = env.render_trajectory(system + "\n\n## Hints that might help\nsecret", [Turn(obs, submit("0.5 * v"))])
  assert text.startswith("System:\n") and "secret" not in text
  assert text.endswith("Submitted action expression:\n0.5 * v") and f"Task:\n{obs}" in text
  raw = env.render_trajectory(system, [Turn(obs, "no tags")])
  assert raw.endswith("Submitted action expression:\nno tags")


def test_determinism():
  a = make("optimal_control").sample_pack(11, 3)
  b = make("optimal_control").sample_pack(11, 3)
  assert [e.reset() for e in a] == [e.reset() for e in b]
  assert a[0].step(submit("0.2")).info["feedback"] == b[0].step(submit("0.2")).info["feedback"]


def test_expert_identifies_and_plans():
  dyn = oc.Dynamics(0.83, -1.21)
  task = oc.ControlTask(0.5, -0.3, 4.0, 0.0, 12)
  probe = oc.simulate(safe_expr.parse(oce.PROBE, oc.VARIABLES), dyn, task)
  a, b, n = oce.fit_dynamics(oc.rollout_table(probe))
  assert (a, b) == pytest.approx((0.83, -1.21), abs=5e-3) and n == 12
  us = oce.plan_controls(0.83, -1.21, task.x0, task.v0, task.x_target, 0.0, 12)
  plan = oc.simulate(safe_expr.parse(oce.controls_expression(us), oc.VARIABLES), dyn, task)
  cfg = oc.ControlConfig()
  loss = plan.loss(task, cfg)
  # no random bounded control sequence does better than the planned one
  rng = np.random.default_rng(0)
  for _ in range(200):
    cand = np.clip(us + rng.normal(0, 0.1, 12), -1, 1)
    r = oc.simulate(safe_expr.parse(oce.controls_expression(cand), oc.VARIABLES), dyn, task)
    assert r.loss(task, cfg) >= loss - 1e-3
  assert loss < 0.5


def test_expert_hints_raise_later_rewards():
  fam = make("optimal_control")
  expert = make_policy("optimal_control", "expert")
  seeds = list(range(40))
  with_hints = np.stack([t.task_rewards for t in run_text_packs(expert, fam, seeds, 4, use_hints=True)])
  without = np.stack([t.task_rewards for t in run_text_packs(expert, fam, seeds, 4, use_hints=False)])
  assert np.allclose(with_hints[:, 0], without[:, 0])
  assert with_hints[:, 1:].mean() > without[:, 1:].mean() + 0.5
  rand = np.stack([t.task_rewards for t in run_text_packs(make_policy("optimal_control", "random"), fam, seeds, 4)])
  assert with_hints[:, 1:].mean() > rand[:, 1:].mean() + 0.5


def test_expert_update_pools_estimates_and_parses_its_own_hint():
  rng = random.Random(0)
  fam = make("optimal_control")
  trajs = run_text_packs(make_policy("optimal_control", "expert"), fam, [5], 3)
  hints = trajs[0].hints
  assert hints[0] == "Hints: null"
  first = oce.parse_dynamics_hint(hints[1])
  second = oce.parse_dynamics_hint(hints[2])
  dyn = oc.sample_dynamics(5, fam.cfg)
  assert first[:2] == pytest.approx((dyn.a, dyn.b), abs=5e-3) and second[2] == first[2] + 12
  assert "--- Start of updated hints ---" in make_policy("optimal_control", "random").respond(
      [{"role": "system", "content": "s"}, {"role": "user", "content": "--- Previous hints ---\n\nx"}], rng)


def test_expert_reads_the_loss_weights_from_the_prompt():
  fam = make("optimal_control", control_penalty=0.5, velocity_weight=3.0)
  system, _ = fam.sample_pack(0, 1)[0].reset()
  assert oce._OBJECTIVE_RE.search(system).groups() == ("3", "0.5")
  us_cheap = oce.plan_controls(0.9, 1.0, 0.0, 0.0, 5.0, 0.0, 12)
  us_dear = oce.plan_controls(0.9, 1.0, 0.0, 0.0, 5.0, 0.0, 12, 3.0, 0.5)
  assert np.sum(us_dear**2) < np.sum(us_cheap**2)
