"""Episode token bookkeeping ("token in, token out"): what the trainer will score is
exactly the conversation the environment saw.

With the real ``JaxEngine`` on the tiny checkpoint, over CoD packs of a small test task whose episodes go on
for three turns whatever the model writes (so every solve episode is multi-turn and re-enters the engine
with a cached prefix) and whose observations hold multi-byte characters and edge whitespace:

* ``decode(ep.tokens)`` equals the chat template's rendering of ``ep.messages`` as text, except for the
  separator the template writes after the final end-of-turn token (generated tokens are never re-tokenized,
  so a token-level comparison would be wrong for sampled text);
* the loss mask is 1 exactly on the generated tokens of each assistant turn (its text, then the
  end-of-turn token when it was sampled), and the rollout logprobs sit one to one on those tokens and equal
  the trainer's forward logprobs (``shifted_token_logprobs``) there, at the sampling temperature;
* a reply cut by the response budget, or an episode cut by the prompt budget, is flagged on the episode.

With ``TokenizingBackend`` around a scripted expert the token sequence equals the template tokenization
of the conversation exactly.

Tolerance of the logprob comparison: 1e-4 absolute, the bound of tests/rollout/test_jax_engine.py (both
sides are float32 XLA on CPU; the cached decode and the full forward sum in different orders).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from codjax.agents.cod import CodSettings, Pack, run_cod
from codjax.agents.episode import PolicyBackend
from codjax.agents.token_backend import EngineBackend, TokenizingBackend
from codjax.envs import cod_protocol as cp
from codjax.envs import derive_seed, make
from codjax.envs.base import EnvFamily, StepResult, TaskEnv
from codjax.envs.experts import make_policy
from codjax.models import from_pretrained
from codjax.models.tokenizer import load_tokenizer, render_chat
from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rollout.base import SamplingParams
from codjax.rollout.jax_engine import JaxEngine
from codjax.workflows.cod_summary import summarize

pytestmark = pytest.mark.slow  # engine episodes on the tiny checkpoint (~60 s)

MAX_SEQ = 512
ATOL = 1e-4
SCORE_SHAPE = (8, MAX_SEQ)  # the trainer forward runs on one fixed shape (one compilation per temperature)
TURNS = 3


@pytest.fixture(scope="module")
def tok(tiny_ckpt):
  return load_tokenizer(tiny_ckpt)


@pytest.fixture(scope="module")
def model(tiny_ckpt, tok):
  """The tiny model, with the end-of-turn embedding row (tied: also its output column) moved towards 64
  random tokens' rows: after one of them EOS becomes likely, so about half of the 16-token replies end with
  a sampled EOS and half hit max_tokens (the plain random model almost never samples EOS)."""
  m = from_pretrained(tiny_ckpt, dtype="float32")
  emb = np.asarray(m.embed_vd[...]).copy()
  pull = np.random.default_rng(0).choice(np.arange(3, emb.shape[0]), 64, replace=False)
  emb[tok.eos_token_id] += 1.5 * emb[pull].sum(0)
  m.embed_vd[...] = jnp.asarray(emb)
  return m


@pytest.fixture(scope="module")
def engine(model):
  return JaxEngine(model, max_slots=16, max_seq_len=MAX_SEQ, seed=0)


class Chatter(TaskEnv):
  """A test task: ``TURNS`` replies, whatever they say; the observations carry multi-byte text and edge
  whitespace (the places where re-tokenization drifts). Reward 1 iff some reply contains "ok"."""

  max_turns = TURNS
  OBS = ("Turn 1: ¿qué tal? → go", " leading space, trailing newline\n", "\n\nnewlines  \t tab", "emoji 😀 end")

  def __init__(self, seed):
    self.seed, self.turn, self.ok = seed, 0, False

  def reset(self):
    return f"Reply to each message (task {self.seed}).", self.OBS[self.seed % 2]

  def step(self, text):
    self.turn += 1
    self.ok = self.ok or "ok" in text
    done = self.turn == TURNS
    self._last_feedback = f"turn {self.turn} of {TURNS}"
    obs = "" if done else self.OBS[(self.seed + self.turn) % len(self.OBS)]
    r = float(self.ok) if done else 0.0
    return StepResult(obs, r, done, {"feedback": self._last_feedback, "format_error": False, "raw_reward": r})


class ChatterFamily(EnvFamily):
  name = "chatter"

  def sample_pack(self, pack_seed, num_tasks, task_seeds=None):
    return [Chatter(s) for s in task_seeds]


def chatter_packs(n=1, size=2):
  return [Pack("chatter", ChatterFamily(), derive_seed(3, k), tuple(range(k * size, (k + 1) * size)), k)
          for k in range(n)]


class PromptLog:
  """Wraps an engine and records the prompt length of every request."""

  def __init__(self, engine):
    self.engine = engine
    self.lengths: list[int] = []

  def generate(self, prompts, params, session_ids=None):
    self.lengths += [len(p) for p in prompts]
    return self.engine.generate(prompts, params, session_ids)

  def end_session(self, sid):
    self.engine.end_session(sid)


def rollout(engine, tok, packs, *, temperature=1.0, max_tokens=16, max_prompt_tokens=MAX_SEQ - 20, seed=5,
            repeats=2, seed_by="call"):
  log = PromptLog(engine)
  backend = EngineBackend(log, tok, SamplingParams(temperature=temperature, max_tokens=max_tokens),
                          max_prompt_tokens=max_prompt_tokens, seed=seed, seed_by=seed_by)
  trajs = run_cod(backend, packs, repeats, CodSettings(protocol="compact"))
  assert engine.num_sessions() == 0, "episodes must release their cache slots"
  return [e for t in trajs for e in t.episodes()], trajs, log


@pytest.fixture(scope="module")
def run(engine, tok):
  before = dict(engine.stats)
  eps, trajs, log = rollout(engine, tok, chatter_packs(2))
  stats = {k: engine.stats[k] - before[k] for k in before}
  return eps, trajs, log, stats


@pytest.fixture(scope="module")
def scorer(model):
  """The trainer's per-token logprobs, jitted over one fixed [rows, MAX_SEQ] shape."""
  graphdef, state = nnx.split(model)
  fn = jax.jit(lambda st, toks, temperature: shifted_token_logprobs(nnx.merge(graphdef, st), toks,
                                                                     temperature=temperature)[0],
               static_argnums=2)
  return lambda toks, temperature: np.asarray(fn(state, jnp.asarray(toks), temperature))


