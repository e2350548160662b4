"""The JAX sampler: trainer/sampler logprob agreement, greedy parity with transformers, prefix reuse,
per-sequence stopping, bucketing without recompiles, and sharding.

The model is the peaked checkpoint (tests/rollout/conftest.py): the random tiny model's greedy continuation
is the prompt's last token repeated, which a wrong position, a stale cache row or a dropped prefix would
reproduce just as well, so equality tests on it could not fail. ``assert_nontrivial`` checks every greedy
continuation an equality test compares."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from codjax.models import from_pretrained
from codjax.parallel import make_mesh
from codjax.rl.logprobs import shifted_token_logprobs
from codjax.rollout import SamplingParams
from codjax.rollout.jax_engine import JaxEngine

pytestmark = pytest.mark.slow  # engine compiles per shape (~140 s on 2 cores)


@pytest.fixture(scope="module")
def model(peaked_ckpt):
  return from_pretrained(peaked_ckpt)


@pytest.fixture(scope="module")
def engine(model):
  # min_batch=1: batches of 1, 2 and 4 rows, so the decode-phase tests below see phases at every size
  return JaxEngine(model, max_slots=8, max_seq_len=256, seed=0, min_batch=1)


PROMPTS = [[5, 17, 99, 230, 41, 7], [300, 12, 8], list(range(20, 45))]


def assert_nontrivial(prompts, comps):
  """Greedy continuations an equality check can fail on: no row is its prompt's last token repeated (the
  random model's argmax), and the rows together hold varied tokens (at least a third of them distinct)."""
  for p, c in zip(prompts, comps):
    assert c.token_ids and set(c.token_ids) != {p[-1]}, (p[-3:], c.token_ids)
  toks = [t for c in comps for t in c.token_ids]
  assert len(set(toks)) >= len(toks) / 3, [c.token_ids for c in comps]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_logprobs_match_trainer_forward(model, engine, temperature):
  comps = engine.generate(PROMPTS, SamplingParams(temperature=temperature, max_tokens=12, seed=3))
  for p, c in zip(PROMPTS, comps):
    assert len(c.token_ids) == len(c.logprobs) == 12 and c.finish_reason == "length"
    seq = jnp.asarray([p + c.token_ids])
    lp, _ = shifted_token_logprobs(model, seq, temperature=temperature)
    np.testing.assert_allclose(np.asarray(lp[0, len(p):]), c.logprobs, atol=1e-4)


def test_greedy_matches_transformers_generate(peaked_ckpt, engine):
  hf = AutoModelForCausalLM.from_pretrained(peaked_ckpt, dtype=torch.float32).eval()
  comps = engine.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=16))
  assert_nontrivial(PROMPTS, comps)
  for p, c in zip(PROMPTS, comps):
    out = hf.generate(torch.tensor([p]), max_new_tokens=16, min_new_tokens=16, do_sample=False)
    assert c.token_ids == out[0, len(p):].tolist()


def test_prefix_reuse_equals_reprefill_and_prefills_less(model):
  reuse = JaxEngine(model, max_slots=4, max_seq_len=256)
  fresh = JaxEngine(model, max_slots=4, max_seq_len=256)
  greedy = SamplingParams(temperature=0.0, max_tokens=6)
  hist = [list(p) for p in PROMPTS[:2]]
  for turn in range(3):
    a = reuse.generate(hist, greedy, session_ids=[11, 12])
    b = fresh.generate(hist, greedy)  # no sessions: full re-prefill every turn
    assert_nontrivial(hist, b)
    for x, y in zip(a, b):
      assert x.token_ids == y.token_ids
      np.testing.assert_allclose(x.logprobs, y.logprobs, atol=1e-5)
    hist = [h + x.token_ids + [60 + turn, 61, 62] for h, x in zip(hist, a)]  # + next "user turn"
  assert reuse.stats["prefill_tokens"] < fresh.stats["prefill_tokens"] / 2
  assert reuse.stats["reused_tokens"] > 0 and reuse.num_sessions() == 2
  reuse.end_session(11)
  reuse.end_session(12)
  assert reuse.num_sessions() == 0 and fresh.num_sessions() == 0


def test_diverged_history_is_reprefilled(model):
  eng = JaxEngine(model, max_slots=2, max_seq_len=128)
  g = SamplingParams(temperature=0.0, max_tokens=4)
  a = eng.generate([PROMPTS[0]], g, session_ids=[1])[0]
  other = [1, 2, 3]
  b = eng.generate([other], g, session_ids=[1])[0]  # not an extension of the session's history
  ref = JaxEngine(model, max_slots=2, max_seq_len=128).generate([other], g)[0]
  assert_nontrivial([other], [ref])
  assert b.token_ids == ref.token_ids and a.token_ids


def test_per_sequence_stopping(model, engine):
  greedy = SamplingParams(temperature=0.0, max_tokens=10)
  free = engine.generate(PROMPTS, greedy)
  assert_nontrivial(PROMPTS, free)
  # a stop token that row `row` first samples mid-reply (index >= 2), so that the decode loop's own stop
  # check ends it (the first sampled token is checked before the loop)
  row, first = next((r, k) for r, f in enumerate(free) for k, t in enumerate(f.token_ids)
                    if k >= 2 and t not in f.token_ids[:k])
  stop = free[row].token_ids[first]
  comps = engine.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=10, stop_token_ids=(stop,)))
  assert comps[row].token_ids == free[row].token_ids[:first + 1] and comps[row].finish_reason == "stop"
  for c, f in zip(comps, free):
    k = f.token_ids.index(stop) + 1 if stop in f.token_ids else len(f.token_ids)
    assert c.token_ids == f.token_ids[:k] and c.finish_reason == ("stop" if stop in f.token_ids else "length")
    np.testing.assert_allclose(c.logprobs, f.logprobs[:k], atol=1e-5)


