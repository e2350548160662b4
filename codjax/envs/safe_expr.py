"""A safe evaluator for small scalar expressions written by a model (AST whitelist, no eval/exec).

The text is parsed with ``ast.parse`` (parsing only; nothing is ever compiled to code) and validated against a
whitelist (the OptimalControl policy syntax of agentscope-ai/Trinity-RFT
``trinity/common/workflows/connect_the_dots/optimalcontrol/``; docs/methods/cod.md):

* numeric literals (``int``/``float``; not bool, str or complex) and whitelisted variable names;
* ``+ - * / **``, unary ``+ - not``, comparisons ``< <= > >= == !=`` (chains allowed), ``and``/``or``,
  the conditional ``a if c else b``;
* calls of whitelisted functions by plain name with positional arguments only. The default table is the
  OptimalControl one: ``abs, min, max, pow, clip, ifelse, lt, le, gt, ge, eq, ne``.

Everything else (attributes, subscripts, lambdas, comprehensions, keyword or starred arguments, other names,
assignments, ...) is rejected with an ``ExprError`` that names the construct. Resources are bounded so
adversarial input fails fast: at most ``MAX_CHARS`` characters, ``MAX_NODES`` AST nodes and ``MAX_DEPTH``
nesting levels; every literal and every intermediate value must be finite with magnitude at most
``max_abs``; a power's exponent must satisfy ``|e| <= MAX_EXPONENT`` (so ``9**9**9`` fails at the outer
power after one cheap inner power). Arithmetic is done in floats; comparisons yield bools, which count as
0/1 inside arithmetic (Python semantics), and ``Expr.value`` rejects a bool or non-finite final result.
"""

from __future__ import annotations

import ast
import math
from typing import Callable, Mapping

MAX_CHARS = 2000
MAX_NODES = 400
MAX_DEPTH = 48
MAX_ABS = 1e12
MAX_EXPONENT = 64.0


class ExprError(ValueError):
  """The expression is not allowed, or evaluating it failed."""


Value = float | bool
Env = Mapping[str, float]
_Fn = Callable[[Env], Value]


def _num(v: Value) -> float:
  return float(v)


def _checked(v: float, max_abs: float) -> float:
  if not math.isfinite(v) or abs(v) > max_abs:
    raise ExprError(f"value {v!r} is not finite or exceeds the magnitude bound {max_abs:g}")
  return v


def _power(base: float, exp: float, max_abs: float) -> float:
  if abs(exp) > MAX_EXPONENT:
    raise ExprError(f"exponent {exp:g} exceeds the bound {MAX_EXPONENT:g}")
  if base == 0.0 and exp < 0:
    raise ExprError("zero raised to a negative power")
  if base < 0 and not float(exp).is_integer():
    raise ExprError("negative base raised to a fractional power")
  if base != 0.0 and exp * math.log10(abs(base)) > math.log10(max_abs) + 1:
    raise ExprError(f"power {base:g}**{exp:g} exceeds the magnitude bound {max_abs:g}")
  try:
    return _checked(math.pow(base, exp), max_abs)
  except (OverflowError, ValueError) as e:
    raise ExprError(f"power {base:g}**{exp:g} failed: {e}") from None


def _clip(x: Value, lo: Value, hi: Value) -> float:
  return min(max(_num(x), _num(lo)), _num(hi))


def _ifelse(c: Value, a: Value, b: Value) -> Value:
  return a if c else b


def _min(*args: Value) -> float:
  return min(_num(a) for a in args)


def _max(*args: Value) -> float:
  return max(_num(a) for a in args)


# name -> (function, min arity, max arity)
CONTROL_FUNCTIONS: dict[str, tuple[Callable[..., Value], int, int]] = {
    "abs": (lambda x: abs(_num(x)), 1, 1),
    "min": (_min, 2, 16),
    "max": (_max, 2, 16),
    "pow": (None, 2, 2),  # handled like ``**`` (bounded)
    "clip": (_clip, 3, 3),
    "ifelse": (_ifelse, 3, 3),
    "lt": (lambda a, b: _num(a) < _num(b), 2, 2),
    "le": (lambda a, b: _num(a) <= _num(b), 2, 2),
    "gt": (lambda a, b: _num(a) > _num(b), 2, 2),
    "ge": (lambda a, b: _num(a) >= _num(b), 2, 2),
    "eq": (lambda a, b: _num(a) == _num(b), 2, 2),
    "ne": (lambda a, b: _num(a) != _num(b), 2, 2),
}

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: None,  # checked division
    ast.Pow: None,  # bounded power
}
_CMPOPS = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}
_NODE_NAMES = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripts",
    ast.Lambda: "lambdas",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.NamedExpr: "assignment expressions",
    ast.Starred: "starred arguments",
    ast.JoinedStr: "strings",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.Await: "await",
    ast.Yield: "yield",
}


class Expr:
  """A validated expression; call ``value(env)`` to evaluate it on a variable binding."""

  def __init__(self, source: str, fn: _Fn, names: frozenset[str]):
    self.source = source
    self.names = names  # variable names the expression reads
    self._fn = fn

  def value(self, env: Env) -> float:
    """Evaluates to a finite float; raises ``ExprError`` on runtime failure or a bool/non-finite result."""
    try:
      out = self._fn(env)
    except ExprError:
      raise
    except (ArithmeticError, ValueError, TypeError) as e:  # defensive: arithmetic edge cases in math.*
      raise ExprError(f"evaluation failed: {e}") from None
    if isinstance(out, bool):
      raise ExprError("the expression evaluates to a boolean, not a number")
    out = float(out)
    if not math.isfinite(out):
      raise ExprError("the expression evaluates to a non-finite value")
    return out


