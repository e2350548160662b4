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
    ("algorithm.loss", "dpo", "algorithm.loss"),
    ("algorithm.returns", "sum", "algorithm.returns"),
    ("algorithm.kl_coef", 0.1, "kl_type"),
    ("algorithm.red_t_min", 200.0, "red_t_min"),
    ("optim.learning_rate", -1e-6, "optim.learning_rate"),
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
