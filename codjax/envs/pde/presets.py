"""PDE-Discovery presets: named parameter sets of ``model.PdeConfig``, chosen with
``make("pde_discovery", preset=..., **overrides)``: ``train`` (the train template family, 1-2 reaction terms)
and ``eval`` (the support-disjoint eval family, 1-3 terms) (docs/methods/cod.md)."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "train": dict(family="train", min_reaction_terms=1, max_reaction_terms=2),
    "eval": dict(family="eval", min_reaction_terms=1, max_reaction_terms=3),
}
