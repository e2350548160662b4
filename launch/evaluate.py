"""CoD-Deploy evaluation (cod_reference.md sec. 5): one trajectory per test pack, mean reward +- s.e. per
position.

The packs, the workflow (CoD, or ORBIT's multi-episode protocol) and its summary are exactly those of the
trainer's periodic evaluation (``codjax.train.loop.Trainer.evaluate``): the first ``eval.num_packs`` packs
of ``eval.pack_size`` rows of each evaluation environment's ``eval.split`` (``eval.envs``, else
``data.envs``), rolled out once with ``workflow.rollout`` at ``eval.temperature`` and summarized with
``workflow.summarize``. What is evaluated is chosen with ``--engine``:

  jax | vllm     the checkpoint ``model.path`` (an HF directory) on the JAX sampler or in-process vLLM
  openai         a served model (``--base_url``, ``--model_name``), through its chat endpoint
  expert|random  each environment's scripted policy (``codjax.envs.experts.make_policy``)

Without ``--engine`` the config's ``rollout.engine`` is used. The checkpoint engines apply the config's
token budgets (``rollout.max_prompt_tokens``, ``rollout.max_response_tokens``), as in training. Text policies
(openai, expert, random) are never cut by codjax (a server applies its own limits); when a tokenizer is
available (``--tokenizer``, else ``model.path``) their conversations are tokenized with it
(``TokenizingBackend``) so the token counts are reported, otherwise token counts are 0.

  python launch/evaluate.py --config=experiments/eval_frozenlake_hard.py --config.model.path=CKPT --out=DIR
  python launch/evaluate.py --config=experiments/tiny_cod_frozenlake.py --engine=expert --out=DIR
  python launch/evaluate.py --config=experiments/tiny_cod_frozenlake.py --engine=expert --expert_random_frac=0.2 \
      --out=DIR   # the SFT teacher of sft.expert_random_frac=0.2
  python launch/evaluate.py --config=experiments/eval_terminal.py --engine=openai \\
      --base_url=http://localhost:8000/v1 --model_name=Qwen/Qwen3-8B --out=DIR

Writes ``DIR/eval.json`` (``{"meta": ..., "results": {env label: summary}}``; for CoD each summary holds
``reward_mean``/``reward_se`` per position, ``format_error_rate`` per position, ``hint_parse_rate``,
``generated_tokens``, ``response_tokens_mean``, ``truncated_episodes``) and prints the table.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from absl import app, flags
from ml_collections import config_flags

from codjax.train import host_allocator

ENGINES = ("jax", "vllm", "openai", "expert", "random")
UNBOUNDED = 1 << 40

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiment config file", lock_config=True)
_ENGINE = flags.DEFINE_enum("engine", None, ENGINES, "what to evaluate (default: the config's rollout.engine)")
_OUT = flags.DEFINE_string("out", None, "output directory for eval.json")
_LABEL = flags.DEFINE_string("label", "", "row label prefix in the printed table (default: engine and model)")
_BASE_URL = flags.DEFINE_string("base_url", "", "openai: server URL including the API prefix, e.g. .../v1")
_MODEL_NAME = flags.DEFINE_string("model_name", "", "openai: the served model's name")
_CONCURRENCY = flags.DEFINE_integer("concurrency", 32, "openai: requests in flight")
_TIMEOUT = flags.DEFINE_float("timeout_s", 600.0, "openai: seconds per request attempt")
_RANDOM_FRAC = flags.DEFINE_float("expert_random_frac", 0.0, "expert: answer this fraction of solve turns with "
                                  "the random policy (the SFT teacher of sft.expert_random_frac)")
_TOKENIZER = flags.DEFINE_string("tokenizer", "", "text policies: tokenizer directory for token counts "
                                 "(default: model.path when it holds one)")
_HOST_ALLOCATOR = host_allocator.define_flag()


def sampling_params(cfg):
  """The evaluation sampling parameters (as the trainer's evaluation uses them)."""
  from codjax.rollout.base import SamplingParams

  r = cfg.rollout
  return SamplingParams(temperature=float(cfg.eval.temperature), top_p=float(cfg.eval.top_p), top_k=int(r.top_k),
                        max_tokens=int(r.max_response_tokens))


def eval_specs(cfg):
  from codjax.train.data import env_specs

  return env_specs(cfg.eval.envs) if len(cfg.eval.envs) else env_specs(cfg.data.envs)


def eval_seed(cfg) -> int:
  """The sampling seed of the trainer's evaluation (``Trainer.evaluate``), so both draw the same keys."""
  from codjax.envs.base import derive_seed

  return derive_seed(int(cfg.seed), 99991)


def _tokenizer(cfg):
  """``--tokenizer``, else the tokenizer of ``model.path`` when that directory exists, else None."""
  from codjax.models.tokenizer import load_tokenizer

  if _TOKENIZER.value:
    return load_tokenizer(_TOKENIZER.value)
  path = str(cfg.model.path)
  return load_tokenizer(path) if path and os.path.isdir(path) else None


class _ModelEngine:
  """The checkpoint on the JAX sampler or vLLM, behind one ``EngineBackend`` for all environments."""

  def __init__(self, cfg, engine_name: str):
    from codjax.agents.token_backend import EngineBackend
    from codjax.models import from_pretrained
    from codjax.models.tokenizer import load_tokenizer
    from codjax.parallel import maybe_initialize_distributed, mesh_from_config
    from codjax.train.config import validate
    from codjax.train.engines import build_engine

    validate(cfg)
    path = str(cfg.model.path)
    if not path or not os.path.isfile(os.path.join(path, "config.json")):
      raise ValueError(f"--engine={engine_name} evaluates a checkpoint: set --config.model.path to an HF "
                       f"directory (got {path!r})")
    maybe_initialize_distributed()
    mesh = mesh_from_config(cfg.mesh)
    model = from_pretrained(path, dtype=str(cfg.model.dtype), mesh=mesh, attention_impl=str(cfg.model.attention_impl),
                            scan_layers=bool(cfg.model.scan_layers))
    rollout = cfg.rollout.copy_and_resolve_references()
    rollout.engine = engine_name
    self.engine = build_engine(rollout, model, path, mesh, seed=int(cfg.seed))
    self.backend = EngineBackend(self.engine, load_tokenizer(path), sampling_params(cfg),
                                 max_prompt_tokens=int(cfg.rollout.max_prompt_tokens), seed=eval_seed(cfg))

  def backend_for(self, spec):
    del spec
    return self.backend

  def close(self):
    self.engine.close()


class _TextPolicies:
  """Scripted policies (one per environment) or a served model, optionally token-counted."""

  def __init__(self, cfg, engine_name: str):
    self.cfg = cfg
    self.kind = engine_name
    self.tok = _tokenizer(cfg)
    self.server = None
    if engine_name == "openai":
      from codjax.rollout.openai_engine import OpenAIBackend, OpenAIEngine

      if not _BASE_URL.value or not _MODEL_NAME.value:
        raise ValueError("--engine=openai needs --base_url and --model_name")
      self.server = OpenAIEngine(_BASE_URL.value, _MODEL_NAME.value, max_concurrency=_CONCURRENCY.value,
                                 timeout_s=_TIMEOUT.value)
      params = sampling_params(cfg)
      params = dataclasses.replace(params, seed=eval_seed(cfg) % 2**31)
      self.server_backend = OpenAIBackend(self.server, params)

  def backend_for(self, spec):
    from codjax.agents.episode import PolicyBackend
    from codjax.agents.token_backend import TokenizingBackend
    from codjax.envs.experts import make_policy
    from codjax.train.sft import configured_teacher

    if self.server is not None:
      inner = self.server_backend
    else:
      policy = (configured_teacher(self.cfg, spec.name, _RANDOM_FRAC.value) if self.kind == "expert"
                else make_policy(spec.name, self.kind))
      inner = PolicyBackend(policy, seed=int(self.cfg.seed))
    if self.tok is None:
      return inner
    return TokenizingBackend(inner, self.tok, max_prompt_tokens=UNBOUNDED)  # counted, never cut

  def close(self):
    if self.server is not None:
      self.server.close()


def evaluate(cfg, engine_name: str) -> tuple[dict, dict]:
  """Rolls out and summarizes every evaluation environment; returns ({label: summary}, meta)."""
  from codjax.train.data import eval_packs
  from codjax.train.workflows import get_workflow

  if engine_name not in ENGINES:
    raise ValueError(f"engine must be one of {ENGINES}, got {engine_name!r}")
  workflow = get_workflow(str(cfg.workflow))
  specs = eval_specs(cfg)
  ev, d = cfg.eval, cfg.data
  packs = {s.label: eval_packs(s, int(ev.num_packs), int(ev.pack_size), int(d.n_train), int(d.n_test),
                               int(d.split_seed), split=str(ev.split)) for s in specs}
  runner = _ModelEngine(cfg, engine_name) if engine_name in ("jax", "vllm") else _TextPolicies(cfg, engine_name)
  results, seconds = {}, {}
  try:
    for spec in specs:
      t0 = time.perf_counter()
      trajs = workflow.rollout(runner.backend_for(spec), packs[spec.label], 1, cfg)
      results[spec.label] = workflow.summarize(trajs)
      seconds[spec.label] = time.perf_counter() - t0
  finally:
    runner.close()
  meta = {"engine": engine_name, "config": str(cfg.name), "workflow": str(cfg.workflow),
          "model_path": str(cfg.model.path) if engine_name in ("jax", "vllm") else "",
          "served_model": _MODEL_NAME.value if engine_name == "openai" else "",
          "num_packs": int(ev.num_packs), "pack_size": int(ev.pack_size), "split": str(ev.split),
          "temperature": float(ev.temperature), "seed": int(cfg.seed),
          "envs": {s.label: {"name": s.name, "preset": s.preset, "params": s.params} for s in specs},
          "pack_seeds": {label: [p.pack_seed for p in ps] for label, ps in packs.items()},
          "wall_s": seconds}
  return results, meta


def main(argv):
  del argv
  host_allocator.keep_freed_memory(_HOST_ALLOCATOR.value)  # before JAX starts its threads
  cfg = _CONFIG.value
  engine_name = _ENGINE.value or str(cfg.rollout.engine)
  results, meta = evaluate(cfg, engine_name)
  os.makedirs(_OUT.value, exist_ok=True)
  path = os.path.join(_OUT.value, "eval.json")
  with open(path, "w") as f:
    json.dump({"meta": meta, "results": results}, f, indent=2)
  from codjax.train.workflows import get_workflow

  who = _LABEL.value or (engine_name if engine_name not in ("jax", "vllm")
                         else f"{engine_name}:{os.path.basename(os.path.normpath(str(cfg.model.path)))}")
  print(get_workflow(str(cfg.workflow)).table({f"{who} / {label}": r for label, r in results.items()}))
  print(f"wrote {path}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["config", "out"])
  app.run(main)
