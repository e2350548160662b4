"""The random tiny base model of a CPU demo (``model.make_tiny``): one directory per generating settings.

A generated model is fixed by three things: the architecture and tokenizer fields of ``model.tiny``,
``model.init_seed``, and the tokenizer's corpus (scripted-expert transcripts of the configured environments played
through the configured workflow; it follows ``seed``, ``data.envs``, ``data.pack_size``, ``model.tiny.corpus_packs``,
``sft.teacher_params`` and the workflow's own block). The directory records them in ``generated_by.json`` (the
corpus by those settings and the SHA-256 of its text), so what a model is can always be read back, and the run's
``config.json`` copies the record under ``base_model``.

Where the model goes:

  model.path = ''   (the demos' default) ``<parent of run_dir>/base_models/<name>-<key>``, ``key`` a short hash
                    of the three things: a config that generates another model gets another directory, one that
                    generates the same model reuses it, whatever the run directory.
  model.path = DIR  the model is written to DIR when DIR holds none; a model there whose record differs from
                    what the config generates, or that has no record, is refused with the differing fields and
                    the fixes (never trained silently in place of the configured one).

The corpus is rebuilt on every start (1-4 s for the demos) and compared by its hash, so no setting that shapes it
can be missed. Workflows that keep state in the run directory (EvoHarness' bank) build it as a fresh run does, in
a scratch directory, so a resumed run finds the model its first start generated.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile

from codjax.parallel import multihost

RECORD = "generated_by.json"
MODELS_DIR = "base_models"


class BaseModelError(ValueError):
  """The configured base model cannot be used (missing, or generated with other settings)."""


def _plain(x):
  """A JSON round trip (ConfigDicts and tuples become dicts and lists), for comparing recorded values."""
  if hasattr(x, "to_dict"):
    x = x.to_dict()
  return json.loads(json.dumps(x, sort_keys=True, default=str))


def tiny_corpus(cfg) -> list[str]:
  """The tiny tokenizer's training texts: the scripted experts' transcripts of the configured environments, played
  through the configured workflow (CoD packs, or ORBIT's multi-episode conversations), one text per message with
  the role name first as in the chat template."""
  from codjax.agents.cod import run_text_packs, text_packs
  from codjax.agents.episode import PolicyBackend
  from codjax.workflows import get_workflow
  from codjax.workflows.packs import env_specs
  from codjax.workflows.scripted import configured_teacher

  workflow = get_workflow(str(cfg.workflow))
  scratch = None
  if hasattr(workflow, "prepare"):  # the workflow's initial state, as a fresh run prepares it
    scratch = tempfile.mkdtemp(prefix="codjax-corpus-")
    cfg = cfg.copy_and_resolve_references()
    cfg.run_dir = scratch
    workflow.prepare(cfg)
  try:
    corpus = []
    n, size = int(cfg.model.tiny.corpus_packs), int(cfg.data.pack_size)
    for spec in env_specs(cfg.data.envs):
      teacher = configured_teacher(cfg, spec.name)
      if str(cfg.workflow) == "cod":
        trajs = run_text_packs(teacher, spec.family, range(n), size, env_name=spec.name, seed=cfg.seed)
      else:
        packs = text_packs(spec.family, range(n), size, env_name=spec.name)
        trajs = workflow.rollout(PolicyBackend(teacher, cfg.seed), packs, 1, cfg)
      for t in trajs:
        for ep in t.episodes():
          corpus += [f"{m['role']}\n{m['content']}" for m in ep.messages]  # role names as in the template
    return corpus
  finally:
    if scratch:
      shutil.rmtree(scratch, ignore_errors=True)


def corpus_settings(cfg) -> dict:
  """The config fields the tokenizer corpus follows (recorded to name what differs; the hash decides)."""
  wf = str(cfg.workflow)
  out = {"seed": int(cfg.seed), "workflow": wf,
         "data.envs": {label: {"name": e.name, "preset": e.preset, "params": _plain(e.params)}
                       for label, e in cfg.data.envs.items()},
         "data.pack_size": int(cfg.data.pack_size), "model.tiny.corpus_packs": int(cfg.model.tiny.corpus_packs),
         "sft.teacher_params": _plain(cfg.sft.teacher_params)}
  if wf in cfg and wf not in ("model", "data", "sft"):
    out[wf] = _plain(cfg[wf])
  return _plain(out)


def generating_settings(cfg, corpus: list[str]) -> dict:
  """What generates the model: ``tiny`` (the ``model.tiny`` fields but the corpus size), ``init_seed``, and
  ``corpus`` (its settings, number of texts and SHA-256)."""
  tiny = {k: v for k, v in _plain(cfg.model.tiny).items() if k != "corpus_packs"}
  digest = hashlib.sha256("\n\x00".join(corpus).encode()).hexdigest()
  return {"tiny": tiny, "init_seed": int(cfg.model.init_seed),
          "corpus": {**corpus_settings(cfg), "texts": len(corpus), "sha256": digest}}


def settings_key(settings: dict) -> str:
  """A 12-hex-digit hash of what makes the model (architecture, init seed, corpus text)."""
  core = {"tiny": settings["tiny"], "init_seed": settings["init_seed"], "corpus": settings["corpus"]["sha256"]}
  return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()[:12]


def keyed_dir(cfg, settings: dict) -> str:
  """``<parent of run_dir>/base_models/<name>-<key>`` (relative when run_dir is)."""
  parent = os.path.dirname(os.path.normpath(str(cfg.run_dir)))
  return os.path.join(parent, MODELS_DIR, f"{cfg.name}-{settings_key(settings)}")


def read_record(path: str) -> dict | None:
  """A generated model's ``generated_by.json``, or None when the directory has none."""
  p = os.path.join(path, RECORD)
  if not os.path.isfile(p):
    return None
  with open(p) as f:
    return json.load(f)


def differences(recorded: dict, wanted: dict) -> list[str]:
  """The config fields whose values differ between two generating settings, as ``field: old -> new``."""
  out = []
  tiny_keys = sorted(set(recorded.get("tiny", {})) | set(wanted["tiny"]))
  for k in tiny_keys:
    a, b = recorded.get("tiny", {}).get(k), wanted["tiny"].get(k)
    if a != b:
      out.append(f"model.tiny.{k}: {a!r} -> {b!r}")
  if recorded.get("init_seed") != wanted["init_seed"]:
    out.append(f"model.init_seed: {recorded.get('init_seed')!r} -> {wanted['init_seed']!r}")
  rc, wc = recorded.get("corpus", {}), wanted["corpus"]
  if rc.get("sha256") != wc["sha256"]:
    named = [f"{k}: {rc.get(k)!r} -> {wc[k]!r}" for k in wc if k not in ("texts", "sha256") and rc.get(k) != wc[k]]
    out += named or ["the tokenizer corpus (same recorded settings, other transcripts)"]
  return out


def _write(path: str, cfg, corpus: list[str], settings: dict) -> None:
  """Generates the model into a sibling scratch directory and renames it into place (an interrupted write leaves
  no half model at ``path``)."""
  from codjax.models.tiny import make_tiny_checkpoint

  parent = os.path.dirname(os.path.abspath(path))
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=os.path.basename(path) + ".tmp-", dir=parent)
  try:
    tiny = dict(cfg.model.tiny)
    tiny.pop("corpus_packs")
    vocab = tiny.pop("vocab_size")
    make_tiny_checkpoint(tmp, corpus=corpus, vocab_size=vocab, seed=int(cfg.model.init_seed),
                         model_preset=tiny.pop("preset", "tiny"), **tiny)
    with open(os.path.join(tmp, RECORD), "w") as f:
      json.dump(settings, f, indent=2)
    if os.path.isdir(path) and not os.listdir(path):
      os.rmdir(path)
    try:
      os.rename(tmp, path)
    except OSError:
      if read_record(path) is None:  # not a concurrent writer of the same model: a real failure
        raise
  finally:
    shutil.rmtree(tmp, ignore_errors=True)


