"""The JAX sampler serving the Qwen3.5/3.6 hybrid (Gated DeltaNet + gated attention, dense and MoE): sampled
logprobs equal the trainer's forward, greedy replies equal a full-forward greedy loop (no cache at all),
prefix reuse across turns (recurrent-state snapshots) equals re-prefill, per-row stopping and decode phases,
LRU eviction, sharding, and no recompiles across batch compositions.

Models have an untied output head scaled by 20 (peaked, varied next-token distributions, as the Qwen3 engine
tests' checkpoint), so a stale state, a pad token leaking into a state or a wrong position changes tokens."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codjax.models.config import preset
from codjax.models.qwen3_5 import init_model
from codjax.parallel import make_mesh
from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rollout import SamplingParams
from codjax.rollout.jax_engine import JaxEngine

pytestmark = pytest.mark.slow  # engine compiles per shape

PROMPTS = [[5, 17, 99, 230, 41, 7], [300, 12, 8], list(range(20, 45))]


def _peaked(name: str):
  # chunk 8: prefills of these prompts cross DeltaNet chunk boundaries
  model = init_model(preset(name, tie_word_embeddings=False, delta_chunk_size=8), seed=1)
  model.lm_head_dv[...] = model.lm_head_dv[...] * 20.0
  return model


@pytest.fixture(scope="module")
def model():
  return _peaked("tiny-hybrid")


@pytest.fixture(scope="module")
def engine(model):
  # min_batch=1: batches of 1, 2 and 4 rows, so the stopping test sees decode phases at every size
  return JaxEngine(model, max_slots=4, max_seq_len=128, seed=0, min_batch=1)


def full_forward_greedy(fwd, prompt, n):
  """Greedy continuation from the full-sequence forward ``fwd``, re-run on the whole sequence per token (no
  cache; right padding to 64 tokens never reaches a real token)."""
  seq = list(prompt)
  for _ in range(n):
    logits = np.asarray(fwd(jnp.asarray([seq + [0] * (64 - len(seq))])))[0, len(seq) - 1]
    seq.append(int(np.argmax(logits)))
  return seq[len(prompt):]


def trainer_logprobs(model, seqs) -> list[np.ndarray]:
  """The trainer's ``shifted_token_logprobs`` of each sequence, under one jit: every row right-padded to 64
  tokens (padding after a token never changes its causal logprob)."""
  fn = jax.jit(lambda ids: shifted_token_logprobs(model, ids)[0])
  lp = np.asarray(fn(jnp.asarray([list(q) + [0] * (64 - len(q)) for q in seqs])))
  return [lp[i, :len(q)] for i, q in enumerate(seqs)]


def assert_nontrivial(prompts, comps):
  """Greedy continuations an equality check can fail on (tests/rollout/test_jax_engine.py): no row is its
  prompt's last token repeated, and the rows together hold varied tokens (at least a third of them distinct)."""
  for p, c in zip(prompts, comps):
    assert c.token_ids and set(c.token_ids) != {p[-1]}, (p[-3:], c.token_ids)
  toks = [t for c in comps for t in c.token_ids]
  assert len(set(toks)) >= len(toks) / 3, [c.token_ids for c in comps]


def test_sampled_logprobs_match_trainer_forward(model, engine):
  comps = engine.generate(PROMPTS, SamplingParams(temperature=1.0, max_tokens=10, seed=3))
  lps = trainer_logprobs(model, [p + c.token_ids for p, c in zip(PROMPTS, comps)])
  for p, c, lp in zip(PROMPTS, comps, lps):
    assert len(c.token_ids) == len(c.logprobs) == 10
    np.testing.assert_allclose(lp[len(p):], c.logprobs, atol=1e-4)


def test_greedy_equals_full_forward_greedy(model, engine):
  comps = engine.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=12))
  assert_nontrivial(PROMPTS, comps)
  fwd = jax.jit(lambda ids: model(ids))
  for p, c in zip(PROMPTS, comps):
    assert c.token_ids == full_forward_greedy(fwd, p, 12)


def test_prefix_reuse_equals_reprefill_and_prefills_less(model, engine):
  reuse = JaxEngine(model, max_slots=4, max_seq_len=128)
  fresh = engine
  before = dict(fresh.stats)
  greedy = SamplingParams(temperature=0.0, max_tokens=6)
  hist = [list(p) for p in PROMPTS[:2]]
  for turn in range(3):
    a = reuse.generate(hist, greedy, session_ids=[11, 12])
    b = fresh.generate(hist, greedy)  # no sessions: whole-history prefill from a zero state every turn
    assert_nontrivial(hist, b)
    for x, y in zip(a, b):
      assert x.token_ids == y.token_ids
      # the reused state and a whole-history prefill sum the DeltaNet recurrence over different chunkings (and
      # the shared engine's buckets depend on the tests before): float32 rounding, 1.05e-5 seen on a logprob of -2
      np.testing.assert_allclose(x.logprobs, y.logprobs, atol=3e-5)
    hist = [h + x.token_ids + [60 + turn, 61, 62] for h, x in zip(hist, a)]  # + next "user turn"
  assert reuse.stats["prefill_tokens"] < (fresh.stats["prefill_tokens"] - before["prefill_tokens"]) / 2
  assert reuse.stats["reused_tokens"] > 0


