"""The CoD pack rollout (codjax.agents.cod) driven by scripted policies: episode order, hint carry-over, the
parse-failure rule and penalties, Ralph packing, G repeats sharing a pack seed, metrics (docs/methods/cod.md).

Policies are the environments' scripted experts through ``PolicyBackend``; where a test needs exact control
of the text (a broken hint block, a known reward per position) a small ``Scripted`` backend supplies it.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from codjax.agents.cod import CodSettings, CodWorkflow, Pack, make_packs, run_cod, run_text_packs
from codjax.agents.episode import PolicyBackend, run_lockstep
from codjax.envs import cod_protocol as cp
from codjax.envs import derive_seed, make
from codjax.envs.base import EnvFamily, StepResult, TaskEnv
from codjax.envs.experts import make_policy
from codjax.envs.frozenlake.env import mapping_from_seed
from codjax.workflows import cod_rollout_metrics
from codjax.workflows.cod_summary import summarize

FL = "frozenlake_obscure"


@pytest.fixture(scope="module")
def fl():
  return make(FL, preset="tiny")


@pytest.fixture(scope="module")
def expert():
  return make_policy(FL, "expert")


def fl_packs(fl, n, size, base=0):
  return [Pack(FL, fl, derive_seed(base, k), tuple(derive_seed(base, k, j) for j in range(size)), k)
          for k in range(n)]


class Recording:
  """Wraps a backend; logs every call's episodes (by identity) in order."""

  def __init__(self, inner):
    self.inner = inner
    self.calls: list[list] = []

  def respond(self, episodes):
    self.calls.append(list(episodes))
    return self.inner.respond(episodes)

  def release(self, episode):
    self.inner.release(episode)


class Scripted:
  """A backend whose replies come from ``solve(ep)`` / ``update(ep)`` (default: the wrapped policy)."""

  def __init__(self, policy=None, solve=None, update=None, seed=0):
    self.policy = PolicyBackend(policy, seed) if policy is not None else None
    self.solve, self.update = solve, update

  def respond(self, episodes):
    out = []
    for ep in episodes:
      fn = self.update if ep.kind == "update" else self.solve
      out.append(fn(ep) if fn is not None else self.policy.respond([ep])[0])
    return out

  def release(self, episode):
    del episode


def hint_reply(ep, body=None):
  body = body if body is not None else f"- note p{ep.position} g{ep.repeat_id}\n  - detail: x = {ep.pack_id}"
  return f"reasoning first\n{cp.HINT_START}\n{body}\n{cp.HINT_END}"


def fresh_envs(pack):
  return pack.family.sample_pack(pack.pack_seed, pack.size, task_seeds=list(pack.task_seeds))


def user_prompt(ep):
  assert [m["role"] for m in ep.messages[:2]] == ["system", "user"]
  return cp.parse_update_user_prompt(ep.messages[1]["content"])


# -- order and structure --------------------------------------------------------------------------------

def test_order_of_episodes_and_lockstep(fl, expert):
  S, G = 4, 2
  packs = fl_packs(fl, 3, S)
  backend = Recording(PolicyBackend(expert, seed=3))
  trajs = run_cod(backend, packs, G, CodSettings(protocol="compact"))
  assert len(trajs) == len(packs) * G
  for k, p in enumerate(packs):
    for g in range(G):
      t = trajs[k * G + g]
      assert t.pack is p and t.repeat_id == g
      assert [e.kind for e in t.episodes()] == ["solve", "update"] * (S - 1) + ["solve"]
      assert [e.position for e in t.solve_episodes] == list(range(S))
      assert [e.position for e in t.update_episodes] == list(range(S - 1))
      assert all(e.pack_id == p.pack_id and e.repeat_id == g and e.env_name == FL for e in t.episodes())
      # chronological: the order in which the backend saw this trajectory's episodes
      seen = []
      for call in backend.calls:
        mine = [e for e in call if e.pack_id == p.pack_id and e.repeat_id == g]
        assert len(mine) <= 1  # at most one active episode per trajectory per tick
        if mine and (not seen or seen[-1] is not mine[0]):
          seen.append(mine[0])
      assert len(seen) == 2 * S - 1 and all(a is b for a, b in zip(seen, t.episodes()))
      for e in t.solve_episodes:
        roles = [m["role"] for m in e.messages]
        assert roles == ["system"] + ["user", "assistant"] * e.num_turns and e.done
      for i, u in enumerate(t.update_episodes):
        assert [m["role"] for m in u.messages] == ["system", "user", "assistant"] and u.num_turns == 1
        # the update prompt holds the trajectory, the (penalized) reward and the feedback of solve i
        solve = t.solve_episodes[i]
        parsed = user_prompt(u)
        assert parsed.trajectory == u.info["trajectory_text"]
        assert parsed.reward == pytest.approx(round(solve.reward, 3))
        assert parsed.feedback == solve.feedback
        for turn, m in enumerate(solve.messages[2::2], start=1):
          assert f"Step {turn}:\nObservation: " in parsed.trajectory
          assert f"Action: {m['content']}" in parsed.trajectory
        assert cp.HINT_SECTION_MARKER not in parsed.trajectory  # the hint section is stripped
  # lock step: every tick serves every unfinished trajectory, so ticks = the longest trajectory's turns
  turns = [sum(e.num_turns for e in t.episodes()) for t in trajs]
  assert len(backend.calls) == max(turns)
  assert sum(len(c) for c in backend.calls) == sum(turns)


