"""GridNavigation presets: named parameter sets of ``GridConfig`` (env.py), chosen with
``make("grid_navigation", preset=..., **overrides)``: ``27b_train`` (the 27B training setting: 8-12 cells a
side, 4 bumps, length scales 0.15-0.45, 3-5 rounds, reveal radius 1), ``8b`` (length scales 0.10-0.35, 4-6
rounds, reveal radius 2) and ``eval`` (10-14 cells a side, 5 bumps)."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "27b_train": dict(grid_min=8, grid_max=12, num_bumps=4, min_scale=0.15, max_scale=0.45, min_rounds=3,
                      max_rounds=5, reveal_radius=1),
    "8b": dict(grid_min=8, grid_max=12, num_bumps=4, min_scale=0.10, max_scale=0.35, min_rounds=4,
               max_rounds=6, reveal_radius=2),
    "eval": dict(grid_min=10, grid_max=14, num_bumps=5, min_scale=0.15, max_scale=0.45, min_rounds=3,
                 max_rounds=5, reveal_radius=1),
}
