"""Property tests: arbitrary model text never raises, format errors end the episode, experts survive any hint."""

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codjax.envs import cod_protocol as proto
from codjax.envs import make
from codjax.envs.experts import make_policy

ENVS = [("frozenlake_obscure", "train"), ("frozenlake_obscure", "tiny"), ("alchemy_random", "easy"),
        ("alchemy_random", "hard"), ("terminal_simulator", "eval")]
_FAMILIES = {(n, p): make(n, preset=p) for n, p in ENVS}

_META = ["<answer>", "</answer>", proto.HINT_START, proto.HINT_END, "\n- a: ", "Direction ", "+", "&&", ";", "|", ">",
         "<", "$(", "`", "'", '"', "\\", "~", "..",
         "/", "rm -rf /", "curl x", "%USERPROFILE%", "\n", "\x00", "é", "😀", "\u202e", "ls", "cd", "scp", "ssh"]
_pieces = st.one_of(st.text(max_size=40), st.sampled_from(_META), st.integers(-10**30, 10**30).map(str))
texts = st.one_of(
    st.text(max_size=200),
    st.lists(_pieces, max_size=12).map("".join),
    st.lists(_pieces, max_size=8).map(lambda xs: "<answer>" + "".join(xs) + "</answer>"),
    st.integers(0, 10**6).map(lambda n: "<answer>Direction " + "9" * (n % 5000) + "</answer>"),
    st.integers(1, 200_000).map(lambda n: "<answer>" + "a" * n + " + b</answer>"),
)


def _check_episode(name, preset, pack_seed, actions):
  task = _FAMILIES[(name, preset)].sample_pack(pack_seed, 1)[0]
  system, obs = task.reset()
  assert isinstance(system, str) and isinstance(obs, str)
  for turn, text in enumerate(actions * (task.max_turns + 1)):
    r = task.step(text)
    assert isinstance(r.observation, str) and isinstance(r.info["feedback"], str)
    assert 0.0 <= r.reward <= 1.0 and r.info["raw_reward"] in (0.0, 1.0)
    assert len(r.observation) < 20_000
    if r.info["format_error"]:
      assert r.done and r.reward == 0.0
    if r.done:
      assert turn < task.max_turns
      return
  raise AssertionError("episode did not end within its turn budget")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env=st.sampled_from(ENVS), pack_seed=st.integers(0, 2**63 - 1), actions=st.lists(texts, min_size=1, max_size=4))
def test_arbitrary_text_never_raises(env, pack_seed, actions):
  _check_episode(*env, pack_seed, actions)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env=st.sampled_from(ENVS), hint=texts, seed=st.integers(0, 1000))
def test_experts_survive_arbitrary_hints(env, hint, seed):
  name, preset = env
  task = _FAMILIES[env].sample_pack(seed, 1)[0]
  system, obs = task.reset()
  msgs = [{"role": "system", "content": proto.augment_system_prompt(system, "Hints: " + hint)},
          {"role": "user", "content": obs}]
  for kind in ("expert", "random"):
    reply = make_policy(name, kind).respond(msgs, random.Random(seed))
    assert isinstance(reply, str)
  trajectory = f"System:\n{system}\n\nStep 1:\nObservation: {obs}\nAction: {hint}"
  update = [{"role": "system", "content": proto.update_system_prompt()},
            {"role": "user", "content": proto.update_user_prompt("Hints: " + hint, trajectory, 0.0, hint)}]
  reply = make_policy(name).respond(update, random.Random(seed))
  assert proto.parse_hint(reply) is not None


def test_marker_text_in_previous_hint_is_not_copied():
  hint = f"Hints: - upload (linux): scp a b\n- trap: {proto.HINT_END}\n- also: {proto.HINT_START}"
  for name, preset in ENVS:
    system, obs = _FAMILIES[(name, preset)].sample_pack(1, 1)[0].reset()
    update = [{"role": "system", "content": proto.update_system_prompt()},
              {"role": "user", "content": proto.update_user_prompt(hint, "System:\n" + system, 1.0, "Success!")}]
    assert proto.parse_hint(make_policy(name).respond(update, random.Random(0))) is not None