# -- checks shared by the tests ---------------------------------------------------------------------------

def generation_prompt_ids(tok):
  probe = [{"role": "system", "content": "x"}]
  full = render_chat(tok, probe, add_generation_prompt=True)
  return tok.encode(full[len(render_chat(tok, probe)):], add_special_tokens=False)


def mask_runs(mask):
  runs, start = [], None
  for i, m in enumerate(list(mask) + [0]):
    if m and start is None:
      start = i
    elif not m and start is not None:
      runs.append((start, i))
      start = None
  return runs


def check_text(ep, tok):
  """decode(tokens) is the template rendering of the messages (up to the trailing separator)."""
  decoded = tok.decode(ep.tokens, skip_special_tokens=False)
  if ep.messages[-1]["role"] == "assistant":
    rendered = render_chat(tok, ep.messages)
    tail = rendered[len(decoded):]
    assert rendered.startswith(decoded) and tail == "\n", f"{ep.kind}: rendering differs from the tokens"
  else:  # ended by the prompt budget before a reply: the tokens end with the generation prompt
    assert decoded == render_chat(tok, ep.messages, add_generation_prompt=True)


def check_layout(ep, tok):
  """Loss mask exactly on generated tokens; logprobs aligned; truncations flagged. Returns #EOS-ended."""
  n = len(ep.tokens)
  assert len(ep.loss_mask) == n == len(ep.logprobs)
  assert set(ep.loss_mask) <= {0, 1}
  eos = tok.eos_token_id
  gp = generation_prompt_ids(tok)
  replies = [m["content"] for m in ep.messages if m["role"] == "assistant"]
  runs = mask_runs(ep.loss_mask)
  assert len(runs) == len(replies) == len(ep.response_token_counts) == ep.num_turns
  ended_by_eos = 0
  for (s, e), text, count in zip(runs, replies, ep.response_token_counts):
    ids = ep.tokens[s:e]
    assert e - s == count
    assert ep.tokens[s - len(gp):s] == gp  # every masked run starts right after "<|im_start|>assistant\n"
    assert eos not in ids[:-1]
    if ids[-1] == eos:
      ended_by_eos += 1
      assert tok.decode(ids[:-1], skip_special_tokens=False) == text
    else:  # cut by a budget: closed with an unmasked EOS and flagged
      assert tok.decode(ids, skip_special_tokens=False) == text
      assert ep.tokens[e] == eos and ep.loss_mask[e] == 0
      assert ep.truncated and ep.truncation_reason
  assert ep.num_loss_tokens == sum(ep.response_token_counts)
  assert all(lp == 0.0 for lp, m in zip(ep.logprobs, ep.loss_mask) if not m)
  return ended_by_eos


