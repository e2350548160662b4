"""Every ``experiments/*.py`` builds, validates, constructs its environments, and its model and mesh work out.

Shapes only: models are ``nnx.eval_shape`` builds and the train step is traced with ``jax.eval_shape``, so
no 8B parameter is ever allocated. Meshes larger than the 8 fake CPU devices (tests/conftest.py) are
checked arithmetically on an AbstractMesh of their real sizes and built for real as data=1, fsdp=8.
"""

import functools
import glob
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from codjax.models import Qwen35Config, abstract_model
from codjax.parallel import make_mesh
from codjax.parallel.sharding import state_shardings
from codjax.rl.train_step import REQUIRED_FIELDS, TrainState, make_optimizer, train_step
from codjax.train.config import load_experiment, validate
from codjax.train.loop import optimizer_config, step_config
from codjax.train.memory_plan import abstract_mesh, device_bytes, mesh_sizes, param_logical_axes, resolve_architecture
from codjax.workflows.packs import env_specs

EXPERIMENTS = os.path.join(os.path.dirname(__file__), "..", "..", "experiments")
PATHS = sorted(p for p in glob.glob(os.path.join(EXPERIMENTS, "*.py")) if not os.path.basename(p).startswith("_"))
STEMS = [os.path.splitext(os.path.basename(p))[0] for p in PATHS]


def load(stem: str):
  return load_experiment(os.path.join(EXPERIMENTS, f"{stem}.py"))


def config(stem: str):
  return load(stem).get_config()


def sizes_of(cfg) -> dict[str, int]:
  """The config's mesh sizes; a -1 axis fills the 8 fake devices."""
  return mesh_sizes(cfg.mesh, devices=8 if -1 in cfg.mesh.values() else None)


def known_arch(stem: str) -> bool:
  try:
    resolve_architecture(config(stem))
    return True
  except ValueError:
    return False


KNOWN = [s for s in STEMS if known_arch(s)]
UNKNOWN = [s for s in STEMS if s not in KNOWN]
PAPER_8B_TRAIN = ["cod_frozenlake_qwen3_8b", "cod_mixed_qwen3_8b", "alchemy_ablation_grpo_qwen3_8b",
                  "alchemy_ablation_rec_nois_qwen3_8b", "alchemy_ablation_rec_red_qwen3_8b", "grid_navigation_qwen3_8b"]
PAPER_8B_EVAL = ["eval_frozenlake_hard", "eval_alchemy_easy", "eval_alchemy_hard", "eval_terminal"]
PAPER_27B = ["pde_discovery_qwen3_6_27b", "optimal_control_qwen3_6_27b", "grid_navigation_qwen3_6_27b",
             "pde_control_grid_opd_qwen3_6_27b", "eval_science_qwen3_6_27b"]
PAPER_EVOLUTION = ["evolve_terminal_qwen3_6_27b", "evolve_terminal_qwen3_6_35b_a3b"]  # Environment Evolution paper


def test_the_paper_experiments_exist():
  assert set(PAPER_8B_TRAIN + PAPER_8B_EVAL + PAPER_27B + ["tiny_cod_frozenlake"]) <= set(KNOWN)
  assert {s for s in STEMS if "27b" in s} == set(PAPER_27B) | {PAPER_EVOLUTION[0]}
  assert set(PAPER_EVOLUTION) <= set(KNOWN)


@pytest.mark.parametrize("stem", PAPER_EVOLUTION)
def test_evolution_paper_configs_cite_the_paper_s_values(stem):
  c = validate(config(stem))
  assert c.total_steps == 200 and c.data.repeats == 8 and c.data.lineages.scheduler == "el"
  assert c.data.lineages.tau == 0.75 and c.rollout.sync_interval - 1 == 5  # staleness bound 5
  assert (c.rollout.temperature, c.rollout.top_p, c.rollout.top_k) == (1.0, 0.95, 20)
  assert c.model.arch == {"evolve_terminal_qwen3_6_27b": "qwen3.6-27b",
                          "evolve_terminal_qwen3_6_35b_a3b": "qwen3.6-35b-a3b"}[stem]


