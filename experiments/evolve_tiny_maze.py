"""Tiny CPU run of environment evolution: GRPO on evolved Maze lineages, EL scheduling against random scheduling.

The CPU counterpart of Figure 5 of the Environment Evolution paper (arXiv 2609.04128; Sec. 4.2 and Eq. 2 for the
EL scheduler, Sec. 5.4 for the comparison). The policy is the SFT'd tiny model of
``experiments/orbit_tiny_learns.py`` (ORBIT's Maze, compact text, T = 3 episodes per instance); only the task
source changes: training environments come from lineages grown by ``launch/evolve.py --env=maze_compact`` (seed
mazes with shorter paths, each generation lengthening the path, changing the grid shape or adding junctions and
loops, verified by the frontier oracle within 3 episodes while the constant, random and parent-replay policies
fail). The reward the scheduler reads is the success of episode T (``codjax.evolve.task_source``). The run
records the fraction of partially solved groups (1-7 of 8 rollouts succeed) and the mean reward per step
(``sched/partial_groups``, ``sched/pass_rate``, ``reward_mean`` in metrics.jsonl) under each scheduler with the
same rollout budget.

  python launch/evolve.py --env=maze_compact --lineages=16 --generations=6 --width=2 \\
      --out=runs/evolve_tiny_maze/lineages
  python launch/train.py --config=experiments/evolve_tiny_maze.py                       # EL (SFT first, ~10 min)
  python launch/train.py --config=experiments/evolve_tiny_maze.py --config.data.lineages.scheduler=random \\
      --config.run_dir=runs/evolve_tiny_maze_random --config.model.path=runs/evolve_tiny_maze/sft_model \\
      --config.model.make_tiny=False --config.sft.steps=0

Method: docs/methods/environment_evolution.md. Measurements: docs/results.md.
"""

from codjax.train.config import load_experiment


def get_config():
  base = load_experiment("experiments/orbit_tiny_learns.py")  # the model, SFT, ORBIT loss and protocol
  c = base.get_config()
  c.name = "evolve_tiny_maze"
  c.run_dir = "runs/evolve_tiny_maze"
  c.model.path = "runs/evolve_tiny_maze/base_model"
  c.data.lineages.dir = "runs/evolve_tiny_maze/lineages"
  c.data.lineages.scheduler = "el"  # Environment Evolution paper Sec. 5.4: EL by default (random: Figure 5's baseline)
  c.data.lineages.tau = 6 / 8  # Environment Evolution paper Eq. 2: tau = 6/8
  c.data.repeats = 8  # Environment Evolution paper Eq. 2: B = 8 rollouts per environment
  c.data.packs_per_step = 8  # demo: 8 environments x 8 rollouts per step (orbit_tiny_learns.py's batch)
  c.total_steps = 16  # demo: the first steps, where Figure 5 compares the schedulers (paper: 50)
  c.optim.learning_rate = 4e-4  # demo: the learning rate this run was measured with
  c.rollout.temperature = 1.0  # demo: training rollouts at 1.0 (orbit_tiny_learns.py trains at 0.6)
  c.rollout.max_slots = 320  # demo: no held-out evaluation; training rollouts are 64 trajectories
  c.rollout.jax_kernels = "v1"  # demo: the kernels of the README's recorded run, which reproduces bit for bit
  c.eval.at_start = False  # demo: the comparison reads the training metrics; no held-out evaluation
  c.eval.at_end = False
  c.eval.baselines = ()
  return c
