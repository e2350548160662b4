"""Per-episode success of the ORBIT games' oracles and scripted players under the multi-episode protocol.

Each trajectory is T episodes of one hidden instance (``make(game).sample_pack(pack_seed, T)``) played in one
growing conversation, as in ORBIT (orbit_evo.md A.2): the system prompt, then ``[Episode k] New episode
begins.`` plus the episode's first observation, the terminal observation of an episode carried into the
next episode's first user message. Episodes are counted as in the paper's Algorithm 1 (exactly T, each of at
most H turns); ORBIT's total-step cap only adds episodes after fast wins and leaves Ep1..EpT unchanged.
This driver stands in until ``codjax/agents/orbit.py`` runs the protocol for models.

  python launch/orbit_oracles.py                                   # all seven games, 256 instances, T = 3
  python launch/orbit_oracles.py --games=mastermind --mastermind_all_codes
  python launch/orbit_oracles.py --games=maze --policy_params=planner=shaped
  python launch/orbit_oracles.py --games=wordle --params=faithful=False --policy=random --instances=64

Prints Ep1..EpT success, the mean success count, the in-context regret (J* = 1) and, for every game, the
exploration metric of the paper's Table 4 (new states in episode k after failing all earlier ones).
"""

from __future__ import annotations

import ast
import json
import random
import time

from absl import app
from absl import flags

from codjax.envs import derive_seed, make
from codjax.envs.experts import make_policy
from codjax.envs.games import GAMES
from codjax.envs.games.mastermind import MastermindInstance, MastermindTask
from codjax.envs.games.oracles.mastermind import all_codes
from codjax.eval import orbit_metrics

_GAMES = flags.DEFINE_list("games", list(GAMES), "Games to evaluate.")
_INSTANCES = flags.DEFINE_integer("instances", 256, "Task instances (trajectories) per game.")
_EPISODES = flags.DEFINE_integer("episodes", 3, "Episodes per trajectory (T).")
_POLICY = flags.DEFINE_enum("policy", "expert", ["expert", "random"], "Scripted policy.")
_PARAMS = flags.DEFINE_list("params", [], "Game parameters, key=value (Python literals).")
_POLICY_PARAMS = flags.DEFINE_list("policy_params", [], "Policy constructor parameters, key=value.")
_SEED = flags.DEFINE_integer("seed", 0, "Pack seeds are derive_seed(seed, k); also seeds the policy.")
_ALL_CODES = flags.DEFINE_boolean("mastermind_all_codes", False,
                                  "Mastermind: play every possible code once instead of sampled instances.")
_OUT = flags.DEFINE_string("out", None, "Write the results as JSON here.")

# Paper Table 2 (Qwen3-8B + ORBIT, episode 3), for reference in the printout.
PAPER_EP3 = {"maze": 0.55, "mastermind": 0.59}
SYSTEM = ("You will solve one task over several episodes. Every episode restarts the game, but the hidden task "
          "stays the same, so use what you learned in earlier episodes to succeed sooner. Reason briefly and put "
          "each turn's action inside \\boxed{}.\n\n")


def parse_kv(items: list[str]) -> dict:
  out = {}
  for item in items:
    key, sep, value = item.partition("=")
    if not sep or not key:
      raise ValueError(f"entries must be key=value, got {item!r}")
    try:
      out[key] = ast.literal_eval(value)
    except (ValueError, SyntaxError):
      out[key] = value
  return out


def play_trajectory(envs, policy, rng: random.Random) -> tuple[list[bool], list[list]]:
  """Plays the episodes ``envs`` in one conversation; returns per-episode success and visited states."""
  messages, carry, successes, states = [], "", [], []
  for k, env in enumerate(envs, start=1):
    system, obs = env.reset()
    if k == 1:
      messages.append({"role": "system", "content": SYSTEM + system})
    head = f"[Episode {k}] New episode begins.\n{obs}"
    messages.append({"role": "user", "content": f"{carry}\n\n{head}" if carry else head})
    visited = [] if env.initial_state_key is None else [env.initial_state_key]
    while True:
      action = policy.respond(messages, rng)
      messages.append({"role": "assistant", "content": action})
      result = env.step(action)
      if result.info["state_key"] is not None:
        visited.append(result.info["state_key"])
      if result.done:
        carry = result.observation
        successes.append(bool(result.info["success"]))
        break
      messages.append({"role": "user", "content": result.observation})
    states.append(visited)
  return successes, states


def trajectories(game: str, params: dict, n: int, episodes: int, seed: int, every_code: bool):
  """The episode lists to play: sampled packs, or (Mastermind) one pack per possible code."""
  family = make(game, **params)
  if game == "mastermind" and every_code:
    cfg = family.cfg
    for i, code in enumerate(all_codes(cfg.code_length, cfg.num_digits, cfg.duplicates)):
      inst = MastermindInstance(code=code, example=family.instance(derive_seed(seed, i)).example)
      yield [MastermindTask(cfg, inst, derive_seed(seed, i, e)) for e in range(episodes)]
    return
  for k in range(n):
    yield family.sample_pack(derive_seed(seed, k), episodes)


def main(argv):
  del argv
  params, policy_params = parse_kv(_PARAMS.value), parse_kv(_POLICY_PARAMS.value)
  results = {}
  for game in _GAMES.value:
    policy = make_policy(game, _POLICY.value, **policy_params)
    rng = random.Random(_SEED.value)
    start = time.time()
    outcomes, states = [], []
    for envs in trajectories(game, params, _INSTANCES.value, _EPISODES.value, _SEED.value, _ALL_CODES.value):
      ok, visited = play_trajectory(envs, policy, rng)
      outcomes.append(ok)
      states.append(visited)
    s = orbit_metrics.success_matrix(outcomes, _EPISODES.value)
    summary = orbit_metrics.summarize(s, states)
    summary["n"] = len(outcomes)
    summary["seconds"] = time.time() - start
    results[game] = summary
    eps = " ".join(f"Ep{k}={summary[f'episode_{k}/success_rate']:.3f}" for k in range(1, _EPISODES.value + 1))
    explore = " ".join(f"dStates(Ep{k}|fail)={summary[f'explore/new_states_ep{k}_given_fail']:.2f}"
                       f"(n={int(summary[f'explore/num_ep{k}_given_fail'])})" for k in range(2, _EPISODES.value + 1))
    paper = f"  [paper ORBIT Qwen3-8B Ep3: {PAPER_EP3[game]}]" if game in PAPER_EP3 else ""
    print(f"{game:12s} {_POLICY.value:6s} n={len(outcomes)} {eps} count={summary['episode/success_count']:.3f} "
          f"regret@T={summary[f'regret/ep{_EPISODES.value}']:.3f} {explore} ({summary['seconds']:.1f}s){paper}",
          flush=True)
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump({"flags": {"params": params, "policy": _POLICY.value, "policy_params": policy_params,
                           "instances": _INSTANCES.value, "episodes": _EPISODES.value, "seed": _SEED.value},
                 "results": results}, f, indent=1)


if __name__ == "__main__":
  app.run(main)
