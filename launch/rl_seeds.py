"""RL seeds from one SFT model: ``python launch/rl_seeds.py --config=experiments/<name>.py --sft_run=runs/<name>
[--seeds=1,2,3] [--config.a.b=value ...] [--out_root=DIR]``.

A robustness check as one command: is the RL effect over 3 standard errors whatever the RL seed? For each seed K,
``<out_root>/seed<K>`` gets the SFT run's ``sft_model/`` (hard links where the filesystem allows, else a copy) and
``sft_stats.json``; then ``launch/train.py`` runs in a child process with every ``--config.*`` flag given here and
``--config.seed=K``, ``--config.run_dir=<that directory>``, ``--config.model.path=<the SFT run's base model>`` (its
tokenizer, loaded as it is: ``--config.model.make_tiny=False``) and ``--config.sft.steps=<the SFT run's>``, so the
trainer takes the copied SFT model instead of training one and records the steps it was trained with. The start
evaluation is redone with seed K's samples, so each seed's RL effect is paired with its own start (as the README's
RL-seed rows are). The child's output streams through; after each seed a line with the effect, the seeds done and an
estimate of the time left; at the end the table (``codjax.eval.rl_seeds``: effect and standard error per seed, per
position, hint accuracy, wall time and peak RSS of the child) on stdout and in ``<out_root>/rl_seeds.md`` /
``rl_seeds.json``.

Rerunning the same command continues a stopped sweep: a seed whose run holds ``eval/rl_effect.json`` is not run
again (its row is read back), one with committed checkpoints resumes (``--resume``), anything else starts over.
SIGTERM or Ctrl-C stops the running child with SIGTERM (it stops after its current step) and exits with 130.

``--smoke``: the children run the smoke preset (``codjax.train.smoke``: a few RL steps and evaluation packs) in
``<sft_run>_rl_seeds`` (``_smoke`` added unless the SFT run is a smoke run, as ``launch/train.py --smoke`` writes
``runs/<name>_smoke``).
"""

import os
import sys
import time

from absl import app, flags
from ml_collections import config_flags

from codjax.common import cli, interrupts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "launch", "train.py")
RESERVED = ("seed", "run_dir", "model.path", "model.make_tiny", "sft.steps")  # set per seed from the SFT run

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiment config file", lock_config=True)
_SFT_RUN = flags.DEFINE_string("sft_run", None, "run directory holding sft_model/ (a finished SFT warm start)")
_SEEDS = flags.DEFINE_list("seeds", ["1", "2", "3"], "RL seeds, one run each")
_OUT = flags.DEFINE_string("out_root", "", "directory of the seed runs (default: <sft_run>_rl_seeds)")
_BASE = flags.DEFINE_string("base_model", "", "the base model directory (tokenizer) the SFT model was trained "
                            "from (default: model.path in the SFT run's config.json)")
_SMOKE = flags.DEFINE_boolean("smoke", False, "each seed runs the smoke preset (codjax.train.smoke), out_root "
                               "defaulting to <sft_run>_rl_seeds_smoke")
_LABEL = flags.DEFINE_string("label", "", "evaluation label of the table (default: the only one)")


def forwarded_overrides(argv: list[str]) -> list[str]:
  """The ``--config.a.b=value`` flags of ``argv``, checked: the per-seed keys are not the user's to set."""
  out = []
  for a in argv:
    if not a.startswith("--config."):
      continue
    if "=" not in a:
      raise app.UsageError(f"write {a}=VALUE (one argument; the value after a space is not forwarded)")
    key = a[len("--config."):].split("=", 1)[0]
    if key in RESERVED:
      raise app.UsageError(f"--config.{key} is set per seed from --sft_run and --seeds; drop it")
    out.append(a)
  return out


def smoke_flags(cfg) -> list[str]:
  """The smoke preset applied to ``cfg`` (in place, so the children's config is validated as they run it) and
  returned as the children's ``--config.a.b=value`` flags, less the per-seed keys and the run directory (each
  seed's is set here)."""
  from codjax.train.config import override
  from codjax.train.smoke import smoke_overrides

  over = {k: v for k, v in smoke_overrides(cfg).items()
          if k not in RESERVED and k != "name" and not k.startswith("model.")}
  override(cfg, over)
  return [f"--config.{k}={v}" for k, v in over.items()]


def sft_source(sft_run: str, base_flag: str) -> tuple[str, int | None]:
  """(base model directory, absolute; SFT steps) of a finished SFT run, with clear errors for what is missing. A
  relative model.path in its config.json is read from the working directory, as the trainer read it."""
  import json

  if not os.path.isfile(os.path.join(sft_run, "sft_model", "config.json")):
    raise app.UsageError(f"--sft_run={sft_run}: no sft_model/config.json there (a run directory whose SFT warm "
                         "start finished, e.g. runs/tiny_cod_frozenlake after launch/train.py)")
  cfg = {}
  cfg_path = os.path.join(sft_run, "config.json")
  if os.path.isfile(cfg_path):
    try:
      with open(cfg_path) as f:
        cfg = json.load(f)
    except ValueError as e:
      raise app.UsageError(f"{cfg_path}: not JSON ({e})") from None
  base = base_flag or (cfg.get("model") or {}).get("path", "")
  if not base:
    raise app.UsageError(f"{sft_run} has no config.json naming its base model: pass --base_model")
  if not os.path.isfile(os.path.join(base, "config.json")):
    raise app.UsageError(f"base model {base} (the tokenizer of the SFT model) has no config.json; pass "
                         "--base_model=<the directory the SFT run trained from>")
  steps = (cfg.get("sft") or {}).get("steps")
  return os.path.abspath(base), (int(steps) if steps else None)


