"""Tiny CPU ORBIT experiment: a random tiny Qwen3 trained with ORBIT's multi-episode GRPO for a few steps.

It exercises the whole ORBIT path on 2 CPU cores in a couple of minutes: tiny model and BPE (trained on the
scripted players' transcripts) -> multi-episode rollouts of two ORBIT training games (T episodes of one
hidden instance per trajectory, K trajectories per instance) -> GRPO on success counts with ORBIT's loss
settings -> a held-out Mastermind evaluation with Ep1..EpT, regret and the oracle's curve. A model this small
learns nothing useful in a few steps; the point is that every stage runs. Each value cites the ORBIT paper
(arXiv 2602.04089) or says why the demo differs.

  python launch/train.py --config=experiments/orbit_tiny.py

Method: docs/methods/orbit.md. Measurements: docs/results.md.
"""

from codjax.train.config import env_entry, tiny_demo_config
from codjax.workflows.orbit import orbit_config, set_orbit_loss


def get_config():
  c = tiny_demo_config("orbit_tiny", workflow="orbit")
  c.model.tiny.update(dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=32, intermediate_size=128, tie_word_embeddings=True,
                           corpus_packs=60))  # demo: a ~50k-parameter model, tokenizer corpus kept small
  # demo: two short-text training games (ORBIT paper Table 1 trains on five); Mastermind stays held out
  c.data.envs = {"rps": env_entry("rps", "orbit"), "hangman": env_entry("hangman", "orbit")}
  c.data.pack_size = 3  # ORBIT paper Table 1: T = 3 episodes per instance
  c.data.packing = "cod"  # T distinct episode seeds; the hidden instance is the pack seed's
  c.data.repeats = 4  # ORBIT paper Sec. 4.2: K = 4 trajectories per instance
  c.data.packs_per_step = 2  # demo: 2 instances x 4 = 8 trajectories per step (paper Sec. 4.2: 64)
  c.data.n_train, c.data.n_test = 512 * 3, 256 * 3  # ORBIT paper Table 1: 512 train / 256 test instances per game
  # ORBIT's T*H step cap (XiaofengLin7/ORBIT `envs/multi_episode_env.py`); paper Sec. 4.2: overflow scores 0
  c.orbit = orbit_config(extra_episodes=True, zero_reward_on_overflow=True)
  c.rollout.temperature = 1.0  # ORBIT paper Sec. 4.2: training temperature 1.0
  c.rollout.top_p = 1.0  # ORBIT paper Sec. 4.2: top-p 1.0
  c.rollout.max_response_tokens = 12  # demo: a random model's replies are noise; keep them short
  c.rollout.max_prompt_tokens = 1536  # demo: ~3 episodes of these games (paper Sec. 4.2: 32k); longer ones overflow
  c.rollout.max_slots = 16  # demo: 8 trajectories per step
  set_orbit_loss(c.algorithm)  # ORBIT paper Sec. 3.2, 4.2 (GRPO, clip 0.2 / 0.28, no KL); cited in orbit_qwen3_8b.py
  c.optim.learning_rate = 1e-4  # demo: tiny model from scratch (paper Sec. 4.2: 1e-6 for Qwen3-8B)
  c.train.seq_len = 1536  # demo: as rollout.max_prompt_tokens
  c.train.pack = False  # demo: one trajectory per row, bucketed by length (cheaper attention on CPU)
  c.total_steps = 2  # demo: a smoke run (paper Sec. 4.2: 100 steps)
  c.eval.envs = {"mastermind": env_entry("mastermind", "orbit")}  # ORBIT paper Table 1: held-out test game
  c.eval.pack_size = 3  # ORBIT paper Table 1: T = 3
  c.eval.num_packs = 8  # demo (paper Sec. 4.2: 256 instances)
  c.eval.temperature = 0.6  # ORBIT paper Sec. 4.2: evaluation temperature 0.6 (top-p: eval.top_p, 1.0 here)
  c.eval.at_start = False  # demo
  c.eval.at_end = True
  c.checkpoint.every = 0  # demo: no checkpoints
  c.log.tensorboard = False  # demo
  return c
