"""TerminalSimulator presets: named parameter sets of ``TerminalConfig`` (env.py), chosen with
``make("terminal_simulator", preset=..., **overrides)``: ``eval`` (CoD paper, Appendix B Table 2): 12 steps,
composite ratio 0.5."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {"eval": dict(agent_max_steps=12, composite_ratio=0.5)}