def main(argv):
  del argv
  interrupts.install()
  import json

  from codjax.eval.plots import RL_EFFECT_FILE
  from codjax.eval.rl_seeds import RUN_RECORD, format_table, read_row, summary
  from codjax.train.config import validate
  from codjax.train.seed_runs import prepare_seed_dir, run_child

  sft_run = os.path.abspath(_SFT_RUN.value)
  base, sft_steps = sft_source(sft_run, _BASE.value)
  forwarded = forwarded_overrides(sys.argv[1:])
  try:
    seeds = [int(s) for s in _SEEDS.value]
  except ValueError:
    raise app.UsageError(f"--seeds must be integers, got {_SEEDS.value}") from None
  if not seeds or len(set(seeds)) != len(seeds):
    raise app.UsageError(f"--seeds must name distinct seeds, got {seeds}")
  cfg = _CONFIG.value
  if _SMOKE.value:
    forwarded += smoke_flags(cfg)
  steps = sft_steps or int(cfg.sft.steps)
  if steps <= 0:
    raise app.UsageError("the SFT steps are unknown (no sft.steps in the SFT run's config.json, and config.sft.steps "
                         "is 0): without them the trainer would start RL from the base model")
  if not (cfg.eval.at_start and cfg.eval.at_end):
    raise app.UsageError("the RL effect needs eval.at_start and eval.at_end")
  cfg.run_dir, cfg.model.path, cfg.model.make_tiny, cfg.sft.steps = sft_run, base, False, steps
  try:
    validate(cfg)  # the children's config: bad values fail here, before any run starts
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  smoke_suffix = "_smoke" if _SMOKE.value and not sft_run.rstrip("/").endswith("_smoke") else ""
  out_root = os.path.abspath(_OUT.value or sft_run.rstrip("/") + "_rl_seeds" + smoke_suffix)
  config_file = config_flags.get_config_filename(flags.FLAGS["config"])
  label = _LABEL.value or None

  rows, ran_s = [], []
  t_start = time.perf_counter()
  try:
    for i, seed in enumerate(seeds):
      run_dir = os.path.join(out_root, f"seed{seed}")
      if os.path.isfile(os.path.join(run_dir, "eval", RL_EFFECT_FILE)):
        print(f"[rl_seeds] seed {seed}: finished earlier in {run_dir}", flush=True)
      else:
        resume = prepare_seed_dir(run_dir, sft_run)
        cmd = [sys.executable, TRAIN, f"--config={config_file}", *forwarded, f"--config.seed={seed}",
               f"--config.run_dir={run_dir}", f"--config.model.path={base}", "--config.model.make_tiny=False",
               f"--config.sft.steps={steps}"]
        cmd += ["--resume"] if resume else []
        print(f"[rl_seeds] seed {seed} ({i + 1}/{len(seeds)}): {' '.join(cmd[1:])}", flush=True)
        code, wall, rss = run_child(cmd)
        interrupts.check()  # a stop whose KeyboardInterrupt was dropped while the child ran
        if code != 0:
          raise SystemExit(f"[rl_seeds] seed {seed} failed (exit {code}); {run_dir} is kept: rerun the same command "
                           "to continue")
        with open(os.path.join(run_dir, RUN_RECORD), "w") as f:
          json.dump({"seed": seed, "wall_s": wall, "peak_rss_gib": rss, "resumed": resume, "command": cmd}, f,
                    indent=2)
        ran_s.append(wall)
      row = read_row(run_dir, seed, label)
      rows.append(row)
      left = len(seeds) - i - 1
      eta = f", ~{sum(ran_s) / len(ran_s) * left / 60:.0f} min left" if ran_s and left else ""
      print(f"[rl_seeds] seed {seed}: RL effect {row.mean:+.3f} ± {row.se:.3f} ({row.z:+.1f} s.e.); {i + 1}/"
            f"{len(seeds)} seeds done in {(time.perf_counter() - t_start) / 60:.1f} min{eta}", flush=True)
  except KeyboardInterrupt as e:
    print(f"[rl_seeds] stopped ({e or 'interrupt'}); rerun the same command to continue", file=sys.stderr)
    sys.exit(130)
  table = format_table(rows)
  print(f"\nRL seeds from {sft_run} (SFT {steps} steps):\n{table}", flush=True)
  with open(os.path.join(out_root, "rl_seeds.md"), "w") as f:
    f.write(table + "\n")
  with open(os.path.join(out_root, "rl_seeds.json"), "w") as f:
    json.dump({"sft_run": sft_run, "base_model": base, "sft_steps": steps, "overrides": forwarded,
               **summary(rows)}, f, indent=2)


if __name__ == "__main__":
  flags.mark_flags_as_required(["config", "sft_run"])
  cli.run(main)
