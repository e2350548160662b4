"""codjax: JAX-native training of LLM agents that improve while deployed ("Connect the Dots")."""

__version__ = "0.1.0"
