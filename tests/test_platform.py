"""tests/conftest.py runs the suite on 8 fake CPU devices whatever the user's environment says: a user's
XLA_FLAGS keep their flags and gain the device count (once), and an accelerator platform is overridden."""

import json
import os
import runpy
import subprocess
import sys

import jax
import pytest

CONFTEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conftest.py")

# Loads conftest.py the way pytest does (before jax starts), then starts jax and reports what it got.
PROBE = f"""
import json, os, runpy
runpy.run_path({CONFTEST!r})
import jax
print(json.dumps({{"platform": jax.devices()[0].platform, "count": jax.device_count(),
                  "xla_flags": os.environ["XLA_FLAGS"]}}))
"""


def _probe(**env_over):
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
  env.update(env_over)
  out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_this_session_runs_on_eight_cpu_devices():
  assert jax.default_backend() == "cpu" and jax.device_count() == 8
  assert os.environ["XLA_FLAGS"].split().count("--xla_force_host_platform_device_count=8") == 1


@pytest.mark.parametrize("user_flags, want", [
    ("", "--xla_force_host_platform_device_count=8"),
    ("--xla_cpu_enable_fast_math=false", "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=8"),
    ("--xla_force_host_platform_device_count=8", "--xla_force_host_platform_device_count=8"),
    ("--xla_force_host_platform_device_count=2 --xla_dump_to=/tmp/x --xla_force_host_platform_device_count",
     "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=8"),
])
def test_fake_device_flag_is_appended_once(user_flags, want):
  with_fake_devices = runpy.run_path(CONFTEST)["with_fake_devices"]  # idempotent: sets the same environment
  assert with_fake_devices(user_flags) == want


def test_user_xla_flags_and_platform_are_overridden_before_jax_starts():
  # JAX_PLATFORMS=cuda would fail to start here (no CUDA plugin) or pick a GPU: conftest must force cpu
  got = _probe(XLA_FLAGS="--xla_force_host_platform_device_count=2 --xla_cpu_enable_fast_math=false",
               JAX_PLATFORMS="cuda")
  assert got["platform"] == "cpu" and got["count"] == 8
  assert got["xla_flags"] == "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=8"
