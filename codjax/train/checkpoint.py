"""orbax checkpoints of the whole run state: params, optimizer state, step, RNG, data-sampler position, and
the weights the rollout engine samples from when they lag the trainer.

Layout of ``<run_dir>/checkpoints``::

  <step>/state/        the train state as a flat ``{path: array}`` dict (robust to pytree node types)
  <step>/meta/         JSON run metadata (sampler position, RNG seed, counters such as ``last_sync``)
  <step>/engine/       only when the engine lags the trainer (``rollout.sync_interval`` > 1): the engine's
                       sampling params as a flat ``{path: array}`` dict, i.e. the policy of step ``last_sync``
  quarantine/<step>-<UTC time>/   a step that could not be read, moved aside (never deleted) with the reason
                       in ``QUARANTINE_REASON.txt``; orbax never lists it

The three items of a step are one orbax step: orbax writes them into a temporary directory and renames it into
place only when all are complete, so a crash mid-save leaves the previous step as the latest good one, and a
restored step's engine weights always belong to it. ``restore_latest`` walks back over newer steps that cannot
be read (corrupt or truncated files, non-finite values), restores the newest readable one and quarantines the
unreadable newer ones, so the resumed run can write those step numbers again. A checkpoint that is readable but
does not fit the run (other model/optimizer structure, shapes, or missing engine weights the run needs) is a
``CheckpointMismatch`` at once and nothing is moved: that is a configuration problem, not a corrupt file.

Runs written before the engine weights moved into the orbax step kept them in ``<run_dir>/engine_weights``,
overwritten by every save; that directory is no longer read. Resuming such a run at a step where the engine
lagged is a ``CheckpointMismatch`` naming the way out (``rollout.sync_interval=1`` re-syncs, inexactly).
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

QUARANTINE_DIR = "quarantine"
REASON_FILE = "QUARANTINE_REASON.txt"


def _flatten(tree) -> tuple[dict[str, Any], Any]:
  leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
  return {jax.tree_util.keystr(p): v for p, v in leaves}, treedef


def _abstract(flat: dict[str, Any]) -> dict[str, jax.ShapeDtypeStruct]:
  return {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=getattr(v, "sharding", None)) for k, v in flat.items()}


def _all_finite(tree) -> bool:
  """True if every floating leaf is finite; a leaf spread over several processes is reduced on the devices
  (a collective: every process calls this for the same tree)."""
  ok = True
  for x in jax.tree.leaves(tree):
    if not np.issubdtype(np.dtype(x.dtype), np.floating):
      continue
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      # a reduction to one replicated scalar: every process reads the global verdict from its own copy
      ok &= bool(np.asarray(jnp.isfinite(x).all().addressable_data(0)))
    else:
      ok &= bool(np.isfinite(np.asarray(x)).all())
  return ok


class CheckpointError(RuntimeError):
  pass


class CheckpointMismatch(CheckpointError):
  """A readable checkpoint that does not fit the run restoring it (never quarantined)."""


class Restored(NamedTuple):
  step: int
  state: Any
  meta: dict
  engine: Any  # the engine's sampling params (structure of the engine target), or None


EngineTarget = Callable[[dict], Any]  # meta -> params pytree whose values the step must hold, or None


def committed_steps(directory: str) -> list[int]:
  """The committed steps under a ``Checkpointer`` directory (orbax writes a step under a temporary name and
  renames it to the step number when complete), read without creating the directory or a manager."""
  if not os.path.isdir(directory):
    return []
  return sorted(int(n) for n in os.listdir(directory) if n.isdigit() and os.path.isdir(os.path.join(directory, n)))


class Checkpointer:
  def __init__(self, directory: str, max_to_keep: int = 3):
    self.directory = os.path.abspath(directory)
    os.makedirs(self.directory, exist_ok=True)
    opts = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                        enable_async_checkpointing=False)
    # handlers named up front: a fresh manager can then read an item's metadata before any save or restore
    handlers = dict(state=ocp.StandardCheckpointHandler(), meta=ocp.JsonCheckpointHandler(),
                    engine=ocp.StandardCheckpointHandler())
    self._mgr = ocp.CheckpointManager(self.directory, options=opts, item_handlers=handlers)

  def save(self, step: int, state, meta: dict, engine_params=None) -> None:
    """Writes one orbax step holding ``state``, ``meta`` and, if given, the engine's sampling params."""
    items = dict(state=ocp.args.StandardSave(_flatten(state)[0]), meta=ocp.args.JsonSave(meta))
    if engine_params is not None:
      items["engine"] = ocp.args.StandardSave(_flatten(engine_params)[0])
    self._mgr.save(int(step), args=ocp.args.Composite(**items), force=True)
    self._mgr.wait_until_finished()

  def steps(self) -> list[int]:
    return sorted(self._mgr.all_steps())

  def _check_structure(self, step: int, item: str, flat: dict[str, Any]) -> None:
    """Compares a stored item's key set and shapes (read from its metadata) with the target's."""
    stored = self._mgr.item_metadata(int(step))[item]
    if stored is None:
      raise CheckpointError(f"checkpoint step {step}: the metadata of item {item!r} cannot be read")
    tree = getattr(stored, "tree", stored)
    if set(tree) != set(flat):
      missing, extra = sorted(set(flat) - set(tree))[:3], sorted(set(tree) - set(flat))[:3]
      raise CheckpointMismatch(f"checkpoint step {step} ({item}) does not match the model/optimizer structure "
                               f"of this run (missing e.g. {missing}, unexpected e.g. {extra})")
    for k, v in tree.items():
      if tuple(v.shape) != tuple(flat[k].shape):
        raise CheckpointMismatch(f"checkpoint step {step} ({item}): {k} has shape {tuple(v.shape)}, "
                                 f"this run expects {tuple(flat[k].shape)}")

  def _restore_item(self, step: int, item: str, target) -> Any:
    flat, treedef = _flatten(target)
    self._check_structure(step, item, flat)
    got = self._mgr.restore(int(step), args=ocp.args.Composite(**{item: ocp.args.StandardRestore(_abstract(flat))}))
    got = got[item]
    return jax.tree_util.tree_unflatten(treedef, [got[k] for k in flat])

  def restore(self, step: int, target_state, engine_target: EngineTarget | None = None) -> Restored:
    """Restores ``step`` into the structure (and shardings) of ``target_state``.

    ``engine_target(meta)`` names the engine params the step must hold (a pytree giving structure and
    shardings), or None when the run needs none; a step that lacks them raises ``CheckpointMismatch``."""
    meta = dict(self._mgr.restore(int(step), args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"])
    state = self._restore_item(step, "state", target_state)
    engine = None
    target = engine_target(meta) if engine_target is not None else None
    if target is not None:
      if not os.path.isdir(os.path.join(self.directory, str(int(step)), "engine")):
        raise CheckpointMismatch(
            f"checkpoint step {step} holds no engine weights, but the run's rollout engine sampled from the "
            f"weights of step {meta.get('last_sync')} at that point (rollout.sync_interval > 1). A checkpoint "
            "written before engine weights moved into the orbax step (they were in run_dir/engine_weights) "
            "cannot resume exactly; resume with rollout.sync_interval=1 to re-sync the engine (not exact), or "
            "start a fresh run")
      engine = self._restore_item(step, "engine", target)
    if not _all_finite((state, engine)):
      raise CheckpointError("non-finite values in the restored state")
    return Restored(int(step), state, meta, engine)

  def restore_latest(self, target_state, engine_target: EngineTarget | None = None) -> Restored | None:
    """The newest readable checkpoint, or None if there is none at all.

    Unreadable newer steps are quarantined once an older one restores; if none can be read, all stay in
    place and a ``CheckpointError`` names each failure. A ``CheckpointMismatch`` is raised at once."""
    steps = self.steps()
    errors: list[tuple[int, str]] = []
    for step in reversed(steps):
      try:
        got = self.restore(step, target_state, engine_target)
      except CheckpointMismatch:
        raise
      except Exception as e:  # corrupt/truncated files surface as many exception types
        errors.append((step, f"{type(e).__name__}: {e}"[:300]))
        logging.warning("cannot restore checkpoint step %d: %s", step, e)
        continue
      for bad, reason in errors:
        self.quarantine(bad, reason)
      if errors:
        logging.warning("restored checkpoint step %d after quarantining unreadable newer steps %s", step,
                        [s for s, _ in errors])
      return got
    if steps:
      raise CheckpointError(f"no readable checkpoint in {self.directory}; tried: "
                            + "; ".join(f"step {s}: {r}" for s, r in errors))
    return None

  def quarantine(self, step: int, reason: str) -> str:
    """Moves step ``step`` to ``quarantine/<step>-<UTC time>`` (with the reason in a file) and returns that
    path; orbax no longer lists the step, so a resumed run can save it again."""
    src = os.path.join(self.directory, str(int(step)))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    base = os.path.join(self.directory, QUARANTINE_DIR, f"{int(step)}-{stamp}")
    dst, n = base, 1
    while os.path.exists(dst):
      dst, n = f"{base}-{n}", n + 1
    if jax.process_index() == 0:
      os.makedirs(os.path.dirname(dst), exist_ok=True)
      shutil.move(src, dst)
      with open(os.path.join(dst, REASON_FILE), "w") as f:
        f.write(f"step {int(step)} quarantined at {stamp} UTC: {reason}\n")
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils

      multihost_utils.sync_global_devices(f"codjax_quarantine_{int(step)}")
    self._mgr.reload()
    logging.warning("quarantined unreadable checkpoint step %d -> %s (%s)", step, dst, reason)
    return dst

  def close(self) -> None:
    self._mgr.close()
