"""Alchemy-Random presets: named parameter sets of ``AlchemyConfig`` (env.py), chosen with
``make("alchemy_random", preset=..., **overrides)``.

Presets (paper Table 2): ``easy`` (train and easy eval): tiers 3-4, base 3-4, shrink 0.4-0.6, one recipe per
element, cross-tier 0-0.1, no noise, 8 rounds, unlimited materials. ``hard``: base 4-6, shrink 0.4-0.8, 1-2
recipes, cross-tier 0-0.05, noise 0-0.3, 15 rounds, limited materials. Both: max_tier_gap 1, noise depth 2.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "easy": dict(min_num_tiers=3, max_num_tiers=4, min_base_elements=3, max_base_elements=4, tier_shrink_min=0.4,
                 tier_shrink_max=0.6, min_recipes_per_element=1, max_recipes_per_element=1, max_tier_gap=1,
                 min_cross_tier_prob=0.0, max_cross_tier_prob=0.1, min_noise_node_ratio=0.0,
                 max_noise_node_ratio=0.0, noise_chain_depth=2, max_rounds=8, material_mode="unlimited"),
    "hard": dict(min_num_tiers=3, max_num_tiers=4, min_base_elements=4, max_base_elements=6, tier_shrink_min=0.4,
                 tier_shrink_max=0.8, min_recipes_per_element=1, max_recipes_per_element=2, max_tier_gap=1,
                 min_cross_tier_prob=0.0, max_cross_tier_prob=0.05, min_noise_node_ratio=0.0,
                 max_noise_node_ratio=0.3, noise_chain_depth=2, max_rounds=15, material_mode="limited"),
}
