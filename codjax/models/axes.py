"""Logical axes of every parameter of every architecture codjax implements (the models' half of the sharding
seam, ``codjax.parallel.sharding``): one table, so trainers, engines and the memory planner need no branch on
the architecture. Names shared by both families (embeddings, norms, dense MLP) have the same axes in both."""

from codjax.models import qwen3, qwen3_5

for _name in set(qwen3.PARAM_LOGICAL_AXES) & set(qwen3_5.PARAM_LOGICAL_AXES):
  assert qwen3.PARAM_LOGICAL_AXES[_name] == qwen3_5.PARAM_LOGICAL_AXES[_name], _name

PARAM_LOGICAL_AXES: dict[str, tuple[str | None, ...]] = {**qwen3.PARAM_LOGICAL_AXES, **qwen3_5.PARAM_LOGICAL_AXES}
