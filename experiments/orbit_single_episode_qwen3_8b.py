"""ORBIT's single-episode RL baseline (ORBIT paper (arXiv 2602.04089), Sec. 4.3 and Table 2 "RL"): the same
Qwen3-8B, games, GRPO and hyperparameters as experiments/orbit_qwen3_8b.py, but every training trajectory is ONE
episode with reward 1 on success (XiaofengLin7/ORBIT ``envs/single_episode_env.py``), so GRPO
compares the K = 4 single attempts at one instance. Validation stays multi-episode: T = 3 episodes of each
held-out instance in one conversation, exactly as for ORBIT, so the two runs are read on the same Ep1..Ep3.

With T = 1 and no extra episodes the protocol reduces to a plain episode (no multi-episode preamble, no
episode header). The orbit settings apply to evaluation too: without extra episodes the held-out trajectories
play exactly 3 episodes, which leaves Ep1..Ep3 and the success count over them unchanged (ORBIT's step cap only
adds episodes after fast wins; codjax/agents/orbit.py).

  python launch/train.py --config=experiments/orbit_single_episode_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B

Method: docs/methods/orbit.md. Results: docs/results.md.
"""

import os

from codjax.train.config import load_experiment
from codjax.workflows.orbit import orbit_config


def _orbit_config():
  return load_experiment(os.path.join(os.path.dirname(os.path.abspath(__file__)), "orbit_qwen3_8b.py"))


def get_config():
  orbit = _orbit_config()
  c = orbit.get_config()
  c.name = "orbit_single_episode_qwen3_8b"
  c.run_dir = "runs/orbit_single_episode_qwen3_8b"
  c.data.pack_size = 1  # ORBIT's RL baseline: one episode per training trajectory
  c.data.n_train = 512  # ORBIT paper Table 1: the same 512 training instances per game, one row each
  c.orbit = orbit_config(extra_episodes=False, zero_reward_on_overflow=True, same_task=False)
  c.eval.pack_size = orbit.T  # ORBIT paper Sec. 4.3: validation stays multi-episode, T = 3 per instance
  return c
