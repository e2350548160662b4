"""OptimalControl presets: named parameter sets of ``ControlConfig`` (env.py), chosen with
``make("optimal_control", preset=..., **overrides)``: ``easy``, ``medium`` and ``hard`` widen the initial state
and target ranges (and lengthen the horizon from 8 to 12 steps)."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "easy": dict(horizon=8, x0_max=1.0, v0_max=0.5, target_max=3.0),
    "medium": dict(horizon=12, x0_max=2.0, v0_max=1.0, target_max=5.0),
    "hard": dict(horizon=12, x0_max=2.0, v0_max=1.5, target_max=8.0),
}