def trainer_logprobs(scorer, eps, temperature):
  """The trainer's logprob of every token of every episode (right-padded rows; causal, so pads are inert)."""
  rows, length = SCORE_SHAPE
  out = []
  for i in range(0, len(eps), rows):
    group = eps[i:i + rows]
    tokens = np.zeros(SCORE_SHAPE, np.int32)
    for r, e in enumerate(group):
      assert len(e.tokens) <= length
      tokens[r, :len(e.tokens)] = e.tokens
    lp = scorer(tokens, temperature)
    out += [lp[r, :len(e.tokens)] for r, e in enumerate(group)]
  return out


def check_logprobs(scorer, eps, temperature):
  want = trainer_logprobs(scorer, eps, temperature)
  worst, n = 0.0, 0
  for e, w in zip(eps, want):
    m = np.asarray(e.loss_mask, bool)
    got = np.asarray(e.logprobs)
    assert np.all(got[m] < 0)  # real logprobs where the mask is 1
    if m.any():
      worst = max(worst, float(np.abs(got[m] - w[m]).max()))
      n += int(m.sum())
  assert n > 0
  assert worst < ATOL, f"sampler/trainer logprob gap {worst:.2e}"
  return worst


# -- the real engine ----------------------------------------------------------------------------------------

def test_engine_episodes_render_their_conversation(run, tok):
  eps, trajs, _, stats = run
  assert [e.kind for e in eps] == ["solve", "update", "solve"] * 4
  for e in eps:
    assert e.num_turns == (TURNS if e.kind == "solve" else 1)
    check_text(e, tok)
  # prefix reuse: later turns re-enter the engine with their history cached
  assert stats["reused_tokens"] > 0 and stats["prefill_tokens"] > 0
  assert stats["generated_tokens"] == sum(sum(e.response_token_counts) for e in eps)
  # repeats sample independently
  assert trajs[0].solve_episodes[0].messages[2] != trajs[1].solve_episodes[0].messages[2]


def test_engine_loss_mask_and_logprobs_align_with_trainer(run, tok, scorer):
  eps = run[0]
  eos_ended = sum(check_layout(e, tok) for e in eps)
  cut = sum(e.tokens[t - 1] != tok.eos_token_id for e in eps for _, t in mask_runs(e.loss_mask))
  # both branches of the bookkeeping are exercised: replies closed by a sampled EOS and replies cut at
  # max_tokens
  assert eos_ended > 0 and cut > 0
  check_logprobs(scorer, eps, 1.0)


def test_engine_logprobs_follow_the_sampling_temperature(engine, tok, scorer):
  eps, _, _ = rollout(engine, tok, chatter_packs(2), temperature=0.7, seed=9)
  for e in eps:
    check_text(e, tok)
    check_layout(e, tok)
  check_logprobs(scorer, eps, 0.7)
  # the check has teeth: at T = 1 the same tokens score differently
  t1 = trainer_logprobs(scorer, eps, 1.0)
  gap = max(np.abs(np.asarray(e.logprobs) - w)[np.asarray(e.loss_mask, bool)].max() for e, w in zip(eps, t1))
  assert gap > 1e-2


def test_engine_prompt_budget_is_flagged_never_silent(engine, tok, scorer):
  budget = 150  # a solve episode fits a turn or two, no update prompt fits
  eps, trajs, log = rollout(engine, tok, chatter_packs(2), max_prompt_tokens=budget, seed=7)
  assert max(log.lengths) < budget  # the engine never received a prompt over the budget
  ended = [e for e in eps if e.budget_exhausted]
  assert {e.kind for e in ended} == {"solve", "update"}
  assert all(e.truncated and "prompt token budget" in e.truncation_reason for e in ended)
  for e in eps:
    check_text(e, tok)
    check_layout(e, tok)
    assert all(end <= budget for _, end in mask_runs(e.loss_mask))  # no generated token beyond the budget
  for e in ended:
    if e.kind == "solve":
      assert e.messages[-1]["role"] == "user" and e.reward == 0.0 and e.raw_reward == 0.0
      assert e.num_turns < TURNS and e.done
    else:  # an update prompt over the budget is a parse failure: -c and the failure hint
      assert e.num_turns == 0 and e.messages[-1]["role"] == "user"
      assert e.format_error and e.reward == -0.1 and e.info["new_hint"] == cp.FAILED_HINT
  assert summarize(trajs)["truncated_episodes"] == sum(e.truncated for e in eps)
  check_logprobs(scorer, eps, 1.0)


