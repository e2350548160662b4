"""Logical-axis rules: every model parameter and activation gets a ``PartitionSpec``.

A rule maps a logical axis name to a mesh axis (or a tuple of mesh axes, or None). Parameters are sharded
FSDP-style over ``fsdp`` on their embedding dimension, Megatron-style over ``tensor`` on heads / MLP /
vocabulary, and over ``expert`` on the expert dimension of mixture-of-experts weights (logical axis
``experts``); activations are sharded over (data, fsdp, expert) on the batch (MaxText-style: outside the
expert layers the expert axis is data-parallel, so ``codjax.parallel.mesh.batch_shards`` = data * fsdp *
expert). A mesh axis that does not divide the dimension is dropped for that tensor (replicated instead), so
small test models shard wherever possible.

Which logical axes a parameter has belongs to the model (``codjax.models.qwen3.PARAM_LOGICAL_AXES``: parameter
name -> one logical axis name or None per dimension); the functions here take that table as an argument, so
the dependency points one way (models -> parallel) and every architecture brings its own table.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import jax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

#: parameter name -> logical axis (or None) per dimension, e.g. ``{"embed_vd": ("vocab", "embed")}``
LogicalAxes = Mapping[str, Sequence[str | None]]

DEFAULT_RULES: dict[str, str | tuple[str, ...] | None] = {
    # parameters
    "vocab": "tensor",
    "embed": "fsdp",
    "q_heads": "tensor",
    "kv_heads": "tensor",
    "mlp": "tensor",
    "experts": "expert",
    "layers": None,
    # activations
    "batch": ("data", "fsdp", "expert"),
    "seq": None,
    "act_embed": None,
    "act_heads": "tensor",
    "act_vocab": "tensor",
}

ACTIVATION_AXES = {
    "tokens_bt": ("batch", "seq"),
    "hidden_btd": ("batch", "seq", "act_embed"),
    "q_btnh": ("batch", "seq", "act_heads", None),
    "kv_btkh": ("batch", "seq", "act_heads", None),
    "logits_btv": ("batch", "seq", "act_vocab"),
    "cache_k_lbkhs": ("layers", "batch", "act_heads", None, "seq"),  # keys, transposed (JaxEngine)
    "cache_v_lbksh": ("layers", "batch", "act_heads", "seq", None),
}


def logical_to_spec(axes: Sequence[str | None], shape: Sequence[int], mesh: Mesh,
                    rules: Mapping[str, object] | None = None) -> P:
  """PartitionSpec for a tensor with the given logical axes; non-dividing mesh axes are dropped."""
  rules = DEFAULT_RULES if rules is None else rules
  used: set[str] = set()
  out = []
  for ax, dim in zip(axes, shape):
    target = rules.get(ax) if ax is not None else None
    if target is None:
      out.append(None)
      continue
    names = (target,) if isinstance(target, str) else tuple(target)
    keep = []
    size = 1
    for n in names:
      if n in used or n not in mesh.shape:
        continue
      if dim % (size * mesh.shape[n]) == 0:
        keep.append(n)
        size *= mesh.shape[n]
    used.update(keep)
    out.append(None if not keep else (keep[0] if len(keep) == 1 else tuple(keep)))
  return P(*out)


def param_sharding(name: str, shape: Sequence[int], mesh: Mesh | None, logical_axes: LogicalAxes, rules=None):
  """Sharding of the parameter ``name`` of a model with the given logical-axis table (a single default device
  when ``mesh`` is None)."""
  if mesh is None:
    return jax.sharding.SingleDeviceSharding(jax.devices()[0])
  if name not in logical_axes:
    raise KeyError(f"parameter {name!r} has no entry in the logical-axis table")
  return NamedSharding(mesh, logical_to_spec(logical_axes[name], shape, mesh, rules))


def activation_sharding(kind: str, shape: Sequence[int], mesh: Mesh, rules=None) -> NamedSharding:
  return NamedSharding(mesh, logical_to_spec(ACTIVATION_AXES[kind], shape, mesh, rules))


def state_shardings(state: nnx.State, mesh: Mesh, logical_axes: LogicalAxes, rules=None):
  """A pytree of NamedShardings matching an nnx state of a model (or optimizer state over it).

  Leaves are matched by the last path element that names a parameter of ``logical_axes`` with as many axes
  as the leaf has dimensions; anything else (step counters, scalars) is replicated.
  """

  def leaf_sharding(path, leaf):
    shape = getattr(leaf, "shape", ())
    for key in reversed(path):
      k = getattr(key, "key", getattr(key, "name", key))
      if isinstance(k, str) and k in logical_axes and len(logical_axes[k]) == len(shape):
        return NamedSharding(mesh, logical_to_spec(logical_axes[k], shape, mesh, rules))
    return NamedSharding(mesh, P())

  return jax.tree_util.tree_map_with_path(leaf_sharding, state)


def shard_model(model, mesh: Mesh, logical_axes: LogicalAxes, rules=None):
  """Places an existing model's parameters into their sharded layouts (in place); returns the model."""
  graphdef, state = nnx.split(model)
  shardings = state_shardings(state, mesh, logical_axes, rules)
  state = jax.device_put(state, shardings)
  nnx.update(model, state)
  return model
