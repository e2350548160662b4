"""``JaxWorkers``: JAX engines side by side on one device, a call's requests split over them by session.

Every check compares with one ``JaxEngine`` of the same seed, the reference a user swaps the workers in for:
the same replies (tokens, finish reasons; logprobs within float rounding of other batch shapes), over
multi-turn sessions whose caches are reused, under per-request, per-call and unseeded draws; one copy of the
weights and one compilation per kernel for all workers; weight updates reaching every worker."""

import jax
import numpy as np
import pytest

from codjax.agents.cod import CodSettings, Pack, run_cod
from codjax.agents.token_backend import EngineBackend
from codjax.envs import derive_seed, make
from codjax.models import from_pretrained
from codjax.models.tokenizer import load_tokenizer
from codjax.rollout import SamplingParams
from codjax.rollout.jax_engine import JaxEngine
from codjax.rollout.jax_workers import JaxWorkers

pytestmark = pytest.mark.slow  # engines compile per shape


@pytest.fixture(scope="module")
def model(peaked_ckpt):
  return from_pretrained(peaked_ckpt)


def engines(model, seed=0, max_seq_len=256, **kw):
  kw = dict(max_seq_len=max_seq_len, seed=seed, **kw)
  return JaxEngine(model, max_slots=8, **kw), JaxWorkers(model, workers=2, max_slots=8, **kw)


def assert_same(got, want):
  assert [c.token_ids for c in got] == [c.token_ids for c in want]
  assert [c.finish_reason for c in got] == [c.finish_reason for c in want]
  for g, w in zip(got, want):
    np.testing.assert_allclose(g.logprobs, w.logprobs, atol=1e-5)


# two pairs of prompts that share a 20-token prefix (a pack's repeats), and different lengths
BASE = [list(range(30, 50)), list(range(200, 220))]
TURN1 = [BASE[0] + [7, 8], BASE[0] + [9], BASE[1] + [5, 6, 7], BASE[1] + [11, 12]]


def test_workers_reply_as_one_engine_over_multi_turn_sessions(model):
  """Four sessions, two turns, three kinds of draws: every reply equals one engine's; the sessions are split
  two and two, each pair of prompts sharing a prefix on one worker (it is prefilled once there), and the
  second turn reuses every session's cache on its worker."""
  one, w = engines(model)
  sids = [11, 12, 13, 14]
  for params in (SamplingParams(temperature=1.0, max_tokens=10, seed=5),  # per call
                 SamplingParams(temperature=1.0, max_tokens=10, seeds=(1, 2, 3, 4)),  # per request
                 SamplingParams(temperature=1.0, max_tokens=10)):  # the engines' key streams
    a1, b1 = one.generate(TURN1, params, sids), w.generate(TURN1, params, sids)
    assert_same(b1, a1)
    assert len({t for c in a1 for t in c.token_ids}) >= 8, [c.token_ids for c in a1]  # varied draws
    assert [e.num_sessions() for e in w.engines] == [2, 2]
    turn2 = [p + c.token_ids + [40 + i, 41] for i, (p, c) in enumerate(zip(TURN1, a1))]
    before = w.stats["reused_tokens"]
    a2, b2 = one.generate(turn2, params, sids), w.generate(turn2, params, sids)
    assert_same(b2, a2)
    assert w.stats["reused_tokens"] - before == sum(len(p) + len(c.token_ids) - 1 for p, c in zip(TURN1, a1))
    for s in sids:
      one.end_session(s)
      w.end_session(s)
    assert w.num_sessions() == 0
  # the pairs sharing a prefix were split by worker, so each worker copied its pair's 20 tokens, never computed
  # them twice: as many copied tokens as one engine
  assert w.stats["shared_tokens"] == one.stats["shared_tokens"] > 0


def test_workers_share_weights_and_compile_each_kernel_once(model, peaked_ckpt, compilations):
  """The second worker adds no copy of the weights and no compilation; a weight update reaches both workers
  (replies as a fresh engine's with the new weights), and the old weights come back the same way."""
  w = JaxWorkers(model, workers=2, max_slots=4, max_seq_len=256, seed=0)
  a, b = w.engines
  assert b._params is a._params and b._layers is a._layers and b._panels is a._panels
  g = SamplingParams(temperature=0.0, max_tokens=8)
  first = compilations(lambda: w.generate(TURN1[:2], g, [1, 2]))  # one worker: both sessions are new, 1 + 1
  assert first, "the first call compiles its kernels"
  assert [e.num_sessions() for e in w.engines] == [1, 1]
  # the same shapes on the other pair of sessions: each worker runs what the first call compiled
  again = compilations(lambda: w.generate(TURN1[2:], g, [3, 4]))
  assert not again, f"{len(again)} XLA compilations for kernels the other worker compiled"
  before = [c.token_ids for c in w.generate(TURN1, g)]
  other = from_pretrained(peaked_ckpt)
  other.embed_vd[...] = jax.random.normal(jax.random.key(7), other.embed_vd[...].shape)
  w.update_weights(other)
  assert b._params is a._params
  changed = w.generate(TURN1, g)
  assert_same(changed, JaxEngine(other, max_slots=4, max_seq_len=256).generate(TURN1, g))
  assert [c.token_ids for c in changed] != before
  w.update_weights(model)
  assert [c.token_ids for c in w.generate(TURN1, g)] == before


