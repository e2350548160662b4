"""Tiny CPU ORBIT experiment that visibly learns: Maze, tiny Qwen3 -> SFT warm start -> ORBIT GRPO -> evaluation.

ORBIT's claim (ORBIT paper Sec. 4, Table 2) is that a policy trained over multi-episode trajectories succeeds
more often in later episodes of one hidden instance because it uses what it saw earlier, and that meta-RL
widens that gap. On 2 CPU cores this config shows the first clearly (after SFT, Ep3 - Ep1 = +0.20 +- 0.02 on
600 held-out instances), and 72 GRPO steps at the evaluation temperature raise the success count by +0.42 +-
0.05 (7.9 s.e., paired over the same instances and sampling seeds), by 6.1 and 7.2 s.e. with RL seeds 1 and 2
from the same SFT model; the Ep3 - Ep1 gap itself widens in one seed of three (see the RL note below and the
README's seed table, "ORBIT that learns"):

* **Game: Maze with its ORBIT parameters** (6-7 side grids, shortest path 7-8, 9 moves per episode, T = 3
  episodes; codjax/envs/games/maze.py), trained and evaluated on disjoint instances. Maze is chosen because
  the knowledge an episode leaves behind is *positional and deterministic*: once an episode has reached the
  goal, replaying its moves wins every later episode, and the position text ``(r,c)`` that keys each move is
  repeated verbatim in the observations, so carrying knowledge across episodes is a copy that a
  three-layer model learns in minutes. RPS (the other candidate) carries a count over noisy rounds, its
  expert gains only 0.55 -> 0.75 over three episodes and its GRPO signal is mostly adversary noise.
* **Scripted player: the ``replay`` player** (codjax/envs/games/oracles/maze.py): explore (onto the goal
  when it is next to it, else uniformly among open neighbours without turning straight back) until an
  episode reaches the goal, then replay that episode's last exit from every cell. Before each move it writes a note, its position and the moves it
  explores among (``(2,3) up right \\boxed{up}``): copying "the move made here last time" is then the token
  after an earlier identical note, and exploring is a pick among the moves just written. With the position
  alone in the note (and a quarter of random moves), 300 SFT steps of 8 trajectories left the model walking
  into walls on 26 % of its moves (success 0.02-0.05 per episode); with the move list, 450 steps reach the
  teacher's level.
* **Text and tokenizer**: the game's ``compact`` text (same rules and instances, a few words per observation:
  ``moved up, at (2,3): up path, down wall, left wall, right path``), and (``isolate``) each position
  ``(2,3): `` / ``(2,3) ``, the note's move list, each neighbour report ``up path, `` and each move
  ``\\boxed{left}`` is one pre-token (one token after BPE): a trajectory of 27 moves is ~670 tokens.
* **SFT with headroom for RL**: 5 % of the teacher's moves are uniformly random, and the tiny model imitates
  its teacher imperfectly (sampled at temperature 1.0 it succeeds far less often than at 0.6). A
  teacher that also walks past a goal it sees (``take_goal`` off, a uniform choice that evaluation at 0.6
  cannot sharpen away) was tried for more headroom: in that run SFT learned to explore but not to replay
  (Ep1..Ep3 0.26 / 0.28 / 0.26), so the replay player keeps ``take_goal`` on. More random moves fail the
  same way: with 15 % the teacher wins 0.79 times in three episodes and SFT replays weakly (0.30 / 0.36 /
  0.33), with 30 % (0.36) not at all (0.24 / 0.22 / 0.23); 5 % keeps the in-context gain.
* **RL**: ORBIT's loss settings (GRPO on the success count with verl's std normalisation, PPO clip
  0.2/0.28 with dual clip 3, seq-mean-token-mean, no KL, no entropy; paper Sec. 4.2), K = 8 trajectories per
  instance, with the learning rate a tiny model trained from scratch needs, sampling at the evaluation
  temperature 0.6 (the paper trains at 1.0). At 1.0 the training reward doubles in a few steps, but what RL
  removes there is mostly the noise that evaluation at 0.6 already sharpens away: 12-24 steps gave +0.03 to
  +0.06 successes at 0.6 (1 s.e.). Trained at 0.6 the policy itself moves. At lr 4e-4, 36 steps gave +0.22
  with seed 0, but with seeds 1 and 2 episode 1 gained while the replays lost and the entropy rose (a bigger
  batch, 16 instances x 8 at lr 8e-4, or Adam eps 1e-4 did not stop that on seed 1); at lr 2e-4 the entropy
  falls for every seed, but 36 steps gave only +0.7 to +4.1 s.e.; lr 2e-4 for 72 steps gives +6.1 to +7.9 s.e.
  for seeds 0, 1, 2.
* **Evaluation**: 600 held-out instances at the paper's evaluation temperature 0.6, at the start of RL and
  at the end, the same instances and sampling seeds both times (``eval/rl_effect.json``: the paired change of
  the success count and of every episode's success), beside the scripted players on the same instances
  (``eval.baselines``: the replay expert, the SFT teacher, the random player; the frontier oracle, which plans
  on a belief map, is the ``oracle`` column of every table). 600 rather than 300 instances: the paired
  standard error of the success count is ~0.056 instead of ~0.079 (the first 300 instances of the 600 are the
  300 of a 300-instance evaluation, and RL does not depend on the evaluation size), ~1.5 min per evaluation.

Paper-faithful values are cited; demo-specific ones say why.
"""

