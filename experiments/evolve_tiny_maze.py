"""Tiny CPU run of environment evolution: GRPO on evolved Maze lineages, EL scheduling vs random scheduling
(environment-evolution paper, Figure 5; orbit_evo.md C.3).

The policy is the SFT'd tiny model of ``experiments/orbit_tiny_learns.py`` (ORBIT's Maze, compact text,
T = 3 episodes per instance, the copy-friendly replay teacher); only the task source changes: training
environments come from lineages grown by ``launch/evolve.py --env=maze_compact`` (seed mazes one corridor
segment shorter than ORBIT's default: paths 5-6 in 7 moves, so the SFT model passes some seeds; each
generation lengthens the path, changes the grid shape or adds junctions and loops, verified by the frontier
oracle within 3 episodes, the constant, random and parent-replay policies failing). B = 8 rollouts per
environment (``data.repeats``), tau = 6/8 (paper Eq. 2); the per-rollout reward the scheduler reads is the
success of episode T (``codjax.evolve.task_source``). What the run shows is the paper's Figure 5: the
fraction of partially solved groups (1-7 of 8 rollouts succeed: a GRPO signal) and the mean reward over the
steps (``sched/partial_groups``, ``sched/pass_rate``, ``reward_mean`` in metrics.jsonl) under each scheduler
with the same rollout budget.

  python launch/evolve.py --env=maze_compact --lineages=16 --generations=6 --width=2 --out=runs/evolve_tiny_maze/lineages
  python launch/train.py --config=experiments/evolve_tiny_maze.py                       # EL (SFT first, ~10 min)
  python launch/train.py --config=experiments/evolve_tiny_maze.py --config.data.lineages.scheduler=random \\
      --config.run_dir=runs/evolve_tiny_maze_random --config.model.path=runs/evolve_tiny_maze/sft_model \\
      --config.model.make_tiny=False --config.sft.steps=0

Paper-faithful values are cited; demo-specific ones say why.
"""

from codjax.train.config import load_experiment


def get_config():
  base = load_experiment("experiments/orbit_tiny_learns.py")  # the model, SFT, ORBIT loss and protocol
  c = base.get_config()
  c.name = "evolve_tiny_maze"
  c.run_dir = "runs/evolve_tiny_maze"
  c.model.path = "runs/evolve_tiny_maze/base_model"
  c.data.lineages.dir = "runs/evolve_tiny_maze/lineages"
  c.data.lineages.scheduler = "el"  # paper section 5.2 (random: the baseline of Figure 5)
  c.data.lineages.tau = 6 / 8  # paper Eq. 2 with B = 8
  c.data.repeats = 8  # B = 8 rollouts per environment (paper Eq. 2)
  c.data.packs_per_step = 8  # demo: 8 environments x 8 rollouts per step (orbit_tiny_learns' batch)
  c.total_steps = 16  # demo: the first steps, where Figure 5 compares the schedulers (paper: 50)
  c.optim.learning_rate = 4e-4  # as measured here (orbit_tiny_learns later moved to 2e-4 for 72 steps)
  c.rollout.temperature = 1.0  # training rollouts at 1.0 (orbit_tiny_learns trains at its evaluation temperature)
  c.rollout.max_slots = 320  # no held-out evaluation here; training rollouts are 64 trajectories
  c.rollout.jax_kernels = "v1"  # the kernels of the README's recorded run: it reproduces bit for bit
  c.eval.at_start = False  # demo: the comparison reads the training metrics; no held-out evaluation
  c.eval.at_end = False
  c.eval.baselines = ()
  return c
