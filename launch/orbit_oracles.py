"""Per-episode success of the ORBIT games' oracles and scripted players under the multi-episode protocol.

Each trajectory is T episodes of one hidden instance played in one growing conversation by
``codjax.agents.orbit.run_orbit`` (the protocol the trainer and ``launch/evaluate.py`` run;
docs/methods/orbit.md): the system prompt, then ``[Episode k] New episode begins.`` plus the episode's first
observation, the terminal observation of an episode carried into the next episode's first user message. Episodes
are counted as in the paper's Algorithm 1 (exactly T, each of at most H turns: ``extra_episodes=False``); ORBIT's
total-step cap only adds episodes after fast wins and leaves Ep1..EpT unchanged. Pack k has pack seed
``derive_seed(seed, k)`` and task seeds ``derive_seed(pack seed, 7, e)`` (the games' own default), the policy's
random choices come from ``PolicyBackend``'s per-turn streams of ``--seed``.

  python launch/orbit_oracles.py                                   # all seven games, 256 instances, T = 3
  python launch/orbit_oracles.py --games=mastermind --mastermind_all_codes
  python launch/orbit_oracles.py --games=maze --policy_params.planner=shaped
  python launch/orbit_oracles.py --games=wordle --params.faithful=False --policy=random --instances=64

Game and policy parameters are ml_collections config overrides, ``--params.<name>=<value>`` and
``--policy_params.<name>=<value>`` (values are Python literals, else strings), the mechanism of the other
launchers' ``--config.a.b=value``; unknown names are rejected by the game or the policy.

Prints Ep1..EpT success, the mean success count, the in-context regret (J* = 1) and, for every game, the
exploration metric of the paper's Table 4 (new states in episode k after failing all earlier ones).
"""

from __future__ import annotations

import json
import time

from absl import flags
import ml_collections
from ml_collections import config_flags

from codjax.common import cli
from codjax.agents.cod import Pack
from codjax.agents.episode import PolicyBackend
from codjax.agents.orbit import OrbitSettings, run_orbit
from codjax.common.metrics import Progress
from codjax.envs import derive_seed, make
from codjax.envs.base import EnvFamily
from codjax.envs.experts import make_policy
from codjax.envs.games import GAMES
from codjax.envs.games.mastermind import MastermindInstance, MastermindTask
from codjax.envs.games.oracles.mastermind import all_codes
from codjax.workflows import orbit_metrics

_GAMES = flags.DEFINE_list("games", list(GAMES), "Games to evaluate.")
_INSTANCES = flags.DEFINE_integer("instances", 256, "Task instances (trajectories) per game.")
_EPISODES = flags.DEFINE_integer("episodes", 3, "Episodes per trajectory (T).")
_POLICY = flags.DEFINE_enum("policy", "expert", ["expert", "random"], "Scripted policy.")
_PARAMS = config_flags.DEFINE_config_dict("params", ml_collections.ConfigDict(),
                                          "Game parameters: --params.<name>=<Python literal>.", lock_config=False,
                                          accept_new_attributes=True)
_POLICY_PARAMS = config_flags.DEFINE_config_dict("policy_params", ml_collections.ConfigDict(),
                                                 "Policy constructor parameters: --policy_params.<name>=<value>.",
                                                 lock_config=False, accept_new_attributes=True)
_SEED = flags.DEFINE_integer("seed", 0, "Pack seeds are derive_seed(seed, k); also seeds the policy.")
_ALL_CODES = flags.DEFINE_boolean("mastermind_all_codes", False,
                                  "Mastermind: play every possible code once instead of sampled instances.")
_OUT = flags.DEFINE_string("out", None, "Write the results as JSON here.")

# Paper Table 2 (Qwen3-8B + ORBIT, episode 3), for reference in the printout.
PAPER_EP3 = {"maze": 0.55, "mastermind": 0.59}
#: Ep1..EpT exactly (the paper's Algorithm 1)
SETTINGS = OrbitSettings(extra_episodes=False)