def test_engine_slots_bound_live_episodes(engine, tok):
  """More trajectories than cache slots: the backend runs at most ``max_slots`` episodes at once (a wave
  joins as others finish) instead of running out of slots."""

  class FourSlots(PromptLog):
    max_slots = 4

    def __init__(self, engine):
      super().__init__(engine)
      self.live, self.most = set(), 0

    def generate(self, prompts, params, session_ids=None):
      self.live |= set(session_ids)
      self.most = max(self.most, len(self.live))
      return super().generate(prompts, params, session_ids)

    def end_session(self, sid):
      self.live.discard(sid)
      super().end_session(sid)

  capped = FourSlots(engine)
  backend = EngineBackend(capped, tok, SamplingParams(max_tokens=16), max_prompt_tokens=MAX_SEQ - 20, seed=1)
  # 8 trajectories of 7 ticks each: two waves of 4 (all calls keep the batch shape of the other tests)
  trajs = run_cod(backend, chatter_packs(4), 2, CodSettings(protocol="compact"))
  assert capped.most == 4 and not capped.live and engine.num_sessions() == 0
  assert len(capped.lengths) == 8 * 7
  for e in (e for t in trajs for e in t.episodes()):
    assert e.done and e.num_turns == (TURNS if e.kind == "solve" else 1)
    check_text(e, tok)


def test_episode_seeding_gives_an_episode_its_replies_whatever_runs_beside_it(engine, tok):
  """``seed_by="episode"``: pack 1's episodes get the same replies (tokens, logprobs) run alone as run with
  packs 0 and 2 beside them (other batch sizes, rows and decode phases at every call), as a resumed
  evaluation needs. With ``seed_by="call"`` they do not (the comparison is sensitive to the keys)."""
  packs = chatter_packs(3)

  def by_id(eps):
    return {(e.pack_id, e.repeat_id, e.kind, e.position): e for e in eps}

  together = by_id(rollout(engine, tok, packs, seed_by="episode")[0])
  alone = by_id(rollout(engine, tok, packs[1:2], seed_by="episode")[0])
  assert len(alone) == len(together) // 3 and {k[0] for k in alone} == {1}
  for k, e in alone.items():
    t = together[k]
    assert e.messages == t.messages and e.tokens == t.tokens and e.loss_mask == t.loss_mask, k
    np.testing.assert_allclose(e.logprobs, t.logprobs, atol=1e-5)
  assert len({tuple(e.tokens) for e in alone.values()}) == len(alone)  # sampled replies, not one repeated
  by_call = by_id(rollout(engine, tok, packs, seed_by="call")[0])
  by_call_alone = by_id(rollout(engine, tok, packs[1:2], seed_by="call")[0])
  assert any(by_call_alone[k].tokens != by_call[k].tokens for k in by_call_alone)


def test_engine_backend_seeding_is_validated(engine, tok):
  with pytest.raises(ValueError, match="seed_by must be one of"):
    EngineBackend(engine, tok, SamplingParams(), seed=1, seed_by="pack")
  with pytest.raises(ValueError, match="needs a seed"):
    EngineBackend(engine, tok, SamplingParams(), seed_by="episode")
  backend = EngineBackend(engine, tok, SamplingParams(), seed=1, seed_by="episode")
  with pytest.raises(ValueError, match="needs a seed"):
    backend.reseed(None)
  with pytest.raises(ValueError, match="per-request seeds itself"):
    EngineBackend(engine, tok, SamplingParams(seeds=(1,)), seed=1)


# -- scripted expert through TokenizingBackend --------------------------------------------------------------

def expert_rollout(tok, **kw):
  fl = make("frozenlake_obscure", preset="tiny")
  packs = [Pack("frozenlake_obscure", fl, derive_seed(8, k), tuple(derive_seed(8, k, j) for j in range(3)), k)
           for k in range(3)]
  backend = TokenizingBackend(PolicyBackend(make_policy("frozenlake_obscure", "expert"), seed=2), tok, **kw)
  trajs = run_cod(backend, packs, 2, CodSettings())
  return [e for t in trajs for e in t.episodes()], trajs


