"""Prompt text of PDE-Discovery (codjax's own wording of the content of agentscope-ai/Trinity-RFT
``connect_the_dots/pde_discovery/prompts/*.jinja2``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from codjax.envs.cod_protocol import HINT_END, HINT_START
from codjax.envs.pde import dictionary, model, regression

FEEDBACK_HEADER = "Action feedback:\n"
COMPRESSED = FEEDBACK_HEADER + "[History compressed.]"
MAX_POINT_ROWS = 64
PROTOCOL_REMINDER = (
    f"Protocol reminder: your hints must sit between the exact line {HINT_START} and the exact line "
    f"{HINT_END}. Copy both delimiters character for character; in particular do not shorten the opening "
    "one to --- Updated hints ---.")


def _fmt(v: float) -> str:
  return f"{v:.4g}"


def system_prompt(cfg: model.PdeConfig, num_tasks: int) -> str:
  terms = ", ".join(dictionary.TERMS)
  n_terms = (f"{cfg.min_reaction_terms}" if cfg.min_reaction_terms == cfg.max_reaction_terms
             else f"{cfg.min_reaction_terms} to {cfg.max_reaction_terms}")
  return (
      "You are identifying the reaction term of a reaction-diffusion equation\n"
      "  u_t = u_xx + f(u),   0 <= x <= 1, 0 <= t <= 1,   u(0, t) = u(1, t) = 0.\n"
      f"f(u) = sum_k c_k * phi_k(u) is a sparse combination of these {dictionary.NUM_TERMS} dictionary terms "
      f"with numeric coefficients:\n  {terms}\n"
      f"The hidden equation has {n_terms} active terms. The same f governs all {num_tasks} tasks of this "
      "pack, but each task observes a different trajectory (a new initial condition). Datasets sampled in "
      "any task persist and can be reused by later tasks of the pack.\n\n"
      f"Per task you have {cfg.max_steps} actions and a budget of {cfg.point_budget} sample points. A sample "
      "at (x, t) returns noisy u(x, t) and noisy y(x, t) = u_t - u_xx, which equals f(u) up to noise, so the "
      "regression fits y against dictionary terms evaluated at u.\n\n"
      "Actions (exactly one per response, as XML inside the final <answer> block):\n"
      "1. Sample data (0 < x < 1, 0 <= t <= 1, at most the remaining budget):\n"
      "<sample_pde_data><point_grid><point x=\"0.5\" t=\"0.0\"/><point x=\"0.3\" t=\"0.1\"/></point_grid>"
      "</sample_pde_data>\n"
      "2. List the equations recorded by earlier tasks of this pack:\n"
      "<summarize_pack_evidence reveal_equations=\"true\"/>\n"
      "3. Sparse regression on a dataset (a dataset id, merged_all = every dataset of the pack, or "
      "merged_t{a}_t{b} = the datasets of tasks a..b), either over dictionary terms (default: all; every "
      f"support of up to {cfg.max_reaction_terms} terms is scored):\n"
      "<run_sparse_regression dataset_id=\"merged_all\" alpha=\"0.05\" threshold=\"0.05\"><dictionary>"
      "<term>u</term><term>u**3</term></dictionary></run_sparse_regression>\n"
      f"or by refitting the supports of 1 to {8} candidate equations:\n"
      "<run_sparse_regression dataset_id=\"merged_all\"><candidate_equations><equation>0.7*u - 1.2*u**3"
      "</equation></candidate_equations></run_sparse_regression>\n"
      "4. Submit your answer (this ends the task):\n"
      "<update_scientific_context><preferred_equation>0.7*u - 1.2*u**3</preferred_equation><note>short "
      "note</note><uncertain_terms><term>u**3</term></uncertain_terms></update_scientific_context>\n"
      "It is accepted only after at least one sample and one regression in this task, and the equation must "
      "be one of the candidates scored by your latest regression, written with numeric coefficients (no "
      "symbols such as c1 or alpha). uncertain_terms (optional) lists at most 4 terms.\n\n"
      "Equation syntax: a sum of coefficient*term, with compound terms in parentheses, e.g. "
      "0.7*(exp(u)-1) - 1.2*u**3 + 0.4*(u/(1+u**2)).\n"
      "Diagnostics: max error = max |y - prediction| on the regression dataset; kappa = condition number of "
      "the normalized term columns (large kappa: the terms are hard to tell apart on the sampled u-range; "
      f"condition penalty = max(0, log10 kappa - log10 {cfg.kappa_threshold:g})); relative margin = how much "
      "worse the closest alternative support fits, relative to the best.\n\n"
      "Reason briefly, then end your response with exactly one <answer>...</answer> block.")


def evidence_stats(e: dict[str, Any]) -> str:
  lo, hi = e["u_span"]
  margin = "n/a" if e["relative_margin"] is None else _fmt(e["relative_margin"])
  return (f"sampled_points {e['sampled_points']}, u_span [{_fmt(lo)}, {_fmt(hi)}], "
          f"preferred_sampled_max_error {_fmt(e['preferred_sampled_max_error'])}, relative_margin {margin}")


def user_prompt(*, position: int, num_tasks: int, step: int, max_steps: int, budget: int, point_budget: int,
                datasets: list[str], latest_error: float | None, evidence: list[dict[str, Any]],
                can_sample: bool, has_data: bool, can_update: bool, feedback: str) -> str:
  lines = [f"Task {position}/{num_tasks} | Step {step}/{max_steps}",
           f"Point budget remaining: {budget}/{point_budget}",
           "Available datasets: " + ("; ".join(datasets) if datasets else "none yet"),
           "Latest max error: " + (_fmt(latest_error) if latest_error is not None else "none yet")]
  if evidence:
    lines.append("Prior task evidence:")
    lines += [f"- task {e['position']}: {evidence_stats(e)}" for e in evidence]
  possible = []
  if can_sample:
    possible.append("sample_pde_data")
  possible.append("summarize_pack_evidence")
  if has_data:
    possible.append("run_sparse_regression")
  if can_update:
    possible.append("update_scientific_context")
  lines.append("Possible actions now: " + ", ".join(possible) + ".")
  if not can_update:
    lines.append("update_scientific_context needs a sample and a regression in this task first.")
  return "\n".join(lines) + "\n\n" + FEEDBACK_HEADER + feedback


def compress_feedback(observation: str) -> str:
  i = observation.find(FEEDBACK_HEADER)
  return observation if i < 0 else observation[:i] + COMPRESSED


def regression_report(dataset_id: str, x: np.ndarray, t: np.ndarray, u: np.ndarray, y: np.ndarray,
                      res: regression.RegressionResult, alpha: float, threshold: float, n_terms: int,
                      n_candidates: int | None = None) -> str:
  """The tool's reply; ``n_candidates`` set means candidate-equation mode."""
  best, alt = res.best, res.alternative
  mode = (f"Sparse regression on {dataset_id} ({len(u)} points, {n_terms} terms" if n_candidates is None else
          f"Candidate refit on {dataset_id} ({len(u)} points, {n_candidates} candidate equations")
  lines = [f"{mode}, alpha={alpha:g}, threshold={threshold:g}).",
           f"Best equation: {dictionary.format_equation(best.coefs)} | max error {_fmt(best.max_error)}",
           f"kappa (selected support) = {_fmt(res.kappa_selected)}; kappa (full library) = "
           f"{_fmt(res.kappa_full)}; condition penalty = {res.kappa_penalty:.3f}"]
  if res.dropped_terms:
    lines.append("Dropped degenerate columns: " + ", ".join(dictionary.TERMS[k] for k in res.dropped_terms))
  if alt is not None:
    lines.append(f"Closest alternative: {dictionary.format_equation(alt.coefs)} | max error "
                 f"{_fmt(alt.max_error)} | relative margin {_fmt(res.margin)}")
  lines.append("Ranked candidates:")
  lines += [f"{i}. {dictionary.format_equation(c.coefs)} | max error {_fmt(c.max_error)}"
            for i, c in enumerate(res.ranked[:5], start=1)]
  lines.append("Per-point fit of the best equation (x | t | u | y | pred | abs_error):")
  order = np.arange(len(u))[:MAX_POINT_ROWS]
  lines += [f"{x[i]:.4f} | {t[i]:.4f} | {u[i]:.5f} | {y[i]:.5f} | {res.predictions[i]:.5f} | "
            f"{abs(res.residuals[i]):.5f}" for i in order]
  if len(u) > MAX_POINT_ROWS:
    lines.append(f"... {len(u) - MAX_POINT_ROWS} more points not shown")
  return "\n".join(lines)