@pytest.mark.parametrize("kernels", ["fast", "fast2"])
def test_new_prompt_lengths_reuse_compiled_buckets(model, kernels, compilations):
  """Prompts of new lengths in the same buckets compile nothing. Under "fast2" (packed prefill) a prefill
  program is also specialised to its packed size (a multiple of 16 tokens for these 8 x 16 chunks): a warm-up
  whose two rows hold 10 and 23 prompt tokens compiles both sizes, then every composition below reuses them."""
  eng = JaxEngine(model, max_slots=4, max_seq_len=256, kernels=kernels)
  g = SamplingParams(temperature=1.0, max_tokens=5, seed=0)
  warm = compilations(lambda: (eng.generate([[1] * 9, [2] * 3], g), eng.generate([[1] * 16, [2] * 9], g)))
  assert warm
  prefill = eng._prefill_packed_fn if kernels == "fast2" else eng._prefill_fn
  assert prefill._cache_size() == (2 if kernels == "fast2" else 1)
  n_decode = len(eng._decode_fns)
  again = compilations(lambda: [eng.generate([[3] * n, [4] * (n // 2 + 1)], g) for n in (4, 11, 16, 13)])
  assert not again, f"{len(again)} XLA compilations after warm-up"
  assert prefill._cache_size() == (2 if kernels == "fast2" else 1)
  assert len(eng._decode_fns) == n_decode


def test_sharded_engine_matches_unsharded(model, engine):
  mesh = make_mesh(data=2, fsdp=2, tensor=2)
  sharded = JaxEngine(model, max_slots=8, max_seq_len=256, mesh=mesh)
  g = SamplingParams(temperature=0.0, max_tokens=8)
  ref = engine.generate(PROMPTS, g)
  assert_nontrivial(PROMPTS, ref)
  assert [c.token_ids for c in sharded.generate(PROMPTS, g)] == [c.token_ids for c in ref]
  # slots over (data, fsdp), kv heads over tensor: k^T [L, slots, K, H, S], v [L, slots, K, S, H]
  want = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, ("data", "fsdp"), "tensor", None, None))
  for c in sharded._cache:
    assert c.sharding.is_equivalent_to(want, c.ndim), c.sharding.spec


def test_update_weights_changes_outputs_and_restores(model, engine, peaked_ckpt):
  g = SamplingParams(temperature=0.0, max_tokens=8)
  before = [c.token_ids for c in engine.generate(PROMPTS, g)]
  other = from_pretrained(peaked_ckpt)
  other.embed_vd[...] = jax.random.normal(jax.random.key(7), other.embed_vd[...].shape)
  engine.update_weights(other)
  changed = [c.token_ids for c in engine.generate(PROMPTS, g)]
  engine.update_weights(model)
  assert [c.token_ids for c in engine.generate(PROMPTS, g)] == before
  assert changed != before


def test_bad_requests_raise_clear_errors(engine):
  with pytest.raises(ValueError, match="empty prompt"):
    engine.generate([[]], SamplingParams())
  with pytest.raises(ValueError, match="max_seq_len"):
    engine.generate([[1] * 300], SamplingParams())
  with pytest.raises(ValueError, match="top_p"):
    SamplingParams(top_p=0.0)


def test_more_sessions_than_slots_evicts_lru_and_stays_exact(model):
  small = JaxEngine(model, max_slots=2, max_seq_len=256)
  big = JaxEngine(model, max_slots=8, max_seq_len=256)
  g = SamplingParams(temperature=0.0, max_tokens=4)
  hist = [list(p) for p in PROMPTS] + [[9, 8, 7, 6]]
  for turn in range(2):
    a = small.generate(hist, g, session_ids=[1, 2, 3, 4])  # 4 live sessions, 2 slots
    b = big.generate(hist, g, session_ids=[1, 2, 3, 4])
    assert_nontrivial(hist, b)
    assert [x.token_ids for x in a] == [y.token_ids for y in b]
    hist = [h + x.token_ids + [70 + turn] for h, x in zip(hist, a)]
  assert small.stats["evictions"] > 0 and big.stats["evictions"] == 0



def test_decode_phases_continue_long_rows_exactly(model):
  """Rows whose replies end early leave the batch (the loop exits once at most half of it is still going)
  and the rest continue in a smaller batch: tokens and logprobs equal those of one uninterrupted decode, and
  sampled logprobs still match the trainer's forward at every position."""
  eng = JaxEngine(model, max_slots=8, max_seq_len=256, seed=0, min_batch=1)
  prompts = [[5, 17, 99], [300, 12, 8, 4], list(range(20, 45)), [7] * 9, [11, 250, 3], [90, 91]]
  free = eng.generate(prompts, SamplingParams(temperature=0.0, max_tokens=24))
  assert_nontrivial(prompts, free)
  # stopping on rows 0-2's first tokens ends those rows after one token: the batch of 8 drops to 3 live rows,
  # which finish in a second phase with a batch of 4
  stops = tuple({f.token_ids[0] for f in free[:3]})
  assert not any(t in f.token_ids for t in stops for f in free[3:])
  before = eng.stats["decode_phases"]
  got = eng.generate(prompts, SamplingParams(temperature=0.0, max_tokens=24, stop_token_ids=stops))
  assert eng.stats["decode_phases"] - before == 2
  for i, (c, f) in enumerate(zip(got, free)):
    k = 1 if i < 3 else 24
    assert c.token_ids == f.token_ids[:k] and c.finish_reason == ("stop" if i < 3 else "length")
    np.testing.assert_allclose(c.logprobs, f.logprobs[:k], atol=1e-5)
  comps = eng.generate(prompts, SamplingParams(temperature=1.0, max_tokens=20, seed=5, stop_token_ids=stops))
  for p, c in zip(prompts, comps):
    lp, _ = shifted_token_logprobs(model, jnp.asarray([p + c.token_ids]), temperature=1.0)
    np.testing.assert_allclose(np.asarray(lp[0, len(p):]), c.logprobs, atol=1e-4)


# -- per-request seeds: a reply's draws depend on its own seed alone -------------------------------------------

SEEDED = [[5, 17, 99, 230, 41, 7], [300, 12, 8], list(range(20, 45))]
SEEDS = (11, 2**31 + 5, 7)


def sampled(seeds, max_tokens=20, stop=()):
  return SamplingParams(temperature=1.0, max_tokens=max_tokens, seeds=seeds, stop_token_ids=stop)


def assert_same_reply(got, want):
  """Same tokens, finish reason and logprobs (float32 sums of other batch shapes: 1e-5, as above)."""
  assert got.token_ids == want.token_ids and got.finish_reason == want.finish_reason
  np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5)


def test_per_request_seeds_make_replies_independent_of_the_batch(model, engine):
  """A (prompt, seed) request gets the same completion alone, in a batch with other prompts, in another
  order, split over runs of ``max_slots`` and continued over decode phases next to a row that stops at once:
  a resumed evaluation regenerates its remaining replies in other batches and must get the same ones."""
  eng = engine
  alone = [eng.generate([p], sampled((s,)))[0] for p, s in zip(SEEDED, SEEDS)]
  # sampled at T=1 on the peaked model: varied tokens, so a changed key shows as changed tokens
  assert all(len(set(c.token_ids)) >= 5 for c in alone), [c.token_ids for c in alone]
  together = eng.generate(SEEDED, sampled(SEEDS))
  reordered = eng.generate(SEEDED[::-1], sampled(SEEDS[::-1]))[::-1]
  split = JaxEngine(model, max_slots=2, max_seq_len=256, seed=1).generate(SEEDED, sampled(SEEDS))  # runs of 2, 1
  for got in (together, reordered, split):
    for g, a in zip(got, alone):
      assert_same_reply(g, a)
  # the same prompt under two seeds in one call: its own reply for each seed, not clones
  twice = eng.generate([SEEDED[0], SEEDED[0]], sampled((SEEDS[0], 12345)))
  assert_same_reply(twice[0], alone[0])
  assert twice[1].token_ids != alone[0].token_ids
  # decode phases: row 1 stops on its first token, so the other two (of a batch of 4 with one padding row)
  # continue in a second batch of 2
  stop = alone[1].token_ids[0]
  assert stop not in alone[0].token_ids + alone[2].token_ids
  before = eng.stats["decode_phases"]
  phased = eng.generate(SEEDED, sampled(SEEDS, stop=(stop,)))
  assert eng.stats["decode_phases"] - before == 2
  assert phased[1].token_ids == [stop] and phased[1].finish_reason == "stop"
  np.testing.assert_allclose(phased[1].logprobs, alone[1].logprobs[:1], atol=1e-5)
  assert_same_reply(phased[0], alone[0])
  assert_same_reply(phased[2], alone[2])


def test_call_seed_without_per_request_seeds_is_reproducible(model, engine):
  """``seed`` alone: the call is reproducible whatever the engine's own key, copies of a prompt in the call
  draw different replies; unseeded calls follow the engine's key stream (same engine seed, same replies)."""
  a = engine
  b = JaxEngine(model, max_slots=8, max_seq_len=256, seed=1)
  g = SamplingParams(temperature=1.0, max_tokens=12, seed=3)
  first = a.generate(SEEDED + [SEEDED[0]], g)
  for got in (a.generate(SEEDED + [SEEDED[0]], g), b.generate(SEEDED + [SEEDED[0]], g)):
    for x, y in zip(got, first):
      assert x.token_ids == y.token_ids
      np.testing.assert_allclose(x.logprobs, y.logprobs, atol=1e-5)
  assert first[0].token_ids != first[3].token_ids
  u = SamplingParams(temperature=1.0, max_tokens=12)
  c = JaxEngine(model, max_slots=8, max_seq_len=256, seed=1)
  ub, uc = b.generate(SEEDED, u), c.generate(SEEDED, u)  # both engines' first unseeded call
  assert [x.token_ids for x in ub] == [x.token_ids for x in uc]
  assert [x.token_ids for x in b.generate(SEEDED, u)] != [x.token_ids for x in ub]


def test_changing_seeds_and_batch_composition_does_not_recompile(model, compilations):
  """Row keys are traced kernel arguments: after one call of each keying (per-request seeds, call seed,
  engine key), other seeds, another order and other prompts of the same length buckets compile nothing (XLA
  backend compilations counted through ``jax.monitoring``, eager helper ops included)."""
  eng = JaxEngine(model, max_slots=4, max_seq_len=256)
  eng.generate(SEEDED, sampled(SEEDS, max_tokens=6))  # warm-up
  eng.generate(SEEDED, SamplingParams(temperature=1.0, max_tokens=6, seed=8))
  eng.generate(SEEDED, SamplingParams(temperature=1.0, max_tokens=6))

  def calls():
    eng.generate(SEEDED[::-1], sampled((1, 2, 3), max_tokens=6))
    eng.generate([[1, 2, 3, 4], [7, 7], list(range(100, 130))], sampled((4, 5, 6), max_tokens=6))
    eng.generate(SEEDED[::-1], SamplingParams(temperature=1.0, max_tokens=6, seed=9))
    eng.generate(SEEDED, SamplingParams(temperature=1.0, max_tokens=6))

  compiles = compilations(calls)
  assert not compiles, f"{len(compiles)} XLA compilations after warm-up"


def test_new_request_counts_within_a_power_of_two_do_not_recompile(model, compilations):
  """The host-side row arrays of a call (row keys, last hidden states, their gathers and scatters) are padded
  to powers of two: after calls of 5 and 8 requests, calls of 6 and 7 (either keying, other prompts of the
  same length) compile nothing, and a padded call's replies are the ones each request gets alone."""
  eng = JaxEngine(model, max_slots=8, max_seq_len=256)

  def batch(n, base):
    return [[(base + 13 * i + j) % 500 + 3 for j in range(6)] for i in range(n)]

  for n in (5, 8):  # warm-up: one call of each keying per power-of-two bucket
    eng.generate(batch(n, 0), sampled(tuple(range(n)), max_tokens=4))
    eng.generate(batch(n, 0), SamplingParams(temperature=1.0, max_tokens=4, seed=1))
  got = {}

  def calls():
    for n in (6, 7):
      got[n] = eng.generate(batch(n, 40), sampled(tuple(range(100, 100 + n)), max_tokens=4))
      eng.generate(batch(n, 80), SamplingParams(temperature=1.0, max_tokens=4, seed=2))

  compiles = compilations(calls)
  assert not compiles, f"{len(compiles)} XLA compilations after warm-up"
  alone = JaxEngine(model, max_slots=8, max_seq_len=256)
  for r, prompt in enumerate(batch(7, 40)):
    assert_same_reply(got[7][r], alone.generate([prompt], sampled((100 + r,), max_tokens=4))[0])


def test_bad_per_request_seeds_raise_clear_errors(engine):
  with pytest.raises(ValueError, match="2 entries for 3 requests"):
    engine.generate(SEEDED, sampled((1, 2)))
  with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
    engine.generate(SEEDED[:1], sampled((-1,)))
  with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
    engine.generate(SEEDED[:1], sampled((2**32,)))


# -- continuous batching: submit / poll -----------------------------------------------------------------------

def drain(eng):
  out = {}
  while eng.in_flight():
    got = eng.poll()
    assert got, "poll returned nothing with requests in flight"
    out.update(got)
  return out


def test_submit_poll_equals_generate_with_the_same_seeds(model, engine):
  """Requests that enter while others are mid-reply (continuous batching) get the replies ``generate`` gives
  them with the same per-request seeds: tokens, finish reasons, logprobs (1e-5), and the logprobs of the
  trainer's forward (1e-4); a session's next turn reuses its prefix as under ``generate``."""
  eng = JaxEngine(model, max_slots=8, max_seq_len=256, seed=0)
  p = SamplingParams(temperature=1.0, max_tokens=20)
  want = engine.generate(SEEDED, sampled(SEEDS))
  first = eng.submit(SEEDED[0], p, session_id=1, seed=SEEDS[0])
  got = dict(eng.poll())  # the first request runs alone until it finishes
  assert first in got
  ids = [first] + [eng.submit(q, p, session_id=2 + i, seed=s) for i, (q, s) in enumerate(zip(SEEDED[1:], SEEDS[1:]))]
  got.update(drain(eng))
  for rid, w in zip(ids, want):
    assert_same_reply(got[rid], w)
  for q, rid in zip(SEEDED, ids):
    lp, _ = shifted_token_logprobs(model, jnp.asarray([q + got[rid].token_ids]), temperature=1.0)
    np.testing.assert_allclose(np.asarray(lp[0, len(q):]), got[rid].logprobs, atol=1e-4)
  # stopping rows leave, the rest continue; a joining request mid-way does not change anyone's reply
  stop = next(t for k, t in enumerate(want[1].token_ids) if k >= 1 and t not in want[1].token_ids[:k])
  eng2 = JaxEngine(model, max_slots=8, max_seq_len=256, seed=0)
  ps = SamplingParams(temperature=1.0, max_tokens=20, stop_token_ids=(stop,))
  ref = engine.generate(SEEDED, sampled(SEEDS, stop=(stop,)))
  a = eng2.submit(SEEDED[1], ps, seed=SEEDS[1])
  b = eng2.submit(SEEDED[2], ps, seed=SEEDS[2])
  res = dict(eng2.poll())
  c = eng2.submit(SEEDED[0], ps, seed=SEEDS[0])
  res.update(drain(eng2))
  for rid, w in zip((c, a, b), ref):
    assert_same_reply(res[rid], w)
  assert res[a].finish_reason == "stop" and eng2.num_sessions() == 0
  # next turn of session 1: only the new tokens are prefilled
  hist = SEEDED[0] + got[ids[0]].token_ids + [60, 61]
  before = eng.stats["prefill_tokens"]
  nxt = eng.submit(hist, p, session_id=1, seed=9)
  turn2 = drain(eng)[nxt]
  assert eng.stats["prefill_tokens"] - before == 2 + 1  # the last sampled token and the user turn
  assert_same_reply(turn2, engine.generate([hist], sampled((9,)))[0])


def test_submit_poll_does_not_recompile_across_batch_compositions(model, compilations):
  """After a warm-up over the batch buckets, other seeds, other prompts of the same length buckets and other
  arrival orders compile nothing (XLA compilations counted through ``jax.monitoring``)."""
  eng = JaxEngine(model, max_slots=4, max_seq_len=256)
  p = SamplingParams(temperature=1.0, max_tokens=6)

  def wave(prompts, seeds, stagger):
    for i, (q, s) in enumerate(zip(prompts, seeds)):
      eng.submit(q, p, seed=s)
      if stagger and i == 0:
        eng.poll()
    drain(eng)

  for stagger in (False, True):
    for n in (1, 2, 3, 4):  # distinct prompts: identical ones would share one prefill (a smaller batch)
      wave([[i + 1] + SEEDED[i % 3] for i in range(n)], range(n), stagger)

  def calls():
    wave([SEEDED[2], [1, 2, 3, 4], [7, 7]], (11, 12, 13), True)
    wave([list(range(100, 130)), SEEDED[0], SEEDED[1], [9] * 5], (1, 2, 3, 4), False)
    wave([SEEDED[1]], (5,), False)

  compiles = compilations(calls)
  assert not compiles, f"{len(compiles)} XLA compilations after warm-up"


def test_submit_rejects_bad_requests(model):
  eng = JaxEngine(model, max_slots=2, max_seq_len=64)
  p = SamplingParams(temperature=1.0, max_tokens=4)
  with pytest.raises(ValueError, match="empty prompt"):
    eng.submit([], p)
  with pytest.raises(ValueError, match="does not fit"):
    eng.submit([1] * 64, p)
  with pytest.raises(ValueError, match="seed argument"):
    eng.submit([1, 2], SamplingParams(seed=3))
  eng.submit([1, 2], p, session_id=7)
  with pytest.raises(ValueError, match="already has a request in flight"):
    eng.submit([1, 2, 3], p, session_id=7)
  with pytest.raises(ValueError, match="sample with"):
    eng.submit([3, 4], SamplingParams(temperature=0.5, max_tokens=4))
  eng.submit([3, 4], p)
  with pytest.raises(RuntimeError, match="fill all max_slots"):
    eng.submit([5, 6], p)
  with pytest.raises(RuntimeError, match="in flight"):
    eng.end_session(7)
  with pytest.raises(RuntimeError, match="in flight"):
    eng.update_weights(model)
  assert len(drain(eng)) == 2 and eng.poll() == []


def test_bfloat16_compute_stores_bfloat16_params_with_identical_outputs(peaked_ckpt, monkeypatch):
  """float32 parameters under bfloat16 compute: the engine keeps a bfloat16 copy (half the bytes a decode step
  reads) and samples exactly what an engine holding the float32 parameters samples, before and after a weight
  sync; the trainer's own parameters stay float32."""
  from codjax.models.qwen3 import Qwen3

  bf16 = from_pretrained(peaked_ckpt, dtype="bfloat16", param_dtype="float32")
  params = lambda e: jax.tree.leaves(e._params)
  cast = JaxEngine(bf16, max_slots=4, max_seq_len=128, seed=0)
  assert {x.dtype for x in params(cast)} == {jnp.dtype(jnp.bfloat16)}
  assert {x.dtype for x in jax.tree.leaves(nnx_params(bf16))} == {jnp.dtype(jnp.float32)}
  with monkeypatch.context() as m:
    m.setattr(Qwen3, "PARAMS_CAST_TO_COMPUTE_BEFORE_USE", False)
    plain = JaxEngine(bf16, max_slots=4, max_seq_len=128, seed=0)
    assert {x.dtype for x in params(plain)} == {jnp.dtype(jnp.float32)}
  sp = SamplingParams(temperature=1.0, max_tokens=12, seed=5)
  a, b = cast.generate(PROMPTS, sp), plain.generate(PROMPTS, sp)
  assert [c.token_ids for c in a] == [c.token_ids for c in b] and len(set(a[0].token_ids)) > 3
  assert [c.logprobs for c in a] == [c.logprobs for c in b]
  other = from_pretrained(peaked_ckpt, dtype="bfloat16", param_dtype="float32")
  other.q_ldnh[...] = other.q_ldnh[...] * 1.5
  cast.update_weights(other)
  with monkeypatch.context() as m:
    m.setattr(Qwen3, "PARAMS_CAST_TO_COMPUTE_BEFORE_USE", False)
    plain.update_weights(other)
  assert {x.dtype for x in params(cast)} == {jnp.dtype(jnp.bfloat16)}
  a2, b2 = cast.generate(PROMPTS, sp), plain.generate(PROMPTS, sp)
  assert [c.logprobs for c in a2] == [c.logprobs for c in b2] and [c.logprobs for c in a2] != [c.logprobs for c in a]


def nnx_params(model):
  from flax import nnx

  return nnx.state(model, nnx.Param)


# -- shared prompt prefixes and chunking ------------------------------------------------------------------------

SYSTEM = [(7 * j) % 400 + 20 for j in range(40)]  # a 40-token "system prompt" shared by two prompts


def test_share_plan_copies_duplicates_and_common_prefixes():
  """Hand-worked plans: rows 0 and 2 hold the same prefix (2 copies 0), rows 0 and 1 share the 40 system
  tokens (1, sorting after 0, copies them from leader 0), row 3 continues a cached history (None), row 4 shares
  fewer than ``min_share`` tokens with anything and leads; without partial sharing only the duplicate copies."""
  from codjax.rollout.jax_engine.cache import _share_plan

  a, b = SYSTEM + [5, 17, 99], SYSTEM + [300, 12]
  prefixes = [a, b, list(a), None, SYSTEM[:3] + [1, 2]]
  dup, part = _share_plan(prefixes, partial=True, min_share=16)
  assert dup == {2: 0} and part == {1: (0, 40)}
  dup, part = _share_plan(prefixes, partial=False, min_share=16)
  assert dup == {2: 0} and part == {}
  # b sorts before a when its first differing token is smaller: then b leads and a shares from it
  b2 = SYSTEM + [1, 2]
  assert _share_plan([a, b2], partial=True, min_share=16) == ({}, {0: (1, 40)})


def test_chunks_split_when_a_bucket_would_be_mostly_padding(model):
  """A group's next chunk: the bucket holding the remaining tokens, or the next smaller bucket when that
  plus the bucket of the rest is at most 3/4 of it (worked by hand for buckets 16 ... 512, the "fast"
  kernels'; "fast2" caps chunks at 256 tokens)."""
  want = {1: 16, 16: 16, 17: 32, 20: 32, 33: 32, 100: 128, 130: 128, 259: 256, 380: 256, 400: 512, 600: 512}
  fast = JaxEngine(model, max_slots=1, max_seq_len=64, kernels="fast")
  assert {n: fast._chunk_len(n) for n in want} == want
  fast2 = JaxEngine(model, max_slots=1, max_seq_len=64, kernels="fast2")
  assert {n: fast2._chunk_len(n) for n in want} == {**want, 400: 256, 600: 256}


def test_shared_prompt_prefixes_are_prefilled_once_and_stay_exact(model):
  """Two copies of a prompt (the G repeats of a first turn) and a prompt starting with the same 40-token
  system prompt copy those tokens' keys and values instead of computing them; every reply (tokens,
  logprobs) is the one its request gets alone, where nothing is shared, under ``generate`` and under
  ``submit``/``poll``; the next turn continues each session from its own history."""
  a, b = SYSTEM + [5, 17, 99, 230], SYSTEM + [300, 12, 8, 4, 77]
  prompts, seeds = [a, b, a, list(range(50, 62))], (1, 2, 3, 4)
  eng = JaxEngine(model, max_slots=8, max_seq_len=256)
  got = eng.generate(prompts, sampled(seeds, max_tokens=10), session_ids=[1, 2, 3, 4])
  # a's copy: all of a but its last token (the decode kernel feeds that one); b: the 40 system tokens
  shared = (len(a) - 1) + len(SYSTEM)
  assert eng.stats["shared_tokens"] == shared
  assert eng.stats["prefill_tokens"] == sum(len(p) for p in prompts) - shared
  alone = JaxEngine(model, max_slots=8, max_seq_len=256)
  for p, s, g in zip(prompts, seeds, got):
    assert_same_reply(g, alone.generate([p], sampled((s,), max_tokens=10))[0])
  assert got[0].token_ids != got[2].token_ids  # the copies draw their own replies
  hist = [p + g.token_ids + [60, 61] for p, g in zip(prompts, got)]
  nxt = eng.generate(hist, sampled((5, 6, 7, 8), max_tokens=8), session_ids=[1, 2, 3, 4])
  assert eng.stats["shared_tokens"] == shared  # continuing sessions share nothing new
  for h, s, g in zip(hist, (5, 6, 7, 8), nxt):
    assert_same_reply(g, alone.generate([h], sampled((s,), max_tokens=8))[0])
  stream = JaxEngine(model, max_slots=8, max_seq_len=256)
  rids = [stream.submit(p, SamplingParams(temperature=1.0, max_tokens=10), seed=s) for p, s in zip(prompts, seeds)]
  done = dict(stream.poll(min_finished=len(prompts)))
  assert stream.stats["shared_tokens"] == shared
  for rid, g in zip(rids, got):
    assert_same_reply(done[rid], g)


def test_continuous_arrivals_copy_prefixes_of_resident_and_ended_sessions(model):
  """Under continuous batching a request arriving alone copies the system prompt it shares with a resident
  session (one still holding its slot) or with an ended one whose slot nobody took since, and computes only the
  rest; once every slot was taken by unrelated sessions, nothing stale is copied. Every reply is the one the
  request gets from a fresh engine, where nothing is shared; ``generate`` keeps its within-call plan."""
  a, b, c, d = (SYSTEM + [5, 17, 99, 230], SYSTEM + [300, 12, 8, 4, 77], SYSTEM + [9, 9, 9, 41],
                SYSTEM + [64, 3, 2])
  n_sys = len(SYSTEM)  # the prompts differ from their 41st token on
  p = SamplingParams(temperature=1.0, max_tokens=10)
  alone = JaxEngine(model, max_slots=8, max_seq_len=256)
  eng = JaxEngine(model, max_slots=4, max_seq_len=256)

  def run(prompt, seed, session_id=None):
    before = dict(eng.stats)
    rid = eng.submit(prompt, p, session_id=session_id, seed=seed)
    got = drain(eng)[rid]
    assert_same_reply(got, alone.generate([prompt], sampled((seed,), max_tokens=10))[0])
    return eng.stats["shared_tokens"] - before["shared_tokens"], eng.stats["prefill_tokens"] - before["prefill_tokens"]

  assert run(a, 1, session_id=1) == (0, len(a))  # nothing to share with yet
  assert run(b, 2) == (n_sys, len(b) - n_sys)  # from session 1, resident
  eng.end_session(1)
  assert run(c, 3) == (n_sys, len(c) - n_sys)  # from an ended session's slot (a's or b's)
  # four unrelated sessions take every slot: the ended sessions' prefixes are gone
  rids = [eng.submit(list(range(100 + 10 * i, 130 + 10 * i)), p, session_id=10 + i, seed=i) for i in range(4)]
  drain(eng)
  for i in range(4):
    eng.end_session(10 + i)
  assert len(rids) == 4 and eng.num_sessions() == 0
  assert run(d, 4) == (0, len(d))
  # generate shares within its call only: the same prompt again, now with d's slot retired
  before = eng.stats["shared_tokens"]
  eng.generate([d], sampled((5,), max_tokens=10))
  assert eng.stats["shared_tokens"] == before


def test_min_batch_pads_small_calls_to_one_compiled_batch(model, engine, compilations):
  """The default ``min_batch`` of 8 under the "fast" kernels (every decode phase at least ``min_batch`` rows;
  "fast2" lets phases shrink to 2 rows: test_decode_phases_shrink_below_min_batch_under_fast2): after one call
  of 5 requests, calls of 1, 2 and 3 requests (other prompts of the same length buckets) run the same 8-row
  kernels, compiling nothing, and every reply equals the one an engine without the floor (``min_batch=1``,
  phases down to one row) gives."""
  eng = JaxEngine(model, max_slots=8, max_seq_len=256, kernels="fast")
  assert eng.min_batch == 8

  def batch(n, base):
    return [[(base + 13 * i + j) % 500 + 3 for j in range(6)] for i in range(n)]

  eng.generate(batch(5, 0), sampled(tuple(range(5)), max_tokens=6))
  got = {}

  def calls():
    for n in (1, 2, 3):
      got[n] = eng.generate(batch(n, 40 + n), sampled(tuple(range(10, 10 + n)), max_tokens=6))

  compiles = compilations(calls)
  assert not compiles, f"{len(compiles)} XLA compilations after warm-up"
  for n in (1, 2, 3):
    for g, w in zip(got[n], engine.generate(batch(n, 40 + n), sampled(tuple(range(10, 10 + n)), max_tokens=6))):
      assert_same_reply(g, w)
  with pytest.raises(ValueError, match="power of two"):
    JaxEngine(model, max_slots=2, max_seq_len=64, min_batch=3)


def record_decode_hlo(eng, into: dict, key) -> None:
  """Wraps ``eng._decode_fn`` so that the first decode loop it runs stores its compiled HLO text in
  ``into[key]`` (lowering compiles it once more)."""
  make = eng._decode_fn

  def spy(*sig):
    fn = make(*sig)

    def call(*args):
      if key not in into:
        into[key] = fn.lower(*args).compile().as_text()
      return fn(*args)
    return call

  eng._decode_fn = spy


def test_kernel_choices_give_the_same_replies_with_their_own_shapes_and_compiler_options(model, monkeypatch):
  """``kernels="fast"`` (the main job's) against ``"v1"`` (the kernels the README's recorded runs used): the same
  greedy and seeded replies, logprobs within float rounding, on a conversation past 512 positions (where the
  windows differ) after a lone long prompt (where the prefill floors differ); each compiled decode loop carries
  its own choice (on a host without AVX-512, as the main job's recorded run: YNNPACK fusions in v1's only)."""
  from codjax.rollout import jax_engine

  monkeypatch.setattr(jax_engine.kernels, "cpu_has", lambda flag: False)
  engines = {k: JaxEngine(model, max_slots=4, max_seq_len=1024, seed=0, kernels=k) for k in ("fast", "v1")}
  fast, v1 = engines["fast"], engines["v1"]
  assert fast.kernels == "fast" and JaxEngine(model, max_slots=1, max_seq_len=64).kernels == "fast3"
  # the documented shapes: 1.5x-power-of-two windows past 512 and a prefill floor of <= 256 token slots
  assert [fast._length_bucket(e) for e in (100, 300, 513, 700, 769, 1000)] == [128, 512, 768, 768, 1024, 1024]
  assert [v1._length_bucket(e) for e in (100, 300, 513, 700, 769, 1000)] == [128, 512, 1024, 1024, 1024, 1024]
  assert [fast._prefill_floor(c) for c in (16, 32, 64, 128, 256, 512)] == [8, 8, 4, 2, 1, 1]
  assert {v1._prefill_floor(c) for c in (16, 32, 64, 128, 256, 512)} == {8}
  lowered = {}
  for name, eng in engines.items():
    record_decode_hlo(eng, lowered, name)
  long_prompt = [(7 * i) % 500 + 3 for i in range(540)]
  prompts = [long_prompt, PROMPTS[0]]
  for params in (SamplingParams(temperature=0.0, max_tokens=12), sampled((11, 12), max_tokens=12)):
    got = fast.generate(prompts, params)
    want = v1.generate(prompts, params)
    for g, w in zip(got, want):
      assert_same_reply(g, w)
  assert fast._decode_fns.keys() != v1._decode_fns.keys()  # other windows: 768 (fast) and 1024 (v1)
  assert "ynn" in lowered["v1"].lower() and "ynn" not in lowered["fast"].lower()
  with pytest.raises(ValueError, match="kernels must be one of"):
    JaxEngine(model, max_slots=1, max_seq_len=64, kernels="turbo")


def test_decode_compiler_options_follow_the_host_cpu(model, monkeypatch):
  """``Kernels.cpu_decode_options_unless``: the "fast" kernels compile the decode loop without YNNPACK fusions
  on hosts without AVX-512 and with XLA's defaults (YNNPACK) on hosts with it; "v1" always with the defaults;
  no options off the CPU backend. The replies agree within float rounding either way."""
  import platform

  from codjax.rollout import jax_engine
  from codjax.rollout.jax_engine import KERNELS, cpu_has, decode_compiler_options

  off = {"xla_cpu_experimental_ynn_fusion_type": ""}
  assert cpu_has("no_such_cpu_flag") is False
  if platform.system() == "Linux" and platform.machine() == "x86_64":
    assert cpu_has("fpu") is True  # every x86-64 CPU lists it
  replies, hlo = {}, {}
  for host_avx512 in (False, True):
    monkeypatch.setattr(jax_engine.kernels, "cpu_has", lambda flag, _v=host_avx512: _v and flag == "avx512f")
    for name in ("fast", "fast2"):
      assert decode_compiler_options(KERNELS[name], "cpu") == ({} if host_avx512 else off)
      assert decode_compiler_options(KERNELS[name], "gpu") == {}
    assert decode_compiler_options(KERNELS["v1"], "cpu") == {}
    eng = JaxEngine(model, max_slots=2, max_seq_len=256, seed=0, kernels="fast")
    record_decode_hlo(eng, hlo, host_avx512)
    replies[host_avx512] = eng.generate(PROMPTS[:2], SamplingParams(temperature=0.0, max_tokens=10))
  assert "ynn" in hlo[True].lower() and "ynn" not in hlo[False].lower()
  for g, w in zip(replies[True], replies[False]):
    assert_same_reply(g, w)


def test_unrolled_prefill_writes_the_scanned_prefill_s_cache_bit_for_bit(model, monkeypatch):
  """The "fast" kernels prefill through the layers unrolled (``Kernels.unrolled_prefill``); the same kernels
  with the stacked-layer scan must leave identical cache bits and give identical replies (tokens and
  logprobs exactly): a lone 540-token prompt (a 512 chunk and a tail), a second turn that continues a session
  from a cached history, and a batch of new prompts at other chunk sizes."""
  import dataclasses

  from codjax.rollout import jax_engine

  assert jax_engine.KERNELS["fast"].unrolled_prefill and not jax_engine.KERNELS["v1"].unrolled_prefill
  monkeypatch.setitem(jax_engine.KERNELS, "fast_scan",
                      dataclasses.replace(jax_engine.KERNELS["fast"], unrolled_prefill=False))
  engines = {k: JaxEngine(model, max_slots=4, max_seq_len=1024, seed=0, kernels=k) for k in ("fast", "fast_scan")}
  hlo = {}
  for name, eng in engines.items():
    fn = eng._prefill_fn

    def spy(*args, _fn=fn, _name=name, **kwargs):
      hlo.setdefault(_name, _fn.lower(*args, **kwargs).as_text())
      return _fn(*args, **kwargs)

    eng._prefill_fn = spy
  long_prompt = [(7 * i) % 500 + 3 for i in range(540)]
  turn1 = [long_prompt, PROMPTS[0]]
  replies = {}
  for name, eng in engines.items():
    first = eng.generate(turn1, sampled((3, 4), max_tokens=10), session_ids=[1, 2])
    turn2 = [p + c.token_ids + [11, 12, 13] for p, c in zip(turn1, first)]
    second = eng.generate(turn2, sampled((5, 6), max_tokens=10), session_ids=[1, 2])
    third = eng.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=10))
    replies[name] = first + second + third
  assert_nontrivial(PROMPTS, replies["fast"][-3:])
  for g, w in zip(replies["fast"], replies["fast_scan"]):
    assert g.token_ids == w.token_ids and g.logprobs == w.logprobs
  for a, b in zip(jax.tree.leaves(engines["fast"]._cache), jax.tree.leaves(engines["fast_scan"]._cache)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  # the two paths are really different programs: a loop over the stacked layers in the scanned one only
  assert "while" in hlo["fast_scan"] and "while" not in hlo["fast"]


def test_decode_phases_shrink_below_min_batch_under_fast2(model, compilations):
  """``kernels="fast2"`` ("fast" with ``decode_floor=2``): a call whose replies end at different lengths keeps
  halving its decode batch below ``min_batch`` (8 -> 4 -> 2 rows) where "fast" runs every phase at 8 rows; the
  replies are the same (tokens exactly, logprobs within float rounding), a second identical call compiles
  nothing new, and the prefill floors stay those of "fast"."""
  engines = {k: JaxEngine(model, max_slots=8, max_seq_len=256, seed=0, kernels=k) for k in ("fast", "fast2")}
  prompts = [[(3 * i + 11 * j) % 400 + 5 for i in range(6 + 3 * j)] for j in range(8)]
  # per-row budgets from 2 to 30 tokens (no stop token): the rows finish one after another
  params = SamplingParams(temperature=1.0, max_tokens=30, seeds=tuple(range(100, 108)))
  budgets = [2, 3, 5, 8, 12, 17, 23, 30]
  # a row's budget is max_seq_len - len(prompt): pad each prompt so its budget is the one listed
  padded = [p + [7] * (256 - b - len(p)) for p, b in zip(prompts, budgets)]
  got = {}
  for name, eng in engines.items():
    got[name] = eng.generate(padded, params)
    assert [len(c.token_ids) for c in got[name]] == budgets
  for g, w in zip(got["fast2"], got["fast"]):
    assert_same_reply(g, w)
  rows = {name: sorted({sig[0] for sig in eng._decode_fns}) for name, eng in engines.items()}
  assert rows["fast"] == [8] and rows["fast2"] == [2, 4, 8], rows
  fast2 = engines["fast2"]
  assert fast2.stats["decode_phases"] > engines["fast"].stats["decode_phases"]
  again = compilations(lambda: fast2.generate(padded, params))
  assert not again, f"{len(again)} XLA compilations after warm-up"
  assert [fast2._prefill_floor(c) for c in (16, 64, 512)] == [engines["fast"]._prefill_floor(c) for c in (16, 64, 512)]


def test_fast3_decodes_small_batches_from_panel_weights_with_the_same_replies(model, peaked_ckpt, monkeypatch, compilations):
  """``kernels="fast3"`` ("fast2" plus ``decode_panels``): on an AVX-512 host the decode phases of 2 and 4 rows
  read the layer weights as column panels (``PanelWeight``, made once per weight version) and the 8-row phase
  the per-layer weights; the replies are fast2's (tokens exactly, logprobs within float rounding) before and
  after ``update_weights``, which remakes the panels without compiling; a host without AVX-512, a sharded
  engine and the "fast2" kernels keep plain weights."""
  from codjax.models.matmul import PanelWeight
  from codjax.rollout import jax_engine

  monkeypatch.setattr(jax_engine.kernels, "cpu_has", lambda flag: False)
  assert JaxEngine(model, max_slots=2, max_seq_len=64, kernels="fast3")._panels is None
  monkeypatch.setattr(jax_engine.kernels, "cpu_has", lambda flag: flag == "avx512f")
  engines = {k: JaxEngine(model, max_slots=8, max_seq_len=256, seed=0, kernels=k) for k in ("fast2", "fast3")}
  fast3 = engines["fast3"]
  assert engines["fast2"]._panels is None
  layer = fast3._panels[0]
  assert all(isinstance(layer[k], PanelWeight) for k in ("q_ldnh", "k_ldkh", "v_ldkh", "o_lnhd", "gate_ldf",
                                                         "up_ldf", "down_lfd"))
  assert not isinstance(layer["attn_norm_ld"], PanelWeight)
  np.testing.assert_array_equal(np.asarray(layer["gate_ldf"].reshape(layer["gate_ldf"].shape[0], -1).w_pkj[1]),
                                np.asarray(fast3._layers[0]["gate_ldf"])[:, 32:64])
  assert fast3._decode_weights(2)[1] is fast3._panels and fast3._decode_weights(4)[1] is fast3._panels
  assert fast3._decode_weights(8)[1] is fast3._layers
  prompts = [[(3 * i + 11 * j) % 400 + 5 for i in range(6 + 3 * j)] for j in range(8)]
  budgets = [2, 3, 5, 8, 12, 17, 23, 30]  # rows finish one after another: phases of 8, 4 and 2 rows
  padded = [p + [7] * (256 - b - len(p)) for p, b in zip(prompts, budgets)]
  params = SamplingParams(temperature=1.0, max_tokens=30, seeds=tuple(range(100, 108)))
  other = from_pretrained(peaked_ckpt)
  other.embed_vd[...] = other.embed_vd[...] * 1.5
  for turn in range(2):
    got = {name: eng.generate(padded, params) for name, eng in engines.items()}
    for g, w in zip(got["fast3"], got["fast2"]):
      assert_same_reply(g, w)
    assert [len(c.token_ids) for c in got["fast3"]] == budgets
    if turn == 0:
      before = got["fast3"]
      for eng in engines.values():
        eng.update_weights(other)
  assert [c.token_ids for c in got["fast3"]] != [c.token_ids for c in before]  # the new weights are in use
  assert sorted({sig[0] for sig in fast3._decode_fns}) == [2, 4, 8]
  again = compilations(lambda: fast3.update_weights(model))  # the RL loop's weight sync: panels remade, not recompiled
  assert not again, f"{len(again)} XLA compilations in a second update_weights"
  sharded = JaxEngine(model, max_slots=8, max_seq_len=256, mesh=make_mesh(data=1, fsdp=-1, tensor=1))
  assert sharded.kernels == "fast3" and sharded._panels is None


def test_packed_prefill_matches_padded_prefill(model, monkeypatch):
  """``Kernels.packed_prefill`` ("fast2"): prompts of very uneven lengths (one row padded to the chunk's row
  floor, rows from 3 to 300 tokens in shared chunks), a second turn from cached sessions and a batch with a
  duplicated prompt give the replies the padded prefill gives (tokens exactly, logprobs within float
  rounding: other product shapes); the packed program really runs fewer token rows than the padded one."""
  import dataclasses

  from codjax.rollout import jax_engine

  assert jax_engine.KERNELS["fast2"].packed_prefill and not jax_engine.KERNELS["fast"].packed_prefill
  monkeypatch.setitem(jax_engine.KERNELS, "fast2_padded",
                      dataclasses.replace(jax_engine.KERNELS["fast2"], packed_prefill=False))
  engines = {k: JaxEngine(model, max_slots=8, max_seq_len=1024, seed=0, kernels=k)
             for k in ("fast2", "fast2_padded")}
  shapes = []
  fn = engines["fast2"]._prefill_packed_fn

  def spy(weights, cache, slots, tokens, *rest, **kw):
    shapes.append((tokens.shape[1], kw["chunk_shape"]))
    return fn(weights, cache, slots, tokens, *rest, **kw)

  engines["fast2"]._prefill_packed_fn = spy
  lengths = (3, 300, 41, 170, 9, 260)
  turn1 = [[(13 * i + 7 * j) % 450 + 5 for i in range(n)] for j, n in enumerate(lengths)]
  got = {}
  for name, eng in engines.items():
    first = eng.generate(turn1, sampled(tuple(range(10, 16)), max_tokens=12), session_ids=list(range(6)))
    turn2 = [p + c.token_ids + [21, 22, 23, 24][: 1 + j % 4] for j, (p, c) in enumerate(zip(turn1, first))]
    second = eng.generate(turn2, sampled(tuple(range(20, 26)), max_tokens=12), session_ids=list(range(6)))
    lone = eng.generate([turn1[1], turn1[1], PROMPTS[2]], SamplingParams(temperature=0.0, max_tokens=12))
    got[name] = first + second + lone
  assert_nontrivial(PROMPTS[2:], got["fast2"][-1:])
  for g, w in zip(got["fast2"], got["fast2_padded"]):
    assert_same_reply(g, w)
  assert shapes and all(n <= b * c for n, (b, c) in shapes)
  assert sum(n for n, _ in shapes) < sum(b * c for _, (b, c) in shapes) / 2, shapes


def test_fast2_decode_windows_follow_the_furthest_position_in_64_steps(model, compilations):
  """``Kernels.decode_window_step`` ("fast2"): a decode call works on the next multiple of 64 positions at or
  past its furthest position (prompt length - 1 + the reply budget; at least 128), where "fast" takes powers
  of two below 512; the replies are those of "fast" (tokens exactly, logprobs within float rounding) and match the
  trainer's full forward; a second call with other prompt lengths in the same windows compiles nothing."""
  from codjax.rollout import jax_engine

  assert jax_engine.KERNELS["fast2"].decode_window_step == 64 and jax_engine.KERNELS["fast"].decode_window_step is None
  engines = {k: JaxEngine(model, max_slots=2, max_seq_len=512, seed=0, kernels=k) for k in ("fast", "fast2")}
  # furthest positions (n - 1 + 8): 107, 137, 192, 257, 330 -> fast2 windows 128, 192, 192, 320, 384
  lengths = (100, 130, 185, 250, 323)
  windows = {"fast2": [128, 192, 192, 320, 384], "fast": [128, 256, 256, 512, 512]}
  got = {name: [] for name in engines}
  for name, eng in engines.items():
    for j, n in enumerate(lengths):
      before = set(eng._decode_fns)
      prompt = [(7 * i + 31 * j) % 450 + 5 for i in range(n)]
      comp = eng.generate([prompt], sampled((40 + j,), max_tokens=8))[0]
      new = set(eng._decode_fns) - before
      assert not new or {sig[-1] for sig in new} == {windows[name][j]}, (name, n, new)
      assert {sig[-1] for sig in eng._decode_fns} >= {windows[name][j]}
      got[name].append((prompt, comp))
  for (p, g), (_, w) in zip(got["fast2"], got["fast"]):
    assert_same_reply(g, w)
    lp, _ = shifted_token_logprobs(model, jnp.asarray([p + g.token_ids]), temperature=1.0)
    np.testing.assert_allclose(np.asarray(lp[0, len(p):]), g.logprobs, atol=1e-4)
  fast2 = engines["fast2"]
  assert sorted({sig[-1] for sig in fast2._decode_fns}) == [128, 192, 320, 384]
  again = compilations(lambda: [fast2.generate([[9] * n], sampled((1,), max_tokens=8)) for n in (121, 140, 310)])
  assert not again, f"{len(again)} XLA compilations after warm-up"


def test_fast2_prefill_chunks_hold_at_most_256_tokens(model):
  """``Kernels.max_prefill_chunk`` ("fast2"): a 450-token prompt prefills as chunks of at most 256 tokens, each
  over the window of its own furthest position (256 then 512 positions, where "fast" runs one 512-token chunk
  over 512), with the reply "fast" samples (tokens exactly, logprobs within float rounding) and the trainer's
  full-forward logprobs; chunk buckets the engine is given must be positive."""
  from codjax.rollout import jax_engine

  assert jax_engine.KERNELS["fast2"].max_prefill_chunk == 256 and jax_engine.KERNELS["fast"].max_prefill_chunk is None
  engines = {k: JaxEngine(model, max_slots=2, max_seq_len=1024, seed=0, kernels=k) for k in ("fast", "fast2")}
  assert max(engines["fast2"].chunk_buckets) == 256 and max(engines["fast"].chunk_buckets) == 512
  calls = {k: [] for k in engines}

  def spy_of(name, fn):  # records (chunk shape [B, C], window) of every prefill call
    def spy(weights, cache, slots, tokens, *rest, **kw):
      calls[name].append((kw.get("chunk_shape", tuple(tokens.shape)), kw["length"]))
      return fn(weights, cache, slots, tokens, *rest, **kw)
    return spy

  engines["fast2"]._prefill_packed_fn = spy_of("fast2", engines["fast2"]._prefill_packed_fn)
  engines["fast"]._prefill_fn = spy_of("fast", engines["fast"]._prefill_fn)
  prompt = [(11 * i) % 450 + 5 for i in range(450)]
  got = {k: eng.generate([prompt], sampled((4,), max_tokens=10))[0] for k, eng in engines.items()}
  assert calls["fast2"] == [((1, 256), 256), ((1, 256), 512)], calls["fast2"]
  assert calls["fast"] == [((1, 512), 512)], calls["fast"]
  assert_same_reply(got["fast2"], got["fast"])
  lp, _ = shifted_token_logprobs(model, jnp.asarray([prompt + got["fast2"].token_ids]), temperature=1.0)
  np.testing.assert_allclose(np.asarray(lp[0, len(prompt):]), got["fast2"].logprobs, atol=1e-4)
  for bad in ((), (0, 16), (-4,)):
    with pytest.raises(ValueError, match="chunk_buckets"):
      JaxEngine(model, max_slots=2, max_seq_len=64, chunk_buckets=bad)
