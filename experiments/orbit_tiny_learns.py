"""Tiny CPU ORBIT experiment that visibly learns: Maze, tiny Qwen3 -> SFT warm start -> ORBIT GRPO -> evaluation.

ORBIT's claim (ORBIT paper (arXiv 2602.04089), Sec. 4.3 and Table 2) is that a policy trained on multi-episode
trajectories succeeds more often in later episodes of one hidden instance, and that meta-RL widens that gap. On
2 CPU cores this config shows both halves at demo scale: after SFT, Ep3 beats Ep1 on 600 held-out Maze
instances, and GRPO raises the success count over the same instances. The game is ORBIT's Maze (6-7 side grids,
H = 9, T = 3; codjax/envs/games/maze.py) in its compact text; the SFT teacher is the ``replay`` scripted player
(codjax/envs/games/oracles/maze.py), which writes its position and the moves it explores among before each move,
so that carrying knowledge across episodes is a copy a three-layer model can learn. The evaluation compares the
policy with the scripted players and the frontier oracle on the same instances. Each value cites the ORBIT paper
or says why the demo differs.

  python launch/train.py --config=experiments/orbit_tiny_learns.py

Method: docs/methods/orbit.md. Measurements, the RL seed table and the recipe's history: docs/results.md.
"""

from codjax.train.config import DEMO_TINY_SHAPE, env_entry, tiny_demo_config
from codjax.workflows.orbit import orbit_config, set_orbit_loss

# one pre-token each (one token after BPE): a position with its colon (observations) or its space (the
# player's note), the note's list of exploring moves, a neighbour report with its comma, a move box and a move
# report; digits and newlines stay single as in the default
ISOLATE = (r"\(\d,\d\)(?:: | )|(?:(?:up|down|left|right) )+(?=\\boxed)|(?:moved (?:up|down|left|right)|hit a wall), at |(?:up|down|left|right) (?:wall|path|goal)(?:, )?"
           r"|\\boxed\{(?:up|down|left|right)\}|\d|\n")


def get_config():
  c = tiny_demo_config("orbit_tiny_learns", workflow="orbit")
  # demo: the CoD demo's 0.6M-parameter shape; positions, moves and neighbour reports one token each (ISOLATE)
  c.model.tiny.update(dict(DEMO_TINY_SHAPE, vocab_size=1024, phrase_merges=True, isolate=ISOLATE, corpus_packs=200))
  c.data.envs = {"maze": env_entry("maze", "compact")}  # ORBIT paper Table 1: Maze; demo: compact text (maze.py)
  c.data.pack_size = 3  # ORBIT paper Table 1: T = 3 episodes per instance
  c.data.packing = "cod"  # one hidden instance per pack (the maze is the pack seed's)
  c.data.repeats = 8  # demo: K = 8 trajectories per instance for a less noisy group baseline (paper Sec. 4.2: 4)
  c.data.packs_per_step = 8  # demo: 8 instances x 8 = 64 trajectories per step (paper Sec. 4.2: 64 instances)
  c.data.n_train, c.data.n_test = 60000, 1800  # demo: 20,000 train instances, 600 held-out test instances
  # ORBIT's T*H step cap (XiaofengLin7/ORBIT `envs/multi_episode_env.py`); paper Sec. 4.2: overflow scores 0
  c.orbit = orbit_config(extra_episodes=True, zero_reward_on_overflow=True)
  c.rollout.temperature = 0.6  # demo: RL at the evaluation temperature (paper Sec. 4.2 trains at 1.0)
  c.rollout.top_p = 1.0  # ORBIT paper Sec. 4.2: top-p 1.0 in training
  c.rollout.max_response_tokens = 8  # demo: the teacher's replies are one move token
  c.rollout.max_prompt_tokens = 1536  # demo: a full 27-move trajectory is ~1,000 tokens (paper Sec. 4.2: 32k)
  c.rollout.max_slots = 640  # demo: the 600-instance evaluation runs at once
  c.rollout.jax_kernels = "v1"  # demo: the kernels of the README's recorded run, which reproduces bit for bit
  c.rollout.sync_interval = 1  # on-policy: one update per batch (XiaofengLin7/ORBIT training script)
  set_orbit_loss(c.algorithm)  # ORBIT paper Sec. 3.2, 4.2 (GRPO, clip 0.2 / 0.28, no KL); cited in orbit_qwen3_8b.py
  c.optim.learning_rate = 2e-4  # demo: tiny model from scratch (paper Sec. 4.2: 1e-6)
  c.optim.warmup_steps = 2  # demo
  c.train.seq_len = 1536  # demo: as rollout.max_prompt_tokens
  c.train.pack = False  # demo: one trajectory per row, rows bucketed by length (cheaper attention on CPU)
  c.train.num_microbatches = 4  # demo: 64 trajectories per step in 4 slices (peak memory)
  c.sft.steps = 450  # demo: ~10 min; the SFT loss flattens after ~150 steps
  c.sft.batch_size = 8  # demo
  c.sft.learning_rate = 3e-3  # demo: tiny model from scratch
  c.sft.warmup_steps = 50  # demo
  c.sft.num_packs = 3000  # demo: teacher trajectories for SFT
  c.sft.seq_len = 1536  # demo: as train.seq_len
  c.sft.expert_random_frac = 0.05  # demo: headroom for RL: 5 % of the teacher's moves are random
  # demo: the copy-friendly scripted player, writing its position and exploring moves before each move
  c.sft.teacher_params = {"maze": {"planner": "replay", "note": "options"}}
  c.total_steps = 72  # demo: 72 x 64 trajectories, ~17 min (paper Sec. 4.2: 100 steps)
  c.eval.envs = {"maze": env_entry("maze", "compact")}  # held-out Maze instances (test split)
  c.eval.pack_size = 3  # ORBIT paper Table 1: T = 3
  c.eval.num_packs = 600  # demo: paired s.e. of the success count ~0.056 (paper Sec. 4.2: 256 instances)
  c.eval.temperature = 0.6  # ORBIT paper Sec. 4.2: evaluation temperature 0.6
  c.eval.top_p = 1.0  # demo: top-p 1.0 (paper Sec. 4.2 evaluates at 0.95)
  c.eval.at_start = True  # demo: before RL, for the paired RL effect
  c.eval.at_end = True
  c.eval.baselines = ("expert", "teacher", "random")  # the scripted players' rows, same instances
  c.checkpoint.every = 10  # demo
  c.checkpoint.max_to_keep = 1  # demo
  return c