def test_stopping_rows_and_decode_phases_keep_states_exact(engine):
  """Rows that stop early keep decoding in the loop as padding (they must not feed their state) and the
  continuing rows move to smaller phases; the next turn of every session must still equal re-prefill."""
  greedy = SamplingParams(temperature=0.0, max_tokens=10)
  free = engine.generate(PROMPTS, greedy)
  row, first = next((r, k) for r, f in enumerate(free) for k, t in enumerate(f.token_ids)
                    if k >= 2 and t not in f.token_ids[:k])
  stop = free[row].token_ids[first]
  params = SamplingParams(temperature=0.0, max_tokens=10, stop_token_ids=(stop,))
  comps = engine.generate(PROMPTS, params, session_ids=[1, 2, 3])
  assert comps[row].finish_reason == "stop" and comps[row].token_ids == free[row].token_ids[:first + 1]
  nxt = [p + c.token_ids + [70, 71] for p, c in zip(PROMPTS, comps)]
  again = engine.generate(nxt, greedy, session_ids=[1, 2, 3])
  for k in (1, 2, 3):
    engine.end_session(k)
  ref = engine.generate(nxt, greedy)  # no sessions: whole-history prefill from zero states
  assert_nontrivial(nxt, ref)
  assert len(again) == len(ref) == 3
  for x, y in zip(again, ref):
    assert x.token_ids == y.token_ids


def test_eviction_keeps_sessions_exact(model, engine):
  eng = JaxEngine(model, max_slots=2, max_seq_len=128)
  g = SamplingParams(temperature=0.0, max_tokens=5)
  hist = {k: list(p) for k, p in zip((1, 2, 3), PROMPTS)}
  refs = []
  for _ in range(2):
    for k in (1, 2, 3):  # three sessions over two slots: each call evicts the least recently used
      c = eng.generate([hist[k]], g, session_ids=[k])[0]
      ref = engine.generate([hist[k]], g)[0]
      refs.append((hist[k], ref))
      assert c.token_ids == ref.token_ids
      hist[k] = hist[k] + c.token_ids + [80]
  assert_nontrivial([p for p, _ in refs], [r for _, r in refs])
  assert eng.stats["evictions"] > 0


def test_sharded_engine_matches_unsharded(model, engine):
  mesh = make_mesh(data=2, fsdp=2, tensor=2)
  sharded = JaxEngine(model, max_slots=8, max_seq_len=128, mesh=mesh)
  g = SamplingParams(temperature=0.0, max_tokens=8)
  ref = engine.generate(PROMPTS, g)
  got = sharded.generate(PROMPTS, g)
  assert_nontrivial(PROMPTS, ref)
  assert len(got) == len(ref) == len(PROMPTS)
  for x, y in zip(got, ref):
    assert x.token_ids == y.token_ids
    np.testing.assert_allclose(x.logprobs, y.logprobs, atol=1e-4)


def test_changing_batch_compositions_do_not_recompile(engine, compilations):
  """After a warm-up call, calls of two rows with other prompt lengths in the same buckets compile nothing
  (XLA backend compilations counted through ``jax.monitoring``, eager helper ops included, as the Qwen3
  engine's tests count them)."""
  eng = engine
  g = SamplingParams(temperature=1.0, max_tokens=5, seed=0)
  eng.generate([[1] * 9, [2] * 3], g)  # warm-up

  def calls():
    for n in (4, 11, 16, 13):
      eng.generate([[3] * n, [4] * (n // 2 + 1)], g)

  compiles = compilations(calls)
  assert not compiles, f"{len(compiles)} XLA compilations after warm-up"


def test_moe_hybrid_engine_is_exact():
  """The MoE variant through one engine: sampled logprobs equal the trainer's forward, greedy equals the
  full-forward greedy loop, and a second turn on the sessions (state snapshots) equals re-prefill."""
  model = _peaked("tiny-hybrid-moe")
  eng = JaxEngine(model, max_slots=4, max_seq_len=128, seed=0)
  comps = eng.generate(PROMPTS, SamplingParams(temperature=1.0, max_tokens=8, seed=3), session_ids=[1, 2, 3])
  for p, c, lp in zip(PROMPTS, comps, trainer_logprobs(model, [p + c.token_ids for p, c in zip(PROMPTS, comps)])):
    np.testing.assert_allclose(lp[len(p):], c.logprobs, atol=1e-4)
  greedy = SamplingParams(temperature=0.0, max_tokens=8)
  nxt = [p + c.token_ids + [90, 91] for p, c in zip(PROMPTS, comps)]
  turn2 = eng.generate(nxt, greedy, session_ids=[1, 2, 3])
  assert eng.stats["reused_tokens"] > 0
  fwd = jax.jit(lambda ids: model(ids))
  assert_nontrivial(nxt, turn2)
  for p, c in zip(nxt, turn2):
    assert c.token_ids == full_forward_greedy(fwd, p, 8)


def test_identical_prompts_share_their_prefill_and_stay_exact(model):
  """On the hybrid only identical prompts share a prefill (its recurrent state exists at a prompt's end, not
  at a common prefix's): two copies of a prompt copy the keys, values and recurrent state of all but its last
  token; a prompt with the same first tokens computes its own; each reply is the one its request gets alone."""
  a = [5, 17, 99, 230, 41, 7, 8, 9] * 3
  b = a[:20] + [300, 12]
  prompts, seeds = [a, b, a], (1, 2, 3)
  eng = JaxEngine(model, max_slots=4, max_seq_len=128)
  params = lambda s: SamplingParams(temperature=1.0, max_tokens=8, seeds=s)
  got = eng.generate(prompts, params(seeds))
  assert eng.stats["shared_tokens"] == len(a) - 1
  alone = JaxEngine(model, max_slots=4, max_seq_len=128)
  for p, s, g in zip(prompts, seeds, got):
    want = alone.generate([p], params((s,)))[0]
    assert g.token_ids == want.token_ids
    np.testing.assert_allclose(g.logprobs, want.logprobs, atol=3e-5)
  assert got[0].token_ids != got[2].token_ids
