"""Training on evolved lineages through the trainer: packs come from the scheduler's active environments, the
scheduler's state is checkpointed, and a resumed run continues exactly (docs/methods/environment_evolution.md)."""

import os

import pytest

from codjax.common.metrics import read_jsonl
from codjax.evolve import registry
from codjax.evolve.evolution import EvolveSettings, grow
from codjax.train.loop import Trainer

pytestmark = pytest.mark.slow  # three tiny training runs (~1.5 min on 2 cores)

TIMING = ("time", "time/", "tok_per_s", "rollout_gen_tok_per_s")


@pytest.fixture(scope="module")
def lineage_dir(tmp_path_factory):
  d = tmp_path_factory.mktemp("lineages")
  param = registry.get("maze_compact")
  for i in range(3):
    assert grow(param, str(d), f"L{i}", param.seed_point(i, 50 + i), EvolveSettings(generations=2, width=2, seed=i))
  return str(d)


def _run(train_config, run_dir, model, lineage_dir, steps, resume=False, scheduler="el", **over):
  cfg = train_config(run_dir, model, total_steps=steps, **{
      "data.lineages.dir": lineage_dir, "data.lineages.scheduler": scheduler, "data.packs_per_step": 2, **over})
  t = Trainer(cfg, resume=resume)
  try:
    t.run()
  finally:
    t.close()
  return [{k: v for k, v in r.items() if not any(k == x or k.startswith(x) for x in TIMING)}
          for r in read_jsonl(os.path.join(run_dir, "metrics.jsonl")) if "train/loss" in r]


def test_lineage_runs_report_the_scheduler_and_resume_exactly(tmp_path, tiny_train_model, train_config,
                                                             lineage_dir, capfd):
  whole = _run(train_config, tmp_path / "whole", tiny_train_model, lineage_dir, 3, **{"log.progress": True})
  assert [r["step"] for r in whole] == [1, 2, 3]
  # the progress bar shows the scheduler's figures beside the loss, not only metrics.jsonl
  bar = capfd.readouterr().err
  assert "sched/partial_groups=" in bar and "sched/pass_rate=" in bar and "loss=" in bar
  for r in whole:
    assert 0.0 <= r["sched/pass_rate"] <= 1.0 and 0.0 <= r["sched/partial_groups"] <= 1.0
    assert r["sched/live"] + r["sched/exhausted"] + r["sched/frozen"] == 3
  meta_dir = tmp_path / "whole" / "checkpoints"
  steps = sorted(int(s) for s in os.listdir(meta_dir) if s.isdigit())
  assert steps[-1] == 3
  cut = tmp_path / "cut"
  _run(train_config, cut, tiny_train_model, lineage_dir, 2)
  resumed = _run(train_config, cut, tiny_train_model, lineage_dir, 3, resume=True)
  assert resumed == whole
  # a run on random scheduling draws from later generations too, and says so in its metrics
  rnd = _run(train_config, tmp_path / "random", tiny_train_model, lineage_dir, 3, scheduler="random")
  assert max(r["sched/batch_generation"] for r in rnd) > 0.0
  assert all("sched/live" not in r for r in rnd)


def test_a_lineage_run_refuses_a_missing_lineage_dir(tmp_path, tiny_train_model, train_config):
  cfg = train_config(tmp_path / "run", tiny_train_model, **{"data.lineages.dir": str(tmp_path / "nowhere")})
  with pytest.raises(ValueError, match="no lineage files"):
    Trainer(cfg)