@pytest.mark.parametrize("stem", STEMS)
def test_config_builds_validates_and_makes_its_environments(stem):
  mod = load(stem)
  assert (mod.__doc__ or "").strip(), "every experiment explains itself"
  cfg = validate(mod.get_config())
  assert cfg.name == stem
  specs = env_specs(cfg.data.envs) + env_specs(cfg.eval.envs)
  for s in specs:  # every family builds with its parameters and can sample a pack
    envs = s.family.sample_pack(1, cfg.data.pack_size)
    assert len(envs) == cfg.data.pack_size
  assert math.prod(sizes_of(cfg).values()) >= 1


@functools.lru_cache(maxsize=None)
def _traced_step(stem: str, rows: int):
  """jax.eval_shape of the config's train step on ``rows`` rows (cached: configs that share it trace once)."""
  cfg = config(stem)
  # cuDNN attention cannot be traced without a GPU; the xla path has the same shapes.
  arch = resolve_architecture(cfg)[0].replace(attention_impl="xla")
  graphdef, params = nnx.split(abstract_model(arch), nnx.Param)
  opt = make_optimizer(optimizer_config(cfg.optim, cfg.total_steps))
  state = TrainState(params=params, opt_state=jax.eval_shape(opt.init, params),
                     step=jax.ShapeDtypeStruct((), jnp.int32))
  t = int(cfg.train.seq_len)
  fields = REQUIRED_FIELDS + (("teacher_logprobs",) if cfg.algorithm.loss == "opd" else ())
  batch = {k: jax.ShapeDtypeStruct((rows, t), jnp.int32 if k in ("tokens", "positions", "segment_ids")
                                   else jnp.float32) for k in fields}
  return state, jax.eval_shape(functools.partial(train_step, graphdef, opt, step_config(cfg)), state, batch)


@pytest.mark.parametrize("stem", KNOWN)
def test_model_and_mesh_shapes_on_fake_devices(stem):
  cfg = config(stem)
  arch, _ = resolve_architecture(cfg)
  sizes = sizes_of(cfg)
  n_dev = math.prod(sizes.values())
  mesh = make_mesh(**sizes) if n_dev <= 8 else make_mesh(1, 8, 1)
  assert len(jax.devices()) == 8
  params = nnx.split(abstract_model(arch), nnx.Param)[1]
  opt = make_optimizer(optimizer_config(cfg.optim, cfg.total_steps))
  opt_state = jax.eval_shape(opt.init, params)
  total = sum(x.size * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(params))
  assert total == arch.num_params() * np.dtype(arch.jnp_param_dtype).itemsize
  axes = param_logical_axes(arch)
  per_dev = device_bytes(params, state_shardings(params, mesh, axes))
  fsdp = mesh.shape["fsdp"]
  if arch.num_params() > 1e9:  # big models: fsdp must really shard (dims divisible), norms aside
    assert per_dev < 1.01 * total / fsdp
    # the config's own mesh (maybe 24 or 32 devices): same per-device bytes for the same fsdp size
    real = device_bytes(params, state_shardings(params, abstract_mesh(sizes), axes))
    assert real < 1.01 * total / sizes["fsdp"]
    assert device_bytes(opt_state, state_shardings(opt_state, mesh, axes)) < 2.02 * total / fsdp
  if cfg.total_steps:
    k = int(cfg.train.num_microbatches)
    rows = k * mesh.shape["data"] * mesh.shape["fsdp"]
    state, (new_state, out) = _traced_step(stem, rows)
    assert jax.tree.map(lambda a: (a.shape, a.dtype), new_state) == jax.tree.map(lambda a: (a.shape, a.dtype), state)
    assert out["loss"].shape == () and out["grad_norm"].shape == ()


def test_configs_without_a_known_architecture_need_a_checkpoint_or_preset_to_plan():
  """Every shipped config names its architecture; one whose checkpoint is absent and that names none (here: a
  27B config with ``model.arch`` cleared) cannot be planned and says which flag to pass."""
  assert not UNKNOWN, UNKNOWN
  cfg = config(PAPER_27B[0])
  cfg.model.arch = ""
  assert cfg.model.path and not os.path.exists(cfg.model.path) and not cfg.model.preset
  with pytest.raises(ValueError, match="model_preset"):
    resolve_architecture(cfg)


