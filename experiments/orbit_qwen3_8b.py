"""ORBIT (arXiv 2602.04089) main run: multi-episode meta-RL of Qwen3-8B on five games, Maze and Mastermind held out.

Sources: the ORBIT paper (Table 1, Sec. 3.2, Sec. 4.2, Appendices D and E) and the authors' public training script
(XiaofengLin7/ORBIT ``scripts/train_multi_task_multi_episode.sh``, verl under rLLM). Where the script differs from
the paper, the paper's value is used and the script's is noted.

Known deviations: task-instance seeds are codjax's (``codjax.envs.datasets.seed_splits`` rows grouped into
packs of T, the instance a function of the pack seed), not ORBIT's sha256 scheme, and the pack sampler
regroups rows every epoch, so training sees 512 fresh instances per game per epoch rather than one fixed pool
of 512; word lists differ from nltk en-basic (codjax/envs/games/words.py).

  python launch/plan_memory.py --config=experiments/orbit_qwen3_8b.py
  python launch/train.py --config=experiments/orbit_qwen3_8b.py --config.model.path=/path/to/Qwen3-8B

Method: docs/methods/orbit.md. Results: docs/results.md.
"""

from codjax.train.config import base_config, env_entry
from codjax.train.paper_configs import QWEN3_8B_PATH
from codjax.workflows.orbit import orbit_config

TRAIN_GAMES = ("rps", "minesweeper", "hangman", "wordle", "blackjack")  # ORBIT paper Table 1: Split = Train
TEST_GAMES = ("maze", "mastermind")  # ORBIT paper Table 1: Split = Test (unseen in training)
T = 3  # ORBIT paper Table 1: T = 3 episodes per instance for every game (Sec. 4.2: what fits in 32k tokens)


