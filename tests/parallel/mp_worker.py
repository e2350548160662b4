"""One process of the multi-process tests (``tests/parallel/test_multiprocess.py``), started by
``codjax.parallel.local_cluster.run_local`` with the coordinator variables set:

  python tests/parallel/mp_worker.py train_step <out_dir> <ckpt> <mesh data size>
  python tests/parallel/mp_worker.py pair <out_dir> <ckpt> <checkpoint dir>     (2 processes; ends with rc 17)
  python tests/parallel/mp_worker.py restore <out_dir> <ckpt> <checkpoint dir>

Every scenario initializes ``jax.distributed`` first (``maybe_initialize_distributed``), then works on a
global mesh over all processes' devices. Process 0 writes the results to ``out_dir``; each process also
writes ``out_dir/p<i>.json`` with what only it can observe. The functions that compute a result are
importable, so the test computes the single-process value with the same code.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)


def synthetic_batch(vocab: int, rows: int = 8, seq_len: int = 48, seed: int = 0) -> dict[str, np.ndarray]:
  """A fixed RL batch: ``rows`` sequences of random tokens with loss masks, old logprobs and advantages."""
  from codjax.rl.batch import TrainSequence, assemble_batch

  rng = np.random.default_rng(seed)
  seqs = []
  for i in range(rows):
    n = int(rng.integers(seq_len // 2, seq_len))
    mask = (np.arange(n) >= n // 3).astype(np.int32)
    seqs.append(TrainSequence(rng.integers(1, vocab, n).tolist(), mask.tolist(),
                              (-rng.random(n) * 3 * mask).tolist(), float(rng.normal())))
  batch, _ = assemble_batch(seqs, seq_len, pack=False, row_multiple=rows)
  return batch


def train_step_result(ckpt: str, mesh) -> dict[str, np.ndarray]:
  """Loads ``ckpt`` onto ``mesh``, runs one jitted RL step on ``synthetic_batch``; returns the metrics and the
  updated parameters as host arrays (gathered from every process)."""
  import jax

  from codjax.models import from_pretrained
  from codjax.models.axes import PARAM_LOGICAL_AXES
  from codjax.parallel.multihost import to_host
  from codjax.parallel.sharding import state_shardings
  from codjax.rl.train_step import (OptimizerConfig, StepConfig, device_batch, init_train_state, make_optimizer,
                                    make_train_step)

  model = from_pretrained(ckpt, dtype="float32", mesh=mesh)
  # Adam's eps well above the gradients' last-bit noise: a step divides g by |g| + eps, which would turn a
  # reduction-order difference in a near-zero gradient into an O(lr) change of the update
  opt = make_optimizer(OptimizerConfig(learning_rate=1e-2, eps=1e-3))
  graphdef, state = init_train_state(model, opt)
  state = jax.device_put(state, state_shardings(state, mesh, PARAM_LOGICAL_AXES))
  batch = synthetic_batch(int(model.cfg.vocab_size))
  step = make_train_step(graphdef, opt, StepConfig(), state, mesh, batch_fields=tuple(sorted(batch)))
  state, out = step(state, device_batch(batch, mesh))
  params = to_host(state.params)
  flat = {f"param{jax.tree_util.keystr(p)}": v for p, v in jax.tree_util.tree_flatten_with_path(params)[0]}
  flat.update({f"metric/{k}": np.asarray(v) for k, v in jax.device_get(out).items()})
  return flat


def scripted_rollout_batch(tokenizer_dir: str, num_packs: int = 6, repeats: int = 2
                           ) -> tuple[dict[str, np.ndarray], list]:
  """The trainer's rollout path (``Trainer.rollout``: ``codjax.train.host_rollouts``, the cod workflow) with
  a scripted FrozenLake player (30 % random moves, drawn per episode and turn) whose transcripts are tokenized
  as the trainer's engine backend would: every process rolls out its block of packs, the trajectories are
  exchanged as records, and the batch is assembled from all of them. Returns (batch, the records)."""
  from codjax.agents.episode import PolicyBackend
  from codjax.agents.token_backend import TokenizingBackend
  from codjax.envs.experts import make_teacher
  from codjax.models.tokenizer import load_tokenizer
  from codjax.rl.batch import TrainSequence, assemble_batch
  from codjax.train.config import base_config, env_entry
  from codjax.train.host_rollouts import rollout_on_hosts
  from codjax.workflows import get_workflow
  from codjax.workflows.packs import PackSampler, env_specs

  cfg = base_config()
  cfg.data.envs = {"fl": env_entry("frozenlake_obscure", "tiny")}
  cfg.cod.protocol = "compact"
  wf = get_workflow("cod")
  packs = PackSampler(env_specs(cfg.data.envs), 3, "cod", 7, 1000, 100, 42).next_packs(num_packs)
  backend = TokenizingBackend(PolicyBackend(make_teacher("frozenlake_obscure", 0.3), seed=11),
                              load_tokenizer(tokenizer_dir), max_prompt_tokens=4096, max_response_tokens=64)
  trajs = rollout_on_hosts(wf, backend, packs, repeats, cfg)
  seqs = [TrainSequence(ep.tokens, ep.loss_mask, ep.logprobs, s) for ep, s in wf.score(trajs, cfg)
          if ep.num_loss_tokens > 0]
  batch, _ = assemble_batch(seqs, 1024, pack=True, row_multiple=8)
  return batch, [wf.to_record(t) for t in trajs]


def _save(out_dir: str, name: str, arrays: dict) -> None:
  np.savez(os.path.join(out_dir, name), **arrays)


def main(argv: list[str]) -> None:
  scenario, out_dir, args = argv[1], argv[2], argv[3:]
  from codjax.parallel import maybe_initialize_distributed

  assert maybe_initialize_distributed(), "not launched with the coordinator variables"
  import jax

  from codjax.parallel import make_mesh, multihost

  pid = jax.process_index()
  mine = {"process_index": pid, "process_count": jax.process_count(), "devices": jax.device_count(),
          "local_devices": jax.local_device_count()}
  if scenario == "train_step":  # <ckpt> <mesh data size>
    train_step_scenario(out_dir, args[0], make_mesh(data=int(args[1]), fsdp=-1), mine)
  elif scenario == "pair":  # <ckpt> <checkpoint dir>: the 2-process checks in one launch
    # 1. the sharded train step; 2. rollouts split over the processes; 3. a checkpoint save that process 1
    # does not survive (it exits with 17 as step 2's save starts): the run ends there, nothing after it runs
    mesh = make_mesh(data=2, fsdp=-1)
    train_step_scenario(out_dir, args[0], mesh, mine)
    batch, mine["records"] = scripted_rollout_batch(args[0])
    if multihost.is_primary():
      _save(out_dir, "batch.npz", batch)
    _write_info(out_dir, mine)
    ckpt_scenario(out_dir, ["save", args[0], args[1], "2"], mesh, mine)
  elif scenario == "restore":  # <ckpt> <checkpoint dir>
    ckpt_scenario(out_dir, ["restore", args[0], args[1]], make_mesh(data=2, fsdp=-1), mine)
  else:
    raise SystemExit(f"unknown scenario {scenario!r}")
  _write_info(out_dir, mine)
  multihost.barrier("worker_done")


def _write_info(out_dir: str, mine: dict) -> None:
  with open(os.path.join(out_dir, f"p{mine['process_index']}.json"), "w") as f:
    json.dump(mine, f)


def train_step_scenario(out_dir: str, ckpt: str, mesh, mine: dict) -> None:
  """``train_step_result`` with a spy on ``from_pretrained``'s ``make_array_from_callback`` that records,
  per parameter, which slices this process read and how many distinct shards its devices and all hold."""
  import codjax.models.checkpoint as ckpt_mod
  from codjax.parallel import multihost

  real = ckpt_mod.jax.make_array_from_callback

  def spy(shape, sharding, cb):
    requested = []

    def wrapped(index):
      requested.append([[s.start, s.stop] for s in index])
      return cb(index)

    arr = real(shape, sharding, wrapped)
    mine.setdefault("shards", []).append(
        {"shape": list(shape), "requested": requested,
         "local_shards": len({tuple((s.start, s.stop) for s in ix)
                              for ix in sharding.addressable_devices_indices_map(shape).values()}),
         "global_shards": len({tuple((s.start, s.stop) for s in ix)
                               for ix in sharding.devices_indices_map(shape).values()})})
    return arr

  ckpt_mod.jax.make_array_from_callback = spy
  try:
    result = train_step_result(ckpt, mesh)
  finally:
    ckpt_mod.jax.make_array_from_callback = real
  if multihost.is_primary():
    _save(out_dir, "result.npz", result)


def ckpt_scenario(out_dir: str, args: list[str], mesh, mine: dict) -> None:
  """``save <ckpt> <dir> [die_at_step]``: a train state saved at steps 1 and 2 (``die_at_step``: process 1
  dies as that save starts); ``restore <ckpt> <dir>``: restores the latest step and writes it (process 0)."""
  import jax
  import jax.numpy as jnp

  from codjax.models import from_pretrained
  from codjax.models.axes import PARAM_LOGICAL_AXES
  from codjax.parallel import multihost
  from codjax.parallel.sharding import state_shardings
  from codjax.rl.train_step import OptimizerConfig, init_train_state, make_optimizer
  from codjax.train.checkpoint import Checkpointer

  mode, ckpt, directory = args[0], args[1], args[2]
  model = from_pretrained(ckpt, dtype="float32", mesh=mesh)
  _, state = init_train_state(model, make_optimizer(OptimizerConfig()))
  state = jax.device_put(state, state_shardings(state, mesh, PARAM_LOGICAL_AXES))
  ck = Checkpointer(directory, max_to_keep=3)
  if mode == "save":
    die_at = int(args[3]) if len(args) > 3 else 0
    for step in (1, 2):
      state = jax.tree.map(lambda x, s=step: x + s if jnp.issubdtype(x.dtype, jnp.floating) else x, state)
      if step == die_at and jax.process_index() == 1:
        os._exit(17)  # killed as the save of this step starts; process 0 is inside the save
      host = multihost.to_host(state.params)
      if multihost.is_primary():
        _save(out_dir, f"saved_{step}.npz", {jax.tree_util.keystr(p): v for p, v in
                                             jax.tree_util.tree_flatten_with_path(host)[0]})
      ck.save(step, state, {"step": step})
  else:
    got = ck.restore_latest(state)
    host = multihost.to_host(got.state.params)
    mine["restored_step"] = got.step
    mine["meta"] = got.meta
    if multihost.is_primary():
      _save(out_dir, "restored.npz", {jax.tree_util.keystr(p): v for p, v in
                                      jax.tree_util.tree_flatten_with_path(host)[0]})
  ck.close()


if __name__ == "__main__":
  main(sys.argv)