@pytest.mark.parametrize("stem", PAPER_27B)
def test_27b_configs_plan_the_qwen36_preset(stem):
  """Qwen3.6-27B is the hybrid preset (the checkpoint path is a placeholder); the JAX sampler serves it with
  one cache slot per trajectory of a step; 3x8 GPUs for training, 6x4 for the benchmark (Trinity-RFT
  ``examples/research_cod/exp_plan_final`` train and bench yamls)."""
  cfg = validate(config(stem))
  arch, source = resolve_architecture(cfg)
  assert cfg.model.arch == "qwen3.6-27b" and source.startswith("model.arch=qwen3.6-27b")
  assert isinstance(arch, Qwen35Config) and arch.num_params() == 26_895_998_464
  assert (arch.dtype, arch.remat) == ("bfloat16", "full")
  assert cfg.rollout.engine == "jax" and cfg.rollout.max_slots == 64
  assert mesh_sizes(cfg.mesh) in ({"data": 3, "fsdp": 8, "tensor": 1, "expert": 1},
                                  {"data": 6, "fsdp": 4, "tensor": 1, "expert": 1})


# -- the paper's numbers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("stem", PAPER_8B_TRAIN)
def test_8b_training_configs_follow_table_1(stem):
  c = config(stem)
  assert c.model.arch == "qwen3-8b"
  assert (c.data.pack_size, c.eval.pack_size, c.data.repeats) == (4, 8, 8)
  assert c.data.pack_size * c.data.packs_per_step == 32  # rollout batch size 32 tasks
  assert (c.optim.learning_rate, c.optim.b1, c.optim.b2, c.optim.max_grad_norm) == (1e-6, 0.9, 0.999, 1.0)
  assert c.algorithm.kl_coef == 0 and c.algorithm.eps_low == c.algorithm.eps_high == 0.2
  assert (c.algorithm.advantage, c.algorithm.returns, c.algorithm.red_t_min) == ("cod", "mean", 0.8)
  assert (c.rollout.temperature, c.rollout.sync_interval, c.rollout.engine) == (1.0, 4, "vllm")
  assert (c.rollout.max_prompt_tokens, c.rollout.max_response_tokens, c.train.seq_len) == (10_000, 2_000, 12_000)
  assert (c.cod.response_limit, c.cod.hint_penalty) == (1_000, 0.1)
  assert c.total_steps == c.data.n_train * len(c.data.envs) // 32  # one epoch
  shards = c.mesh.data * c.mesh.fsdp
  assert c.train.num_microbatches * shards >= 8 * 8 * 7  # one row per GPU per microbatch, worst case
  assert c.checkpoint.every == 100 and c.checkpoint.export_hf
  for e in c.data.envs.values():
    assert e.params.get("length_penalty_coef", 0.1) == 0.1  # solve-task length penalty 0.1


def test_figure_8_losses():
  got = {s: (config(s).algorithm.loss, config(s).algorithm.red_weight) for s in PAPER_8B_TRAIN[2:5]}
  assert got == {"alchemy_ablation_grpo_qwen3_8b": ("ppo", False),
                 "alchemy_ablation_rec_nois_qwen3_8b": ("rec_oneside_nois", False),
                 "alchemy_ablation_rec_red_qwen3_8b": ("rec_oneside_nois", True)}
  assert {e.name for s in PAPER_8B_TRAIN[2:5] for e in config(s).data.envs.values()} == {"alchemy_random"}
  mixed = config("cod_mixed_qwen3_8b")
  assert {e.name: (e.preset, e.proportion) for e in mixed.data.envs.values()} == {
      "frozenlake_obscure": ("train", 50_000), "alchemy_random": ("easy", 50_000)}
  assert mixed.total_steps == 3125 and mixed.mesh.data * mixed.mesh.fsdp == 32


@pytest.mark.parametrize("stem", PAPER_8B_EVAL)
def test_benchmark_configs_follow_the_bench_yamls(stem):
  c = config(stem)
  assert c.total_steps == 0 and c.eval.num_packs * c.eval.pack_size == c.data.n_test == 4_000
  assert (c.eval.pack_size, c.eval.temperature, c.eval.split) == (8, 1.0, "test")
  assert (c.rollout.max_prompt_tokens, c.rollout.max_response_tokens, c.train.seq_len) == (30_000, 2_000, 32_000)
  assert c.cod.response_limit == 1_500 and c.eval.envs.to_dict() == c.data.envs.to_dict()
  preset = {"eval_frozenlake_hard": "hard", "eval_alchemy_easy": "easy", "eval_alchemy_hard": "hard",
            "eval_terminal": "eval"}[stem]
  assert [e.preset for e in c.eval.envs.values()] == [preset]
