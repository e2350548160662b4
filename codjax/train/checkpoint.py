"""orbax checkpoints of the whole run state: params, optimizer state, step, RNG and data-sampler position.

The train state is saved as a flat ``{path: array}`` dict (robust to pytree node types) next to a JSON item
with the run metadata (sampler position, RNG seeds, counters). orbax writes each step into a temporary
directory and renames it into place only when complete, so a crash mid-save leaves the previous checkpoint
as the latest good one. ``restore_latest`` walks back over older steps if the newest cannot be read
(corrupt or truncated files), logging which step it skipped and why; if none can be read it raises.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp


def _flatten(tree) -> tuple[dict[str, Any], Any]:
  leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
  return {jax.tree_util.keystr(p): v for p, v in leaves}, treedef


class CheckpointError(RuntimeError):
  pass


class Checkpointer:
  def __init__(self, directory: str, max_to_keep: int = 3):
    self.directory = os.path.abspath(directory)
    os.makedirs(self.directory, exist_ok=True)
    opts = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                        enable_async_checkpointing=False)
    self._mgr = ocp.CheckpointManager(self.directory, options=opts, item_names=("state", "meta"))

  def save(self, step: int, state, meta: dict) -> None:
    flat, _ = _flatten(state)
    self._mgr.save(int(step), args=ocp.args.Composite(state=ocp.args.StandardSave(flat),
                                                      meta=ocp.args.JsonSave(meta)), force=True)
    self._mgr.wait_until_finished()

  def steps(self) -> list[int]:
    return sorted(self._mgr.all_steps())

  def restore(self, step: int, target_state) -> tuple[Any, dict]:
    """Restores ``step`` into the structure (and shardings) of ``target_state``."""
    flat, treedef = _flatten(target_state)
    abstract = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=getattr(v, "sharding", None))
                for k, v in flat.items()}
    out = self._mgr.restore(int(step), args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                               meta=ocp.args.JsonRestore()))
    got = out["state"]
    if set(got) != set(flat):
      raise CheckpointError(f"checkpoint step {step} does not match the model/optimizer structure")
    for k, v in got.items():
      if tuple(v.shape) != tuple(flat[k].shape):
        raise CheckpointError(f"checkpoint step {step}: {k} has shape {v.shape}, expected {flat[k].shape}")
    leaves = [got[k] for k in flat]
    return jax.tree_util.tree_unflatten(treedef, leaves), dict(out["meta"])

  def restore_latest(self, target_state) -> tuple[int, Any, dict] | None:
    """(step, state, meta) of the newest readable checkpoint, or None if there is none at all."""
    steps = self.steps()
    errors = []
    for step in reversed(steps):
      try:
        state, meta = self.restore(step, target_state)
        if not all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state)
                   if np.issubdtype(np.asarray(x).dtype, np.floating)):
          raise CheckpointError("non-finite values in the restored state")
        if errors:
          logging.warning("restored checkpoint step %d after skipping unreadable newer ones: %s", step, errors)
        return step, state, meta
      except Exception as e:  # corrupt/truncated files surface as many exception types
        errors.append(f"step {step}: {type(e).__name__}: {e}"[:300])
        logging.warning("cannot restore checkpoint step %d: %s", step, e)
    if steps:
      raise CheckpointError(f"no readable checkpoint in {self.directory}; tried: {errors}")
    return None

  def close(self) -> None:
    self._mgr.close()
