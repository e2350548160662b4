"""Tries a multi-host run on one machine: N local processes of one JAX program, joined by ``jax.distributed``.

  python launch/multiprocess.py --num_processes=2 --devices_per_process=4 -- \\
      launch/train.py --config=experiments/tiny_cod_frozenlake.py --config.mesh.data=2 --config.mesh.fsdp=4

On a real cluster run the same training command on every host instead, with the standard coordinator
variables set on each (``JAX_COORDINATOR_ADDRESS=<host0>:<port> JAX_NUM_PROCESSES=<n> JAX_PROCESS_ID=<i>``;
under SLURM or Open MPI jax reads them itself). This launcher sets exactly those for each local process
(``codjax.parallel.local_cluster``); with ``--platform=cpu`` each process sees ``--devices_per_process`` fake
CPU devices and the processes exchange data over gloo. A script path after ``--`` runs with this Python.
The first process that fails stops the others; Ctrl-C stops them all.
"""

import sys

from absl import app, flags

from codjax.common import cli
from codjax.parallel.local_cluster import run_local

_N = flags.DEFINE_integer("num_processes", 2, "processes to start")
_DEV = flags.DEFINE_integer("devices_per_process", 4, "fake CPU devices per process (platform cpu)")
_PLATFORM = flags.DEFINE_string("platform", "cpu", "JAX_PLATFORMS for the processes ('' keeps the default; "
                                "one GPU machine with several processes needs CUDA_VISIBLE_DEVICES per process)")
_PORT = flags.DEFINE_integer("port", 0, "coordinator port (0: a free one)")
_TIMEOUT = flags.DEFINE_float("timeout_s", 0, "stop every process after this many seconds (0: no limit)")


def main(argv):
  cmd = argv[1:]
  if not cmd:
    raise app.UsageError("give the command after --, e.g. -- launch/train.py --config=...")
  if cmd[0].endswith(".py"):
    cmd = [sys.executable] + cmd
  rc = run_local(cmd, _N.value, devices_per_process=_DEV.value, platform=_PLATFORM.value, port=_PORT.value,
                 timeout_s=_TIMEOUT.value or None)
  sys.exit(rc)


if __name__ == "__main__":
  cli.run(main)
