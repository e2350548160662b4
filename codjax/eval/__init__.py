"""CoD-Deploy evaluation and per-position tables."""

from codjax.workflows.cod_summary import compare, evaluate_packs, format_table, summarize

__all__ = ["compare", "evaluate_packs", "format_table", "summarize"]
