"""The EvoHarness Belief / Progress / Experience harness (EvoHarness-RL, arXiv 2608.05446; docs/methods/evoharness.md).

* ``actions``: one model reply -> ``ParsedAction`` (environment command, meta action or malformed);
* ``belief``: the per-episode scene graph read from ALFWorld's feedback, ``track [q]`` and the progress estimate;
* ``progress``: the per-episode subgoal list (``commit [s]``, the objective fold, the ``PLAN:`` checklist);
* ``workspace``: ``Harness``, one per episode: modes, ablations, the four meta actions and the panels;
* ``render``: the system prompt per mode and ablation and the per-turn user message;
* ``experience`` / ``consolidate`` / ``reward``: the cross-episode bank, its consolidation and the cost-aware reward.

Submodules are imported explicitly (``from codjax.agents.harness.workspace import Harness``); this package
file imports nothing so that each piece loads on its own.
"""
