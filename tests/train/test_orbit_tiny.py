"""The trainer's ``orbit`` workflow (codjax/workflows/orbit.py): GRPO scores on success counts, training
metrics, the evaluation summary with the oracle's regret, the ORBIT experiment configs, and the tiny ORBIT
config trained end to end by the Trainer (tiny model, 1 step, held-out Mastermind evaluation)."""

import json
import math
import os

import numpy as np
import pytest

from codjax.agents.cod import Pack
from codjax.agents.episode import PolicyBackend
from codjax.agents.orbit import OrbitSettings, run_orbit
from codjax.envs import derive_seed, make
from codjax.envs.experts import make_policy
from codjax.train.config import load_experiment, validate
from codjax.workflows import get_workflow

pytestmark = pytest.mark.slow  # tiny ORBIT training runs (~25 s)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_GAMES = {"rps", "minesweeper", "hangman", "wordle", "blackjack"}


def load_config(name: str):
  return load_experiment(os.path.join(ROOT, "experiments", f"{name}.py")).get_config()


def scripted(game: str, packs: int, repeats: int, policy: str = "expert", settings=None, seed: int = 0):
  family = make(game)
  ps = [Pack(game, family, derive_seed(seed, k), tuple(derive_seed(seed, k, j) for j in range(3)), k)
        for k in range(packs)]
  return run_orbit(PolicyBackend(make_policy(game, policy), seed), ps, repeats, settings or OrbitSettings())


@pytest.fixture(scope="module")
def workflow():
  return get_workflow("orbit")


@pytest.mark.parametrize("normalize", [True, False])
def test_grpo_scores_on_success_counts(workflow, normalize):
  cfg = load_config("orbit_tiny")
  cfg.algorithm.grpo_normalize_std = normalize
  trajs = scripted("rps", 3, 4, policy="random") + scripted("blackjack", 2, 4, policy="random")
  for k, t in enumerate(trajs):  # distinct group ids across the two games, as the pack sampler gives
    t.pack = Pack(t.pack.env_name, t.pack.family, t.pack.pack_seed, t.pack.task_seeds, k // 4)
  scored = workflow.score(trajs, cfg)
  assert [ep for ep, _ in scored] == [t.episode for t in trajs]  # one score per trajectory, all its tokens
  adv = np.array([a for _, a in scored]).reshape(5, 4)
  r = np.array([t.reward for t in trajs]).reshape(5, 4)
  assert np.all(r == np.array([t.success_count for t in trajs]).reshape(5, 4))
  want = r - r.mean(axis=1, keepdims=True)
  if normalize:
    want = want / (r.std(axis=1, ddof=1, keepdims=True) + 1e-6)
  np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-6)
  assert np.any(adv != 0)
  cfg.algorithm.advantage = "cod"
  with pytest.raises(ValueError, match="grpo"):
    workflow.score(trajs, cfg)


def test_training_metrics(workflow):
  trajs = scripted("hangman", 4, 2) + scripted("rps", 4, 2)
  m = workflow.metrics(trajs)
  for env in ("hangman", "rps"):
    ts = [t for t in trajs if t.pack.env_name == env]
    for k in range(3):
      assert m[f"orbit/{env}/ep{k + 1}_success"] == np.mean([t.success_row()[k] for t in ts])
    assert m[f"orbit/{env}/success_count"] == np.mean([t.success_count for t in ts])
  assert m["reward_mean"] == np.mean([t.reward for t in trajs])
  assert m["orbit/hangman/num_episodes"] > 3 and m["orbit/rps/num_episodes"] == 3  # extra episodes after wins
  assert m["generated_tokens"] == 0.0 and m["overflow_rate"] == 0.0
  assert set(m) >= {"episode_1/success_rate", "episode/success_count", "format_error_rate", "response_tokens_mean"}


