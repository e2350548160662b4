"""Per-device memory of a training config before launching it: parameters, gradients, optimizer state, train
step activations and the rollout engine, from shapes and shardings only (``codjax/train/memory_plan.py``
documents every row and the activation formula).

  python launch/plan_memory.py --config=experiments/cod_frozenlake_qwen3_8b.py [--config.mesh.data=1]
      [--devices=N] [--device_memory_gib=80] [--model_preset=qwen3-8b] [--rows=R]
  python launch/plan_memory.py --config=experiments/pde_discovery_qwen3_6_27b.py --config.mesh.data=1 \
      --devices=8 --device_memory_gib=141 [--model_preset=qwen3.6-35b-a3b]

Both families plan: dense Qwen3 and the Qwen3.5/3.6 hybrid (dense or MoE; expert weights split over the
mesh's ``expert`` axis), whose rollout cache is KV for the full-attention layers plus a per-slot recurrent
state for the Gated DeltaNet layers.

No device, checkpoint or accelerator is needed: the mesh is an AbstractMesh of the config's sizes (``--devices``
fills a -1 axis), and the architecture comes from ``--model_preset``, the checkpoint's config.json when
``model.path`` exists, or the config's preset / ``model.arch``.

The exit status is 0 when the plan fits ``--device_memory_gib``, 1 when it does not (a script or CI step can
gate a launch on it), 2 for bad input.
"""

import sys

from absl import flags
from ml_collections import config_flags

from codjax.common import cli

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiment config file", lock_config=True)
_DEVICES = flags.DEFINE_integer("devices", None, "device count for a -1 mesh axis (default: this machine's)")
_MEMORY = flags.DEFINE_float("device_memory_gib", 80.0, "memory of one device, GiB")
_PRESET = flags.DEFINE_string("model_preset", None, "plan for this model preset instead of the config's model")
_ROWS = flags.DEFINE_integer("rows", None, "rows of one step's batch before padding (default: one per episode)")


def main(argv):
  del argv
  from codjax.train.config import validate
  from codjax.train.memory_plan import GIB, format_plan, plan

  cfg = validate(_CONFIG.value)
  p = plan(cfg, devices=_DEVICES.value, model_preset=_PRESET.value, rows=_ROWS.value,
           device_memory_gib=_MEMORY.value)
  print(f"codjax memory plan: {cfg.name}")
  print(format_plan(p, _MEMORY.value), flush=True)
  if p.total > _MEMORY.value * GIB:
    print(f"plan_memory.py: {cfg.name} does not fit {_MEMORY.value:g} GiB per device (needs "
          f"{p.total / GIB:.2f} GiB); change the mesh, the batch or the context lengths", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  flags.mark_flags_as_required(["config"])
  cli.run(main)
