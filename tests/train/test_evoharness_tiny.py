"""EvoHarness-RL through the trainer (launch/train.py on experiments/evoharness_tiny.py, shrunk): SFT on the harness
teacher's successful episodes, cost-aware GRPO with KL to the SFT policy, the shared bank consolidated after every
update and stored in the checkpoints, a resume that restores the checkpoint's bank, evaluation files in the paper's
layout, and notebooks/evoharness_run.ipynb executed on the run the trainer wrote."""

import json
import os
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from codjax.common.metrics import read_jsonl
from codjax.eval import evoharness_plots

pytestmark = pytest.mark.slow  # two short launch/train.py runs and the notebook (~3 min)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, "notebooks", "evoharness_run.ipynb")
SMALL = ["--config.model.tiny.hidden_size=64",
         "--config.model.tiny.num_hidden_layers=1", "--config.model.tiny.intermediate_size=128",
         "--config.model.tiny.corpus_packs=12", "--config.data.packs_per_step=2", "--config.data.repeats=2",
         "--config.evoharness.seed_bank_packs=6", "--config.sft.steps=6", "--config.sft.warmup_steps=1",
         "--config.sft.num_packs=12", "--config.sft.batch_size=8", "--config.eval.num_packs=3",
         "--config.checkpoint.every=1", "--config.checkpoint.max_to_keep=3", "--config.log.progress=False",
         "--config.log.tensorboard=False", "--config.rollout.max_slots=16"]


def _train(run_dir, steps, resume=False, extra=()):
  base = os.path.join(str(run_dir), "base_model")
  cmd = [sys.executable, os.path.join(ROOT, "launch", "train.py"), "--config=experiments/evoharness_tiny.py",
         f"--config.run_dir={run_dir}", f"--config.model.path={base}", f"--config.total_steps={steps}",
         # a 14-turn budget (the teacher needs ~12 turns) keeps every step a few seconds on CPU
         "--config.data.envs.household.params.max_turns=14", "--config.eval.envs.seen.params.max_turns=14",
         "--config.eval.envs.unseen.params.max_turns=14", *SMALL, *extra]
  if resume:
    cmd.append("--resume")
  out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
  assert out.returncode == 0, out.stderr[-4000:]
  return out.stdout + out.stderr


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  d = tmp_path_factory.mktemp("evoharness") / "run"
  log = _train(d, 2)
  return d, log


def test_sft_rl_bank_and_evaluation_files(run):
  d, log = run
  assert os.path.isfile(d / "sft_model" / "config.json")
  stats = json.load(open(d / "sft_stats.json"))
  assert stats["teacher_metrics"]["evoharness/success_rate"] > 0.5  # SFT kept the teacher's successful episodes
  rows = [r for r in read_jsonl(str(d / "metrics.jsonl")) if "train/loss" in r]
  assert [r["step"] for r in rows] == [1, 2]
  for r in rows:
    assert "train/kl" in r and "evoharness/calls_per_episode" in r and "evoharness/reward/lambda_div" in r
    assert r["bank/updates"] == r["step"]
  # the diversity weight anneals with u = the bank's update counter (U = total_steps of the config, 16)
  assert rows[0]["evoharness/reward/lambda_div"] == pytest.approx(1.0)
  bank = json.load(open(d / "harness" / "bank.json"))
  assert bank["meta"]["updates"] == 2
  log_lines = evoharness_plots.load_bank_log(str(d))
  assert [x["step"] for x in log_lines] == [1, 2]
  for tag in ("start", "final"):
    res = json.load(open(d / "eval" / f"{tag}.json"))["results"]
    assert set(res) == {"seen", "unseen"} and all("family_success" in r and "task_success" in r for r in res.values())
  base = json.load(open(d / "eval" / "baselines" / "expert.json"))["results"]
  assert all(r["success"] == 1.0 and r["calls_per_episode"] > 0 for r in base.values())
  assert set(json.load(open(d / "eval" / "rl_effect.json"))) == {"seen", "unseen"}
  assert "Pick2" in log and "[RL effect] seen" in log
  meta = json.load(open(d / "checkpoints" / "2" / "meta" / "metadata"))
  assert meta["workflow_state"]["bank"]["meta"]["updates"] == 2


def test_resume_restores_the_checkpoint_bank(run, tmp_path):
  d, _ = run
  import shutil

  r = tmp_path / "run"
  shutil.copytree(d, r)
  shutil.rmtree(r / "checkpoints" / "2")  # the newest checkpoint is lost: the run resumes from step 1
  # the resumed steps consolidate with the policy itself (the LLM consolidator through the trainer's engine)
  _train(r, 3, resume=True, extra=["--config.evoharness.consolidator=llm"])
  assert json.load(open(r / "harness" / "bank.json"))["meta"]["updates"] == 3
  lines = evoharness_plots.load_bank_log(str(r))
  assert [x["step"] for x in lines] == [1, 2, 3]  # step 2's old line replaced
  assert lines[0]["report"]["consolidator"] == "rule" and lines[2]["report"]["consolidator"] == "llm"
  # a tiny random policy writes no valid ops JSON: the failure is recorded, the evidence carried, nothing breaks
  if not lines[2]["report"]["ok"]:
    assert lines[2]["report"]["error"] and json.load(open(r / "harness" / "llm_carry.json"))
  rows = [x for x in read_jsonl(str(r / "metrics.jsonl")) if "train/loss" in x]
  assert [x["step"] for x in rows] == [1, 2, 3]


def test_notebook_runs_on_the_trainer_run(run):
  d, _ = run
  nb = nbformat.read(NOTEBOOK, as_version=4)
  os.environ["CODJAX_RUN_DIR"] = str(d)
  try:
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": ROOT}}).execute()
  finally:
    os.environ.pop("CODJAX_RUN_DIR", None)
  text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
  assert "calls per episode, first -> last logged step" in text
  assert "Pick2" in text and "seen (final)" in text
  images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
  assert len(images) >= 3