def test_cod_rollout_through_workers_equals_one_engine(model, peaked_ckpt):
  """The trainer's rollout path (``run_cod`` over ``EngineBackend``): the same trajectories, token for
  token, through two workers as through one engine, and every session released at the end."""
  tok = load_tokenizer(peaked_ckpt)
  fam = make("rps")
  packs = [Pack("rps", fam, derive_seed(9, k), (derive_seed(9, k, 0), derive_seed(9, k, 1)), k) for k in range(2)]
  params = SamplingParams(temperature=1.0, max_tokens=12, stop_token_ids=(tok.eos_token_id,))
  out = []
  for eng in engines(model, seed=3, max_seq_len=2048):  # the tiny tokenizer spells RPS prompts in ~500 tokens
    backend = EngineBackend(eng, tok, params, max_prompt_tokens=2000, seed=4)
    trajs = run_cod(backend, packs, 2, CodSettings(protocol="compact"))
    out.append([(e.tokens, e.reward) for t in trajs for e in t.episodes()])
    assert eng.num_sessions() == 0
  assert out[0] == out[1]
  assert len({tuple(t) for t, _ in out[0]}) == len(out[0])  # the repeats drew different episodes


def test_bad_settings_and_requests_raise_clear_errors(model):
  for bad in (0, 1.5):
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
      JaxWorkers(model, workers=bad)
  with pytest.raises(ValueError, match="gives some of the 4 workers no cache slot"):
    JaxWorkers(model, workers=4, max_slots=3)
  first = JaxEngine(model, max_slots=2, max_seq_len=256)
  with pytest.raises(ValueError, match="share_with needs an engine of the same model, kernels"):
    JaxEngine(model, max_slots=2, max_seq_len=256, kernels="fast", share_with=first)
  w = JaxWorkers(model, workers=2, max_slots=4, max_seq_len=256)
  g = SamplingParams(temperature=0.0, max_tokens=4)
  with pytest.raises(ValueError, match="empty prompt"):  # raised in a worker's thread, reaches the caller
    w.generate([[1, 2, 3], []], g)
  with pytest.raises(ValueError, match="distinct"):
    w.generate([[1, 2], [3, 4]], g, [5, 5])
  with pytest.raises(ValueError, match="seeds has 1 entries for 2 requests"):
    w.generate([[1, 2], [3, 4]], SamplingParams(seeds=(1,)))
  # the workers still serve after the refused calls
  assert_same(w.generate(TURN1, g), JaxEngine(model, max_slots=4, max_seq_len=256).generate(TURN1, g))
  w.close()
  with pytest.raises(RuntimeError, match="JaxWorkers is closed"):
    w.generate(TURN1, g)


def test_the_trainer_s_engine_factory_makes_workers_on_one_device_only(model):
  """``rollout.jax_workers`` through ``build_engine`` (the trainer's and evaluation's factory): workers with the
  configured slots and kernels; a multi-device mesh (the tests' 8 CPU devices) is refused with the setting to
  change, not split silently."""
  from codjax.parallel import make_mesh
  from codjax.train.config import base_config
  from codjax.train.engines import build_engine

  r = base_config().rollout
  r.update(dict(jax_workers=2, max_slots=6, max_prompt_tokens=200, max_response_tokens=16, jax_kernels="fast2"))
  eng = build_engine(r, model, None, mesh=None)
  try:
    assert isinstance(eng, JaxWorkers) and eng.workers == 2 and eng.max_slots == 6
    assert [e.kernels for e in eng.engines] == ["fast2", "fast2"] and eng.engines[0].max_seq_len == 217
  finally:
    eng.close()
  assert len(jax.devices()) > 1
  with pytest.raises(ValueError, match="rollout.jax_workers=2 runs its engines on one device"):
    build_engine(r, model, None, mesh=make_mesh())
