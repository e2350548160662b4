"""Household presets: named parameter sets of ``HouseholdConfig`` (generator.py), chosen with
``make("alfworld_synth", preset=..., **overrides)``.

* ``train``: ALFWorld-sized rooms (8-25 receptacles, 4-12 distractor objects), the six families, 70 turns
  (EvoHarness-RL's T_max, public configs/train/alfworld.yaml); override ``split`` for ``valid_seen`` / ``valid_unseen``.
* ``valid_seen`` / ``valid_unseen``: ``train`` on those splits.
* ``tiny`` (CPU tests and demos): 4-6 receptacles, 1-3 distractors, a 20-turn budget.
"""

from __future__ import annotations

from typing import Any

_ROOMY = dict(max_turns=70, min_receptacles=8, max_receptacles=25, min_distractors=4, max_distractors=12)

PRESETS: dict[str, dict[str, Any]] = {
    "train": dict(split="train", **_ROOMY),
    "valid_seen": dict(split="valid_seen", **_ROOMY),
    "valid_unseen": dict(split="valid_unseen", **_ROOMY),
    "tiny": dict(split="train", max_turns=20, min_receptacles=4, max_receptacles=6, min_distractors=1,
                 max_distractors=3),
}
