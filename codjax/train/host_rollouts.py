"""Rollouts split over the processes of a multi-host run, gathered so that every process holds the step's
trajectories exactly as one process would have produced them.

Process p rolls out its contiguous block of the step's packs (``codjax.parallel.multihost.host_block``); each
trajectory travels as the workflow's record (``to_record``) plus the training annotations a record leaves
out (per episode: ``loss_mask`` and ``logprobs``), and is rebuilt with ``from_record`` around the same pack
object. The result is pack-major (``repeats`` per pack), like ``workflow.rollout``. With one process it is
``workflow.rollout`` itself.
"""

from __future__ import annotations

from codjax.parallel import multihost


def _encode(workflow, traj) -> dict:
  return {"record": workflow.to_record(traj),
          "train": [[list(ep.loss_mask), list(ep.logprobs)] for ep in traj.episodes()]}


def _decode(workflow, rec: dict, pack, cfg):
  traj = workflow.from_record(rec["record"], pack, cfg)
  eps = traj.episodes()
  if len(eps) != len(rec["train"]):
    raise ValueError(f"trajectory record has {len(eps)} episodes but {len(rec['train'])} training annotations")
  for ep, (mask, logprobs) in zip(eps, rec["train"]):
    ep.loss_mask, ep.logprobs = [int(m) for m in mask], [float(x) for x in logprobs]
  return traj


def rollout_on_hosts(workflow, backend, packs, repeats: int, cfg) -> list:
  """``workflow.rollout(backend, packs, repeats, cfg)``, with the packs split over the processes and the
  trajectories gathered on every process (see the module docstring)."""
  packs = list(packs)
  return multihost.gather_blocks(
      packs, len(packs), lambda block: workflow.rollout(backend, block, repeats, cfg),
      encode=lambda t: _encode(workflow, t), decode=lambda rec, k: _decode(workflow, rec, packs[k], cfg),
      per_item=int(repeats))
