"""Evaluation records (codjax/eval/records.py) through the one evaluation path: every finished pack is on disk
as it finishes, a resumed evaluation skips what is recorded and gives the table of an uninterrupted one, a
different evaluation in the same directory is refused, a write cut short is dropped, a damaged file is named."""

import json
import os

import numpy as np
import pytest

from codjax.agents.episode import PolicyBackend
from codjax.agents.orbit import OrbitTrajectory
from codjax.envs.experts import make_policy
from codjax.eval.records import RECORDS_FILE, EvalRecords, RecordsMismatch, checkpoint_digest, eval_fingerprint
from codjax.eval.runner import eval_pack_sets, eval_specs, run_evaluation
from codjax.train.config import base_config, env_entry, override
from codjax.workflows import get_workflow
from codjax.workflows.orbit import orbit_config


def cod_config(**over):
  c = base_config()
  c.name = "records_test"
  c.seed = 3
  c.model.preset = "tiny"
  c.data.envs = {"fl": env_entry("frozenlake_obscure", "tiny"), "al": env_entry("alchemy_random", "easy")}
  c.cod.protocol = "compact"
  c.eval.num_packs, c.eval.pack_size = 6, 3
  c.log.progress = c.log.tensorboard = False
  return override(c, over)


def orbit_cfg():
  c = cod_config()
  c.workflow = "orbit"
  c.algorithm.advantage = "grpo"
  c.data.envs = {"maze": env_entry("maze", "orbit")}
  c.orbit = orbit_config(extra_episodes=True)
  c.eval.num_packs, c.eval.pack_size = 5, 3
  return c


class Noisy:
  """A scripted policy that answers a share of solve turns at random: packs finish after different numbers of
  backend calls (the expert alone would finish them in lock step)."""

  def __init__(self, name):
    self.expert, self.random = make_policy(name, "expert"), make_policy(name, "random")

  def respond(self, messages, rng):
    return (self.random if rng.random() < 0.4 else self.expert).respond(messages, rng)


def _raise_interrupt():
  raise KeyboardInterrupt("test")


class Interrupting:
  """Wraps a backend: at call ``at`` runs ``event()``, by default a KeyboardInterrupt (Ctrl-C, or SIGTERM in the
  launcher)."""

  def __init__(self, inner, at, event=_raise_interrupt):
    self.inner, self.at, self.event, self.calls = inner, at, event, 0

  def respond(self, episodes):
    self.calls += 1
    if self.calls == self.at:
      self.event()
    return self.inner.respond(episodes)

  def release(self, episode):
    self.inner.release(episode)


def backend_for(spec):
  return PolicyBackend(Noisy(spec.name), seed=11)


def records_lines(path):
  with open(os.path.join(path, RECORDS_FILE)) as f:
    return [json.loads(line) for line in f]