def test_lockstep_respects_backend_concurrency(fl, expert):
  """A backend with ``max_concurrent`` (an engine's cache slots) never serves more episodes at once; every
  started trajectory is served each tick until it finishes; the trajectories are unchanged."""
  packs = fl_packs(fl, 4, 3, base=2)

  class Capped(Recording):
    max_concurrent = 3

  capped = Capped(PolicyBackend(expert, seed=1))
  trajs = run_cod(capped, packs, 2, CodSettings())  # 8 trajectories
  assert max(len(c) for c in capped.calls) == 3
  ref = run_cod(PolicyBackend(expert, seed=1), packs, 2, CodSettings())
  assert [[e.messages for e in t.episodes()] for t in trajs] == [[e.messages for e in t.episodes()] for t in ref]
  for t in trajs:
    ticks = [k for k, call in enumerate(capped.calls)
             if any(e.pack_id == t.pack.pack_id and e.repeat_id == t.repeat_id for e in call)]
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks)))  # contiguous: never paused once started


@pytest.mark.parametrize("protocol,limit", [("full", None), ("compact", 77)])
def test_hint_is_carried_forward_exactly(fl, expert, protocol, limit):
  S = 4
  packs = fl_packs(fl, 2, S, base=5)
  trajs = run_cod(Scripted(expert, update=hint_reply), packs, 2,
                  CodSettings(protocol=protocol, response_limit=limit))
  for t in trajs:
    envs = fresh_envs(t.pack)
    assert t.hints[0] == cp.INITIAL_HINT == "Hints: null"
    for i, s in enumerate(t.solve_episodes):
      env_sys, obs = envs[i].reset()
      assert s.messages[0]["content"] == cp.augment_system_prompt(env_sys, t.hints[i], limit, protocol)
      assert s.messages[1]["content"] == obs
      assert cp.hint_from_system_prompt(s.messages[0]["content"]) == t.hints[i]
      if limit:
        assert s.messages[0]["content"].endswith(f"within {limit} tokens.")
    for i, u in enumerate(t.update_episodes):
      want = f"Hints: - note p{i} g{t.repeat_id}\n  - detail: x = {t.pack.pack_id}"
      assert u.info["new_hint"] == t.hints[i + 1] == want
      assert user_prompt(u).prev_hint == t.hints[i]
      assert u.reward == 0.0 and not u.format_error
      assert u.messages[0]["content"] == cp.update_system_prompt(limit, protocol)


