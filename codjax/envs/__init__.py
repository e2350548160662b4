"""Text environments (text in, text out), their registry and scripted experts.

Layout. Every environment is a package ``codjax/envs/<name>/`` of the same shape:

* ``__init__.py``: a docstring naming the files and the environment's registry name; importing the package
  registers it (``registry._LAZY`` maps the registry name to the package, so ``make(name)`` imports it on
  first use);
* ``env.py``: the task and family classes (``TaskEnv``, ``EnvFamily``), the validated config dataclass and the
  ``@register(...)`` factory ``make_<name>(preset, **overrides)``;
* ``presets.py``: ``PRESETS``, the named parameter sets of the config (no logic);
* ``expert.py``: the scripted expert and random ``TextPolicy`` (listed in ``experts._POLICIES``);
* any further modules the environment alone needs (``pde/``: dictionary, model, solver, regression, prompts;
  ``terminal/``: fs, commands, tasks).

Packages: ``frozenlake`` (frozenlake_obscure), ``alchemy`` (alchemy_random), ``terminal`` (terminal_simulator),
``pde`` (pde_discovery), ``optimal_control``, ``grid_navigation``, and ``games`` (ORBIT's seven games: one
module per game holding its environment and presets, its expert in ``games/oracles/<game>.py``, shared
machinery in ``games/common.py``). A new environment (e.g. the household environment) gets its own package of
this shape, one entry in ``registry._LAZY`` and one in ``experts._POLICIES``; an evolved variant of an existing
environment stays in that environment's package (a preset in ``presets.py``, or a module beside ``env.py``).

Shared modules (not environments): ``base`` (the interface), ``registry``, ``experts`` (policy registry,
mixed teacher), ``cod_protocol`` (hint and update-prompt text), ``safe_expr`` (the expression evaluator),
``datasets`` (task-seed splits) and ``helpers`` (argument checks, ``pack_args``, the preset-plus-overrides
``config_from_preset``, ``split_trajectory``), which every environment uses instead of its own copy.
"""

from codjax.envs.base import EnvFamily, StepResult, TaskEnv, Turn, derive_seed
from codjax.envs.registry import make, names, register

__all__ = ["EnvFamily", "StepResult", "TaskEnv", "Turn", "derive_seed", "make", "names", "register"]
