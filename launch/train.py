"""CoD-Train: ``python launch/train.py --config=experiments/<name>.py [--config.a.b=value] [--resume] [--smoke]``.

Runs the experiment's stages: (tiny model) -> (SFT warm start) -> CoD RL -> final evaluation, writing
metrics.jsonl, TensorBoard events, eval/*.json and orbax checkpoints into ``config.run_dir``. ``--smoke``: every
stage of the experiment in about a minute on 2 CPU cores, written to ``<run_dir>_smoke`` (``codjax.train.smoke``).
"""


from absl import flags
from ml_collections import config_flags

from codjax.common import cli, interrupts
from codjax.train import host_allocator

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiment config file", lock_config=True)
_RESUME = flags.DEFINE_boolean("resume", False, "continue from the latest checkpoint in run_dir")
_SMOKE = flags.DEFINE_boolean("smoke", False, "shrink the run to about a minute on 2 CPU cores (every stage, few "
                               "steps and packs), in <run_dir>_smoke: codjax.train.smoke")
_EXPORT = flags.DEFINE_string("export_hf", "", "after the run, export the policy to this HF directory")
_HOST_ALLOCATOR = host_allocator.define_flag()


def main(argv):
  del argv
  # a scheduler's stop (SIGTERM) unwinds like Ctrl-C: trainer.close() stops the producer thread and the vLLM
  # servers a fleet started (they run in their own sessions and would outlive a killed trainer)
  interrupts.install()
  host_allocator.keep_freed_memory(_HOST_ALLOCATOR.value)  # before JAX starts its threads
  from codjax.parallel import maybe_initialize_distributed

  # several hosts (or launch/multiprocess.py): join them before anything touches a device
  maybe_initialize_distributed()
  from absl import logging

  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint file at INFO

  from codjax.train.loop import Trainer

  cfg = _CONFIG.value
  if _SMOKE.value:
    from codjax.train.smoke import apply_smoke

    apply_smoke(cfg)
    print(f"[smoke] {cfg.total_steps} RL steps, {cfg.sft.steps} SFT steps, run_dir {cfg.run_dir}", flush=True)

  from codjax.train.memory_plan import check_training_memory; check_training_memory(cfg)  # noqa: E702  refuse before allocating

  trainer = Trainer(cfg, resume=_RESUME.value)
  try:
    trainer.run()
    if _EXPORT.value:
      print(f"exported policy to {trainer.export_hf(_EXPORT.value)}")
  finally:
    trainer.close()


if __name__ == "__main__":
  flags.mark_flags_as_required(["config"])
  cli.run(main)