BROKEN = {
    "no markers": "I have nothing to add.",
    "start only": f"{cp.HINT_START}\n- a",
    "end only": f"- a\n{cp.HINT_END}",
    "end before start": f"{cp.HINT_END}\n- a\n{cp.HINT_START}",
    "two starts": f"{cp.HINT_START}\n{cp.HINT_START}\n- a\n{cp.HINT_END}",
    "two blocks": f"{cp.HINT_START}\n- a\n{cp.HINT_END}\n{cp.HINT_START}\n- b\n{cp.HINT_END}",
    "empty": f"{cp.HINT_START}\n   \n{cp.HINT_END}",
    "shortened marker": f"--- Updated hints ---\n- a\n{cp.HINT_END}",
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_parse_failure_resets_hint_and_costs_c(fl, expert, name):
  S, c, bad_pos = 4, 0.3, 1
  update = lambda ep: BROKEN[name] if ep.position == bad_pos else hint_reply(ep)  # noqa: E731
  trajs = run_cod(Scripted(expert, update=update), fl_packs(fl, 2, S), 2, CodSettings(hint_penalty=c))
  for t in trajs:
    ups = t.update_episodes
    assert [u.format_error for u in ups] == [False, True, False]
    assert t.hint_parse_ok == [True, False, True]
    assert [u.reward for u in ups] == [0.0, -c, 0.0]
    assert t.hint_rewards.tolist() == [0.0, -c, 0.0]
    # the failed update's context is the fixed failure hint; the previous hint is discarded
    assert t.hints[bad_pos + 1] == cp.FAILED_HINT == "Hints: no hint available."
    assert ups[bad_pos].info["new_hint"] == cp.FAILED_HINT
    sys_next = t.solve_episodes[bad_pos + 1].messages[0]["content"]
    assert sys_next.endswith("\n\n" + cp.FAILED_HINT)
    assert t.hints[bad_pos] not in sys_next
    assert user_prompt(ups[bad_pos + 1]).prev_hint == cp.FAILED_HINT
    # and the next good update is parsed normally again
    assert t.hints[bad_pos + 2] == f"Hints: - note p{bad_pos + 1} g{t.repeat_id}\n  - detail: x = {t.pack.pack_id}"
  res = summarize(trajs)
  assert res["hint_parse_rate"] == pytest.approx(2 / 3)


def test_budget_exhausted_update_is_a_parse_failure(fl, expert):
  """An update episode that a token backend could not serve (prompt budget) follows the failure rule."""

  class Exhausting(Scripted):
    def respond(self, episodes):
      for ep in episodes:
        if ep.kind == "update" and ep.position == 0:
          ep.budget_exhausted = True
      return [("" if ep.budget_exhausted else r) for ep, r in zip(episodes, super().respond(episodes))]

  t = run_cod(Exhausting(expert, update=hint_reply), fl_packs(fl, 1, 3), 1, CodSettings(hint_penalty=0.2))[0]
  u = t.update_episodes[0]
  assert u.truncated and "budget" in u.truncation_reason and u.format_error and u.reward == -0.2
  # no placeholder reply is left in the conversation: nothing was generated
  assert [m["role"] for m in u.messages] == ["system", "user"] and u.num_turns == 0
  assert t.hints[1] == cp.FAILED_HINT


class Counting(Scripted):
  """Records a per-reply token count, as token backends do (here: characters)."""

  def respond(self, episodes):
    out = super().respond(episodes)
    for ep, text in zip(episodes, out):
      ep.response_token_counts.append(len(text))
    return out


def test_solve_length_penalty(fl, expert):
  S = 4
  packs = fl_packs(fl, 6, S, base=9)
  zero, full, coef = 50, 90, 0.2
  settings = CodSettings(len_zero_penalty=zero, len_full_penalty=full, length_penalty_coef=coef)
  pen = run_cod(Counting(expert), packs, 1, settings)
  plain = run_cod(Counting(expert), packs, 1, CodSettings())
  inside = 0
  for t, t0 in zip(pen, plain):
    envs = fresh_envs(t.pack)
    for i, (e, e0) in enumerate(zip(t.solve_episodes, t0.solve_episodes)):
      assert e.messages == e0.messages  # same text, only the reward differs
      assert e.raw_reward == e0.raw_reward
      if e.raw_reward > 0:
        p = [min(1.0, max(0.0, (n - zero) / (full - zero))) for n in e.response_token_counts]
        inside += sum(0 < x < 1 for x in p)
        want = max(0.0, e.raw_reward - coef * (np.mean(p) + e.num_turns / envs[i].max_turns))
        assert e.reward == pytest.approx(want, abs=1e-12)
      else:  # no penalty on a failed task
        assert e.reward == e0.reward == 0.0
      # without the CoD penalty the environment's own reward stands (FrozenLake: 1 - 0.1 steps / budget)
      if e0.raw_reward > 0:
        assert e0.reward == pytest.approx(1 - 0.1 * e0.num_turns / envs[i].max_turns)
    for i, u in enumerate(t.update_episodes):  # the update prompt shows the penalized reward
      assert user_prompt(u).reward == pytest.approx(round(t.solve_episodes[i].reward, 3))
  assert inside > 0, "no reply fell inside the penalty ramp; the check would not see a wrong slope"
  assert any(e.raw_reward > 0 for t in pen for e in t.solve_episodes)


def test_use_hints_false(fl, expert):
  S = 4
  packs = fl_packs(fl, 2, S)
  trajs = run_cod(PolicyBackend(expert), packs, 2, CodSettings(use_hints=False))
  for t in trajs:
    envs = fresh_envs(t.pack)
    assert t.update_episodes == [] and len(t.solve_episodes) == S and t.hints == [""] * S
    for e, env in zip(t.solve_episodes, envs):
      assert e.messages[0]["content"] == env.reset()[0]
      assert "## Hints" not in e.messages[0]["content"]
  assert math.isnan(summarize(trajs)["hint_parse_rate"])


def test_settings_validation():
  with pytest.raises(ValueError, match="protocol"):
    CodSettings(protocol="short")
  with pytest.raises(ValueError, match="hint_penalty"):
    CodSettings(hint_penalty=-0.1)
  with pytest.raises(ValueError, match="together"):
    CodSettings(len_zero_penalty=3)
  with pytest.raises(ValueError, match="exceed"):
    CodSettings(len_zero_penalty=5, len_full_penalty=5)
  with pytest.raises(ValueError, match="repeats"):
    run_cod(PolicyBackend(None), [], 0)


# -- packing -----------------------------------------------------------------------------------------------

def test_make_packs_strategies(fl):
  seeds = list(range(100, 110))
  cod = make_packs(FL, fl, seeds, 4)
  assert [p.task_seeds for p in cod] == [(100, 101, 102, 103), (104, 105, 106, 107), (108, 109, 100, 101)]
  assert [p.pack_id for p in cod] == [0, 1, 2]
  assert [p.task_seeds for p in make_packs(FL, fl, seeds, 4, pad=False)] == [(100, 101, 102, 103),
                                                                             (104, 105, 106, 107)]
  assert make_packs(FL, fl, seeds[:3], 4) == []  # a group smaller than S is dropped
  rs = make_packs(FL, fl, seeds, 4, "ralph_sample")
  assert [p.task_seeds for p in rs] == [(100,) * 4, (104,) * 4, (108,) * 4]
  rf = make_packs(FL, fl, seeds[:5], 3, "ralph_full", first_pack_id=7)
  assert [p.task_seeds for p in rf] == [(s,) * 3 for s in seeds[:5]]  # neither dropped nor padded
  assert [p.pack_id for p in rf] == [7, 8, 9, 10, 11]
  # the pack seed is a stable function of (base, task seeds): same across calls, different across groups
  again = make_packs(FL, fl, seeds, 4)
  assert [p.pack_seed for p in again] == [p.pack_seed for p in cod]
  assert cod[0].pack_seed == derive_seed(0, 100, 101, 102, 103)
  assert len({p.pack_seed for p in cod}) == 3
  assert make_packs(FL, fl, seeds, 4, pack_seed_base=1)[0].pack_seed != cod[0].pack_seed
  with pytest.raises(ValueError, match="packing strategy"):
    make_packs(FL, fl, seeds, 4, "ralph")
  with pytest.raises(ValueError, match="pack_size"):
    make_packs(FL, fl, seeds, 0)


@pytest.mark.parametrize("strategy", ["ralph_sample", "ralph_full"])
def test_ralph_modes_repeat_one_task(fl, expert, strategy):
  S = 4
  seeds = [derive_seed(77, j) for j in range(8)]
  packs = make_packs(FL, fl, seeds, S, strategy)
  assert len(packs) == (2 if strategy == "ralph_sample" else 8)
  trajs = run_cod(Scripted(expert, update=hint_reply), packs, 1, CodSettings())
  for t in trajs:
    first_obs = {e.messages[1]["content"] for e in t.solve_episodes}
    assert len(first_obs) == 1  # the same task (same map) at every position
    assert len(t.solve_episodes) == S and len(t.update_episodes) == S - 1
    assert t.hints[1:] == [f"Hints: - note p{i} g0\n  - detail: x = {t.pack.pack_id}" for i in range(S - 1)]
  # different packs hold different tasks
  assert len({t.solve_episodes[0].messages[1]["content"] for t in trajs}) > 1


# -- repeats -------------------------------------------------------------------------------------------------

_MOVE_RE = re.compile(r"D(\d): moved (\w+)")


def test_repeats_share_the_hidden_mapping(fl, expert):
  S, G = 4, 4
  packs = fl_packs(fl, 3, S, base=21)
  flows = [CodWorkflow(p, g, CodSettings()) for p in packs for g in range(G)]
  for k in range(len(packs)):
    group = flows[k * G:(k + 1) * G]
    for i in range(S):
      maps = [f.envs[i].inst.mapping for f in group]
      assert all(m == mapping_from_seed(packs[k].pack_seed) for m in maps)
      assert len({id(f.envs[i]) for f in group}) == G  # fresh task objects per repeat
  run_lockstep(PolicyBackend(expert, seed=1), flows)
  # the same evidence from the text alone: every "Dk: moved <dir>" line of a pack agrees across repeats
  for k in range(len(packs)):
    seen: dict[int, str] = {}
    for f in flows[k * G:(k + 1) * G]:
      for e in f.solve_episodes:
        for m in e.messages:
          for d, direction in _MOVE_RE.findall(m["content"]):
            assert seen.setdefault(int(d), direction.capitalize()) == direction.capitalize()
    assert seen and all(mapping_from_seed(packs[k].pack_seed)[d] == v for d, v in seen.items())
  assert len({tuple(sorted(mapping_from_seed(p.pack_seed).items())) for p in packs}) > 1


def _grid_backend():
  """Repeat 0 plays the expert, every other repeat the random policy (so repeats reveal different cells)."""
  exp = PolicyBackend(make_policy("grid_navigation", "expert"), seed=0)
  rnd = PolicyBackend(make_policy("grid_navigation", "random"), seed=0)

  class ByRepeat(Scripted):
    def respond(self, episodes):
      return [(exp if ep.repeat_id == 0 else rnd).respond([ep])[0] for ep in episodes]

  return ByRepeat()


def test_repeats_never_share_mutable_pack_state():
  grid = make("grid_navigation", preset="8b", grid_min=8, grid_max=8)
  S = 3
  pack = Pack("grid_navigation", grid, 1234, tuple(range(S)), 0)
  alone = run_cod(_grid_backend(), [pack], 1, CodSettings())[0]
  both = run_cod(_grid_backend(), [pack], 2, CodSettings())
  # repeat 0 sees exactly what it sees when it runs alone, although repeat 1 walked elsewhere concurrently
  assert [e.messages for e in both[0].episodes()] == [e.messages for e in alone.episodes()]
  assert [e.messages for e in both[1].solve_episodes] != [e.messages for e in both[0].solve_episodes]
  # ... and the revealed-cell state objects are distinct per repeat
  flows = [CodWorkflow(pack, g, CodSettings()) for g in range(2)]
  assert flows[0].envs[0]._state is flows[0].envs[1]._state  # shared within a trajectory (pack state)
  assert flows[0].envs[0]._state is not flows[1].envs[0]._state

  # the check has teeth: a family that (wrongly) shares one pack state between repeats is caught
  class Leaky(EnvFamily):
    name = "grid_navigation"
    _cache: dict = {}

    def sample_pack(self, pack_seed, num_tasks, task_seeds=None):
      key = (pack_seed, num_tasks)
      if key not in self._cache:
        self._cache[key] = grid.sample_pack(pack_seed, num_tasks, task_seeds)
      envs = self._cache[key]
      fresh = grid.sample_pack(pack_seed, num_tasks, task_seeds)
      for e, f in zip(fresh, envs):
        e._state = f._state
      return fresh

  leaky = Pack("grid_navigation", Leaky(), 1234, tuple(range(S)), 0)
  leaked = run_cod(_grid_backend(), [leaky], 2, CodSettings())
  assert [e.messages for e in leaked[0].episodes()] != [e.messages for e in alone.episodes()]


# -- metrics ---------------------------------------------------------------------------------------------------

class _OneStep(TaskEnv):
  """Ends after one reply: reward = task_seed / 100 for the reply "ok", else 0 with a format error."""

  max_turns = 1

  def __init__(self, seed):
    self.seed = seed

  def reset(self):
    return "Say ok.", f"Task {self.seed}."

  def step(self, text):
    ok = text == "ok"
    return StepResult("", self.seed / 100 if ok else 0.0, True,
                      {"feedback": "done", "format_error": not ok, "raw_reward": float(ok)})


class _OneStepFamily(EnvFamily):
  name = "one_step"

  def sample_pack(self, pack_seed, num_tasks, task_seeds=None):
    return [_OneStep(s) for s in task_seeds]


def test_per_position_metrics():
  fam = _OneStepFamily()
  packs = [Pack("one_step", fam, 0, (10, 20, 30), 0), Pack("one_step", fam, 1, (10, 20, 30), 1)]
  # (pack, repeat) -> positions answered wrongly; one broken hint block in trajectory (1, 1)
  wrong = {(0, 0): {0}, (0, 1): {0, 2}, (1, 0): set(), (1, 1): {2}}
  backend = Scripted(solve=lambda ep: "no" if ep.position in wrong[ep.pack_id, ep.repeat_id] else "ok",
                     update=lambda ep: "broken" if (ep.pack_id, ep.repeat_id, ep.position) == (1, 1, 0)
                     else hint_reply(ep))
  trajs = run_cod(backend, packs, 2, CodSettings())
  # rewards per trajectory: [0, .2, .3], [0, .2, 0], [.1, .2, .3], [.1, .2, 0]
  res = summarize(trajs)
  np.testing.assert_allclose(res["reward_mean"], [0.05, 0.2, 0.15])
  se0 = np.std([0, 0, .1, .1], ddof=1) / 2  # = 0.0288675
  np.testing.assert_allclose(res["reward_se"], [se0, 0.0, np.std([.3, 0, .3, 0], ddof=1) / 2])
  assert se0 == pytest.approx(0.05 / math.sqrt(3))
  np.testing.assert_allclose(res["format_error_rate"], [0.5, 0.0, 0.5])
  assert res["hint_parse_rate"] == pytest.approx(7 / 8)
  assert res["last_minus_first"] == pytest.approx(np.mean([.3, 0, .2, -.1]))
  assert res["mean_reward"] == pytest.approx(np.mean([0, .2, .3, 0, .2, 0, .1, .2, .3, .1, .2, 0]))
  assert res["n"] == 4 and res["pack_size"] == 3 and res["solve_turns_mean"] == 1.0
  m = cod_rollout_metrics(trajs)
  assert [m[f"reward/one_step/pos{k}"] for k in range(3)] == pytest.approx([0.05, 0.2, 0.15])
  assert m["hint_parse_rate"] == pytest.approx(7 / 8) and m["format_error_rate"] == pytest.approx(1 / 3)


def test_run_text_packs_matches_run_cod(fl, expert):
  S = 3
  a = run_text_packs(expert, fl, [11, 12], S, env_name=FL, repeats=2, seed=4, hint_penalty=0.5)
  packs = [Pack(FL, fl, ps, tuple(derive_seed(ps, 1, j) for j in range(S)), k) for k, ps in enumerate([11, 12])]
  b = run_cod(PolicyBackend(expert, 4), packs, 2, CodSettings(hint_penalty=0.5))
  assert [[e.messages for e in t.episodes()] for t in a] == [[e.messages for e in t.episodes()] for t in b]
  with pytest.raises(ValueError, match="task seeds"):
    run_text_packs(expert, fl, [1], S, task_seeds=[[1, 2]])


def test_compact_update_prompt_omits_system_block_and_job_text(fl, expert):
  """Compact protocol: the update trajectory starts at Step 1 (no task system prompt) and the user prompt ends
  at the job header; the full protocol keeps both. The expert still parses either form."""
  packs = fl_packs(fl, 1, 3, base=11)
  for protocol in ("full", "compact"):
    t = run_cod(Scripted(expert), packs, 1, CodSettings(protocol=protocol))[0]
    for u in t.update_episodes:
      traj = u.info["trajectory_text"]
      user = u.messages[1]["content"]
      if protocol == "compact":
        assert traj.startswith("Step 1:\nObservation: ") and "System:" not in traj
        assert user.endswith(cp.JOB_HEADER)
      else:
        assert traj.startswith("System:\n")
        assert user.endswith("requirements of the system prompt.")
      assert user_prompt(u).trajectory == traj.strip()
    assert all(t.hint_parse_ok)
