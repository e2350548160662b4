"""Evaluation records: every finished pack on disk as it finishes, and resuming from them.

``EvalRecords`` is an append-only JSON Lines file, ``DIR/eval_records.jsonl``:

  line 1      ``{"record": "header", "version": 1, "fingerprint": {...}}``: what is evaluated
  each next   ``{"record": "pack", "env": label, "index": k, "pack_seed": s, "task_seeds": [...],
              "trajectory": workflow.to_record(trajectory)}``: pack k of the environment ``label``'s
              evaluation packs, written (flushed and fsynced) the moment its trajectory finished

A trajectory record holds the whole conversation of every episode (messages, rewards, format errors, token
ids, response token counts, hints), everything a workflow's ``summarize`` reads; only the training-only
per-token annotations (loss mask, logprobs) are left out. The evaluation's summaries are always computed from
the records read back (``codjax.eval.runner``), so an evaluation interrupted and resumed in the same directory
and one that ran straight through give the same table.

The fingerprint says what was evaluated: the full experiment config, the engine, the checkpoint's content
digest (``checkpoint_digest``) or the served model's name, and the options that change what is sampled.
Opening a directory whose header has another fingerprint raises ``RecordsMismatch`` listing what differs:
records of two different evaluations are never mixed (a file without any finished pack is started afresh).
Options that cannot change a result (the server's URL, the request concurrency, timeouts) are not part of
it, so an evaluation can resume against a restarted server on another port.

A last line cut short by a kill during its write is dropped (with a warning) when the file is opened; a
malformed line anywhere else is an error naming the line (the file is never rewritten silently).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any, Iterable

RECORDS_FILE = "eval_records.jsonl"
VERSION = 1
_FULL_HASH_BYTES = 64 << 20  # files up to this size are hashed whole; larger ones by header + samples
_SAMPLE_BYTES = 1 << 20
_SAMPLES = 16


def finished_packs(out_dir: str) -> int:
  """Pack records in ``out_dir``'s records file (0 if there is none), read without opening it for resume."""
  path = os.path.join(out_dir, RECORDS_FILE)
  if not os.path.exists(path):
    return 0
  with open(path, "rb") as f:
    return sum(1 for line in f if line.startswith(b'{"record":"pack"') and line.endswith(b"\n"))


class RecordsMismatch(ValueError):
  """The directory holds records of a different evaluation (another config, engine or checkpoint)."""


def _canonical(x: Any) -> Any:
  """JSON-normalized ``x`` (tuples -> lists, keys as strings) so fingerprints compare after a round trip."""
  return json.loads(json.dumps(x, sort_keys=True, default=str))


