"""experiments/orbit_tiny_learns.py (the README's ORBIT run) in a reduced form, through the Trainer: the
scripted baselines, the evaluations before and after RL, the paired RL effect, the printed tables, the
notebook on the run directory, and a repeat with the same seed giving identical numbers."""

import json
import os

import pytest

from codjax.train.config import load_experiment, validate

pytestmark = pytest.mark.slow  # two reduced trainer runs and the notebook (~2 min)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, "notebooks", "explore_run.ipynb")


def reduced_config(run_dir: str, base_model: str):
  cfg = load_experiment(os.path.join(ROOT, "experiments", "orbit_tiny_learns.py")).get_config()
  cfg.run_dir = run_dir
  cfg.model.path = base_model
  cfg.model.tiny.corpus_packs = 12
  cfg.sft.update(dict(steps=3, batch_size=2, num_packs=4, warmup_steps=1, log_every=1))
  cfg.data.update(dict(packs_per_step=1, repeats=2))
  cfg.total_steps = 1
  cfg.eval.num_packs = 4
  cfg.rollout.max_slots = 8
  # a short context (trajectories are cut after ~10 moves, the overflow path): fewer engine steps and shapes
  cfg.rollout.max_prompt_tokens = cfg.train.seq_len = cfg.sft.seq_len = 320
  cfg.log.progress = False
  cfg.log.tensorboard = False
  return validate(cfg)


def train(cfg) -> None:
  from codjax.train.loop import Trainer

  trainer = Trainer(cfg)
  try:
    trainer.run()
  finally:
    trainer.close()


def read(run_dir: str, *parts: str) -> dict:
  with open(os.path.join(run_dir, "eval", *parts)) as f:
    return json.load(f)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  base = tmp_path_factory.mktemp("orbit_learns")
  out = {}
  for name in ("a", "b"):  # the same config twice: the second reuses the written base model
    train(reduced_config(str(base / name), str(base / "base_model")))
    out[name] = str(base / name)
  return out


def test_committed_config_is_the_documented_one():
  cfg = validate(load_experiment(os.path.join(ROOT, "experiments", "orbit_tiny_learns.py")).get_config())
  assert cfg.workflow == "orbit" and [e.name for e in cfg.data.envs.values()] == ["maze"]
  assert [(e.name, e.preset) for e in cfg.eval.envs.values()] == [("maze", "compact")]
  assert (cfg.data.pack_size, cfg.eval.pack_size, cfg.eval.temperature) == (3, 3, 0.6)  # T = 3, paper's eval T
  assert cfg.eval.num_packs >= 200 and cfg.eval.at_start and cfg.eval.at_end
  assert cfg.data.n_test >= cfg.eval.num_packs * cfg.eval.pack_size  # distinct held-out instances for every pack
  assert cfg.rollout.temperature == cfg.eval.temperature  # RL samples at the evaluation temperature (docstring)
  assert (cfg.algorithm.loss, cfg.algorithm.eps_low, cfg.algorithm.eps_high) == ("ppo", 0.2, 0.28)
  assert cfg.algorithm.kl_coef == 0.0 and cfg.algorithm.entropy_coef == 0.0 and cfg.algorithm.grpo_normalize_std
  assert 0 < cfg.sft.expert_random_frac < 1 and cfg.sft.steps > 0
  assert set(cfg.eval.baselines) == {"expert", "teacher", "random"}


def test_run_writes_the_tables_and_the_rl_effect(runs):
  d = runs["a"]
  start, final = read(d, "start.json"), read(d, "final.json")
  assert start["step"] == 0 and final["step"] == 1
  for ev in (start, final):
    r = ev["results"]["maze"]
    assert r["n"] == 4 and r["episodes"] == 3 and len(r["instance_success"]) == 4
    assert len(r["oracle_episode_success"]) == 3 and "explore/new_states_ep2_given_fail" in r
    gain = [row[2] - row[0] for row in r["instance_success"]]
    assert r["ep_last_minus_first"] == pytest.approx(sum(gain) / 4)
  effect = read(d, "rl_effect.json")["maze"]
  a = [sum(row) for row in start["results"]["maze"]["instance_success"]]
  b = [sum(row) for row in final["results"]["maze"]["instance_success"]]
  assert effect["n"] == 4 and effect["metric"] == "success count" and len(effect["per_position"]) == 3
  assert effect["mean"] == pytest.approx((sum(b) - sum(a)) / 4)
  assert effect["before"] == pytest.approx(sum(a) / 4) and effect["after"] == pytest.approx(sum(b) / 4)
  for kind in ("expert", "teacher", "random"):
    base = read(d, "baselines", f"{kind}.json")
    assert base["policy"] == kind and base["results"]["maze"]["n"] == 4
  # the replay expert and the frontier oracle play the very instances the model was evaluated on
  expert = read(d, "baselines", "expert.json")["results"]["maze"]
  assert expert["oracle_episode_success"] == start["results"]["maze"]["oracle_episode_success"]
  assert read(d, "baselines", "random.json")["results"]["maze"]["episode_success"] == [0.0, 0.0, 0.0]
  with open(os.path.join(d, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  assert any("orbit/maze/ep3_success" in r for r in rows)


def test_same_seed_same_numbers(runs):
  for name in ("start.json", "final.json", "rl_effect.json"):
    assert read(runs["a"], name) == read(runs["b"], name), name
  with open(os.path.join(runs["a"], "sft.jsonl")) as fa, open(os.path.join(runs["b"], "sft.jsonl")) as fb:
    la = [{k: v for k, v in json.loads(x).items() if "time" not in k and "elapsed" not in k and "per_s" not in k}
          for x in fa]
    lb = [{k: v for k, v in json.loads(x).items() if "time" not in k and "elapsed" not in k and "per_s" not in k}
          for x in fb]
  assert la == lb and len(la) == 3


def test_notebook_on_the_orbit_run(runs):
  import nbformat
  from nbclient import NotebookClient

  from codjax.eval.plots import load_run, plot_episode_success

  run = load_run(runs["a"])
  assert run.is_orbit and [e.tag for e in run.baselines] == ["expert", "random", "teacher"]
  fig = plot_episode_success(run)
  lines = fig.axes[0].get_legend().get_texts()
  assert [t.get_text() for t in lines] == ["start", "final", "expert (scripted)", "random (scripted)",
                                           "teacher (scripted)"]
  nb = nbformat.read(NOTEBOOK, as_version=4)
  os.environ["CODJAX_RUN_DIRS"] = runs["a"]
  try:
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": ROOT}}).execute()
  finally:
    os.environ.pop("CODJAX_RUN_DIRS")
  text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
  assert "paired diff" in text and "scripted expert" in text and "Ep3" in text
  assert sum(o.get("output_type") == "display_data" for c in nb.cells if c.cell_type == "code"
             for o in c.get("outputs", [])) >= 3  # training success, evaluation per checkpoint, episodes 1..T
