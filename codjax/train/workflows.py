"""Rollout workflows the trainer can run, by name (``config.workflow``): the entry point of the registry.

Importing this module imports every known workflow module, each of which registers itself in
``codjax.train.workflow_registry`` (the protocol and the table live there, so a workflow module never imports
this one and there is no import cycle):

  cod     CoD-Train (paper Sec. 3)                          codjax.train.cod_workflow
  orbit   ORBIT's multi-episode meta-RL (ORBIT paper Sec. 3)  codjax.train.orbit_workflow
  evoharness  EvoHarness-RL: the BPE harness, cost-aware GRPO  codjax.train.evoharness_workflow

A new workflow is a module that calls ``register_workflow`` at import, plus one import line below.
"""

from __future__ import annotations

from codjax.train.cod_workflow import CodWorkflowSpec, cod_rollout_metrics, cod_settings  # registers "cod"
import codjax.train.orbit_workflow  # noqa: F401  (registers "orbit")
import codjax.train.evoharness_workflow  # noqa: F401  (registers "evoharness")
from codjax.train.workflow_registry import Workflow, get_workflow, register_workflow, workflow_names

__all__ = ["CodWorkflowSpec", "Workflow", "cod_rollout_metrics", "cod_settings", "get_workflow",
           "register_workflow", "workflow_names"]