def _file_digest(path: str) -> str:
  size = os.path.getsize(path)
  h = hashlib.sha256(str(size).encode())
  with open(path, "rb") as f:
    if size <= _FULL_HASH_BYTES:
      for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
    else:  # a multi-GB shard: its first MiB (the safetensors header) and evenly spaced samples of the rest
      for i in range(_SAMPLES):
        f.seek((size - _SAMPLE_BYTES) * i // (_SAMPLES - 1))
        h.update(f.read(_SAMPLE_BYTES))
  return h.hexdigest()


def checkpoint_digest(path: str) -> dict[str, str]:
  """{file name: content digest} of an HF checkpoint directory's weights, config and tokenizer files
  (whole-file SHA-256 up to 64 MiB per file; larger shards are sampled: 16 MiB spread over the file, which any
  training step changes)."""
  if not os.path.isdir(path):
    raise FileNotFoundError(f"checkpoint directory {path!r} does not exist")
  names = sorted(n for n in os.listdir(path) if n.endswith((".safetensors", ".json", ".bin", ".model", ".txt",
                                                              ".jinja")))
  return {n: _file_digest(os.path.join(path, n)) for n in names if os.path.isfile(os.path.join(path, n))}


def eval_fingerprint(cfg, *, engine: str, checkpoint: str | None = None, served_model: str = "",
                     options: dict | None = None) -> dict:
  """What an evaluation is (module docstring): config, engine, checkpoint digest or served model, options."""
  return _canonical({"config": cfg.to_dict(), "engine": engine,
                     "checkpoint": checkpoint_digest(checkpoint) if checkpoint else None,
                     "served_model": served_model, "options": options or {}})


def _differences(a: Any, b: Any, path: str = "") -> Iterable[str]:
  if isinstance(a, dict) and isinstance(b, dict):
    for k in sorted(set(a) | set(b)):
      sub = f"{path}.{k}" if path else str(k)
      if k not in a or k not in b:
        yield f"{sub}: {'absent' if k not in a else json.dumps(a[k])[:80]} -> " \
              f"{'absent' if k not in b else json.dumps(b[k])[:80]}"
      else:
        yield from _differences(a[k], b[k], sub)
  elif a != b:
    yield f"{path}: {json.dumps(a)[:80]} -> {json.dumps(b)[:80]}"


class EvalRecords:
  """The records file of one evaluation directory (module docstring).

  ``EvalRecords(out_dir, fingerprint)`` creates the file, or opens an existing one whose header has the same
  fingerprint and reads the packs it already holds (``done``). ``append`` writes one finished pack.
  """

  def __init__(self, out_dir: str, fingerprint: dict):
    self.path = os.path.join(out_dir, RECORDS_FILE)
    self.fingerprint = _canonical(fingerprint)
    self._done: dict[tuple[str, int], dict] = {}
    os.makedirs(out_dir, exist_ok=True)
    if os.path.exists(self.path):
      self._load()
    else:
      self._write_line({"record": "header", "version": VERSION, "fingerprint": self.fingerprint})

  @property
  def resumed(self) -> int:
    """How many packs were already on disk when the file was opened (then: how many are on disk)."""
    return len(self._done)

  def _load(self) -> None:
    with open(self.path, "rb") as f:
      raw = f.read()
    lines = raw.split(b"\n")
    complete = lines[:-1]  # the text after the last newline is a write that was cut short (or empty)
    if lines[-1].strip():
      logging.warning("%s: dropping an incomplete last line of %d bytes (a write cut short)", self.path,
                      len(lines[-1]))
      with open(self.path, "rb+") as f:
        f.truncate(len(raw) - len(lines[-1]))
    if not complete:
      raise RecordsMismatch(f"{self.path} has no header line; it is not an evaluation records file (move it away "
                            f"or choose another --out)")
    rows = []
    for n, line in enumerate(complete, 1):
      try:
        rows.append(json.loads(line))
      except ValueError as e:
        raise ValueError(f"{self.path}, line {n}: not a JSON record ({e}); the file is damaged: move it away to "
                         f"start this evaluation over") from e
    head = rows[0]
    if head.get("record") != "header" or head.get("version") != VERSION:
      raise RecordsMismatch(f"{self.path}: line 1 is not a version-{VERSION} records header")
    if head["fingerprint"] != self.fingerprint and len(rows) == 1:  # no pack finished: nothing to keep
      logging.warning("%s: replacing the header of an evaluation that finished no pack", self.path)
      with open(self.path, "w"):
        pass
      self._write_line({"record": "header", "version": VERSION, "fingerprint": self.fingerprint})
      return
    if head["fingerprint"] != self.fingerprint:
      diff = list(_differences(head["fingerprint"], self.fingerprint))
      shown = "\n  ".join(diff[:12]) + (f"\n  ... and {len(diff) - 12} more" if len(diff) > 12 else "")
      raise RecordsMismatch(f"{self.path} holds records of a different evaluation; refusing to mix them. "
                            f"Differences (recorded -> now):\n  {shown}\nUse another --out directory, or move "
                            f"the old records away to start over.")
    for n, row in enumerate(rows[1:], 2):
      if row.get("record") != "pack":
        raise ValueError(f"{self.path}, line {n}: unknown record kind {row.get('record')!r}")
      self._done[(row["env"], int(row["index"]))] = row

  def _write_line(self, row: dict) -> None:
    line = json.dumps(row, separators=(",", ":")) + "\n"
    with open(self.path, "a") as f:
      f.write(line)
      f.flush()
      os.fsync(f.fileno())

  def done(self, label: str) -> set[int]:
    """Indices of ``label``'s packs already on disk."""
    return {k for (env, k) in self._done if env == label}

  def get(self, label: str, index: int, pack) -> dict:
    """The trajectory record of pack ``index`` of ``label``, checked against the pack it must belong to."""
    row = self._done[(label, index)]
    if int(row["pack_seed"]) != int(pack.pack_seed) or [int(s) for s in row["task_seeds"]] != list(pack.task_seeds):
      raise RecordsMismatch(f"{self.path}: the record of {label} pack {index} has pack seed {row['pack_seed']} "
                            f"and tasks {row['task_seeds']}, but this evaluation's pack {index} has "
                            f"{pack.pack_seed} and {list(pack.task_seeds)} (the evaluation data changed)")
    return row["trajectory"]

  def append(self, label: str, index: int, pack, trajectory: dict) -> None:
    """Writes one finished pack (flushed and fsynced before returning)."""
    row = {"record": "pack", "env": label, "index": int(index), "pack_seed": int(pack.pack_seed),
           "task_seeds": [int(s) for s in pack.task_seeds], "trajectory": trajectory}
    self._write_line(row)
    self._done[(label, int(index))] = _canonical(row)
