"""The forward on a (data=2, fsdp=2, tensor=2) mesh of 8 fake CPU devices equals the unsharded one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from codjax.models import from_pretrained, init_model, preset, save_pretrained
from codjax.models.qwen3 import PARAM_LOGICAL_AXES
from codjax.parallel import activation_sharding, make_mesh, shard_model

pytestmark = pytest.mark.slow  # sharded forward on 8 fake devices (~10 s)


@pytest.fixture(scope="module")
def mesh():
  if jax.device_count() < 8:
    pytest.fail("tests need XLA_FLAGS=--xla_force_host_platform_device_count=8 (set in tests/conftest.py)")
  return make_mesh(data=2, fsdp=2, tensor=2)


def test_mesh_validation():
  with pytest.raises(ValueError, match="needs"):
    make_mesh(data=3, fsdp=1, tensor=1)
  with pytest.raises(ValueError, match="at most one"):
    make_mesh(data=-1, fsdp=-1, tensor=1)


def test_sharded_forward_equals_unsharded(mesh, tmp_path):
  cfg = preset("tiny", tie_word_embeddings=False, num_key_value_heads=2)
  ref_model = init_model(cfg, seed=3)
  ids = jnp.asarray(np.random.default_rng(0).integers(0, 512, (4, 16)))
  ref = np.asarray(ref_model(ids))

  save_pretrained(ref_model, str(tmp_path / "ck"))
  model = from_pretrained(str(tmp_path / "ck"), mesh=mesh)  # loaded straight into the sharded layout
  # parameters really are sharded
  q = model.q_ldnh[...]
  assert q.sharding.spec == P(None, "fsdp", "tensor", None)
  assert model.embed_vd[...].sharding.spec == P("tensor", "fsdp")
  assert model.gate_ldf[...].sharding.spec == P(None, "fsdp", "tensor")
  assert len(q.addressable_shards) == 8
  assert q.addressable_shards[0].data.shape == (2, 64, 2, 32)

  ids_sharded = jax.device_put(ids, activation_sharding("tokens_bt", ids.shape, mesh))
  graphdef, state = nnx.split(model)
  fwd = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))
  out = fwd(state, ids_sharded)
  np.testing.assert_allclose(np.asarray(out), ref, atol=1e-5)

  # shard_model reshards an in-memory model the same way
  m2 = shard_model(init_model(cfg, seed=3), mesh, PARAM_LOGICAL_AXES)
  assert m2.o_lnhd[...].sharding.spec == P(None, "tensor", None, "fsdp")
  np.testing.assert_allclose(np.asarray(m2(ids)), ref, atol=1e-5)
