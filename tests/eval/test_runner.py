"""The one evaluation path (codjax/eval/runner.py): the trainer's evaluation and launch/evaluate.py send the
engine the same first prompt, rendered with the config's chat-template arguments (Qwen3 thinking off when
``model.enable_thinking=False``) and from a model loaded with the config's dtypes; text policies and served
models get the same template arguments; ``eval.packing`` selects the Ralph loop."""

import http.server
import json
import os
import shutil
import threading

import jax
import pytest
from flax import nnx

from codjax.agents.episode import PolicyBackend
from codjax.envs.experts import make_policy
from codjax.eval.runner import eval_pack_sets, eval_specs, run_evaluation
from codjax.models.tokenizer import load_tokenizer
from codjax.train.config import ConfigError, base_config, env_entry, override, validate

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# The chat template published with the Qwen3 tokenizers (Qwen/Qwen3-8B tokenizer_config.json "chat_template").
QWEN3_CHAT_TEMPLATE = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""
GEN_PROMPT = "<|im_start|>assistant\n"
NO_THINK = "<think>\n\n</think>\n\n"



@pytest.fixture(scope="module")
def qwen3_ckpt(tiny_ckpt, tmp_path_factory):
  """The tiny random checkpoint (tests/conftest.py) with the real Qwen3 chat template in its tokenizer."""
  path = str(tmp_path_factory.mktemp("qwen3tmpl") / "m")
  shutil.copytree(tiny_ckpt, path)
  tok = load_tokenizer(path)
  tok.chat_template = QWEN3_CHAT_TEMPLATE
  tok.save_pretrained(path)
  assert load_tokenizer(path).chat_template == QWEN3_CHAT_TEMPLATE
  return path


def eval_config(run_dir, model_path, **over):
  c = base_config()
  c.name = "eval_path_test"
  c.run_dir = str(run_dir)
  c.seed = 5
  if model_path:
    c.model.path = str(model_path)
  else:  # text policies: no checkpoint
    c.model.preset = "tiny"
  c.model.dtype, c.model.param_dtype = "bfloat16", "float32"  # bf16 compute over fp32 weights (paper configs)
  c.data.envs = {"fl": env_entry("frozenlake_obscure", "tiny")}
  c.data.pack_size, c.data.repeats = 2, 2
  c.cod.protocol = "compact"
  c.rollout.max_response_tokens = 8
  c.rollout.max_prompt_tokens = 2048
  c.rollout.max_slots = 4
  c.train.seq_len = 2048
  c.total_steps = 0
  c.eval.num_packs, c.eval.pack_size = 2, 2
  c.checkpoint.every = 0
  c.log.progress = c.log.tensorboard = False
  return validate(override(c, over))


class _FirstGenerate(Exception):
  """Stops an evaluation at its first engine call (the prompts are what is compared)."""


class RecordingEngine:
  """Wraps a RolloutEngine: records the prompts of the first ``generate`` call, then stops the evaluation."""

  def __init__(self, inner, record: dict):
    self.inner = inner
    self.record = record

  def generate(self, prompts, params, **kw):
    self.record["prompts"] = [list(p) for p in prompts]
    raise _FirstGenerate

  def __getattr__(self, name):
    return getattr(self.inner, name)


def _recording_build_engine(real, record):
  def build(rollout_cfg, model, *a, **kw):
    record["model"] = model
    return RecordingEngine(real(rollout_cfg, model, *a, **kw), record)
  return build


def _first_prompt_via_trainer(cfg, monkeypatch):
  import codjax.train.loop as loop

  record = {}
  monkeypatch.setattr(loop, "build_engine", _recording_build_engine(loop.build_engine, record))
  trainer = loop.Trainer(cfg)
  try:
    with pytest.raises(_FirstGenerate):
      trainer.evaluate("start")
  finally:
    trainer.close()
  return record


def _first_prompt_via_launcher(cfg, monkeypatch, launcher):
  import codjax.train.engines as engines

  record = {}
  monkeypatch.setattr(engines, "build_engine", _recording_build_engine(engines.build_engine, record))
  with pytest.raises(_FirstGenerate):
    launcher.evaluate(cfg, launcher.Options(engine="jax"))
  return record