def get_config():
  c = base_config()
  c.name = "orbit_qwen3_8b"
  c.workflow = "orbit"
  c.run_dir = "runs/orbit_qwen3_8b"
  c.seed = 0
  c.model.path = QWEN3_8B_PATH  # ORBIT paper Sec. 4.2: Qwen3-8B (script: Qwen3-4B); --config.model.path=<HF dir>
  c.model.arch = "qwen3-8b"
  c.model.param_dtype = "float32"  # codjax: float32 master weights keep lr-1e-6 updates (paper_configs.py)
  c.model.dtype = "bfloat16"  # codjax: bfloat16 compute
  c.model.remat = "full"  # codjax: 32k-token rows, keep only each layer's input
  c.model.attention_impl = "cudnn"  # codjax: flash attention on GPU
  c.model.vocab_chunks = 16  # codjax: logprobs over 151,936 / 16-token vocabulary chunks
  c.model.enable_thinking = True  # ORBIT paper Sec. 4.2: thinking mode on in training and evaluation
  c.mesh.update(dict(data=1, fsdp=8, tensor=1))  # ORBIT paper App. E: one node of 8 H100s
  # ORBIT paper Table 1: five training games sampled uniformly, H per game as in ORBIT's configs (the env presets'
  # max_turns: RPS 5, Minesweeper 8, Hangman 10, Wordle 10, Blackjack 4)
  c.data.envs = {g: env_entry(g, "orbit") for g in TRAIN_GAMES}
  c.data.pack_size = T  # one pack = one task instance played for T episodes
  c.data.packing = "cod"  # T distinct episode seeds (RPS draws differ per episode); instance = pack seed
  c.data.repeats = 4  # ORBIT paper Sec. 4.2: K = 4 trajectories per instance (script: rollout.n = 8)
  # ORBIT paper Sec. 4.2: batch size 64 task instances per step (verl's train_batch_size; script: 32)
  c.data.packs_per_step = 64
  c.data.n_train = 512 * T  # ORBIT paper Table 1: 512 training instances per game
  c.data.n_test = 256 * T  # ORBIT paper Table 1: 256 test instances per game
  # ORBIT's T*H step cap, fast wins buy extra episodes (XiaofengLin7/ORBIT `envs/multi_episode_env.py`);
  # ORBIT paper Sec. 4.2: a trajectory that exceeds the 32k context is truncated and scores 0
  c.orbit = orbit_config(extra_episodes=True, zero_reward_on_overflow=True, same_task=False)
  c.rollout.engine = "vllm"  # ORBIT trains with rLLM on vLLM; "jax" runs the embedded sampler instead
  c.rollout.temperature = 1.0  # ORBIT paper Sec. 4.2: temperature 1.0 (script: 0.6)
  c.rollout.top_p = 1.0  # ORBIT paper Sec. 4.2: top-p 1.0
  c.rollout.top_k = 0  # no top-k truncation
  c.rollout.max_prompt_tokens = 32768  # ORBIT paper Sec. 4.2: 32,768-token context (script: 1024 + 31744)
  c.rollout.max_response_tokens = 31744  # script: per reply, bounded anyway by what is left of the 32k context
  c.rollout.max_slots = 256  # all 64 x 4 trajectories in flight
  c.rollout.sync_interval = 1  # script: ppo_epochs 1, mini-batch = batch, i.e. on-policy
  # vLLM shares each GPU with the train step (gpu_memory_utilization as in codjax/train/paper_configs.py)
  c.rollout.vllm.update(dict(dtype="bfloat16", gpu_memory_utilization=0.3, tensor_parallel_size=1))
  c.algorithm.advantage = "grpo"  # ORBIT paper Sec. 3.2: GRPO on the success count, no value function
  # verl's GRPO divides by the group std (the script's trainer); the paper's equation shows only the mean baseline
  c.algorithm.grpo_normalize_std = True
  c.algorithm.red_weight = False
  c.algorithm.loss = "ppo"  # ORBIT paper Sec. 3.2: PPO-style clipped surrogate
  c.algorithm.eps_low = 0.2  # ORBIT paper Sec. 4.2: asymmetric clip (0.2, 0.28); same in the script
  c.algorithm.eps_high = 0.28  # ORBIT paper Sec. 4.2
  c.algorithm.dual_clip = 3.0  # script: verl's PPO loss with its default dual clip c = 3 (not in the paper)
  c.algorithm.aggregation = "seq-mean-token-mean"  # script: loss_agg_mode
  c.algorithm.kl_type = ""  # ORBIT paper Sec. 4.2: KL regularization disabled (script: use_kl_loss=False)
  c.algorithm.kl_coef = 0.0
  c.algorithm.entropy_coef = 0.0  # ORBIT paper Sec. 4.2: entropy regularization disabled (script: entropy_coeff=0)
  c.optim.learning_rate = 1e-6  # ORBIT paper Sec. 4.2: 1e-6 (same in the script)
  c.optim.warmup_steps = 0
  c.optim.schedule = "constant"
  c.optim.weight_decay = 0.01  # verl's AdamW default
  c.optim.max_grad_norm = 1.0  # verl's default grad clip
  c.train.seq_len = 32768  # one trajectory = one sequence of at most the context length
  c.train.pack = True
  c.train.num_microbatches = 32  # 64 x 4 = 256 trajectories: one 32k row per GPU per microbatch, worst case
  c.total_steps = 100  # ORBIT paper Sec. 4.2: 100 optimization steps (script: 10 epochs)
  # ORBIT paper Sec. 4.2: 256 Maze and 256 Mastermind test instances, T = 3, temperature 0.6, top-p 0.95 (final
  # numbers: experiments/eval_orbit_{maze,mastermind}.py on the exported checkpoint)
  c.eval.envs = {g: env_entry(g, "orbit") for g in TEST_GAMES}
  c.eval.pack_size = T
  c.eval.num_packs = 256
  c.eval.temperature = 0.6
  c.eval.top_p = 0.95
  c.eval.split = "test"
  c.eval.every = 10  # ORBIT paper App. D: validation success count over training
  c.eval.at_start = True  # the base model's point of the curve
  c.eval.at_end = True
  c.checkpoint.every = 20  # ORBIT paper Sec. 4.2: Sec. 4.5 takes the best checkpoint within 100 steps
  c.checkpoint.max_to_keep = 5
  c.checkpoint.export_hf = True  # HF exports for the evaluation configs
  c.log.tensorboard = True
  return c
