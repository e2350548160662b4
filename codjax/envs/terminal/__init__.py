"""TerminalSimulator: an in-memory local/remote shell for file-operation tasks; registers "terminal_simulator"."""

from codjax.envs.terminal.env import TerminalFamily, TerminalTask, make_terminal

__all__ = ["TerminalFamily", "TerminalTask", "make_terminal"]
