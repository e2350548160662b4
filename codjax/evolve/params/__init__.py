"""Parameterisations of the evolvable environments (one module per environment package)."""
