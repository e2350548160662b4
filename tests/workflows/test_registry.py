"""Workflows register themselves in ``codjax.workflows.registry``; the package ``codjax.workflows`` imports the
known ones, and no workflow module takes a name from the package's entry point (no import cycle)."""

import ast
import json
import pathlib
import subprocess
import sys

import pytest

import codjax.workflows
from codjax.workflows import get_workflow, register_workflow, registry as workflow_registry, workflow_names
from codjax.workflows.cod import CodWorkflowSpec
from codjax.workflows.orbit import OrbitWorkflowSpec

WORKFLOWS_DIR = pathlib.Path(codjax.workflows.__file__).parent


def test_both_workflows_by_name():
  assert isinstance(get_workflow("cod"), CodWorkflowSpec)
  assert isinstance(get_workflow("orbit"), OrbitWorkflowSpec)
  assert {"cod", "orbit"} <= set(workflow_names())
  with pytest.raises(ValueError, match=r"unknown workflow 'grpo'.*'cod'.*'orbit'"):
    get_workflow("grpo")


def test_a_taken_name_is_not_silently_replaced():
  class Other:
    name = "orbit"

  with pytest.raises(ValueError, match="already registered"):
    register_workflow(Other())
  assert isinstance(get_workflow("orbit"), OrbitWorkflowSpec)
  with pytest.raises(ValueError, match="non-empty string name"):
    register_workflow(object())


@pytest.mark.parametrize("module", ["cod", "orbit", "evoharness", "registry"])
def test_workflow_modules_do_not_import_the_entry_point(module):
  # ``from codjax.workflows import x`` is allowed only where x is a module of the package (not a name that
  # __init__ defines): __init__ imports every workflow, so a workflow module must not need it finished
  tree = ast.parse((WORKFLOWS_DIR / f"{module}.py").read_text())
  modules = {p.stem for p in WORKFLOWS_DIR.glob("*.py")}
  for n in ast.walk(tree):
    if isinstance(n, ast.ImportFrom) and n.module == "codjax.workflows":
      assert {a.name for a in n.names} <= modules, ast.unparse(n)
    if isinstance(n, ast.Import):
      assert "codjax.workflows" not in {a.name for a in n.names}, ast.unparse(n)


def test_orbit_workflow_imports_alone_and_registers():
  # an experiment file imports codjax.workflows.orbit (for orbit_config) before anything else: the package's
  # __init__ then runs first and registers every workflow, without an import cycle
  code = ("import json, sys; import codjax.workflows.orbit as o; "
          "from codjax.workflows.registry import workflow_names; "
          "print(json.dumps(workflow_names()))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
  names = json.loads(out.stdout.strip().splitlines()[-1])
  assert names == ["cod", "evoharness", "orbit"]
  assert workflow_registry.get_workflow("orbit") is get_workflow("orbit")