class EveryMastermindCode(EnvFamily):
  """Mastermind whose pack i hides the i-th possible code (``all_codes`` order); the rest of the instance
  (the example shown in the prompt) and the episode seeds come from ``derive_seed(seed, i)``."""

  name = "mastermind"

  def __init__(self, family, seed: int):
    self.family = family
    self.seed = seed
    cfg = family.cfg
    self.codes = list(all_codes(cfg.code_length, cfg.num_digits, cfg.duplicates))

  def sample_pack(self, pack_seed, num_tasks, task_seeds=None):
    i = int(pack_seed)
    inst = MastermindInstance(code=self.codes[i], example=self.family.instance(derive_seed(self.seed, i)).example)
    seeds = task_seeds if task_seeds is not None else [derive_seed(self.seed, i, e) for e in range(num_tasks)]
    return [MastermindTask(self.family.cfg, inst, int(s)) for s in seeds]


def packs(game: str, params: dict, n: int, episodes: int, seed: int, every_code: bool) -> list[Pack]:
  """The instances to play: sampled packs, or (Mastermind) one pack per possible code."""
  family = make(game, **params)
  if game == "mastermind" and every_code:
    every = EveryMastermindCode(family, seed)
    return [Pack(game, every, i, tuple(derive_seed(seed, i, e) for e in range(episodes)), i)
            for i in range(len(every.codes))]
  out = []
  for k in range(n):
    ps = derive_seed(seed, k)
    out.append(Pack(game, family, ps, tuple(derive_seed(ps, 7, e) for e in range(episodes)), k))
  return out


def evaluate_game(game: str, policy_kind: str, params: dict, policy_params: dict, instances: int, episodes: int,
                  seed: int, every_code: bool = False) -> dict:
  """``orbit_metrics.summarize`` of the scripted player's trajectories, with ``n`` and ``seconds``."""
  start = time.time()
  policy = make_policy(game, policy_kind, **policy_params)
  instances_ = packs(game, params, instances, episodes, seed, every_code)
  bar = Progress(len(instances_), desc=f"{game} {policy_kind}", unit="instance")
  try:
    trajs = run_orbit(PolicyBackend(policy, seed), instances_, 1, SETTINGS, on_done=lambda j, t: bar.update({}))
  finally:
    bar.close()
  s = orbit_metrics.success_matrix([t.successes for t in trajs], episodes)
  summary = orbit_metrics.summarize(s, [t.states() for t in trajs])
  summary["n"] = len(trajs)
  summary["seconds"] = time.time() - start
  return summary


def main(argv):
  del argv
  params, policy_params = _PARAMS.value.to_dict(), _POLICY_PARAMS.value.to_dict()
  t_eps = _EPISODES.value
  results = {}
  for game in _GAMES.value:
    summary = evaluate_game(game, _POLICY.value, params, policy_params, _INSTANCES.value, t_eps, _SEED.value,
                            _ALL_CODES.value)
    results[game] = summary
    eps = " ".join(f"Ep{k}={summary[f'episode_{k}/success_rate']:.3f}" for k in range(1, t_eps + 1))
    explore = " ".join(f"dStates(Ep{k}|fail)={summary[f'explore/new_states_ep{k}_given_fail']:.2f}"
                       f"(n={int(summary[f'explore/num_ep{k}_given_fail'])})" for k in range(2, t_eps + 1))
    paper = f"  [paper ORBIT Qwen3-8B Ep3: {PAPER_EP3[game]}]" if game in PAPER_EP3 else ""
    print(f"{game:12s} {_POLICY.value:6s} n={summary['n']} {eps} count={summary['episode/success_count']:.3f} "
          f"regret@T={summary[f'regret/ep{t_eps}']:.3f} {explore} ({summary['seconds']:.1f}s){paper}", flush=True)
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      json.dump({"flags": {"params": params, "policy": _POLICY.value, "policy_params": policy_params,
                           "instances": _INSTANCES.value, "episodes": t_eps, "seed": _SEED.value},
                 "results": results}, f, indent=1)


if __name__ == "__main__":
  cli.run(main)
