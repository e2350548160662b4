"""The one evaluation path: the trainer's periodic evaluation (``Trainer.evaluate``) and
``launch/evaluate.py`` both call ``run_evaluation`` (or ``evaluate_engine`` for a token engine).

What an evaluation is, fixed here once from the config:

  specs     ``eval.envs``, else ``data.envs``
  packs     the first ``eval.num_packs`` packs of ``eval.pack_size`` rows of each environment's ``eval.split``,
            grouped by ``eval.packing`` (``cod``: S distinct tasks; ``ralph_sample``: each pack's first task S
            times; ``ralph_full``: every row a pack of S copies; cod_reference.md sec. 1.1), the same for
            every checkpoint (``codjax.train.data.eval_packs``)
  sampling  temperature ``eval.temperature``, top-p ``eval.top_p``, top-k ``rollout.top_k``, at most
            ``rollout.max_response_tokens`` per reply and ``rollout.max_prompt_tokens`` per conversation
  seed      ``derive_seed(seed, 99991)``: request i of an evaluation samples with ``derive_seed(that, i)``, so
            two checkpoints are compared on the same packs with the same sampling keys (paired differences)
  template  the chat-template arguments ``{"enable_thinking": model.enable_thinking}`` (Qwen3's switch; the
            paper's Table 1 evaluates with thinking disabled), for every backend that tokenizes
  rollout   one trajectory per pack (``workflow.rollout(backend, packs, 1, cfg)``), then
            ``workflow.summarize`` per environment

The caller only chooses what answers: a token engine with the policy's tokenizer (``evaluate_engine``, used by
the trainer after pushing its current weights and by the launcher's jax/vllm engines), or any ``Backend``
per environment (scripted policies, a served model; ``run_evaluation``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from codjax.agents.token_backend import EngineBackend, TokenizingBackend
from codjax.envs.base import derive_seed
from codjax.rollout.base import SamplingParams
from codjax.train.data import EnvSpec, env_specs, eval_packs
from codjax.train.workflows import get_workflow

EVAL_SEED_SALT = 99991
UNBOUNDED_TOKENS = 1 << 40


@dataclasses.dataclass
class Evaluation:
  """``results``: {env label: workflow summary}; ``meta``: what was evaluated (config, packs, seeds, timing)."""

  results: dict[str, dict]
  meta: dict


def eval_seed(cfg) -> int:
  """The evaluation's sampling seed (the same for every checkpoint of a run and for the launcher)."""
  return derive_seed(int(cfg.seed), EVAL_SEED_SALT)


def template_kwargs(cfg) -> dict:
  """Chat-template arguments of the policy's tokenizer (training and evaluation alike)."""
  return {"enable_thinking": bool(cfg.model.enable_thinking)}


def sampling_params(cfg) -> SamplingParams:
  """The evaluation's sampling parameters (unseeded: the backend seeds each request)."""
  return SamplingParams(temperature=float(cfg.eval.temperature), top_p=float(cfg.eval.top_p),
                        top_k=int(cfg.rollout.top_k), max_tokens=int(cfg.rollout.max_response_tokens))


def eval_specs(cfg) -> list[EnvSpec]:
  return env_specs(cfg.eval.envs) if len(cfg.eval.envs) else env_specs(cfg.data.envs)


def eval_pack_sets(cfg, specs: list[EnvSpec]) -> dict[str, list]:
  """{label: packs} of every evaluation environment (module docstring)."""
  ev, d = cfg.eval, cfg.data
  return {s.label: eval_packs(s, int(ev.num_packs), int(ev.pack_size), int(d.n_train), int(d.n_test),
                              int(d.split_seed), split=str(ev.split), packing=str(ev.packing)) for s in specs}


def engine_backend(cfg, engine, tokenizer) -> EngineBackend:
  """A fresh evaluation backend over a token engine (seeded from the start: every evaluation draws the same
  keys)."""
  return EngineBackend(engine, tokenizer, sampling_params(cfg), max_prompt_tokens=int(cfg.rollout.max_prompt_tokens),
                       seed=eval_seed(cfg), template_kwargs=template_kwargs(cfg))


def token_counting_backend(cfg, inner, tokenizer) -> TokenizingBackend:
  """A text backend (scripted policy, served model) whose conversations are tokenized with the policy's
  chat template and arguments, so token counts are reported; never cut (a server applies its own limits)."""
  return TokenizingBackend(inner, tokenizer, max_prompt_tokens=UNBOUNDED_TOKENS, template_kwargs=template_kwargs(cfg))


def run_evaluation(cfg, backend_for: Callable[[EnvSpec], object]) -> Evaluation:
  """Rolls out one trajectory per evaluation pack of every environment with ``backend_for(spec)`` and
  summarizes each environment with the config's workflow."""
  workflow = get_workflow(str(cfg.workflow))
  specs = eval_specs(cfg)
  packs = eval_pack_sets(cfg, specs)
  results, seconds = {}, {}
  for spec in specs:
    t0 = time.perf_counter()
    trajs = workflow.rollout(backend_for(spec), packs[spec.label], 1, cfg)
    results[spec.label] = workflow.summarize(trajs)
    seconds[spec.label] = time.perf_counter() - t0
  ev = cfg.eval
  meta = {"config": str(cfg.name), "workflow": str(cfg.workflow), "num_packs": int(ev.num_packs),
          "pack_size": int(ev.pack_size), "packing": str(ev.packing), "split": str(ev.split),
          "temperature": float(ev.temperature), "top_p": float(ev.top_p), "seed": int(cfg.seed),
          "eval_seed": eval_seed(cfg), "template_kwargs": template_kwargs(cfg),
          "envs": {s.label: {"name": s.name, "preset": s.preset, "params": s.params} for s in specs},
          "pack_seeds": {label: [p.pack_seed for p in ps] for label, ps in packs.items()},
          "wall_s": seconds}
  return Evaluation(results, meta)


def evaluate_engine(cfg, engine, tokenizer) -> Evaluation:
  """``run_evaluation`` with one ``engine_backend`` for every environment: a checkpoint on a token engine."""
  backend = engine_backend(cfg, engine, tokenizer)
  return run_evaluation(cfg, lambda spec: backend)
