"""ORBIT evaluation on the held-out Maze (ORBIT paper (arXiv 2602.04089), Sec. 4.2-4.4, Tables 2 and 4).

256 unseen Maze instances (H = 9), T = 3 episodes each in one conversation, thinking on, temperature 0.6 and
top-p 0.95 (the Qwen3-recommended inference settings the paper evaluates with). Reports Ep1..Ep3 success, the
success count, the in-context regret, the exploration metric of Table 4 (new cells visited in episode k after
failing every earlier episode) and the belief-map oracle's curve on the same instances with the regret against
it (paper App. C). Paper Table 2, Qwen3-8B + ORBIT: Ep3 0.55 (+0.33 over the base model); single-episode RL 0.45.

No training runs (total_steps = 0); launch/evaluate.py rolls out the checkpoint (or, with --engine=expert,
the oracle itself) and writes DIR/eval.json.

  python launch/evaluate.py --config=experiments/eval_orbit_maze.py \\
      --config.model.path=runs/orbit_qwen3_8b/hf/step_100 --out=DIR

Method: docs/methods/orbit.md. Results: docs/results.md.
"""

import os

from codjax.train.config import env_entry, load_experiment


def _orbit_config():
  return load_experiment(os.path.join(os.path.dirname(os.path.abspath(__file__)), "orbit_qwen3_8b.py"))


def get_config(game: str = "maze"):
  orbit = _orbit_config()
  c = orbit.get_config()
  c.name = f"eval_orbit_{game}"
  c.run_dir = f"runs/eval_orbit_{game}"
  c.model.path = "runs/orbit_qwen3_8b/hf/step_100"  # the exported ORBIT policy (or the base model's directory)
  c.total_steps = 0
  c.data.envs = {game: env_entry(game, "orbit")}
  c.eval.envs = {game: env_entry(game, "orbit")}
  c.eval.pack_size = orbit.T  # ORBIT paper Table 1: T = 3
  c.eval.num_packs = 256  # ORBIT paper Table 1, Sec. 4.2: 256 test instances
  c.eval.split = "test"
  c.eval.temperature = 0.6  # ORBIT paper Sec. 4.2: temperature 0.6 at evaluation
  c.eval.top_p = c.rollout.top_p = 0.95  # ORBIT paper Sec. 4.2: top-p 0.95 at evaluation
  c.eval.at_start = False
  c.eval.at_end = True
  c.eval.every = 0
  c.checkpoint.every = 0
  c.checkpoint.export_hf = False
  return c
