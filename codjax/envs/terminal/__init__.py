"""TerminalSimulator (registers "terminal_simulator"): an in-memory local/remote shell for file-operation tasks.

env.py (tasks, family, registration), presets.py (named parameter sets), expert.py (scripted expert and random
policy), and the environment's own parts: fs.py (in-memory file systems), commands.py (the shell), tasks.py
(task templates and goal checks).
"""

from codjax.envs.terminal.env import TerminalConfig, TerminalFamily, TerminalTask, build_config, make_terminal
from codjax.envs.terminal.presets import PRESETS

__all__ = ["PRESETS", "TerminalConfig", "TerminalFamily", "TerminalTask", "build_config", "make_terminal"]
