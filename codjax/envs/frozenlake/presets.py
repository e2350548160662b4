"""FrozenLake-Obscure presets: named parameter sets of ``FrozenLakeConfig`` (env.py), chosen with
``make("frozenlake_obscure", preset=..., **overrides)``.

* ``train`` (paper Table 2, easy): side 4-5, p in [0.6, 0.7], env_max_steps 6, budget 8.
* ``hard`` (OOD eval): side 6-7, p in [0.6, 0.7], env_max_steps 8, budget 10.
* ``tiny`` (CPU demo for a ~1-2M-parameter model trained from scratch; docs/methods/cod.md): side 3-4, p in
  [0.8, 0.9] (few holes), env_max_steps 4, and a per-task budget of ``shortest path + budget_slack`` (slack 1):
  with a known mapping the task is a short walk, while probing an unknown direction at position 0 usually costs
  the episode. Text is compact (``text_style="compact"``: a short system prompt, the map shown once in the
  first observation as space-separated cells with the player's and the goal's cells, later turns only
  ``D2: moved down to (1,0)`` and the goal again) and the move
  feedback is relative (``feedback_style="relative"``), which also prefixes the final feedback with the last
  move, so the update episode sees every transition. Same information, far fewer tokens.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "train": dict(min_size=4, max_size=5, min_p=0.6, max_p=0.7, env_max_steps=6, agent_max_steps=8),
    "hard": dict(min_size=6, max_size=7, min_p=0.6, max_p=0.7, env_max_steps=8, agent_max_steps=10),
    "tiny": dict(min_size=3, max_size=4, min_p=0.8, max_p=0.9, env_max_steps=4, agent_max_steps=None,
                 budget_slack=1, feedback_style="relative", text_style="compact"),
}
