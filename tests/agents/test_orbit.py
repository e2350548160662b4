"""ORBIT's multi-episode protocol (codjax/agents/orbit.py): context layout and reset signals, the step cap and
extra episodes, success counts and the overflow rules, hidden instances shared within a trajectory and
independent across trajectories, repeats without shared state, FrozenLake-Obscure under the protocol, and the
token record of one multi-episode conversation through EngineBackend + JaxEngine on a tiny checkpoint."""

from collections import deque

import numpy as np
import pytest

from codjax.agents.cod import Pack
from codjax.agents.episode import PolicyBackend, run_lockstep
from codjax.agents.orbit import (OrbitSettings, OrbitWorkflow, episode_header, episode_success,
                                 orbit_system_prompt, run_orbit, settings_from_config)
from codjax.envs import derive_seed, make
from codjax.envs.experts import TextPolicy, make_policy
from codjax.envs.frozenlake.env import DELTAS
from codjax.envs.games import GAMES


def packs_for(game: str, n: int, t: int = 3, seed: int = 0, **params) -> list[Pack]:
  family = make(game, **params)
  return [Pack(game, family, derive_seed(seed, k), tuple(derive_seed(seed, k, j) for j in range(t)), k)
          for k in range(n)]


def expert(game: str, seed: int = 0) -> PolicyBackend:
  return PolicyBackend(make_policy(game, "expert"), seed)


def user_messages(traj) -> list[str]:
  return [m["content"] for m in traj.episode.messages if m["role"] == "user"]


# ------------------------------------------------------------------------------------------------ layout


@pytest.mark.parametrize("extra", [False, True])
def test_one_growing_context_with_reset_signals(extra):
  packs = packs_for("mastermind", 6)
  trajs = run_orbit(expert("mastermind"), packs, 1, OrbitSettings(extra_episodes=extra))
  for pack, t in zip(packs, trajs):
    msgs = t.episode.messages
    assert t.episodes() == [t.episode] and t.episode.kind == "orbit"
    roles = [m["role"] for m in msgs]
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"  # the last observation is never shown
    assert all(a != b for a, b in zip(roles[1:], roles[2:]))  # user / assistant alternate
    assert roles.count("assistant") == t.steps == sum(g.turns for g in t.games) == t.episode.num_turns
    fresh = pack.family.sample_pack(pack.pack_seed, pack.size, task_seeds=list(pack.task_seeds))
    env_system, first_obs = fresh[0].reset()
    assert msgs[0]["content"] == orbit_system_prompt(env_system, shared_budget=extra)
    assert msgs[1]["content"] == f"{episode_header(1)}\n{first_obs}"
    users = user_messages(t)
    heads = [i for i, u in enumerate(users) if "[Episode " in u]
    assert len(heads) == len(t.games) and heads[0] == 0
    for k, i in enumerate(heads[1:], start=2):
      carry, sep, rest = users[i].partition(f"\n\n{episode_header(k)}\n")
      assert sep and rest == fresh[(k - 1) % 3].reset()[1]  # the full instructions are repeated
      # the finished episode's terminal line comes first in the same message
      assert carry.startswith("Congratulations!") or carry == "You have reached the maximum number of turns."
      assert users[i].count("[Episode ") == 1
    # every episode before the last one ended in its environment; wins are what the reward counts
    assert all(g.ended for g in t.games[:-1])
    assert t.reward == t.episode.reward == t.success_count == sum(g.success for g in t.games)
    wins_shown = sum(u.startswith("Congratulations!") for u in users)
    assert wins_shown == sum(g.success for g in t.games[:-1])


def test_mastermind_oracle_wins_every_later_episode():
  """The code is the same in all episodes of a trajectory: the belief-state oracle wins episodes 2 and 3."""
  trajs = run_orbit(expert("mastermind"), packs_for("mastermind", 24), 1, OrbitSettings(extra_episodes=False))
  s = np.stack([t.success_row() for t in trajs])
  assert s.shape == (24, 3) and np.all(s[:, 1:] == 1.0)
  assert 0 < s[:, 0].mean() < 1
  assert [t.reward for t in trajs] == list(s.sum(axis=1))
  assert all(len(t.games) == 3 and t.step_cap is None for t in trajs)