def test_summary_against_the_oracle(workflow):
  trajs = scripted("mastermind", 24, 1)
  s = workflow.summarize(trajs)
  rows = np.stack([t.success_row() for t in trajs])
  assert s["n"] == 24 and s["episodes"] == 3 and s["env"] == ["mastermind"]
  np.testing.assert_allclose(s["episode_success"], rows.mean(axis=0))
  assert s["episode_success"][1:] == [1.0, 1.0]
  # the oracle replayed on the same instances is the same player here: zero regret against it
  assert s["oracle_episode_success"] == s["episode_success"]
  assert [s[f"oracle_regret/ep{k}"] for k in (1, 2, 3)] == [0.0, 0.0, 0.0]
  assert math.isclose(s["regret/ep3"], 3 - rows.mean(axis=0).sum())
  assert math.isclose(s["episode/success_count"], rows.sum(axis=1).mean())
  weak = workflow.summarize(scripted("mastermind", 24, 1, policy="random"))
  assert weak["oracle_regret/ep3"] > 1.0  # the random player is far below the DP oracle
  assert "explore/new_states_ep2_given_fail" in weak
  no_oracle = workflow.summarize(scripted("rps", 4, 1))
  assert "oracle_episode_success" not in no_oracle and "oracle_regret/ep1" not in no_oracle
  table = workflow.table({"oracle": s, "random": weak, "rps": no_oracle})
  assert table.splitlines()[0].split()[3:6] == ["Ep1", "Ep2", "Ep3"] and len(table.splitlines()) == 4
  json.dumps(s)  # eval/*.json


def test_experiment_configs_validate(workflow):
  main = validate(load_config("orbit_qwen3_8b"))
  workflow.check_config(main)
  assert main.workflow == "orbit" and main.algorithm.advantage == "grpo" and main.algorithm.loss == "ppo"
  assert {e.name for e in main.data.envs.values()} == TRAIN_GAMES
  assert {e.name for e in main.eval.envs.values()} == {"maze", "mastermind"}
  assert (main.data.pack_size, main.data.repeats, main.data.packs_per_step) == (3, 4, 64)
  assert (main.algorithm.eps_low, main.algorithm.eps_high, main.optim.learning_rate) == (0.2, 0.28, 1e-6)
  assert main.algorithm.aggregation == "seq-mean-token-mean" and not main.algorithm.red_weight
  assert main.algorithm.kl_coef == 0.0 and main.algorithm.entropy_coef == 0.0 and main.total_steps == 100
  assert main.orbit.extra_episodes and main.orbit.zero_reward_on_overflow and not main.orbit.same_task
  single = validate(load_config("orbit_single_episode_qwen3_8b"))
  assert single.data.pack_size == 1 and single.eval.pack_size == 3 and not single.orbit.extra_episodes
  for game in ("maze", "mastermind"):
    ev = validate(load_config(f"eval_orbit_{game}"))
    workflow.check_config(ev)
    assert ev.total_steps == 0 and [e.name for e in ev.eval.envs.values()] == [game]
    assert (ev.eval.temperature, ev.rollout.top_p, ev.eval.pack_size, ev.eval.num_packs) == (0.6, 0.95, 3, 256)
  lake = validate(load_config("orbit_frozenlake_qwen3_8b"))
  assert lake.orbit.same_task and [e.name for e in lake.data.envs.values()] == ["frozenlake_obscure"]
  cod = validate(load_config("cod_orbit_games_qwen3_8b"))
  assert cod.workflow == "cod" and {e.name for e in cod.data.envs.values()} == TRAIN_GAMES


def test_tiny_orbit_config_trains_end_to_end(tmp_path):
  from codjax.train.loop import Trainer

  cfg = load_config("orbit_tiny")
  cfg.run_dir = str(tmp_path / "run")
  cfg.model.path = str(tmp_path / "run" / "base_model")
  cfg.model.tiny.corpus_packs = 8
  cfg.data.packs_per_step = 1
  cfg.data.repeats = 2
  cfg.total_steps = 1
  cfg.eval.num_packs = 2
  # the first episode fits, the conversation outgrows the budget later (the overflow path runs too)
  cfg.rollout.max_prompt_tokens = cfg.train.seq_len = 768
  cfg.rollout.max_slots = 2
  trainer = Trainer(cfg)
  try:
    trainer.run()
  finally:
    trainer.close()
  with open(os.path.join(cfg.run_dir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  step = next(r for r in rows if "train/loss" in r)
  assert step["step"] == 1 and math.isfinite(step["train/loss"])
  assert step["batch/sequences"] == 2.0  # one sequence per multi-episode trajectory
  assert step["generated_tokens"] > 0 and step["episode/num_episodes"] >= 1.0
  assert {"episode_1/success_rate", "episode_3/success_rate", "reward_mean"} <= set(step)
  with open(os.path.join(cfg.run_dir, "eval", "final.json")) as f:
    final = json.load(f)["results"]["mastermind"]
  assert final["n"] == 2 and len(final["episode_success"]) == 3 and len(final["oracle_episode_success"]) == 3
  assert final["generated_tokens"] > 0
