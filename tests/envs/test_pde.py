"""PDE-Discovery: solver accuracy, dictionary and equation parsing, families, regression, actions, reward,
pack state, rendering, determinism and the expert's decision rule."""

import random

import numpy as np
import pytest

from codjax.agents.cod import run_text_packs
from codjax.envs import cod_protocol, make
from codjax.envs.base import Turn
from codjax.envs.experts import make_policy
from codjax.envs.pde import dictionary, env as pde_env, expert, families, model, regression, solver


def act(body: str) -> str:
  return f"Thinking.\n<answer>{body}</answer>"


SAMPLE6 = act("<sample_pde_data><point_grid>" + "".join(
    f'<point x="{x:.2f}" t="{t}"/>' for x, t in zip(np.linspace(0.1, 0.9, 6), (0, 0.05, 0.1) * 2))
              + "</point_grid></sample_pde_data>")
REGRESS = act('<run_sparse_regression dataset_id="merged_all"/>')


def update(eq: str) -> str:
  return act(f"<update_scientific_context><preferred_equation>{eq}</preferred_equation>"
             "</update_scientific_context>")


@pytest.fixture(scope="module")
def fam():
  return make("pde_discovery")


# ----- solver


def _linear_error(nx: int, nt: int, c: float = 2.0) -> float:
  grid = solver.Grid(nx, nt)
  coefs = np.zeros(dictionary.NUM_TERMS)
  coefs[0] = c  # f(u) = c u: u = A exp((c - pi^2) t) sin(pi x) solves the PDE exactly
  u0 = 0.8 * np.sin(np.pi * grid.x)
  hist, ok = solver.simulate(u0[:, None], coefs, grid)
  exact = 0.8 * np.exp(c - np.pi**2) * np.sin(np.pi * grid.x)
  assert ok
  return float(np.max(np.abs(hist[-1, :, 0] - exact)))