def test_interrupted_evaluation_keeps_finished_packs_and_resumes_to_the_same_table(tmp_path):
  cfg = cod_config()
  fp = eval_fingerprint(cfg, engine="expert")
  plain = run_evaluation(cfg, backend_for, progress=False)
  straight = run_evaluation(cfg, backend_for, EvalRecords(str(tmp_path / "a"), fp), progress=False)
  n_packs = sum(len(p) for p in eval_pack_sets(cfg, eval_specs(cfg)).values())
  assert len(records_lines(tmp_path / "a")) == 1 + n_packs

  with pytest.raises(KeyboardInterrupt):  # stopped during the second environment's rollout
    run_evaluation(cfg, lambda spec: Interrupting(backend_for(spec), 10 if spec.label == "fl" else 0),
                   EvalRecords(str(tmp_path / "b"), fp), progress=False)
  kept = records_lines(tmp_path / "b")[1:]
  al, fl = [r for r in kept if r["env"] == "al"], [r for r in kept if r["env"] == "fl"]
  assert len(al) == 6 and 0 < len(fl) < 6  # the first environment whole, some packs of the second

  seen = []

  def counting(spec):
    b = backend_for(spec)
    inner = b.respond
    b.respond = lambda eps: (seen.extend((spec.label, e.pack_id) for e in eps), inner(eps))[1]
    return b

  resumed_records = EvalRecords(str(tmp_path / "b"), fp)
  assert resumed_records.resumed == len(kept)
  resumed = run_evaluation(cfg, counting, resumed_records, progress=False)
  # only the unfinished packs were rolled out again
  assert {k for env, k in seen if env == "fl"} == set(range(6)) - {r["index"] for r in fl}
  assert not [k for env, k in seen if env == "al"]
  assert resumed.meta["resumed_packs"] == {"al": 6, "fl": len(fl)}
  for ev in (straight, resumed):
    assert json.dumps(ev.results, sort_keys=True) == json.dumps(plain.results, sort_keys=True)
  wf = get_workflow("cod")
  assert wf.table(resumed.results) == wf.table(plain.results)
  # the records are the packs themselves: the recorded rewards are the summary's per-pack rewards
  rows = {(r["env"], r["index"]): r for r in records_lines(tmp_path / "b")[1:]}
  for label in ("fl", "al"):
    rewards = [[e["reward"] for e in rows[(label, k)]["trajectory"]["solve_episodes"]] for k in range(6)]
    assert rewards == plain.results[label]["pack_rewards"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_sigterm_whose_interrupt_was_dropped_stops_the_evaluation_after_the_next_pack(tmp_path, dropped_sigterm):
  """The launcher's SIGTERM handler raised inside a gc callback (CI, 2026-12-06): the evaluation must still stop,
  at the next finished pack, with that pack on disk, and resume to the uninterrupted table."""
  cfg = cod_config()
  fp = eval_fingerprint(cfg, engine="expert")
  plain = run_evaluation(cfg, backend_for, progress=False)
  first = eval_specs(cfg)[0].label
  with pytest.raises(KeyboardInterrupt, match="signal SIGTERM"):
    run_evaluation(cfg, lambda spec: Interrupting(backend_for(spec), 3 if spec.label == first else 0, dropped_sigterm),
                   EvalRecords(str(tmp_path), fp), progress=False)
  kept = records_lines(tmp_path)[1:]
  assert 1 <= len(kept) < 6 and {r["env"] for r in kept} == {first}
  from codjax.common import interrupts

  interrupts.reset()
  resumed = run_evaluation(cfg, backend_for, EvalRecords(str(tmp_path), fp), progress=False)
  assert resumed.meta["resumed_packs"][first] == len(kept)
  assert json.dumps(resumed.results, sort_keys=True) == json.dumps(plain.results, sort_keys=True)


def test_orbit_trajectories_round_trip_through_records(tmp_path):
  cfg = orbit_cfg()
  fp = eval_fingerprint(cfg, engine="expert")
  plain = run_evaluation(cfg, backend_for, progress=False)
  recorded = run_evaluation(cfg, backend_for, EvalRecords(str(tmp_path), fp), progress=False)
  assert json.dumps(recorded.results, sort_keys=True) == json.dumps(plain.results, sort_keys=True)
  # maze states are tuples: they come back hashable, so the exploration metric is computed from them
  row = records_lines(tmp_path)[1]
  pack = eval_pack_sets(cfg, eval_specs(cfg))["maze"][row["index"]]
  traj = get_workflow("orbit").from_record(row["trajectory"], pack, cfg)
  assert isinstance(traj, OrbitTrajectory)
  states = [s for g in traj.games for s in g.states]
  assert states and all(isinstance(s, tuple) for s in states)
  assert any(k.startswith("explore/") for k in plain.results["maze"])


def test_records_of_another_evaluation_are_refused(tmp_path):
  cfg = cod_config(**{"eval.num_packs": 2})
  run_evaluation(cfg, backend_for, EvalRecords(str(tmp_path), eval_fingerprint(cfg, engine="expert")), progress=False)
  other = cod_config(**{"eval.num_packs": 2, "eval.temperature": 0.3})
  with pytest.raises(RecordsMismatch, match=r"config\.eval\.temperature: 1\.0 -> 0\.3"):
    EvalRecords(str(tmp_path), eval_fingerprint(other, engine="expert"))
  with pytest.raises(RecordsMismatch, match=r"engine: \"expert\" -> \"random\""):
    EvalRecords(str(tmp_path), eval_fingerprint(cfg, engine="random"))
  # the refused attempts left the file as it was
  assert len(records_lines(tmp_path)) == 1 + 4


def test_checkpoint_change_is_refused(tmp_path):
  ckpt = tmp_path / "ckpt"
  ckpt.mkdir()
  (ckpt / "config.json").write_text("{}")
  (ckpt / "model.safetensors").write_bytes(np.arange(1000, dtype=np.float32).tobytes())
  cfg = cod_config(**{"model.path": str(ckpt), "eval.num_packs": 1})
  out = str(tmp_path / "out")
  # (the scripted backend stands in for the checkpoint's engine: the fingerprint is what is compared)
  run_evaluation(cfg, backend_for, EvalRecords(out, eval_fingerprint(cfg, engine="jax", checkpoint=str(ckpt))),
                 progress=False)
  assert EvalRecords(out, eval_fingerprint(cfg, engine="jax", checkpoint=str(ckpt))).resumed == 2  # same: resumes
  (ckpt / "model.safetensors").write_bytes(np.arange(1, 1001, dtype=np.float32).tobytes())  # retrained
  with pytest.raises(RecordsMismatch, match=r"checkpoint\.model\.safetensors"):
    EvalRecords(out, eval_fingerprint(cfg, engine="jax", checkpoint=str(ckpt)))
  assert checkpoint_digest(str(ckpt)).keys() == {"config.json", "model.safetensors"}
  # a file that never got a finished pack (e.g. the engine failed to start) holds nothing to protect
  fresh = str(tmp_path / "fresh")
  EvalRecords(fresh, eval_fingerprint(cfg, engine="random"))
  assert EvalRecords(fresh, eval_fingerprint(cfg, engine="expert")).resumed == 0
  assert records_lines(fresh) == [{"record": "header", "version": 1,
                                   "fingerprint": eval_fingerprint(cfg, engine="expert")}]


def test_a_write_cut_short_is_dropped_and_a_damaged_line_is_named(tmp_path, caplog):
  cfg = cod_config(**{"eval.num_packs": 3})
  fp = eval_fingerprint(cfg, engine="expert")
  full = run_evaluation(cfg, backend_for, EvalRecords(str(tmp_path), fp), progress=False)
  path = tmp_path / RECORDS_FILE
  lines = path.read_bytes().split(b"\n")[:-1]
  path.write_bytes(b"\n".join(lines[:-1]) + b"\n" + lines[-1][:40])  # killed while writing the last pack
  recs = EvalRecords(str(tmp_path), fp)
  assert "incomplete last line" in caplog.text and recs.resumed == len(lines) - 2
  again = run_evaluation(cfg, backend_for, recs, progress=False)
  assert json.dumps(again.results, sort_keys=True) == json.dumps(full.results, sort_keys=True)
  assert len(records_lines(tmp_path)) == len(lines)

  text = path.read_bytes().split(b"\n")
  text[2] = b'{"record": "pack", "env": '
  path.write_bytes(b"\n".join(text))
  with pytest.raises(ValueError, match=r"line 3: not a JSON record"):
    EvalRecords(str(tmp_path), fp)


def test_evaluation_shows_packs_done_rate_and_estimate(capsys):
  cfg = cod_config(**{"eval.num_packs": 2, "data.envs": {"fl": env_entry("frozenlake_obscure", "tiny")}})
  run_evaluation(cfg, backend_for, progress=True)
  err = capsys.readouterr().err
  assert "eval fl" in err and "2.0/2" in err and "pack/s" in err  # packs done (fractional while packs run)