def test_step_cap_gives_extra_episodes_and_leaves_ep1_to_epT_unchanged():
  packs = packs_for("hangman", 12)
  plain = run_orbit(expert("hangman"), packs, 1, OrbitSettings(extra_episodes=False))
  capped = run_orbit(expert("hangman"), packs, 1, OrbitSettings(extra_episodes=True))
  for a, b in zip(plain, capped):
    assert np.array_equal(a.success_row(), b.success_row())
    n = len(a.episode.messages)
    assert a.episode.messages[1:n - 1] == b.episode.messages[1:n - 1]  # same play up to the end of episode T
    assert b.step_cap == 30 and b.steps == 30  # T * H = 3 * 10, always used up
    assert all(g.turns <= 10 for g in b.games) and all(g.ended for g in b.games[:-1])
    if not b.games[-1].ended:
      assert not b.games[-1].success  # cut by the cap: attempted and failed
    assert b.reward == b.success_count >= a.reward
  assert np.mean([len(t.games) for t in capped]) > 3  # fast wins buy extra episodes


def test_single_episode_trajectory_is_a_plain_episode():
  pack = packs_for("maze", 1, t=1)[0]
  (t,) = run_orbit(expert("maze"), [pack], 1, OrbitSettings(extra_episodes=False))
  system, obs = pack.family.sample_pack(pack.pack_seed, 1, task_seeds=list(pack.task_seeds))[0].reset()
  assert t.episode.messages[0]["content"] == system and t.episode.messages[1]["content"] == obs
  assert not any("[Episode " in m["content"] for m in t.episode.messages)
  assert len(t.games) == 1 and t.success_row().shape == (1,)


# ------------------------------------------------------------------------------------------------ instances


@pytest.mark.parametrize("game", GAMES)
def test_hidden_instance_shared_within_and_independent_across_trajectories(game):
  packs = packs_for(game, 6, seed=3)
  flows = [OrbitWorkflow(p, g, OrbitSettings()) for p in packs for g in range(2)]
  run_lockstep(expert(game), flows)
  envs_of = [f.envs for f in flows]
  for f in flows:
    want = f.pack.family.instance(f.pack.pack_seed)
    assert len(f.envs) >= max(3, len(f.games))
    assert all(e.instance == want for e in f.envs)  # extra episodes included
  ids = [id(e) for envs in envs_of for e in envs]
  assert len(ids) == len(set(ids))  # no environment object is shared between repeats or packs
  instances = [packs[k].family.instance(packs[k].pack_seed) for k in range(len(packs))]
  assert len({repr(i) for i in instances}) > 1


def test_repeats_do_not_interact():
  """RPS draws come from per-episode streams: each repeat plays the same whether run alone or with others."""
  packs = packs_for("rps", 2)
  together = run_orbit(expert("rps", seed=5), packs, 3, OrbitSettings())
  for t in together:
    flow = OrbitWorkflow(t.pack, t.repeat_id, OrbitSettings())
    run_lockstep(expert("rps", seed=5), [flow])
    assert flow.episode.messages == t.episode.messages
  seeds = [e.episode_seed for e in OrbitWorkflow(packs[0], 0, OrbitSettings()).envs]
  assert len(set(seeds)) == 3  # different draws in every episode
  same = OrbitWorkflow(packs[0], 0, OrbitSettings(same_task=True)).envs
  assert len({e.episode_seed for e in same}) == 1


# ------------------------------------------------------------------------------------------------ overflow


class ExhaustAfter:
  """Test double of a token backend whose context budget runs out after ``turns`` replies."""

  def __init__(self, inner, turns: int):
    self.inner, self.turns = inner, turns

  def respond(self, episodes):
    out = []
    for ep in episodes:
      if ep.num_turns >= self.turns:
        ep.budget_exhausted = True
        out.append("")
      else:
        out.append(self.inner.respond([ep])[0])
    return out

  def release(self, episode):
    del episode


