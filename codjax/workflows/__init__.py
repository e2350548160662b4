"""Rollout workflows the trainer can run, by name (``config.workflow``): the entry point of the registry.

Importing this module imports every known workflow module, each of which registers itself in
``codjax.workflows.registry`` (the protocol and the table live there, so a workflow module never imports
this one and there is no import cycle):

  cod     CoD-Train (paper Sec. 3)                          codjax.workflows.cod
  orbit   ORBIT's multi-episode meta-RL (ORBIT paper Sec. 3)  codjax.workflows.orbit
  evoharness  EvoHarness-RL: the BPE harness, cost-aware GRPO  codjax.workflows.evoharness

A new workflow is a module that calls ``register_workflow`` at import, plus one import line below.
"""

from __future__ import annotations

from codjax.workflows.cod import CodWorkflowSpec, cod_rollout_metrics, cod_settings  # registers "cod"
import codjax.workflows.evoharness  # noqa: F401  (registers "evoharness")
import codjax.workflows.orbit  # noqa: F401  (registers "orbit")
from codjax.workflows.registry import Workflow, get_workflow, register_workflow, workflow_names

__all__ = ["CodWorkflowSpec", "Workflow", "cod_rollout_metrics", "cod_settings", "get_workflow",
           "register_workflow", "workflow_names"]