def test_tokenized_expert_equals_template_tokenization_exactly(tok):
  eps, _ = expert_rollout(tok)
  sep = tok.encode("\n", add_special_tokens=False)
  assert any(e.num_turns > 1 for e in eps)
  for e in eps:
    assert e.tokens + sep == tok.encode(render_chat(tok, e.messages), add_special_tokens=False)
    assert check_layout(e, tok) == e.num_turns  # every expert reply is closed by its EOS, mask 1
    assert not e.truncated and all(lp == 0.0 for lp in e.logprobs)


def test_tokenized_expert_budgets_are_flagged(tok):
  eps, _ = expert_rollout(tok, max_response_tokens=6)
  for e in eps:
    check_text(e, tok)
    check_layout(e, tok)
    assert e.truncated and "token budget (6 tokens)" in e.truncation_reason
    assert all(n == 6 for n in e.response_token_counts)
  # the environment saw the cut text (FrozenLake: no answer block -> format error)
  assert all(e.format_error for e in eps if e.kind == "solve")
  budget = 450
  eps, trajs = expert_rollout(tok, max_prompt_tokens=budget)
  ended = [e for e in eps if e.budget_exhausted]
  assert {e.kind for e in ended} == {"solve", "update"}
  for e in eps:
    check_text(e, tok)
    check_layout(e, tok)
    assert all(end <= budget for _, end in mask_runs(e.loss_mask))
  assert all(e.truncated for e in ended)
  assert summarize(trajs)["truncated_episodes"] == sum(e.truncated for e in eps) > 0


def test_backend_rejects_injected_assistant_turns(tok):
  """Token in, token out: an assistant turn a workflow injects itself is refused, never re-tokenized."""
  from codjax.agents.episode import Episode

  class Fixed:
    def respond(self, episodes):
      return ["a reply"] * len(episodes)

    def release(self, episode):
      del episode

  backend = TokenizingBackend(Fixed(), tok)
  ep = Episode(kind="solve", position=0)
  ep.add_message("system", "s")
  ep.add_message("user", "u")
  ep.add_message("assistant", backend.respond([ep])[0])
  ep.add_message("assistant", "an injected reply the backend never produced")
  ep.add_message("user", "u2")
  with pytest.raises(RuntimeError, match="token in, token out"):
    backend.respond([ep])


# -- continuous batching (EngineBackend(continuous=True) through run_streaming) -----------------------------

def test_continuous_batching_gives_the_lockstep_episodes(engine, tok):
  """The streaming runner submits an episode's next turn as soon as its reply is back (no lock step), yet
  with the same per-episode seeds every episode gets the same messages, tokens, loss mask and logprobs as
  under the lock-step runner, every slot is released, and episodes did overlap other episodes' turns
  (fewer engine kernels than replies would need one by one is not asserted: the overlap is)."""
  packs = chatter_packs(3)
  params = SamplingParams(temperature=1.0, max_tokens=16)

  def go(continuous):
    b = EngineBackend(engine, tok, params, max_prompt_tokens=MAX_SEQ - 20, seed=5, seed_by="episode",
                      continuous=continuous)
    trajs = run_cod(b, packs, 2, CodSettings(protocol="compact"))
    assert engine.num_sessions() == 0 and engine.in_flight() == 0
    return {(e.pack_id, e.repeat_id, e.kind, e.position): e for t in trajs for e in t.episodes()}

  before = engine.stats["stream_decodes"]
  lock, stream = go(False), go(True)
  assert engine.stats["stream_decodes"] > before
  assert lock.keys() == stream.keys()
  for k, e in lock.items():
    s = stream[k]
    assert s.messages == e.messages and s.tokens == e.tokens and s.loss_mask == e.loss_mask, k
    np.testing.assert_allclose(s.logprobs, e.logprobs, atol=1e-5)
  assert len({tuple(e.tokens) for e in stream.values()}) == len(stream)


def test_continuous_batching_is_validated(engine, tok):
  with pytest.raises(ValueError, match="seed_by='episode'"):
    EngineBackend(engine, tok, SamplingParams(), seed=1, continuous=True)

  class NoStream:
    max_slots = 4

  with pytest.raises(ValueError, match="submit/poll"):
    EngineBackend(NoStream(), tok, SamplingParams(), seed=1, seed_by="episode", continuous=True)