def _reject(node: ast.AST, what: str | None = None) -> ExprError:
  what = what or _NODE_NAMES.get(type(node), f"'{type(node).__name__}' nodes")
  return ExprError(f"{what} not allowed")


def _check_shape(root: ast.AST) -> None:
  """Iterative size and depth bound (no recursion on untrusted trees)."""
  stack = [(root, 1)]
  count = 0
  while stack:
    node, depth = stack.pop()
    count += 1
    if count > MAX_NODES:
      raise ExprError(f"expression has more than {MAX_NODES} syntax nodes")
    if depth > MAX_DEPTH:
      raise ExprError(f"expression nests deeper than {MAX_DEPTH} levels")
    stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def from_ast(node: ast.expr, variables: frozenset[str] | set[str],
             functions: Mapping[str, tuple[Callable[..., Value] | None, int, int]] | None = None,
             max_abs: float = MAX_ABS, source: str = "") -> Expr:
  """Validates and compiles an already-parsed expression node (for callers that split an AST first)."""
  functions = CONTROL_FUNCTIONS if functions is None else functions
  _check_shape(node)
  names: set[str] = set()

  def build(n: ast.AST) -> _Fn:
    if isinstance(n, ast.Constant):
      v = n.value
      if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ExprError(f"constant {v!r} not allowed (numbers only)")
      if isinstance(v, int) and abs(v) > max_abs:
        raise ExprError(f"constant exceeds the magnitude bound {max_abs:g}")
      fv = _checked(float(v), max_abs)
      return lambda env: fv
    if isinstance(n, ast.Name):
      if n.id in functions:
        raise ExprError(f"function {n.id!r} used without calling it")
      if n.id not in variables:
        raise ExprError(f"unknown name {n.id!r}; allowed variables: {', '.join(sorted(variables))}")
      names.add(n.id)
      key = n.id
      return lambda env: env[key]
    if isinstance(n, ast.BinOp):
      if type(n.op) not in _BINOPS:
        raise _reject(n, f"operator {type(n.op).__name__}")
      left, right = build(n.left), build(n.right)
      if isinstance(n.op, ast.Pow):
        return lambda env: _power(_num(left(env)), _num(right(env)), max_abs)
      if isinstance(n.op, ast.Div):

        def div(env):
          den = _num(right(env))
          if den == 0.0:
            raise ExprError("division by zero")
          return _checked(_num(left(env)) / den, max_abs)

        return div
      op = _BINOPS[type(n.op)]
      return lambda env: _checked(op(_num(left(env)), _num(right(env))), max_abs)
    if isinstance(n, ast.UnaryOp):
      operand = build(n.operand)
      if isinstance(n.op, ast.USub):
        return lambda env: -_num(operand(env))
      if isinstance(n.op, ast.UAdd):
        return lambda env: _num(operand(env))
      if isinstance(n.op, ast.Not):
        return lambda env: not operand(env)
      raise _reject(n, f"operator {type(n.op).__name__}")
    if isinstance(n, ast.Compare):
      if any(type(op) not in _CMPOPS for op in n.ops):
        raise _reject(n, "comparison operators other than < <= > >= == !=")
      first = build(n.left)
      rest = [(_CMPOPS[type(op)], build(c)) for op, c in zip(n.ops, n.comparators)]

      def compare(env):
        a = _num(first(env))
        for op, fn in rest:
          b = _num(fn(env))
          if not op(a, b):
            return False
          a = b
        return True

      return compare
    if isinstance(n, ast.BoolOp):
      parts = [build(v) for v in n.values]
      if isinstance(n.op, ast.And):

        def conj(env):
          out: Value = True
          for p in parts:
            out = p(env)
            if not out:
              return out
          return out

        return conj

      def disj(env):
        out: Value = False
        for p in parts:
          out = p(env)
          if out:
            return out
        return out

      return disj
    if isinstance(n, ast.IfExp):
      test, body, orelse = build(n.test), build(n.body), build(n.orelse)
      return lambda env: body(env) if test(env) else orelse(env)
    if isinstance(n, ast.Call):
      if not isinstance(n.func, ast.Name):
        raise _reject(n.func, "calls of anything but a whitelisted function name are")
      fname = n.func.id
      if fname not in functions:
        raise ExprError(f"function {fname!r} not allowed; allowed: {', '.join(sorted(functions))}")
      if n.keywords:
        raise ExprError("keyword arguments not allowed")
      if any(isinstance(a, ast.Starred) for a in n.args):
        raise ExprError("starred arguments not allowed")
      args = [build(a) for a in n.args]
      fn, lo, hi = functions[fname]
      if not lo <= len(args) <= hi:
        raise ExprError(f"{fname}() takes {lo}..{hi} arguments, got {len(args)}")
      if fname == "pow" and fn is None:
        a0, a1 = args
        return lambda env: _power(_num(a0(env)), _num(a1(env)), max_abs)
      return lambda env: fn(*[a(env) for a in args])
    raise _reject(n)

  fn = build(node)
  return Expr(source, fn, frozenset(names))


def parse(text: str, variables: frozenset[str] | set[str],
          functions: Mapping[str, tuple[Callable[..., Value] | None, int, int]] | None = None,
          max_abs: float = MAX_ABS) -> Expr:
  """Parses and validates ``text``; raises ``ExprError`` with a readable reason on any rejection."""
  if not isinstance(text, str):
    raise ExprError("expression must be a string")
  if len(text) > MAX_CHARS:
    raise ExprError(f"expression longer than {MAX_CHARS} characters")
  if not text.strip():
    raise ExprError("empty expression")
  try:
    tree = ast.parse(text.strip(), mode="eval")
  except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
    raise ExprError(f"syntax error: {getattr(e, 'msg', None) or e}") from None
  return from_ast(tree.body, variables, functions, max_abs, source=text.strip())