@pytest.mark.parametrize("zero", [True, False])
def test_overflow_ends_the_trajectory_with_the_configured_reward(zero):
  packs = packs_for("mastermind", 8)
  full = run_orbit(expert("mastermind"), packs, 1, OrbitSettings(extra_episodes=False))
  cut = run_orbit(ExhaustAfter(expert("mastermind"), 4), packs, 1,
                  OrbitSettings(extra_episodes=False, zero_reward_on_overflow=zero))
  for a, b in zip(full, cut):
    assert b.overflow and b.episode.truncated and b.steps == 4
    assert b.episode.messages[-1]["role"] == "user" and "" not in [m["content"] for m in b.episode.messages]
    assert not b.games[-1].ended and not b.games[-1].success  # the running episode fails
    before = [g.success for g in a.games]
    played = [g.success for g in b.games]
    assert played[:-1] == before[:len(played) - 1]
    assert b.episode.raw_reward == sum(played)
    assert b.reward == (0.0 if zero else float(sum(played)))


def test_settings_validation():
  with pytest.raises(ValueError, match="bool"):
    OrbitSettings(extra_episodes="yes")
  with pytest.raises(ValueError, match="unknown orbit setting"):
    settings_from_config({"extra_episode": True})
  assert settings_from_config(None) == OrbitSettings()
  with pytest.raises(ValueError, match="repeats"):
    run_orbit(expert("rps"), packs_for("rps", 1), 0)


# ------------------------------------------------------------------------------------------------ FrozenLake


class PathPolicy(TextPolicy):
  """Test double that walks a given FrozenLake task's shortest path, restarting at every episode header."""

  def __init__(self, actions: list[int]):
    self.actions = actions

  def respond(self, messages, rng):
    del rng
    start = max(i for i, m in enumerate(messages) if m["role"] == "user" and "[Episode " in m["content"])
    done = sum(m["role"] == "assistant" for m in messages[start:])
    return f"<answer>Direction {self.actions[done]}</answer>"


def shortest_actions(inst) -> list[int]:
  by_dir = {d: k for k, d in inst.mapping.items()}
  size = len(inst.rows)
  prev = {inst.start: None}
  queue = deque([inst.start])
  while queue:
    cell = queue.popleft()
    if cell == inst.goal:
      break
    for d, (dr, dc) in DELTAS.items():
      nxt = (cell[0] + dr, cell[1] + dc)
      if 0 <= nxt[0] < size and 0 <= nxt[1] < size and nxt not in prev and inst.rows[nxt[0]][nxt[1]] != "H":
        prev[nxt] = (cell, d)
        queue.append(nxt)
  path, cell = [], inst.goal
  while prev[cell] is not None:
    cell, d = prev[cell]
    path.append(by_dir[d])
  return path[::-1]


@pytest.mark.parametrize("extra", [False, True])
def test_frozenlake_obscure_under_the_protocol(extra):
  """FrozenLake reports no info["success"]: success is a finished episode with raw reward > 0."""
  family = make("frozenlake_obscure", preset="tiny")
  for k in range(4):
    pack = Pack("frozenlake_obscure", family, derive_seed(9, k), tuple(derive_seed(9, k, j) for j in range(3)), k)
    flow = OrbitWorkflow(pack, 0, OrbitSettings(extra_episodes=extra, same_task=True))
    inst = flow.envs[0].inst
    assert all(e.inst == inst for e in flow.envs)  # the same map, goal, mapping and budget in every episode
    actions = shortest_actions(inst)
    run_lockstep(PolicyBackend(PathPolicy(actions)), [flow])
    t = flow.result()
    n_full = (3 * inst.budget) // len(actions) if extra else 3
    assert sum(g.ended for g in t.games) == n_full
    assert t.success_count == n_full and all(g.turns == len(actions) for g in t.games if g.ended)
    assert t.reward == n_full and list(t.success_row()) == [1.0, 1.0, 1.0]
  fresh = family.sample_pack(1, 1)[0]
  fresh.reset()
  res = fresh.step("<answer>Direction 9</answer>")
  assert res.done and "success" not in res.info and not episode_success(res)
  maps = {OrbitWorkflow(pack, 0, OrbitSettings()).envs[j].inst.rows for j in range(3)}
  assert len(maps) > 1  # without same_task the pack's tasks are different maps


# ------------------------------------------------------------------------------------------------ tokens


