"""ORBIT evaluation on the held-out Mastermind (ORBIT paper (arXiv 2602.04089), Sec. 4.2-4.3, Table 2).

256 unseen Mastermind instances (3 digits from 1-6 without repeats, H = 3 guesses), T = 3 episodes each in one
conversation, temperature 0.6 and top-p 0.95, thinking on. Reports Ep1..Ep3 success, the success count, the
in-context regret and the exact belief-state DP oracle's curve on the same instances with the regret against
it (paper App. C; computed exactly over all 120 codes, the oracle scores Ep1 0.367, Ep2 1.0, Ep3 1.0). Paper
Table 2, Qwen3-8B + ORBIT: Ep3 0.59 (+0.32 over the base model); single-episode RL 0.21.

No training runs (total_steps = 0). The settings are those of experiments/eval_orbit_maze.py with the game
swapped.

  python launch/evaluate.py --config=experiments/eval_orbit_mastermind.py \\
      --config.model.path=runs/orbit_qwen3_8b/hf/step_100 --out=DIR

Method: docs/methods/orbit.md. Results: docs/results.md.
"""

import os

from codjax.train.config import load_experiment


def get_config():
  maze = load_experiment(os.path.join(os.path.dirname(os.path.abspath(__file__)), "eval_orbit_maze.py"))
  return maze.get_config(game="mastermind")