def test_solver_order_of_accuracy():
  # first order in time: at a fine fixed dx, halving dt halves the error
  e = [_linear_error(257, nt) for nt in (101, 201, 401)]
  assert 0.9 < np.log2(e[1] / e[2]) < 1.2
  # second order in space: with dt ~ dx^2, halving dx quarters the error
  f = [_linear_error(nx, (nx - 1) ** 2 // 4 + 1) for nx in (17, 33, 65)]
  assert 1.9 < np.log2(f[1] / f[2]) < 2.2 and f[2] < 2e-5


def test_residual_target_equals_reaction_and_interpolation_is_exact_on_nodes(fam):
  hidden = model.sample_hidden(fam.cfg, 21, 2)
  traj = model.dense_trajectory(hidden, 0, 3.0)
  traj.ensure(2000)
  u, y = traj.u, traj.y
  assert u.shape == (2001, 257) and u.dtype == np.float32
  np.testing.assert_allclose(y, dictionary.reaction(u.astype(float), hidden.coefs), atol=1e-4)
  n, i = np.array([0, 10, 2000]), np.array([1, 128, 255])
  np.testing.assert_allclose(solver.bilinear(u, solver.DENSE, i * solver.DENSE.dx, n * solver.DENSE.dt),
                             u[n, i], atol=1e-6)


def test_lazy_trajectory_integrates_on_demand_and_matches_full_run(fam):
  hidden = model.sample_hidden(fam.cfg, 22, 2)
  lazy = model.dense_trajectory(hidden, 1, 3.0)
  x, t = np.array([0.3, 0.7]), np.array([0.0, 0.1])
  u_early, y_early = lazy.sample(x, t)
  assert lazy.rows == 202  # rows up to t = 0.1 plus one for the residual target
  full = model.dense_trajectory(hidden, 1, 3.0)
  full.ensure(2000)
  assert full.rows == 2000
  np.testing.assert_array_equal(lazy.u[:203], full.u[:203])
  np.testing.assert_array_equal(lazy.y[:202], full.y[:202])
  u_late, _ = lazy.sample(x, np.array([0.9, 1.0]))
  np.testing.assert_array_equal(u_late, solver.bilinear(full.u, solver.DENSE, x, np.array([0.9, 1.0])))
  np.testing.assert_array_equal(lazy.y, full.y)
  np.testing.assert_array_equal(u_early, solver.bilinear(full.u, solver.DENSE, x, t))


def test_stability_flag_detects_blow_up():
  coefs = np.zeros(dictionary.NUM_TERMS)
  coefs[4] = 2.0  # +2 u^5 from amplitude 2.5 blows up
  u0 = 2.5 * np.sin(np.pi * solver.COARSE.x)
  assert solver.simulate(u0[:, None], coefs, solver.COARSE, keep=False) == (None, False)
  coefs[4] = -2.0
  assert solver.simulate(u0[:, None], coefs, solver.COARSE, keep=False)[1]


# ----- dictionary, equations, families


@pytest.mark.parametrize("text", [
    "0.7*u - 1.2*u**3", "f(u) = 0.7*u - 1.2*u**3", "u_t = u_xx + 0.7*u - 1.2*u**3", "-1.2*u**3 + 0.7*u",
    "u*0.7 - u**3*1.2", "0.7*u - 1.2*u^3", "1.4*u/2 - (0.6*u**3 + 0.6*u*u*u)", "0.7*u + 1.2*(-u**3)"])
def test_parse_equation_variants(text):
  c = dictionary.parse_equation(text)
  expected = np.zeros(dictionary.NUM_TERMS)
  expected[[0, 2]] = [0.7, -1.2]
  np.testing.assert_allclose(c, expected, atol=1e-12)


def test_parse_equation_compound_terms_and_roundtrip():
  c = dictionary.parse_equation("0.5*(exp(u)-1) + 2*(u/(1+u+u**2)) - 0.3*log(1+u**2) + sin(2*u)")
  assert {dictionary.TERMS[k]: v for k, v in zip(np.flatnonzero(c), c[c != 0])} == {
      "exp(u)-1": 0.5, "u/(1+u+u**2)": 2.0, "log(1+u**2)": -0.3, "sin(2*u)": 1.0}
  for k in range(dictionary.NUM_TERMS):
    v = np.zeros(dictionary.NUM_TERMS)
    v[k] = -1.25
    np.testing.assert_array_equal(dictionary.parse_equation(dictionary.format_equation(v)), v)


@pytest.mark.parametrize("text,fragment", [
    ("c1*u + c2*u**3", "numbers, not symbols"), ("alpha*u", "numbers, not symbols"),
    ("0.7*exp(u) - 1", "not a number times one dictionary term"), ("u**6", "not a number times"),
    ("0.5*(u - u**3)", "not a number times"), ("u.real", "attribute"), ("", "empty"), ("u +", "syntax"),
    ("__import__('os')", "not allowed"), ("-u_xx + u", "diffusion")])
def test_parse_equation_rejections(text, fragment):
  with pytest.raises(dictionary.EquationError, match=fragment):
    dictionary.parse_equation(text)


def test_families_follow_the_stated_rules():
  train, ev = families.load_family("train"), families.load_family("eval")
  assert len(train) == 40 and sorted(len(t.terms) for t in train) == [1] * 5 + [2] * 35
  assert len(ev) == 25 and sorted(len(t.terms) for t in ev) == [2] * 17 + [3] * 8
  train_s, eval_s = {frozenset(t.terms) for t in train}, {frozenset(t.terms) for t in ev}
  assert len(train_s) == 40 and len(eval_s) == 25 and not train_s & eval_s
  assert all(set(t.signs) <= {-1, 1} and t.motivation for t in train + ev)
  with pytest.raises(ValueError):
    families.load_family("test")


def test_hidden_model_sampling(fam):
  cfg = fam.cfg
  a_up = model.amplitude_upper_bound("train", 1, 2, 3.0)
  assert 0 < a_up < 3.0
  h = model.sample_hidden(cfg, 99, 8)
  assert h is model.sample_hidden(cfg, 99, 8)
  tmpl = families.load_family("train")[h.template_index]
  assert tuple(np.flatnonzero(h.coefs)) == tuple(sorted(tmpl.terms))
  mags = np.abs(h.coefs[list(tmpl.terms)])
  assert np.all((mags >= 0.5) & (mags <= 2.0)) and np.allclose(mags, np.round(mags, 2))
  assert np.array_equal(np.sign(h.coefs[list(tmpl.terms)]), tmpl.signs)
  bands = np.floor(h.amplitudes / (a_up / 8)).astype(int)
  assert sorted(bands) == list(range(8))
  for j in range(8):
    u0 = h.initial_condition(j, solver.DENSE.x)
    assert u0[0] == u0[-1] == 0 and u0.min() >= 0 and u0.max() == pytest.approx(h.amplitudes[j])
  fixed = model.sample_hidden(model.PdeConfig(family="eval", max_reaction_terms=3, ground_truth_template_index=20),
                              5, 4)
  assert fixed.template_index == 20


def test_config_validation():
  for bad in [dict(preset="nope"), dict(family="other"), dict(min_reaction_terms=3, max_reaction_terms=2),
              dict(min_reaction_terms=3), dict(point_budget=0), dict(noise_level=-1.0),
              dict(ground_truth_template_index=40), dict(max_steps=True), dict(extra=1)]:
    with pytest.raises(ValueError):
      make("pde_discovery", **bad)
  assert make("pde_discovery", preset="eval").cfg.max_reaction_terms == 3


# ----- regression and reward


def test_regression_recovers_every_template_from_clean_samples():
  u = np.linspace(0.05, 2.5, 30)
  for name, max_terms in (("train", 2), ("eval", 3)):
    for t in families.load_family(name):
      c = np.zeros(dictionary.NUM_TERMS)
      c[list(t.terms)] = np.array(t.signs) * np.linspace(0.7, 1.6, len(t.terms))
      res = regression.sparse_regression(u, dictionary.reaction(u, c), list(range(15)), max_terms=max_terms)
      assert res.best.support == tuple(sorted(t.terms))
      np.testing.assert_allclose(res.best.coefs, c, atol=2e-3)
      assert res.matches(res.best.coefs) is res.best and res.matches(res.best.coefs + 1e-3) is None


def test_regression_candidate_mode_and_diagnostics():
  u = np.linspace(0.1, 2.0, 12)
  c = np.zeros(15)
  c[[0, 2]] = [1.0, -0.5]
  y = dictionary.reaction(u, c)
  res = regression.sparse_regression(u, y, [0, 2, 6], candidate_supports=[(0, 2), (6,)])
  assert [cand.support for cand in res.ranked] == [(0, 2), (6,)]
  assert res.margin > 10 and res.kappa_selected > 1 and res.kappa_penalty >= 0
  np.testing.assert_allclose(res.residuals, y - res.predictions)
  few = regression.sparse_regression(u[:2], y[:2], list(range(15)))
  assert few.kappa_full == regression.KAPPA_CAP


def test_reward_formula():
  true = np.zeros(15)
  true[[0, 2]] = [1.0, -1.0]
  assert pde_env.pde_reward(true, true) == 1.0
  assert pde_env.pde_reward(np.zeros(15), true) == pytest.approx(0.5)
  pred = true.copy()
  pred[0] = 1.5
  assert pde_env.pde_reward(pred, true) == pytest.approx(1 / 1.25)
  pred[5] = 0.1  # one extra term: +0.05 relative error, +1 support penalty
  assert pde_env.pde_reward(pred, true) == pytest.approx(1 / (1 + 0.3 + 1))


# ----- environment


def _solve_best(env, regress=REGRESS):
  env.reset()
  env.step(SAMPLE6)
  r = env.step(regress)
  eq = r.info["feedback"].split("Best equation: ")[1].split(" | ")[0]
  return eq, env.step(update(eq))


def test_full_task_reward_evidence_and_persistence(fam):
  envs = fam.sample_pack(123, 3)
  eq, res = _solve_best(envs[0])
  assert res.done and not res.info["format_error"]
  assert res.reward == pytest.approx(pde_env.pde_reward(dictionary.parse_equation(eq), envs[0]._hidden.coefs))
  assert "Reward" not in res.info["feedback"] and envs[0].show_reward_in_update is False
  final = envs[0].final_feedback()
  assert "Finalized equation: " + eq in final and "Latest sampled data" in final and "reward" not in final.lower()
  _, obs = envs[1].reset()
  assert "Task 2/3 | Step 1/6" in obs and "ds_t1_1 (6 points, task 1)" in obs and "Prior task evidence" in obs
  hidden = envs[1].step(act("<summarize_pack_evidence/>")).info["feedback"]
  shown = envs[1].step(act('<summarize_pack_evidence reveal_equations="true"/>')).info["feedback"]
  assert "H1 (task 1)" in hidden and eq not in hidden and eq in shown
  r = envs[1].step(SAMPLE6)
  assert "ds_t2_1" in r.observation and "merged_all (12 points" in r.observation
  # merged selection by task range
  r = envs[1].step(act('<run_sparse_regression dataset_id="merged_t2_t2"/>'))
  assert "Sparse regression on merged_t2_t2 (6 points" in r.info["feedback"]
  # another trajectory of the same pack and another pack start empty
  assert "none yet" in fam.sample_pack(123, 3)[1].reset()[1]
  assert "none yet" in fam.sample_pack(124, 3)[1].reset()[1]


def test_update_rules(fam):
  env = fam.sample_pack(7, 2)[0]
  env.reset()
  assert "sample data in this task" in env.step(update("0.5*u")).info["feedback"]
  env.step(SAMPLE6)
  assert "run a sparse regression" in env.step(update("0.5*u")).info["feedback"]
  env.step(REGRESS)
  r = env.step(update("0.123456*u"))
  assert "one of the candidates" in r.info["feedback"] and not r.done
  r = env.step(update("c1*u"))  # the sixth turn: the task ends without an accepted update
  assert "symbols" in r.info["feedback"] and r.done and r.reward == 0.0
  assert "Task ended without update_scientific_context" in r.info["feedback"]
  other = fam.sample_pack(7, 2)[0]
  other.reset()
  r = other.step(act("<update_scientific_context><note>x</note></update_scientific_context>"))
  assert "preferred_equation is required" in r.info["feedback"] and not r.done
  r = other.step(act("<update_scientific_context><preferred_equation>u</preferred_equation><uncertain_terms>"
                     "<term>u</term><term>u**9</term></uncertain_terms></update_scientific_context>"))
  assert "unknown: ['u**9']" in r.info["feedback"]


def test_argument_errors_do_not_end_the_task(fam):
  env = fam.sample_pack(8, 1)[0]
  env.reset()
  cases = [
      (act('<sample_pde_data><point_grid><point x="0" t="0.1"/></point_grid></sample_pde_data>'), "outside"),
      (act("<sample_pde_data><point_grid></point_grid></sample_pde_data>"), "at least one"),
      (act("<sample_pde_data><point_grid>" + '<point x="0.5" t="0"/>' * 7 + "</point_grid></sample_pde_data>"),
       "budget"),
      (act('<run_sparse_regression dataset_id="ds_t9_9"/>'), "unknown dataset"),
      (act('<sample_pde_data><point_grid><point x="a" t="0"/></point_grid></sample_pde_data>'), "numeric"),
  ]
  for text, fragment in cases:
    r = env.step(text)
    assert fragment in r.info["feedback"] and not r.done and not r.info["format_error"]
  r = env.step(act('<run_sparse_regression alpha="-1"/>'))
  assert r.done and "Task ended without" in r.info["feedback"] and r.reward == 0.0


@pytest.mark.parametrize("text", [
    "no answer", "<answer>plain text</answer>", "<answer><unknown_action/></answer>",
    "<answer><sample_pde_data><point_grid></sample_pde_data></answer>", act("<a/>") + act("<b/>"),
    "<answer><!DOCTYPE x [<!ENTITY a 'b'>]><sample_pde_data/></answer>",
    "<answer><run_sparse_regression><dataset_id><x/></dataset_id></run_sparse_regression></answer>"])
def test_format_errors_end_the_task(fam, text):
  env = fam.sample_pack(3, 1)[0]
  env.reset()
  r = env.step(text)
  assert r.done and r.reward == 0.0 and r.info["format_error"] and r.info["feedback"] == pde_env.FORMAT_ERROR


def test_dictionary_subset_and_candidate_regressions(fam):
  env = fam.sample_pack(11, 1)[0]
  env.reset()
  env.step(SAMPLE6)
  r = env.step(act('<run_sparse_regression dataset_id="ds_t1_1" threshold="0.01"><dictionary><term>u</term>'
                   "<term>u**3</term><term>tanh(u)</term></dictionary></run_sparse_regression>"))
  assert "(6 points, 3 terms, alpha=0.05, threshold=0.01)" in r.info["feedback"]
  r = env.step(act("<run_sparse_regression><candidate_equations><equation>u - u**3</equation>"
                   "<equation>2*tanh(u)</equation></candidate_equations></run_sparse_regression>"))
  cands = expert._CAND_RE.findall(r.info["feedback"])
  assert len(cands) == 2 and {len(expert._support(eq)) for eq, _ in cands} == {1, 2}
  r = env.step(update(cands[1][0].split("=", 1)[1]))
  assert r.done and r.reward > 0


def test_determinism(fam):
  a, b = fam.sample_pack(31, 2), fam.sample_pack(31, 2)
  assert [e.reset() for e in a] == [e.reset() for e in b]
  assert a[0].step(SAMPLE6).observation == b[0].step(SAMPLE6).observation
  assert a[0].step(REGRESS).observation == b[0].step(REGRESS).observation


def _sampled_rows(feedback: str) -> np.ndarray:
  """The ``x | t | u | y`` rows a sample_pde_data reply lists, as an (n, 4) array."""
  table = feedback.split("x | t | u | y\n")[1]
  return np.array([[float(v) for v in line.split(" | ")] for line in table.strip().splitlines()])


def test_ralph_pack_repeats_one_task_cod_pack_varies(fam):
  """Ralph packing (one task seed S times) shows every position the same task data -- trajectory 0 with the same
  noise, as Trinity-RFT's fixed task index does -- while a cod pack's position k observes trajectory k."""
  pack_seed, seeds = 55, [101, 202, 303]
  hidden = model.sample_hidden(fam.cfg, pack_seed, 3)

  def initial_u(j, x):  # u(x, 0) of trajectory j, straight from the hidden model (no solver involved)
    return np.interp(x, solver.DENSE.x, hidden.initial_condition(j, solver.DENSE.x))

  def sample_each(envs):
    out = []
    for env in envs:
      env.reset()
      out.append(env.step(SAMPLE6))
    return out

  ralph = sample_each(fam.sample_pack(pack_seed, 3, task_seeds=[seeds[0]] * 3))
  cod = sample_each(fam.sample_pack(pack_seed, 3, task_seeds=seeds))
  ralph_rows = [_sampled_rows(r.info["feedback"]) for r in ralph]
  cod_rows = [_sampled_rows(r.info["feedback"]) for r in cod]
  x, t = cod_rows[0][:, 0], cod_rows[0][:, 1]
  at0 = t == 0.0
  assert at0.sum() == 2
  for k in range(3):
    np.testing.assert_array_equal(ralph_rows[k], cod_rows[0])  # identical points, values and noise
    assert np.abs(ralph_rows[k][at0, 2] - initial_u(0, x[at0])).max() < 0.01  # noise sd 0.002
    assert np.abs(cod_rows[k][at0, 2] - initial_u(k, x[at0])).max() < 0.01
  for k in (1, 2):
    assert np.abs(initial_u(k, x[at0]) - initial_u(0, x[at0])).max() > 0.05  # the trajectories do differ
    assert not np.allclose(cod_rows[k][:, 2], cod_rows[0][:, 2], atol=0.02)
  # the repeats' datasets persist side by side, named by position
  assert [f"Dataset: ds_t{k}_1." in r.info["feedback"] for k, r in enumerate(ralph, 1)] == [True] * 3
  assert "merged_all (18 points" in ralph[2].observation and "Task 3/3" in ralph[2].observation


def test_dense_simulation_is_cached_per_trajectory(fam):
  envs = fam.sample_pack(40, 2)
  envs[0].reset()
  envs[0].step(SAMPLE6)
  cached = envs[0]._state.dense[0]
  envs[0].step(act('<sample_pde_data><point_grid><point x="0.5" t="0.5"/></point_grid></sample_pde_data>'))
  assert envs[0]._state.dense[0] is cached and list(envs[0]._state.dense) == [0]


def test_render_trajectory_compresses_old_feedback_and_reminder(fam):
  env = fam.sample_pack(5, 1)[0]
  system, obs = env.reset()
  turns = []
  for text in (SAMPLE6, REGRESS, act("<summarize_pack_evidence/>")):
    turns.append(Turn(obs, text))
    obs = env.step(text).observation
  text = env.render_trajectory(system + "\n\n## Hints that might help\nHints: x", turns)
  assert text.count("[History compressed.]") == 1 and "Hints: x" not in text
  assert text.count("Action feedback:") == 3 and "Sampled 6 points" not in text.split("Step 2:")[0]
  reminder = fam.update_protocol_reminder()
  assert cod_protocol.HINT_START in reminder and "--- Updated hints ---" in reminder


# ----- expert


def test_expert_vote_prefers_the_ledger_over_a_weak_current_fit():
  a, b = (0, 2), (0, 4)
  current = [(1.0, {b: 1.0, a: 1.05})]
  ledger = [(1.0, {a: 1.0, b: 1.4}), (1.0, {a: 1.0, b: 1.2})]
  assert expert.score_supports(current)[0][2] == b
  assert expert.score_supports(current + ledger)[0][2] == a


def test_expert_writes_and_reads_its_ledger(fam):
  trajs = run_text_packs(make_policy("pde_discovery", "expert"), fam, [1001], 3)
  t = trajs[0]
  assert all(t.hint_parse_ok) and t.task_rewards.min() > 0
  ledgers = [expert.ledger(h) for h in t.hints]
  assert [len(x) for x in ledgers] == [0, 1, 2]
  assert "Best equation so far: f(u) = " in t.hints[2]


def test_random_policy_completes_tasks(fam):
  trajs = run_text_packs(make_policy("pde_discovery", "random"), fam, [3, 4], 2)
  assert all(e.reward >= 0 and not e.format_error for t in trajs for e in t.solve_episodes)
  rng = random.Random(0)
  msg = [{"role": "system", "content": "s"}, {"role": "user", "content": cod_protocol.PREV_HINTS_HEADER}]
  assert cod_protocol.parse_hint(make_policy("pde_discovery", "random").respond(msg, rng))
