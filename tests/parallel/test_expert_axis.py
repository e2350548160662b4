"""The ``expert`` mesh axis: meshes over (data, fsdp, tensor, expert) of 8 fake CPU devices, expert weights
split over it, the batch split over data x fsdp x expert, and the MoE block sharded == unsharded."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from jax.sharding import NamedSharding

from codjax.models import moe
from codjax.parallel import (MESH_AXES, activation_sharding, batch_shards, logical_to_spec, make_mesh,
                             mesh_from_config, param_sharding)

D, E, F, S = 64, 8, 32, 48


@pytest.fixture(autouse=True)
def eight_devices():
  if jax.device_count() < 8:
    pytest.fail("tests need XLA_FLAGS=--xla_force_host_platform_device_count=8 (set in tests/conftest.py)")


def test_mesh_axes_batch_shards_and_config():
  assert MESH_AXES == ("data", "fsdp", "tensor", "expert")
  m = make_mesh(data=2, fsdp=1, tensor=1, expert=4)
  assert dict(m.shape) == {"data": 2, "fsdp": 1, "tensor": 1, "expert": 4}
  assert batch_shards(m) == 8
  assert batch_shards(make_mesh(data=2, fsdp=2, tensor=2)) == 4  # expert defaults to 1
  assert dict(make_mesh(data=1, fsdp=1, tensor=2, expert=-1).shape)["expert"] == 4
  assert dict(make_mesh(fsdp=-1, expert=2).shape) == {"data": 1, "fsdp": 4, "tensor": 1, "expert": 2}
  with pytest.raises(ValueError, match="needs"):
    make_mesh(data=1, fsdp=1, tensor=1, expert=3)
  with pytest.raises(ValueError, match="at most one"):
    make_mesh(data=1, fsdp=-1, tensor=1, expert=-1)
  with pytest.raises(ValueError, match="positive"):
    make_mesh(data=1, fsdp=-1, tensor=1, expert=0)

  old = ml_collections.ConfigDict(dict(data=2, fsdp=-1, tensor=1))  # a block written before the expert axis
  assert dict(mesh_from_config(old).shape) == {"data": 2, "fsdp": 4, "tensor": 1, "expert": 1}
  new = ml_collections.ConfigDict(dict(data=1, fsdp=-1, tensor=1, expert=4))
  assert dict(mesh_from_config(new).shape) == {"data": 1, "fsdp": 2, "tensor": 1, "expert": 4}


def test_expert_weights_and_batch_are_split_over_expert():
  mesh = make_mesh(data=1, fsdp=2, tensor=1, expert=4)
  w = jnp.zeros((E, D, F))
  sh = param_sharding("egate_edf", w.shape, mesh, moe.PARAM_LOGICAL_AXES)
  assert sh.spec[0] == "expert" and sh.spec[1] == "fsdp"
  placed = jax.device_put(w, sh)
  assert {s.data.shape for s in placed.addressable_shards} == {(2, 32, 32)}
  assert len({(s.index[0].start, s.index[1].start) for s in placed.addressable_shards}) == 8  # all distinct

  stacked = ("layers", "experts", "mlp", "embed")  # a model stacking layers on a leading axis
  spec = logical_to_spec(stacked, (3, E, F, D), mesh)
  assert spec[0] is None and spec[1] == "expert" and spec[3] == "fsdp"
  assert NamedSharding(mesh, spec).shard_shape((3, E, F, D)) == (3, 2, 32, 32)
  assert logical_to_spec(stacked, (3, 6, F, D), mesh)[1] is None  # 4 does not divide 6: replicated

  # activations: batch over data x fsdp x expert, 8 ways
  act = activation_sharding("hidden_btd", (8, 5, D), mesh)
  assert act.spec[0] == ("data", "fsdp", "expert")
  assert act.shard_shape((8, 5, D)) == (1, 5, D)


def random_params(seed=0) -> dict:
  rng = np.random.default_rng(seed)
  shapes = {"router_de": (D, E), "egate_edf": (E, D, F), "eup_edf": (E, D, F), "edown_efd": (E, F, D),
            "sgate_df": (D, S), "sup_df": (D, S), "sdown_fd": (S, D), "shared_gate_d": (D,)}
  return {k: jnp.asarray(rng.normal(size=s) * (0.5 if k == "router_de" else 0.1), jnp.float32)
          for k, s in shapes.items()}


X = np.random.default_rng(1).normal(size=(8, 4, D)).astype(np.float32)
C = np.random.default_rng(2).normal(size=(8, 4, D)).astype(np.float32)
IMPLS = ("ragged", "blocked", "dense")


def loss_and_grads(impl):
  def loss(x, p):
    y, logits = moe.moe_block(x, p, top_k=3, impl=impl)
    return jnp.sum(y * C) + moe.load_balancing_loss(logits[None], 3), (y, logits)

  return jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))


@pytest.fixture(scope="module")
def unsharded():
  """(loss, (y, router logits)), grads of each impl on one device."""
  return {impl: jax.device_get(loss_and_grads(impl)(jnp.asarray(X), random_params())) for impl in IMPLS}


@pytest.mark.slow  # jit of forward + backward on 8 fake devices, 3 impls (~15 s per mesh)
@pytest.mark.parametrize("sizes", [dict(data=2, fsdp=1, tensor=1, expert=4), dict(data=2, fsdp=1, tensor=2, expert=2)],
                         ids=["data2-expert4", "data2-tensor2-expert2"])
def test_moe_block_sharded_equals_unsharded(sizes, unsharded):
  mesh = make_mesh(**sizes)
  p = random_params()
  p_sh = {k: jax.device_put(v, param_sharding(k, v.shape, mesh, moe.PARAM_LOGICAL_AXES)) for k, v in p.items()}
  assert p_sh["edown_efd"].sharding.shard_shape((E, F, D)) == (E // sizes["expert"], F // sizes["tensor"], D)
  x_sh = jax.device_put(jnp.asarray(X), activation_sharding("hidden_btd", X.shape, mesh))

  for impl in IMPLS:
    (l_ref, (y_ref, r_ref)), g_ref = unsharded[impl]
    (l_sh, (y_sh, r_sh)), g_sh = loss_and_grads(impl)(x_sh, p_sh)
    assert len(y_sh.sharding.device_set) == 8
    np.testing.assert_allclose(np.asarray(y_sh), y_ref, atol=1e-5, rtol=0, err_msg=impl)
    np.testing.assert_allclose(np.asarray(r_sh), r_ref, atol=1e-5, rtol=0, err_msg=impl)
    np.testing.assert_allclose(float(l_sh), float(l_ref), rtol=1e-5)
    for a, b in zip(jax.tree.leaves(g_sh), jax.tree.leaves(g_ref)):
      np.testing.assert_allclose(np.asarray(a), b, atol=1e-4, rtol=1e-5, err_msg=impl)