def _first_observation(cfg):
  """The first evaluation task's system prompt and observation, straight from the environment."""
  spec = eval_specs(cfg)[0]
  pack = eval_pack_sets(cfg, [spec])[spec.label][0]
  env = pack.family.sample_pack(pack.pack_seed, pack.size, task_seeds=list(pack.task_seeds))[0]
  return env.reset()


@pytest.mark.parametrize("thinking", [False, True])
def test_first_eval_prompt_is_identical_through_trainer_and_launcher(tmp_path, qwen3_ckpt, monkeypatch, thinking,
                                                                      evaluate_launcher):
  cfg = eval_config(tmp_path / "run", qwen3_ckpt, **{"model.enable_thinking": thinking})
  via_trainer = _first_prompt_via_trainer(cfg, monkeypatch)
  via_launcher = _first_prompt_via_launcher(cfg, monkeypatch, evaluate_launcher)
  first_t, first_l = via_trainer["prompts"][0], via_launcher["prompts"][0]
  assert first_t == first_l  # token for token
  assert len(via_trainer["prompts"]) == len(via_launcher["prompts"]) == cfg.eval.num_packs
  text = load_tokenizer(qwen3_ckpt).decode(first_l, skip_special_tokens=False)
  _, observation = _first_observation(cfg)
  assert text.startswith("<|im_start|>system\n") and f"<|im_start|>user\n{observation}<|im_end|>\n" in text
  if thinking:
    assert text.endswith("<|im_end|>\n" + GEN_PROMPT) and "<think>" not in text
  else:  # Qwen3's template closes an empty think block after the generation prompt
    assert text.endswith(GEN_PROMPT + NO_THINK)
  # both load the checkpoint with the config's dtypes: fp32 parameters, bf16 compute
  for record in (via_trainer, via_launcher):
    leaves = jax.tree.leaves(nnx.state(record["model"], nnx.Param))
    assert leaves and {str(x.dtype) for x in leaves} == {"float32"}
    assert str(record["model"].cfg.dtype) == "bfloat16"


def test_text_policies_render_with_the_template_arguments(tmp_path, qwen3_ckpt, evaluate_launcher):
  """--engine=expert with a tokenizer: token counts come from the same rendering as the engine's prompts."""
  launcher = evaluate_launcher
  cfg = eval_config(tmp_path, qwen3_ckpt)
  policies = launcher._TextPolicies(cfg, launcher.Options(engine="expert", tokenizer=qwen3_ckpt))
  spec = eval_specs(cfg)[0]
  packs = eval_pack_sets(cfg, [spec])[spec.label]
  from codjax.workflows import get_workflow

  trajs = get_workflow("cod").rollout(policies.backend_for(spec), packs[:1], 1, cfg)
  solve = trajs[0].solve_episodes[0]
  text = load_tokenizer(qwen3_ckpt).decode(solve.tokens, skip_special_tokens=False)
  assert GEN_PROMPT + NO_THINK in text  # every generation prompt of the conversation has thinking off
  assert text.count(GEN_PROMPT + NO_THINK) == solve.num_turns


class _ChatStub:
  """A loopback OpenAI-compatible chat server that answers "Up" and records every request body."""

  def __init__(self):
    self.bodies = []
    stub = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):
        pass

      def do_POST(self):
        stub.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": "Up"},
                                        "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
    threading.Thread(target=self.server.serve_forever, daemon=True).start()

  def close(self):
    self.server.shutdown()
    self.server.server_close()


@pytest.mark.parametrize("send", [True, False])
def test_served_models_get_the_template_arguments(tmp_path, send, evaluate_launcher):
  launcher = evaluate_launcher
  cfg = eval_config(tmp_path, "", **{"model.dtype": "float32", "model.param_dtype": "", "eval.num_packs": 1})
  stub = _ChatStub()
  try:
    results, meta = launcher.evaluate(cfg, launcher.Options(engine="openai", base_url=stub.url, model_name="m",
                                                            server_template_kwargs=send))
  finally:
    stub.close()
  assert stub.bodies and all(b["model"] == "m" for b in stub.bodies)
  if send:
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in stub.bodies)
  else:
    assert not any("chat_template_kwargs" in b for b in stub.bodies)
  assert meta["engine"] == "openai" and meta["template_kwargs"] == {"enable_thinking": False}
  assert results["fl"]["n"] == 1


