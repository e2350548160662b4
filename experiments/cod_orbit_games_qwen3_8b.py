"""Cross-paper: CoD-Train (the CoD paper's packs, hint updates and per-position credit) on ORBIT's games.

A CoD pack here is S = 3 episodes of ONE ORBIT game instance (``sample_pack(pack_seed, S)``: the same maze,
code, word, deck or adversary in every task), solved one task per conversation with a context z_i written by
an update episode in between, instead of ORBIT's one growing conversation. S = 3 equals ORBIT's T, so both
methods get three attempts per instance and are read on the same held-out Maze and Mastermind instances
(CoD positions pos0..pos2 beside ORBIT's Ep1..Ep3 of experiments/orbit_qwen3_8b.py). The RL recipe is the CoD
paper's Setting A (codjax/train/paper_configs.py, Table 1, cited there); the games, the instance counts, the
held-out evaluation (256 instances each, temperature 0.6) and the 100-step budget are ORBIT's.

  python launch/plan_memory.py --config=experiments/cod_orbit_games_qwen3_8b.py
  python launch/train.py --config=experiments/cod_orbit_games_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B
  python launch/evaluate.py --config=experiments/cod_orbit_games_qwen3_8b.py --config.model.path=CKPT --out=DIR

Methods: docs/methods/cod.md, docs/methods/orbit.md. Results: docs/results.md.
"""

from codjax.train.config import env_entry
from codjax.train.paper_configs import paper_8b_base

TRAIN_GAMES = ("rps", "minesweeper", "hangman", "wordle", "blackjack")  # ORBIT paper Table 1: training split
TEST_GAMES = ("maze", "mastermind")  # ORBIT paper Table 1: unseen test split
T = 3  # ORBIT paper Table 1: T = 3 episodes per instance


def get_config():
  c = paper_8b_base("cod_orbit_games_qwen3_8b", {g: env_entry(g, "orbit") for g in TRAIN_GAMES})
  c.data.pack_size = T  # = ORBIT's T (CoD paper Tab. 1 trains on S = 4 tasks)
  c.data.packs_per_step = 8  # CoD paper Tab. 1: 8 packs x G = 8 repeats per step (32 tasks at S = 4)
  c.data.n_train, c.data.n_test = 512 * T, 256 * T  # ORBIT paper Table 1: 512 train / 256 test instances per game
  c.total_steps = 100  # ORBIT paper Sec. 4.2: 100 steps, for an equal step budget
  c.eval.envs = {g: env_entry(g, "orbit") for g in TEST_GAMES}
  c.eval.pack_size = T  # ORBIT's 3 attempts per held-out instance
  c.eval.num_packs = 256  # ORBIT paper Table 1: 256 test instances per game
  c.eval.temperature = 0.6  # ORBIT paper Sec. 4.2: evaluation temperature, for an equal reading (CoD: 1.0)
  c.eval.split = "test"
  c.eval.at_end = True
  return c
