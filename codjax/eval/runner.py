"""The one evaluation path: the trainer's periodic evaluation (``Trainer.evaluate``) and
``launch/evaluate.py`` both call ``run_evaluation`` (or ``evaluate_engine`` for a token engine).

What an evaluation is, fixed here once from the config:

  specs     ``eval.envs``, else ``data.envs``
  packs     the first ``eval.num_packs`` packs of ``eval.pack_size`` rows of each environment's ``eval.split``,
            grouped by ``eval.packing`` (``cod``: S distinct tasks; ``ralph_sample``: each pack's first task S
            times; ``ralph_full``: every row a pack of S copies; docs/methods/cod.md), the same for
            every checkpoint (``codjax.workflows.packs.eval_packs``)
  sampling  temperature ``eval.temperature``, top-p ``eval.top_p``, top-k ``rollout.top_k``, at most
            ``rollout.max_response_tokens`` per reply and ``rollout.max_prompt_tokens`` per conversation
  seed      ``derive_seed(seed, 99991)``; every reply samples with ``episode_turn_seed(that, episode)``, a
            function of the episode's identity (environment, pack, kind, position) and turn alone, so two
            checkpoints are compared on the same packs with the same sampling keys (paired differences), and
            neither the batch composition (concurrency, cache slots) nor a resume changes any draw
  template  the chat-template arguments ``{"enable_thinking": model.enable_thinking}`` (Qwen3's switch; the
            paper's Table 1 evaluates with thinking disabled), for every backend that tokenizes
  rollout   one trajectory per pack (``workflow.rollout(backend, packs, 1, cfg)``), then
            ``workflow.summarize`` per environment

The caller only chooses what answers: a token engine with the policy's tokenizer (``evaluate_engine``, used by
the trainer after pushing its current weights and by the launcher's jax/vllm engines), or any ``Backend``
per environment (scripted policies, a served model; ``run_evaluation``). With an ``EvalRecords`` file every
finished pack is saved at once and a rerun into the same directory resumes (``codjax.eval.records``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from codjax.agents.token_backend import EngineBackend, TokenizingBackend
from codjax.envs.base import derive_seed
from codjax.eval.records import EvalRecords
from codjax.rollout.base import SamplingParams
from codjax.workflows import get_workflow
from codjax.workflows.packs import EnvSpec, env_specs, eval_packs

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
  """An evaluation backend over a token engine; each reply samples with ``episode_turn_seed(eval_seed, episode)``
  (``seed_by="episode"``), so its draws do not depend on which other episodes share an engine call."""
  return EngineBackend(engine, tokenizer, sampling_params(cfg), max_prompt_tokens=int(cfg.rollout.max_prompt_tokens),
                       seed=eval_seed(cfg), template_kwargs=template_kwargs(cfg), seed_by="episode")


def token_counting_backend(cfg, inner, tokenizer) -> TokenizingBackend:
  """A text backend (scripted policy, served model) whose conversations are tokenized with the policy's
  chat template and arguments, so token counts are reported; never cut (a server applies its own limits)."""
  return TokenizingBackend(inner, tokenizer, max_prompt_tokens=UNBOUNDED_TOKENS, template_kwargs=template_kwargs(cfg))


def run_evaluation(cfg, backend_for: Callable[[EnvSpec], object], records: EvalRecords | None = None,
                   progress: bool = True) -> Evaluation:
  """Rolls out one trajectory per evaluation pack of every environment with ``backend_for(spec)`` and
  summarizes each environment with the config's workflow.

  With ``records`` every pack is written to the records file the moment it finishes, packs already there are
  not rolled out again, and the summaries are computed from the records read back (``codjax.eval.records``):
  an interrupted evaluation resumed in the same directory gives the table of an uninterrupted one.
  ``progress`` shows a bar per environment (packs done, rate, estimate)."""
  from codjax.common import interrupts
  from codjax.common.metrics import Progress

  workflow = get_workflow(str(cfg.workflow))
  specs = eval_specs(cfg)
  packs = eval_pack_sets(cfg, specs)
  results, seconds, resumed = {}, {}, {}
  for spec in specs:
    t0 = time.perf_counter()
    label, ps = spec.label, packs[spec.label]
    done = records.done(label) if records is not None else set()
    todo = [k for k in range(len(ps)) if k not in done]
    resumed[label] = len(ps) - len(todo)
    bar = Progress(len(ps), resumed[label], enabled=progress and bool(todo), desc=f"eval {label}", unit="pack",
                   fractional=True)
    finished = [0]  # packs finished in this call: the bar never shows less, whatever the workflow reports

    def on_done(j, traj, label=label, ps=ps, todo=todo, bar=bar, finished=finished):
      if records is not None:
        records.append(label, todo[j], ps[todo[j]], workflow.to_record(traj))
      finished[0] += 1
      bar.advance_to(resumed[label] + finished[0])
      interrupts.check()  # a SIGTERM whose exception a gc callback dropped stops here, after the record

    def on_progress(x, label=label, bar=bar):  # fractional packs: long episodes move the bar as they run
      bar.advance_to(resumed[label] + x)

    try:
      trajs = workflow.rollout(backend_for(spec), [ps[k] for k in todo], 1, cfg, on_done=on_done,
                               on_progress=on_progress) if todo else []
    finally:
      bar.close()
    if records is not None:
      trajs = [workflow.from_record(records.get(label, k, p), p, cfg) for k, p in enumerate(ps)]
    results[label] = workflow.summarize(trajs)
    seconds[label] = time.perf_counter() - t0
  ev = cfg.eval
  meta = {"config": str(cfg.name), "workflow": str(cfg.workflow), "num_packs": int(ev.num_packs),
          "pack_size": int(ev.pack_size), "packing": str(ev.packing), "split": str(ev.split),
          "temperature": float(ev.temperature), "top_p": float(ev.top_p), "seed": int(cfg.seed),
          "eval_seed": eval_seed(cfg), "template_kwargs": template_kwargs(cfg),
          "envs": {s.label: {"name": s.name, "preset": s.preset, "params": s.params} for s in specs},
          "pack_seeds": {label: [p.pack_seed for p in ps] for label, ps in packs.items()},
          "wall_s": seconds, "resumed_packs": resumed}
  return Evaluation(results, meta)


def evaluate_engine(cfg, engine, tokenizer, records: EvalRecords | None = None, progress: bool = True) -> Evaluation:
  """``run_evaluation`` with one ``engine_backend`` for every environment: a checkpoint on a token engine."""
  backend = engine_backend(cfg, engine, tokenizer)
  return run_evaluation(cfg, lambda spec: backend, records, progress)
