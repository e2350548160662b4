"""launch/expert_eval.py and launch/orbit_oracles.py as a user runs them (subprocesses): environment and
policy parameters are ml_collections config overrides (``--params.<name>=<value>``), and the ORBIT oracles
are played by ``codjax.agents.orbit.run_orbit``.

Expected values are independent of the code: Mastermind (3 of 6 digits, no repeats, 3 guesses per
episode) has 120 codes; the exact optimum wins 44 of them in one episode and every code by episode 2
(exact dynamic programming over the codes consistent with the feedback, computed separately 2026-11-30;
docs/methods/orbit.md); with guesses that may repeat digits the oracle wins 45 (benchmarks/README.md).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_launcher(script, *args, check=True):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, os.path.join(ROOT, "launch", script), *args], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)
  if check:
    assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def test_orbit_oracles_mastermind_every_code(tmp_path):
  out = tmp_path / "mm.json"
  run_launcher("orbit_oracles.py", "--games=mastermind", "--mastermind_all_codes", f"--out={out}")
  r = json.loads(out.read_text())["results"]["mastermind"]
  assert r["n"] == 120
  assert [r[f"episode_{k}/success_rate"] for k in (1, 2, 3)] == pytest.approx([44 / 120, 1.0, 1.0])
  assert r["episode/success_count"] == pytest.approx(2 + 44 / 120)
  # a string-valued policy parameter through --policy_params.<name>
  out2 = tmp_path / "mm_all.json"
  run_launcher("orbit_oracles.py", "--games=mastermind", "--mastermind_all_codes", "--policy_params.guess_pool=all",
               f"--out={out2}")
  data = json.loads(out2.read_text())
  assert data["flags"]["policy_params"] == {"guess_pool": "all"}
  assert data["results"]["mastermind"]["episode_1/success_rate"] == pytest.approx(45 / 120)


def test_expert_eval_params_and_standard_errors(tmp_path):
  out = tmp_path / "maze.json"
  run_launcher("expert_eval.py", "--env=maze", "--params.max_turns=12", "--packs=6", "--pack_size=2",
               f"--out={out}")
  r = json.loads(out.read_text())
  assert r["params"] == {"max_turns": 12}  # parsed as a Python int, not the string "12"
  rewards = np.asarray(r["rewards"])
  assert rewards.shape == (6, 2)
  np.testing.assert_allclose(r["se"], rewards.std(axis=0, ddof=1) / np.sqrt(6))
  gap = rewards[:, 1] - rewards[:, 0]
  assert r["gap"] == pytest.approx(gap.mean()) and r["gap_se"] == pytest.approx(gap.std(ddof=1) / np.sqrt(6))
  bad = run_launcher("expert_eval.py", "--env=maze", "--params.size=7", "--packs=2", check=False)
  assert bad.returncode != 0 and "unknown parameter(s) ['size']" in bad.stderr
