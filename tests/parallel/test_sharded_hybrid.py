"""The Qwen3.5/3.6 hybrid on 8 fake CPU devices: forward and gradients on a mesh with a non-trivial ``expert``
axis (MoE expert weights split over it) equal the unsharded ones, with packed segments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from codjax.models.axes import PARAM_LOGICAL_AXES
from codjax.models.config import preset
from codjax.models.qwen3_5 import init_model
from codjax.parallel import make_mesh, shard_model

pytestmark = pytest.mark.slow  # sharded hybrid forward + backward on 8 fake devices


@pytest.mark.parametrize("name,axes", [("tiny-hybrid-moe", dict(data=1, fsdp=2, tensor=2, expert=2))])
def test_sharded_hybrid_equals_unsharded(name, axes):
  """Every mesh axis non-trivial: fsdp on the embedding dims, tensor on heads / MLP / linear heads, expert on
  the experts (the MoE block's own sharded tests, tests/parallel/test_expert_axis.py, cover expert=4)."""
  if jax.device_count() < 8:
    pytest.fail("tests need XLA_FLAGS=--xla_force_host_platform_device_count=8 (set in tests/conftest.py)")
  cfg = preset(name, tie_word_embeddings=False, delta_chunk_size=8)
  ids = jnp.asarray(np.random.default_rng(0).integers(0, 512, (4, 24)))
  seg = jnp.asarray(np.repeat(np.array([[1] * 10 + [2] * 10 + [0] * 4]), 4, axis=0))
  pos = jnp.asarray(np.repeat(np.array([list(range(10)) * 2 + [0] * 4]), 4, axis=0))

  def loss_and_logits(state, graphdef):
    logits = nnx.merge(graphdef, state)(ids, pos, seg)
    return jnp.mean(logits[..., :7] ** 2), logits

  def run(model):  # one compile: logits and every gradient
    graphdef, state = nnx.split(model)
    (_, logits), grads = jax.jit(jax.value_and_grad(loss_and_logits, has_aux=True), static_argnums=1)(state, graphdef)
    return logits, grads

  ref_logits, ref_grads = run(init_model(cfg, seed=3))

  mesh = make_mesh(**axes)
  model = shard_model(init_model(cfg, seed=3), mesh, PARAM_LOGICAL_AXES)
  if cfg.is_moe and axes["expert"] > 1:
    assert model.egate_ledf[...].sharding.spec[1] == "expert"
    assert model.egate_ledf[...].addressable_shards[0].data.shape[1] == cfg.num_experts // axes["expert"]
  if axes["tensor"] > 1:
    assert model.lv_rdus[...].sharding.spec[2] == "tensor"
  logits, grads = run(model)
  np.testing.assert_allclose(np.asarray(logits), np.asarray(ref_logits), atol=2e-5)
  for (path, g), (_, r) in zip(jax.tree_util.tree_leaves_with_path(grads), jax.tree_util.tree_leaves_with_path(ref_grads)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(r), atol=1e-6, rtol=1e-4, err_msg=str(path))
