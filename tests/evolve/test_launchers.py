"""launch/evolve.py and launch/difficulty.py as a user runs them (subprocesses): lineages grown, resumed
exactly after an interruption, and measured with fixed reference agents (Environment Evolution paper,
arXiv 2609.04128, Figure 3)."""

import json
import os
import subprocess
import sys

import pytest

from codjax.evolve.lineage import load_lineages
from codjax.evolve.llm.rubrics import DEFAULT_RUBRICS

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_launcher(script, *args):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, os.path.join(ROOT, "launch", script), *args], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


EVOLVE = ("--env=maze_compact", "--lineages=3", "--generations=3", "--width=2", "--seed=5")


def _records(d):
  return {name: open(os.path.join(d, name)).read() for name in sorted(os.listdir(d)) if name.endswith(".jsonl")}


def test_evolve_grows_resumes_and_difficulty_measures(tmp_path):
  out = tmp_path / "lin"
  proc = run_launcher("evolve.py", *EVOLVE, f"--out={out}")
  assert "maze_compact-002:" in proc.stdout and "gen/s" in proc.stderr  # a line per lineage, a progress bar
  whole = _records(out)
  assert sorted(whole) == [f"maze_compact-00{i}.jsonl" for i in range(3)]
  lineages = load_lineages(str(out))
  summary = json.loads((out / "summary.json").read_text())
  for lin in lineages:
    assert lin.end and summary["lineages"][lin.id]["generations"] == len(lin.generations) - 1
    heads = [g[0] for g in lin.generations]
    assert all(b.difficulty >= a.difficulty for a, b in zip(heads, heads[1:]))
  # an interrupted run (one file cut inside a line, one without its last generation) resumes exactly
  cut = tmp_path / "cut"
  cut.mkdir()
  for name, text in whole.items():
    lines = text.splitlines(keepends=True)
    (cut / name).write_text("".join(lines[:2]) + lines[2][:30] if name.endswith("0.jsonl") and len(lines) > 2
                            else "".join(lines[:-1]))
  run_launcher("evolve.py", *EVOLVE, f"--out={cut}")
  assert _records(cut) == whole
  # Figure 3: the scripted expert passes the verified environments, the random player rarely
  res_path = tmp_path / "difficulty.json"
  proc = run_launcher("difficulty.py", f"--runs={out}", "--agents=expert,random", "--rollouts=4",
                      f"--out={res_path}")
  assert "1-step dPass" in proc.stdout
  rows = json.loads(res_path.read_text())["results"][str(out)]["generations"]
  assert rows[0]["lineages"] == 3 and rows[0]["generation"] == 0
  for r in rows:
    assert r["expert/pass_rate"] >= 0.5 and r["random/pass_rate"] < r["expert/pass_rate"]
    assert r["expert/turns"] > 0
  assert all(0.0 <= r["mutation/environment"] <= 1.0 for r in rows[1:])
  assert rows[-1]["difficulty"] > rows[0]["difficulty"]


@pytest.mark.slow
def test_difficulty_with_a_fixed_model_checkpoint(tmp_path, tiny_ckpt):
  out = tmp_path / "lin"
  run_launcher("evolve.py", "--env=maze_compact", "--lineages=1", "--generations=1", f"--out={out}")
  res_path = tmp_path / "d.json"
  run_launcher("difficulty.py", f"--runs={out}", "--agents=model", f"--model={tiny_ckpt}", "--rollouts=1",
               "--max_tokens=4", f"--out={res_path}")
  rows = json.loads(res_path.read_text())["results"][str(out)]["generations"]
  assert [r["lineages"] for r in rows] == [1] * len(rows) and len(rows) in (1, 2)
  assert all(0.0 <= r["model/pass_rate"] <= 1.0 and r["model/turns"] >= 1 for r in rows)


@pytest.mark.slow
def test_evolve_with_the_llm_evolver_on_the_jax_sampler(tmp_path, tiny_ckpt):
  """A random tiny model writes no valid task: every attempt is rejected with a reason, the lineage ends
  after its seed, and the failures become rubrics in the bank file."""
  out = tmp_path / "term"
  proc = run_launcher("evolve.py", "--env=terminal_simulator", "--evolver=llm", f"--model={tiny_ckpt}",
                      "--lineages=1", "--generations=2", "--repair_budget=1", "--max_tokens=8", f"--out={out}")
  assert "all directions failed at generation 1" in proc.stdout
  (lin,) = load_lineages(str(out))
  assert len(lin.generations) == 1 and lin.end.startswith("all directions failed")
  end = json.loads((out / "terminal_simulator-000.jsonl").read_text().splitlines()[-1])
  assert {r["direction"] for r in end["rejected"]} == {"scenario", "skill", "length"}
  assert all(r["reason"] for r in end["rejected"])
  rubrics = json.loads((out / "rubrics.json").read_text())["rubrics"]
  assert len(rubrics) > len(DEFAULT_RUBRICS)
  assert [r for r in rubrics if r["source"] != "default"][0]["source"] == "no JSON object found in the reply"