def _generate_or_reuse(cfg) -> str:
  explicit = str(cfg.model.path)
  corpus = tiny_corpus(cfg)
  settings = generating_settings(cfg, corpus)
  path = explicit or keyed_dir(cfg, settings)
  if os.path.isfile(os.path.join(path, "config.json")):
    recorded = read_record(path)
    if recorded is None:
      raise BaseModelError(
          f"model.path={path!r} holds a model without {RECORD} (not generated by model.make_tiny, or by an older "
          "version), so it cannot be checked against this config: set model.make_tiny=False to train it as it is, "
          "or model.path='' (a directory per settings), or delete it")
    diff = differences(recorded, settings)
    if diff:
      raise BaseModelError(
          f"model.path={path!r} holds a tiny model generated with other settings ({'; '.join(diff)}): set "
          "model.path='' (a directory per settings), choose another model.path, or delete that directory")
    return path
  if os.path.isdir(path) and os.listdir(path):
    raise BaseModelError(f"model.path={path!r} exists but holds no model (no config.json): choose another "
                         "model.path or delete that directory")
  _write(path, cfg, corpus, settings)
  return path


def resolve_base_model(cfg) -> str:
  """The HF directory the run starts from (``model.path``, or the generated tiny model's directory; module
  docstring), generating it first when needed. With several processes, process 0 generates and checks, and every
  process gets its path or its error. Raises ``BaseModelError`` naming ``model.path`` and the fix."""
  m = cfg.model
  if not m.make_tiny:
    path = str(m.path)
    if path and not os.path.isfile(os.path.join(path, "config.json")):
      raise BaseModelError(f"model.path={path!r} is not an HF checkpoint directory (no config.json there): point "
                           "it at one, or set model.make_tiny=True to generate a random tiny model")
    return path
  path = err = None
  if multihost.is_primary():
    try:
      path = _generate_or_reuse(cfg)
    except BaseModelError as e:
      err = str(e)
  path, err = multihost.broadcast_json([path, err])
  if err:
    raise BaseModelError(err)
  return path