from codjax.train.config import DEMO_TINY_SHAPE, env_entry, tiny_demo_config
from codjax.train.orbit_workflow import orbit_config, set_orbit_loss

# one pre-token each (one token after BPE): a position with its colon (observations) or its space (the
# player's note), the note's list of exploring moves, a neighbour report with its comma, a move box, a move report; digits and newlines stay
# single as in the default
ISOLATE = (r"\(\d,\d\)(?:: | )|(?:(?:up|down|left|right) )+(?=\\boxed)|(?:moved (?:up|down|left|right)|hit a wall), at |(?:up|down|left|right) (?:wall|path|goal)(?:, )?"
           r"|\\boxed\{(?:up|down|left|right)\}|\d|\n")


def get_config():
  c = tiny_demo_config("orbit_tiny_learns", workflow="orbit")
  # demo: the CoD demo's 0.6M-parameter shape (DEMO_TINY_SHAPE)
  c.model.tiny.update(dict(DEMO_TINY_SHAPE, vocab_size=1024, phrase_merges=True, isolate=ISOLATE, corpus_packs=200))
  c.data.envs = {"maze": env_entry("maze", "compact")}  # ORBIT's Maze, compact text (maze.py)
  c.data.pack_size = 3  # T = 3 episodes per instance (paper Table 1)
  c.data.packing = "cod"  # one hidden instance per pack (the maze is the pack seed's)
  c.data.repeats = 8  # demo: K = 8 trajectories per instance (paper: 4) for a less noisy group baseline
  c.data.packs_per_step = 8  # demo: 8 instances x 8 = 64 trajectories per step (paper: 64 instances)
  c.data.n_train, c.data.n_test = 60000, 1800  # 20,000 train instances, 600 held-out test instances
  c.orbit = orbit_config(extra_episodes=True, zero_reward_on_overflow=True)  # ORBIT's step cap and overflow rule
  c.rollout.temperature = 0.6  # demo: the evaluation temperature (paper Sec. 4.2 trains at 1.0; see above)
  c.rollout.top_p = 1.0
  c.rollout.max_response_tokens = 8  # demo: the teacher's replies are one move token
  c.rollout.max_prompt_tokens = 1536  # demo: a full 27-move trajectory is ~1,000 tokens (paper: 32k)
  c.rollout.max_slots = 640  # the 600-instance evaluation runs at once
  c.rollout.jax_kernels = "v1"  # the kernels of the README's recorded run: it reproduces bit for bit
  c.rollout.sync_interval = 1
  set_orbit_loss(c.algorithm)  # ORBIT's loss settings (paper Sec. 3.2, 4.2; cited in orbit_qwen3_8b.py)
  c.optim.learning_rate = 2e-4  # demo: tiny model from scratch (paper: 1e-6); see the RL note above
  c.optim.warmup_steps = 2
  c.train.seq_len = 1536
  c.train.pack = False  # one trajectory per row, rows bucketed by length (cheaper attention on CPU)
  c.train.num_microbatches = 4  # 64 trajectories per step in 4 slices (peak memory)
  c.sft.steps = 450  # ~10 min: the loss per target falls 1.6 -> 0.16 between steps 50 and 150, then flattens
  c.sft.batch_size = 8
  c.sft.learning_rate = 3e-3
  c.sft.warmup_steps = 50
  c.sft.num_packs = 3000
  c.sft.seq_len = 1536
  c.sft.expert_random_frac = 0.05  # headroom for RL: a share of the teacher's moves are random
  # the copy-friendly scripted player, writing its position and exploring moves before each move (see above)
  c.sft.teacher_params = {"maze": {"planner": "replay", "note": "options"}}
  c.total_steps = 72  # demo: 72 x 64 trajectories (~17 min); see the RL note above
  c.eval.envs = {"maze": env_entry("maze", "compact")}
  c.eval.pack_size = 3
  c.eval.num_packs = 600  # >= 200 held-out instances; 600 for a paired s.e. of ~0.056 successes
  c.eval.temperature = 0.6  # paper Sec. 4.2 evaluation setting (top-p 1.0 here)
  c.eval.top_p = 1.0
  c.eval.at_start = True
  c.eval.at_end = True
  c.eval.baselines = ("expert", "teacher", "random")  # the scripted rows of the table, same instances
  c.checkpoint.every = 10
  c.checkpoint.max_to_keep = 1
  return c
