"""Workflows register themselves in ``codjax.train.workflow_registry``; ``codjax.train.workflows`` imports the
known ones, and no workflow module imports it back (no import cycle)."""

import ast
import json
import pathlib
import subprocess
import sys

import pytest

import codjax.train
from codjax.train import workflow_registry
from codjax.train.cod_workflow import CodWorkflowSpec
from codjax.train.orbit_workflow import OrbitWorkflowSpec
from codjax.train.workflows import get_workflow, register_workflow, workflow_names

TRAIN_DIR = pathlib.Path(codjax.train.__file__).parent


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


@pytest.mark.parametrize("module", ["cod_workflow", "orbit_workflow", "workflow_registry"])
def test_workflow_modules_do_not_import_the_entry_point(module):
  tree = ast.parse((TRAIN_DIR / f"{module}.py").read_text())
  names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
  names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
  assert "codjax.train.workflows" not in names


def test_orbit_workflow_imports_alone_and_registers():
  # an experiment file imports codjax.train.orbit_workflow (for orbit_config) before anything else
  code = ("import json, sys; import codjax.train.orbit_workflow as o; "
          "from codjax.train.workflow_registry import workflow_names; "
          "print(json.dumps([workflow_names(), 'codjax.train.workflows' in sys.modules]))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
  names, entry_loaded = json.loads(out.stdout.strip().splitlines()[-1])
  assert names == ["orbit"] and not entry_loaded
  assert workflow_registry.get_workflow("orbit") is get_workflow("orbit")
