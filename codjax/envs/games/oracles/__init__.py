"""Text players for the ORBIT games: the Maze and Mastermind oracles (paper Appendix C) and scripted
reasonable players for the five training games. Each module defines ``Expert`` and ``Random``
(``codjax.envs.experts.make_policy(game, "expert" | "random")``); all act only through conversation text
(base.py)."""