# -- eval.packing: the Ralph loop -----------------------------------------------------------------------------
class ObservationRecorder:
  """Wraps a text backend: records the observation (first user message) of every solve episode."""

  def __init__(self, inner):
    self.inner = inner
    self.seen = {}  # (pack_id, position) -> observation

  def respond(self, episodes):
    for ep in episodes:
      if ep.kind == "solve":
        user = next(m["content"] for m in ep.messages if m["role"] == "user")
        self.seen.setdefault((ep.pack_id, ep.position), user)
    return self.inner.respond(episodes)

  def release(self, episode):
    self.inner.release(episode)


def _observations(cfg):
  recorders = []

  def backend_for(spec):
    recorders.append(ObservationRecorder(PolicyBackend(make_policy(spec.name, "expert"), seed=0)))
    return recorders[-1]

  ev = run_evaluation(cfg, backend_for)
  seen = recorders[0].seen
  by_pack = {}
  for (pack, pos), obs in sorted(seen.items()):
    by_pack.setdefault(pack, []).append(obs)
  return ev, by_pack


@pytest.mark.parametrize("env", [("frozenlake_obscure", "tiny"), ("alchemy_random", "easy")])
@pytest.mark.parametrize("packing", ["cod", "ralph_sample", "ralph_full"])
def test_eval_packing_repeats_one_task_in_the_ralph_loop(tmp_path, packing, env):
  n, size = 4, 3
  cfg = eval_config(tmp_path, "", **{"model.dtype": "float32", "model.param_dtype": "", "eval.num_packs": n,
                                     "eval.pack_size": size, "eval.packing": packing,
                                     "data.envs": {"e": env_entry(*env)}})
  ev, by_pack = _observations(cfg)
  assert ev.meta["packing"] == packing and ev.results["e"]["pack_size"] == size and ev.results["e"]["n"] == n
  assert len(by_pack) == n and all(len(obs) == size for obs in by_pack.values())
  same = [len(set(obs)) == 1 for obs in by_pack.values()]
  if packing == "cod":
    assert not any(same)  # S distinct tasks per pack
  else:
    assert all(same)  # the same task at every position
  # the Ralph packs' tasks are the test split's rows: ralph_sample each regular pack's first row, ralph_full
  # consecutive rows
  from codjax.envs.datasets import seed_splits

  rows = seed_splits(cfg.data.n_train, cfg.data.n_test, cfg.data.split_seed)[1]
  spec = eval_specs(cfg)[0]
  seeds = [p.task_seeds for p in eval_pack_sets(cfg, [spec])["e"]]
  want = {"cod": [tuple(rows[i * size:(i + 1) * size]) for i in range(n)],
          "ralph_sample": [(rows[i * size],) * size for i in range(n)],
          "ralph_full": [(rows[i],) * size for i in range(n)]}[packing]
  assert seeds == [tuple(int(x) for x in w) for w in want]


def test_eval_packing_is_validated(tmp_path):
  with pytest.raises(ConfigError, match="eval.packing must be one of"):
    eval_config(tmp_path, "", **{"eval.packing": "ralph"})


def test_ralph_benchmark_configs_are_the_cod_benchmarks_in_the_ralph_loop():
  from codjax.train.config import load_experiment

  for stem, cod_stem in (("eval_alchemy_easy_ralph", "eval_alchemy_easy"), ("eval_alchemy_hard_ralph",
                                                                          "eval_alchemy_hard"),
                         ("eval_terminal_ralph", "eval_terminal")):
    ralph = validate(load_experiment(os.path.join(ROOT, "experiments", f"{stem}.py")).get_config())
    cod = validate(load_experiment(os.path.join(ROOT, "experiments", f"{cod_stem}.py")).get_config())
    assert (ralph.name, ralph.eval.packing, cod.eval.packing) == (stem, "ralph_sample", "cod")
    a, b = ralph.to_dict(), cod.to_dict()
    for d in (a, b):
      d.pop("name"), d.pop("run_dir"), d["eval"].pop("packing")
    assert a == b  # everything else is the CoD benchmark's (500 packs of 8, T1's limits, temperature 1.0)
    assert ralph.eval.num_packs == 500 and ralph.eval.pack_size == 8 and not ralph.model.enable_thinking