@pytest.mark.slow  # the tiny checkpoint on the JAX engine (~18 s)
def test_engine_token_record_of_a_multi_episode_conversation(tiny_ckpt):
  import jax.numpy as jnp

  from codjax.agents.token_backend import EngineBackend
  from codjax.models import from_pretrained
  from codjax.models.tokenizer import encode_chat, load_tokenizer, render_chat
  from codjax.rl.logprobs import shifted_token_logprobs
  from codjax.rollout import SamplingParams
  from codjax.rollout.jax_engine import JaxEngine

  model = from_pretrained(tiny_ckpt)
  tok = load_tokenizer(tiny_ckpt)
  engine = JaxEngine(model, max_slots=2, max_seq_len=2048, seed=0)
  backend = EngineBackend(engine, tok, SamplingParams(temperature=1.0, max_tokens=6), max_prompt_tokens=2000,
                          seed=1)
  pack = packs_for("mastermind", 1, t=2)[0]
  trajs = run_orbit(backend, [pack], 2, OrbitSettings(extra_episodes=False))
  assert engine.num_sessions() == 0  # every session released when its trajectory ended
  longest = max(len(t.episode.tokens) for t in trajs)
  batch = jnp.asarray([t.episode.tokens + [0] * (longest - len(t.episode.tokens)) for t in trajs])
  forward = np.asarray(shifted_token_logprobs(model, batch)[0])  # right padding leaves earlier positions alone
  for t, fwd in zip(trajs, forward):
    ep = t.episode
    assert len(t.games) == 2 and not t.overflow  # random text: format errors end each episode at once
    assert len(ep.tokens) == len(ep.loss_mask) == len(ep.logprobs)
    text = render_chat(tok, ep.messages)
    assert text.endswith("\n") and tok.decode(ep.tokens, skip_special_tokens=False) == text[:-1]
    prefix = encode_chat(tok, ep.messages[:2], add_generation_prompt=True)
    assert ep.tokens[:len(prefix)] == prefix and not any(ep.loss_mask[:len(prefix)])
    mask = np.asarray(ep.loss_mask)
    runs = np.diff(np.concatenate([[0], mask, [0]]))
    lengths = list(np.flatnonzero(runs == -1) - np.flatnonzero(runs == 1))
    assert lengths == ep.response_token_counts and len(lengths) == t.steps
    lp = np.asarray(ep.logprobs)
    assert np.all(lp[mask == 0] == 0.0) and np.all(lp[mask == 1] < 0.0)
    np.testing.assert_allclose(fwd[:len(mask)][mask == 1], lp[mask == 1], atol=1e-4)
  # a context budget smaller than two episodes: the second header never gets an answer, reward 0
  first_prompt = len(encode_chat(tok, trajs[0].episode.messages[:2], add_generation_prompt=True))
  small = EngineBackend(engine, tok, SamplingParams(temperature=1.0, max_tokens=6),
                        max_prompt_tokens=first_prompt + 10, seed=1)
  for t in run_orbit(small, [pack], 2, OrbitSettings(extra_episodes=False)):
    assert t.overflow and t.reward == 0.0 and len(t.games) == 2 and not t.games[-1].ended


@pytest.mark.parametrize("extra", [False, True])
def test_progress_moves_while_trajectories_run(extra, monkeypatch):
  """A progress bar over ORBIT rollouts: every trajectory is one conversation, so trajectories finish together
  at the end; on_progress reports the games played (and the running game's share of its turn limit) as they
  happen, never backwards, and exactly the pack count at the end. The same for repeats (in packs)."""
  import codjax.agents.episode as episode_mod

  monkeypatch.setattr(episode_mod, "PROGRESS_INTERVAL_S", 0.0)  # a report after every tick
  packs = packs_for("mastermind", 6)
  seen, done_at = [], []
  trajs = run_orbit(expert("mastermind"), packs, 2, OrbitSettings(extra_episodes=extra),
                    on_done=lambda j, t: done_at.append(len(seen)), on_progress=seen.append)
  assert len(trajs) == 12 and seen[-1] == pytest.approx(6.0)
  assert all(b >= a for a, b in zip(seen, seen[1:]))
  first_done = min(done_at)
  assert any(0 < x < 6 for x in seen[:first_done]), (seen[:first_done], first_done)  # moved before any finished
