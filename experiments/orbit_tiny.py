"""Tiny CPU ORBIT experiment: a random tiny Qwen3 trained with ORBIT's multi-episode GRPO for a few steps.

It exercises the whole ORBIT path on 2 CPU cores in a couple of minutes: tiny model and BPE (trained on the
scripted players' transcripts) -> multi-episode rollouts of two ORBIT training games (T episodes of one
hidden instance per trajectory, K trajectories per instance) -> GRPO on success counts with ORBIT's loss
settings -> a held-out Mastermind evaluation with Ep1..EpT, regret and the oracle's curve. A model this small
learns nothing useful in a few steps; the point is that every stage runs. The ORBIT values kept from the
paper are cited (see experiments/orbit_qwen3_8b.py); the demo-only values say why.
"""

from codjax.train.config import env_entry, tiny_demo_config
from codjax.train.orbit_workflow import orbit_config, set_orbit_loss


def get_config():
  c = tiny_demo_config("orbit_tiny", workflow="orbit")
  c.model.tiny.update(dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=32, intermediate_size=128, tie_word_embeddings=True,
                           corpus_packs=60))  # demo: a ~50k-parameter model, tokenizer corpus kept small
  # demo: two short-text training games (ORBIT trains on five); Mastermind stays held out for evaluation
  c.data.envs = {"rps": env_entry("rps", "orbit"), "hangman": env_entry("hangman", "orbit")}
  c.data.pack_size = 3  # T = 3 episodes per instance (paper Table 1)
  c.data.packing = "cod"  # T distinct episode seeds; the hidden instance is the pack seed's
  c.data.repeats = 4  # K = 4 trajectories per instance (paper Sec. 4.2)
  c.data.packs_per_step = 2  # demo: 2 instances x 4 = 8 trajectories per step (paper: 64 instances)
  c.data.n_train, c.data.n_test = 512 * 3, 256 * 3  # 512 train / 256 test instances per game (Table 1)
  c.orbit = orbit_config(extra_episodes=True, zero_reward_on_overflow=True)  # ORBIT's step cap; paper's overflow rule
  c.rollout.temperature = 1.0  # paper Sec. 4.2
  c.rollout.top_p = 1.0
  c.rollout.max_response_tokens = 12  # demo: a random model's replies are noise; keep them short
  c.rollout.max_prompt_tokens = 1536  # demo: ~3 episodes of these games (paper: 32k); longer ones overflow
  c.rollout.max_slots = 16
  set_orbit_loss(c.algorithm)  # ORBIT's loss settings (paper Sec. 3.2, 4.2; cited in orbit_qwen3_8b.py)
  c.optim.learning_rate = 1e-4  # demo: tiny model from scratch (paper: 1e-6 for Qwen3-8B)
  c.train.seq_len = 1536
  c.train.pack = False  # one trajectory per row, bucketed by length (cheaper attention on CPU)
  c.total_steps = 2
  c.eval.envs = {"mastermind": env_entry("mastermind", "orbit")}  # held out (paper Table 1)
  c.eval.pack_size = 3
  c.eval.num_packs = 8  # demo (paper: 256 instances)
  c.eval.temperature = 0.6  # paper Sec. 4.2 evaluation setting (top-p: eval.top_p, 1.0 here)
  c.eval.at_start = False
  c.eval.at_end = True
  c.checkpoint.every = 0
  c.log.tensorboard = False
  c.log.progress = False
  return c
