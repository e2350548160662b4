"""SFT warm start only: ``python launch/sft.py --config=experiments/<name>.py [--out=DIR] [--smoke]``.

Builds expert transcripts through the CoD workflow (so the format is exactly what the policy later
produces), trains with the SFT loss for ``config.sft.steps`` steps and writes an HF checkpoint. ``--smoke``: a few
steps on a few packs, written to ``<run_dir>_smoke/sft_model`` (``codjax.train.smoke``).
"""

import os

from absl import app, flags
from ml_collections import config_flags

from codjax.common import cli
from codjax.train import host_allocator

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiment config file", lock_config=True)
_OUT = flags.DEFINE_string("out", "", "output HF directory (default: <run_dir>/sft_model)")
_SMOKE = flags.DEFINE_boolean("smoke", False, "a few SFT steps on a few packs, in <run_dir>_smoke: codjax.train.smoke")
_HOST_ALLOCATOR = host_allocator.define_flag()


def main(argv):
  del argv
  host_allocator.keep_freed_memory(_HOST_ALLOCATOR.value)  # before JAX starts its threads
  from absl import logging

  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every checkpoint file at INFO
  import json

  from codjax.models import from_pretrained
  from codjax.models.tokenizer import load_tokenizer
  from codjax.parallel import maybe_initialize_distributed, mesh_from_config
  from codjax.train.config import model_compute_overrides, validate
  from codjax.train.loop import ensure_model_dir
  from codjax.train.sft import run_sft
  from codjax.workflows.packs import env_specs

  cfg = _CONFIG.value
  if _SMOKE.value:
    from codjax.train.smoke import apply_smoke

    apply_smoke(cfg)
  cfg = validate(cfg)
  if cfg.sft.steps <= 0:
    raise app.UsageError("config.sft.steps must be > 0")
  maybe_initialize_distributed()
  mesh = mesh_from_config(cfg.mesh)
  path = ensure_model_dir(cfg)
  out = _OUT.value or os.path.join(cfg.run_dir, "sft_model")
  model = from_pretrained(path, dtype=cfg.model.dtype, mesh=mesh, **model_compute_overrides(cfg.model))
  _, stats = run_sft(cfg, model, load_tokenizer(path), env_specs(cfg.data.envs), mesh, out, cfg.run_dir)
  print(json.dumps({k: v for k, v in stats.items()}, indent=2))
  print(f"wrote SFT model to {out}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["config"])
  cli.run(main)
