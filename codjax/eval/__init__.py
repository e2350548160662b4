"""CoD-Deploy evaluation and per-position tables."""

from codjax.eval.cod_eval import evaluate_packs, format_table, summarize

__all__ = ["evaluate_packs", "format_table", "summarize"]
