"""The 15-term reaction dictionary of PDE-Discovery and the equation text format (CoD paper Sec. 3.2.2;
``DEFAULT_DICTIONARY`` of agentscope-ai/Trinity-RFT ``connect_the_dots/pde_discovery/candidate.py``).

``f(u) = sum_k c_k phi_k(u)`` over the fixed dictionary ``TERMS``. Every term vanishes at ``u = 0`` and is
finite for all real u, so the Dirichlet boundary ``u = 0`` is consistent with any f.

Equation text is a sum of terms such as ``0.7*u - 1.2*u**3 + 0.5*(exp(u)-1)``, optionally prefixed by
``f(u) =`` or ``u_t = u_xx +``. It is parsed with ``ast`` into top-level additive terms; each term is compiled
by the safe evaluator (``codjax.envs.safe_expr``; variable ``u``; functions sin, cos, exp, log, tanh) and
identified *numerically*: it must equal ``c * phi_k`` for exactly one dictionary term on a fixed set of probe
values (ratio constant to 1e-9), so any algebraically equal spelling is accepted and its coefficient ``c``
read off. Names other than ``u`` (symbolic placeholders such as ``c1`` or ``alpha``) are rejected.
"""

from __future__ import annotations

import ast
import math

import numpy as np

from codjax.envs import safe_expr

TERMS: tuple[str, ...] = (
    "u", "u**2", "u**3", "u**4", "u**5", "u**7", "sin(u)", "sin(2*u)", "exp(u)-1", "log(1+u**2)", "tanh(u)",
    "u/(1+u**2)", "u**2/(1+u**2)", "u**4/(1+u**4)", "u/(1+u+u**2)")
NUM_TERMS = len(TERMS)
TERM_INDEX = {t: i for i, t in enumerate(TERMS)}

_FUNCS = (
    lambda u: u,
    lambda u: u * u,
    lambda u: u * u * u,
    lambda u: (u * u) * (u * u),
    lambda u: (u * u) * (u * u) * u,
    lambda u: (u * u * u) * (u * u * u) * u,
    np.sin,
    lambda u: np.sin(2 * u),
    np.expm1,
    lambda u: np.log1p(u * u),
    np.tanh,
    lambda u: u / (1 + u * u),
    lambda u: (u * u) / (1 + u * u),
    lambda u: (u * u) ** 2 / (1 + (u * u) ** 2),
    lambda u: u / (1 + u + u**2),
)

# Probe values for identifying a term (no zero: every term vanishes there).
_PROBES = np.array([-1.7, -1.1, -0.6, -0.25, 0.15, 0.4, 0.85, 1.3, 1.9, 2.4])
_PROBE_COLS = np.stack([f(_PROBES) for f in _FUNCS], axis=1)

_PDE_FUNCTIONS = {name: (fn, 1, 1) for name, fn in (("sin", math.sin), ("cos", math.cos), ("exp", math.exp),
                                                    ("log", math.log), ("tanh", math.tanh))}


def term_values(u: np.ndarray, k: int) -> np.ndarray:
  return _FUNCS[k](u)


def library(u: np.ndarray, terms: list[int] | tuple[int, ...] | None = None) -> np.ndarray:
  """Columns ``phi_k(u)`` for the chosen term indices (all 15 by default); shape ``u.shape + (k,)``."""
  ks = range(NUM_TERMS) if terms is None else terms
  with np.errstate(all="ignore"):
    return np.stack([_FUNCS[k](u) for k in ks], axis=-1)


def reaction(u: np.ndarray, coefs: np.ndarray) -> np.ndarray:
  """``f(u)`` for a coefficient vector over the dictionary (only nonzero terms are evaluated)."""
  out = np.zeros_like(u, dtype=float)
  for k in np.flatnonzero(coefs):
    out = out + coefs[k] * _FUNCS[k](u)
  return out


def format_coef(c: float) -> str:
  return f"{c:.6g}"


def format_equation(coefs: np.ndarray) -> str:
  """``f(u) = 0.7*u - 1.2*u**3 + 0.5*(exp(u)-1)``; compound terms are parenthesized."""
  parts = []
  for k in np.flatnonzero(coefs):
    c = float(coefs[k])
    t = TERMS[k]
    body = f"({t})" if any(ch in t for ch in "+-/") else t
    mag = format_coef(abs(c))
    term = body if mag == "1" else f"{mag}*{body}"
    parts.append(("- " if c < 0 else "+ ") + term)
  if not parts:
    return "f(u) = 0"
  text = " ".join(parts)
  return "f(u) = " + (text[2:] if text.startswith("+ ") else "-" + text[2:])


class EquationError(ValueError):
  """The equation text cannot be read as numeric coefficients on dictionary terms."""


def _split_terms(node: ast.expr, sign: float, out: list[tuple[float, ast.expr]]) -> None:
  if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
    _split_terms(node.left, sign, out)
    _split_terms(node.right, sign if isinstance(node.op, ast.Add) else -sign, out)
  elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
    _split_terms(node.operand, -sign if isinstance(node.op, ast.USub) else sign, out)
  else:
    out.append((sign, node))


def parse_equation(text: str) -> np.ndarray:
  """Coefficient vector (length 15) of an equation string; raises ``EquationError`` with the reason."""
  if not isinstance(text, str) or not text.strip():
    raise EquationError("empty equation")
  if len(text) > safe_expr.MAX_CHARS:
    raise EquationError(f"equation longer than {safe_expr.MAX_CHARS} characters")
  rhs = text.strip().rsplit("=", 1)[-1].replace("^", "**").strip()
  try:
    tree = ast.parse(rhs, mode="eval")
  except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
    raise EquationError(f"syntax error in equation: {getattr(e, 'msg', None) or e}") from None
  try:
    safe_expr.from_ast(tree.body, {"u", "u_xx"}, _PDE_FUNCTIONS)  # size/depth/whitelist check of the whole
  except safe_expr.ExprError as e:
    raise EquationError(_explain(str(e))) from None
  pieces: list[tuple[float, ast.expr]] = []
  _split_terms(tree.body, 1.0, pieces)
  coefs = np.zeros(NUM_TERMS)
  for sign, node in pieces:
    if isinstance(node, ast.Name) and node.id == "u_xx":
      if sign != 1.0:
        raise EquationError("the diffusion term must be +u_xx")
      continue
    seg = ast.get_source_segment(rhs, node) or ast.dump(node)
    try:
      expr = safe_expr.from_ast(node, {"u"}, _PDE_FUNCTIONS)
      vals = np.array([expr.value({"u": float(p)}) for p in _PROBES])
    except safe_expr.ExprError as e:
      raise EquationError(f"term '{seg}': {_explain(str(e))}") from None
    if np.all(vals == 0):
      continue
    ratios = vals[:, None] / _PROBE_COLS
    spread = np.abs(ratios - ratios[:1]).max(axis=0)
    matches = np.flatnonzero(spread <= 1e-9 * np.maximum(1.0, np.abs(ratios[0])))
    if matches.size != 1:
      raise EquationError(f"term '{seg}' is not a number times one dictionary term (write e.g. "
                          "0.7*(exp(u)-1) with compound terms in parentheses)")
    k = int(matches[0])
    coefs[k] += sign * float(f"{np.median(ratios[:, k]):.12g}")
  return coefs


def _explain(msg: str) -> str:
  if msg.startswith("unknown name"):
    return msg.split(";")[0] + ": coefficients must be numbers, not symbols"
  return msg
