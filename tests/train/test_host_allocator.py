"""codjax.train.host_allocator: validation, and (in fresh processes) that repeated jitted calls stop
page-faulting their scratch buffer once freed memory is kept, and that a late call is refused clearly."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from codjax.train import host_allocator

pytestmark = pytest.mark.slow  # subprocesses that time page faults (~10 s)

# A jitted call that materializes a 128 MiB [4096, 8192] float32 array (a dot operand) per call: above glibc's
# 64 MiB thread-arena limit, so by default it is mmap'ed anew (32k fresh pages) on every call.
_PROBE = textwrap.dedent("""
    import json, resource, sys
    from codjax.train import host_allocator
    applied, reason = host_allocator.keep_freed_memory(sys.argv[1])
    import jax, jax.numpy as jnp
    x = jnp.ones((4096, 64), jnp.float32) / 64
    w = jnp.ones((64, 8192), jnp.float32)
    v = jnp.ones((8192, 8), jnp.float32)
    f = jax.jit(lambda x, w, v: jnp.sum(jnp.tanh(x @ w) @ v))
    faults = []
    for _ in range(6):
      r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
      jax.block_until_ready(f(x, w, v))
      faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
    late = host_allocator.keep_freed_memory("keep") if not applied else None
    print(json.dumps({"applied": applied, "reason": reason, "faults": faults, "late": late}))
""")


def _probe(policy: str, env_extra=None) -> dict:
  env = {k: v for k, v in os.environ.items() if k != host_allocator.ENV_VAR}
  env.update(env_extra or {})
  env["XLA_FLAGS"] = ""  # one CPU device, as a launch script runs
  out = subprocess.run([sys.executable, "-c", _PROBE, policy], capture_output=True, text=True, env=env,
                       timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_keep_stops_refaulting_the_scratch_buffer():
  res = _probe("keep")
  assert res["applied"], res["reason"]
  first = res["faults"][0]
  assert first >= 0.75 * (128 << 20) // 4096, res  # the first call faults its 128 MiB buffer in
  # later calls reuse the freed block: (almost) no new pages (glibc defaults: ~32k per call, every call)
  assert max(res["faults"][-3:]) < 0.05 * first, res


def test_system_policy_leaves_malloc_alone_and_late_calls_are_refused():
  res = _probe("system")
  assert not res["applied"] and "system" in res["reason"]
  # once JAX's backend runs, applying would be partial (its threads own arenas): refused with the reason
  late_applied, late_reason = res["late"]
  assert not late_applied and "already initialized" in late_reason


def test_env_var_overrides_the_policy():
  res = _probe("keep", {host_allocator.ENV_VAR: "system"})
  assert not res["applied"] and "system" in res["reason"]


def test_bad_policies_raise_clear_errors(monkeypatch):
  monkeypatch.delenv(host_allocator.ENV_VAR, raising=False)
  with pytest.raises(ValueError, match="host allocator policy must be one of"):
    host_allocator.keep_freed_memory("jemalloc")
  monkeypatch.setenv(host_allocator.ENV_VAR, "fast")
  with pytest.raises(ValueError, match=host_allocator.ENV_VAR):
    host_allocator.keep_freed_memory("auto")


def test_auto_keeps_defaults_when_an_accelerator_platform_is_requested(monkeypatch):
  monkeypatch.delenv(host_allocator.ENV_VAR, raising=False)
  monkeypatch.setenv("JAX_PLATFORMS", "cuda,cpu")
  applied, reason = host_allocator.keep_freed_memory("auto")
  assert not applied and "accelerator" in reason
