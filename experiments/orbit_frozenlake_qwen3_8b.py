"""Cross-paper: ORBIT's multi-episode protocol and GRPO over CoD's FrozenLake-Obscure (Qwen3-8B).

One trajectory plays T = 3 episodes of ONE FrozenLake-Obscure task (the same map, start, goal and hidden
direction mapping after every reset; ``orbit.same_task`` makes every episode replay the pack's first task,
since FrozenLake's task seed picks the map) in one growing conversation; the reward is the success count.
Success is the environment's raw outcome (goal reached: raw reward 1 > 0); CoD's length-penalised task reward
is ignored, as ORBIT ignores shaped rewards. Everything else is ORBIT's recipe (experiments/orbit_qwen3_8b.py:
K = 4, batch 64, lr 1e-6, clip 0.2 / 0.28, seq-mean-token-mean, no KL / entropy, 100 steps, extra episodes
after fast wins under the T*H step cap with H = the task's agent budget). Evaluation: CoD's out-of-distribution
FrozenLake ``hard`` preset (CoD paper Appendix B, Table 2) under the same protocol, with ORBIT's evaluation sampling
(temperature 0.6). Compare with CoD-Train on FrozenLake (its packs share the hidden mapping across
different maps) at equal model and step budget.

  python launch/train.py --config=experiments/orbit_frozenlake_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B

Methods: docs/methods/orbit.md, docs/methods/cod.md. Results: docs/results.md.
"""

import os

from codjax.train.config import env_entry, load_experiment
from codjax.workflows.orbit import orbit_config


def _orbit_config():
  return load_experiment(os.path.join(os.path.dirname(os.path.abspath(__file__)), "orbit_qwen3_8b.py"))


def get_config():
  c = _orbit_config().get_config()
  c.name = "orbit_frozenlake_qwen3_8b"
  c.run_dir = "runs/orbit_frozenlake_qwen3_8b"
  # CoD paper Table 2 (easy): FrozenLake training distribution, side 4-5, agent action budget 8
  c.data.envs = {"frozenlake": env_entry("frozenlake_obscure", "train")}
  c.data.n_train, c.data.n_test = 50_000, 4_000  # CoD paper Table 2 caption: 50,000 train / 4,000 test
  c.orbit = orbit_config(extra_episodes=True, zero_reward_on_overflow=True, same_task=True)  # one task, T episodes
  c.eval.envs = {"frozenlake_hard": env_entry("frozenlake_obscure", "hard")}  # CoD paper Table 2 (hard)
  c.eval.num_packs = 256  # ORBIT paper Sec. 4.2: 256 test instances
  return c
