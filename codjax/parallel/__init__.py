"""Device meshes, logical-axis sharding rules and multi-host initialization."""

from codjax.parallel.mesh import MESH_AXES, batch_shards, make_mesh, maybe_initialize_distributed, mesh_from_config
from codjax.parallel.sharding import (ACTIVATION_AXES, DEFAULT_RULES, activation_sharding, logical_to_spec,
                                      param_sharding, shard_model, state_shardings)

__all__ = ["MESH_AXES", "batch_shards", "make_mesh", "maybe_initialize_distributed", "mesh_from_config",
           "ACTIVATION_AXES", "DEFAULT_RULES", "activation_sharding", "logical_to_spec", "param_sharding",
           "shard_model", "state_shardings"]
