"""``codjax.parallel`` holds the sharding rules and knows nothing of models (the import rule of docs/development.md:
models -> parallel, never back): importing it loads no ``codjax.models`` module, and no import statement in
its source (function-local ones included) names ``codjax.models``."""

import ast
import json
import pathlib
import subprocess
import sys

import pytest

import codjax.parallel

PARALLEL_DIR = pathlib.Path(codjax.parallel.__file__).parent


def _imported_modules(path: pathlib.Path) -> list[str]:
  out = []
  for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
    if isinstance(node, ast.Import):
      out += [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
      out.append(node.module if node.level == 0 else f"<relative>.{node.module}")
  return out


@pytest.mark.parametrize("path", sorted(PARALLEL_DIR.glob("*.py")), ids=lambda p: p.name)
def test_parallel_source_imports_no_models(path):
  bad = [m for m in _imported_modules(path) if m.startswith(("codjax.models", "<relative>.models"))]
  assert not bad, f"{path.name} imports {bad}"


def test_importing_parallel_loads_no_models_module():
  code = ("import json, sys, codjax.parallel, codjax.parallel.sharding, codjax.parallel.mesh; "
          "print(json.dumps(sorted(m for m in sys.modules if m.startswith('codjax.'))))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
  loaded = json.loads(out.stdout.strip().splitlines()[-1])
  assert "codjax.parallel.sharding" in loaded  # the probe did import the package
  assert not [m for m in loaded if m.startswith("codjax.models")], loaded


def test_state_shardings_uses_the_table_it_is_given():
  import jax.numpy as jnp
  from jax.sharding import PartitionSpec as P

  from codjax.parallel import make_mesh, state_shardings

  mesh = make_mesh(data=1, fsdp=2, tensor=4)
  state = {"w_dv": jnp.zeros((8, 16)), "other": jnp.zeros((8, 16)), "step": jnp.zeros(())}
  sh = state_shardings(state, mesh, {"w_dv": ("embed", "vocab")})
  assert sh["w_dv"].spec == P("fsdp", "tensor")
  assert sh["other"].spec == P() and sh["step"].spec == P()  # not in the table: replicated
