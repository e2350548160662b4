"""Property tests for PDE-Discovery, OptimalControl and GridNavigation: arbitrary model text in every action
format never raises, rewards stay in range, and the scripted policies survive arbitrary hints and prompts."""

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codjax.envs import cod_protocol as proto
from codjax.envs import make
from codjax.envs.experts import make_policy

FAMILIES = {"pde_discovery": make("pde_discovery"), "optimal_control": make("optimal_control"),
            "grid_navigation": make("grid_navigation")}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_META = ["<answer>", "</answer>", "<", ">", "/>", "\"", "'", "&", "&lt;", "<!DOCTYPE", "<![CDATA[", "**", "*",
         "/", "(", ")", "u", "x", "v", "t", "exp(", "log(", "sin(", "9**9**9", "1e308", "-", "+", ",", ";", "\n",
         "\x00", "é", "😀", "lambda", "__import__", ".", "[", "]", "=", "c1", "merged_all", "ds_t1_1", "```"]
_piece = st.one_of(st.text(max_size=12), st.sampled_from(_META), st.integers(-10**40, 10**40).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))
junk = st.lists(_piece, max_size=10).map("".join)
free_text = st.one_of(st.text(max_size=300), junk, junk.map(lambda s: f"<answer>{s}</answer>"))


def _pde_action(kind, a, b, c):
  if kind == 0:
    return f'<answer><sample_pde_data><point_grid><point x="{a}" t="{b}"/><point x="0.5" t="{c}"/>' \
           "</point_grid></sample_pde_data></answer>"
  if kind == 1:
    return f'<answer><run_sparse_regression dataset_id="{a}" alpha="{b}" threshold="{c}"/></answer>'
  if kind == 2:
    return f"<answer><run_sparse_regression><dictionary><term>{a}</term><term>{b}</term></dictionary>" \
           "</run_sparse_regression></answer>"
  if kind == 3:
    return f"<answer><run_sparse_regression><candidate_equations><equation>{a}</equation><equation>{b}" \
           "</equation></candidate_equations></run_sparse_regression></answer>"
  if kind == 4:
    return f"<answer><update_scientific_context><preferred_equation>{a}</preferred_equation><note>{b}</note>" \
           f"<uncertain_terms>{c}</uncertain_terms></update_scientific_context></answer>"
  return f'<answer><summarize_pack_evidence reveal_equations="{a}"/></answer>'


pde_actions = st.one_of(free_text, st.builds(_pde_action, st.integers(0, 5), junk, junk, junk),
                        st.builds(_pde_action, st.just(0), st.floats(-1, 2).map(str), st.floats(-1, 2).map(str),
                                  st.floats(0, 1).map(str)))
control_actions = st.one_of(free_text, junk.map(lambda s: f"<answer><action_expression>{s}</action_expression>"
                                                          "</answer>"))
grid_actions = st.one_of(free_text, st.tuples(st.integers(-10**30, 10**30), st.integers(-20, 20)).map(
    lambda rc: f"<answer>{rc[0]},{rc[1]}</answer>"), st.tuples(st.integers(0, 14), st.integers(0, 14)).map(
        lambda rc: f"<answer> {rc[0]} , {rc[1]} </answer>"))


def _run(name, seed, actions, reward_ok):
  env = FAMILIES[name].sample_pack(seed, 2)[0]
  system, obs = env.reset()
  assert isinstance(system, str) and isinstance(obs, str)
  for turn, text in enumerate(actions * (env.max_turns + 1)):
    r = env.step(text)
    assert isinstance(r.observation, str) and isinstance(r.info["feedback"], str)
    assert reward_ok(r.reward) and r.reward == r.info["raw_reward"]
    if r.info["format_error"]:
      assert r.done
    if r.done:
      assert turn < env.max_turns
      assert isinstance(env.final_feedback(), str)
      return
  raise AssertionError("episode did not end within its turn budget")


@SETTINGS
@given(seed=st.integers(0, 2**63 - 1), actions=st.lists(pde_actions, min_size=1, max_size=6))
def test_pde_arbitrary_actions(seed, actions):
  _run("pde_discovery", seed, actions, lambda r: 0.0 <= r <= 1.0)


@SETTINGS
@given(seed=st.integers(0, 2**63 - 1), action=control_actions)
def test_control_arbitrary_actions(seed, action):
  _run("optimal_control", seed, [action], lambda r: r == -0.1 or 0.0 <= r <= 1.0)


@SETTINGS
@given(seed=st.integers(0, 2**63 - 1), actions=st.lists(grid_actions, min_size=1, max_size=5))
def test_grid_arbitrary_actions(seed, actions):
  _run("grid_navigation", seed, actions, lambda r: 0.0 <= r <= 1.0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(FAMILIES)), hint=free_text, update_user=free_text, seed=st.integers(0, 50))
def test_policies_survive_arbitrary_hints_and_prompts(name, hint, update_user, seed):
  env = FAMILIES[name].sample_pack(seed, 1)[0]
  system, obs = env.reset()
  solve = [{"role": "system", "content": proto.augment_system_prompt(system, "Hints: " + hint)},
           {"role": "user", "content": obs}]
  update = [{"role": "system", "content": proto.update_system_prompt()},
            {"role": "user", "content": proto.PREV_HINTS_HEADER + "\n\n" + hint + update_user}]
  for kind in ("expert", "random"):
    policy = make_policy(name, kind)
    reply = policy.respond(solve, random.Random(seed))
    assert isinstance(reply, str)
    assert not env.step(reply).info["format_error"]
    env = FAMILIES[name].sample_pack(seed, 1)[0]
    env.reset()
    assert proto.parse_hint(policy.respond(update, random.Random(seed))) is not None
