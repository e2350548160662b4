"""The seven ORBIT games (ORBIT paper Table 1 and Appendix B; docs/methods/orbit.md) as codjax text environments,
plus their oracles and scripted players.

Registry names: ``rps``, ``minesweeper``, ``hangman``, ``wordle``, ``blackjack``, ``maze``, ``mastermind``.
``make(name).sample_pack(pack_seed, T)`` gives T episodes of one hidden instance (common.py). Text policies
for each game (``experts.make_policy(name, "expert" | "random")``) live in ``codjax.envs.games.oracles``.
"""

from codjax.envs.games import blackjack, hangman, mastermind, maze, minesweeper, rps, wordle

GAMES = ("rps", "minesweeper", "hangman", "wordle", "blackjack", "maze", "mastermind")

__all__ = ["GAMES", "blackjack", "hangman", "mastermind", "maze", "minesweeper", "rps", "wordle"]
