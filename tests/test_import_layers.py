"""The package's import rule: each subpackage imports only from the layers below it, and no import cycle.

Layers, top to bottom (``docs/development.md``, "The import rule"):

  train                      the outer loop, SFT, checkpoints, configs
  eval, evolve               evaluation; environment evolution
  workflows                  one module per paper protocol, used by train/ and eval/ alike
  agents                     episodes, CoD / ORBIT / EvoHarness rollouts
  rl, rollout                losses and the train step; sampling engines
  envs, models               environments (text in, text out); the policy
  parallel                   meshes and sharding rules
  common                     run utilities (metrics, interrupts)

A module may import from its own subpackage and from any lower layer, never from its own layer's other
subpackages or from above; function-local imports count too. The library never imports the entry points
(``launch/``, ``benchmarks/``, ``experiments/``, ``tests/``). The checker is tested on a small package with a
known upward import and a known cycle, so a graph it cannot read fails here rather than passing.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import codjax

LAYERS = (
    ("train",),
    ("eval", "evolve"),
    ("workflows",),
    ("agents",),
    ("rl", "rollout"),
    ("envs", "models"),
    ("parallel",),
    ("common",),
)
ENTRY_POINTS = ("launch", "benchmarks", "experiments", "tests")


def module_files(root: pathlib.Path, package: str) -> dict[str, pathlib.Path]:
  """Dotted module name -> file, for every ``.py`` file of the package under ``root``."""
  out = {}
  for path in sorted((root / package).rglob("*.py")):
    parts = path.relative_to(root).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    out[name] = path
  return out


def import_graph(root: pathlib.Path, package: str) -> dict[str, dict[str, int]]:
  """Module -> {imported module of the package or entry-point name: first line}. ``from a import b`` counts as
  an import of ``a.b`` where that is a module, else of ``a``; relative imports are resolved."""
  files = module_files(root, package)
  graph: dict[str, dict[str, int]] = {}
  for name, path in files.items():
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
      targets = []
      if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom):
        if node.level:
          base = pkg.split(".")[:len(pkg.split(".")) - (node.level - 1)]
          mod = ".".join(base + ([node.module] if node.module else []))
        else:
          mod = node.module or ""
        targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod for a in node.names]
      for t in targets:
        top = t.split(".")[0]
        if t in files or top in ENTRY_POINTS:
          if t != name:
            edges.setdefault(t, node.lineno)
        elif top == package:  # a name of a package module (``import codjax.models.qwen3`` style prefixes)
          while t and t not in files:
            t = t.rpartition(".")[0]
          if t and t != name:
            edges.setdefault(t, node.lineno)
    graph[name] = edges
  return graph


def subpackage(module: str) -> str:
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else ""


def layer_violations(graph: dict[str, dict[str, int]], layers=LAYERS) -> list[str]:
  """Every import that points up or sideways, or into an entry point, as 'module:line -> target (why)'."""
  rank = {p: i for i, group in enumerate(layers) for p in group}
  bad = []
  for mod, edges in sorted(graph.items()):
    src = subpackage(mod)
    for target, line in sorted(edges.items()):
      if target.split(".")[0] in ENTRY_POINTS:
        bad.append(f"{mod}:{line} -> {target} (the library never imports an entry point)")
        continue
      dst = subpackage(target)
      if src == dst or src not in rank:  # own subpackage; the package root (codjax/__init__.py) is above all
        continue
      if dst not in rank:
        bad.append(f"{mod}:{line} -> {target} (subpackage {dst!r} has no layer: add it to LAYERS)")
      elif rank[dst] <= rank[src]:
        where = "in the same layer as" if rank[dst] == rank[src] else "above"
        bad.append(f"{mod}:{line} -> {target} ({dst!r} is {where} {src!r})")
  return bad


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
  """The strongly connected components of more than one module (Tarjan), each sorted."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  on: set[str] = set()
  out: list[list[str]] = []

  def visit(v: str) -> None:
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in graph.get(v, {}):
      if w not in graph:
        continue
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        out.append(sorted(comp))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return sorted(out)


ROOT = pathlib.Path(codjax.__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def graph():
  return import_graph(ROOT, "codjax")


def test_every_subpackage_has_a_layer(graph):
  subpackages = {subpackage(m) for m in graph} - {""}
  assert subpackages == {p for group in LAYERS for p in group}


def test_imports_point_down_the_layers(graph):
  assert sum(len(e) for e in graph.values()) > 500  # the graph was read (the package has ~1,000 imports)
  assert ("codjax.workflows.cod", "codjax.agents.cod") in {(m, t) for m, e in graph.items() for t in e}
  assert layer_violations(graph) == []


def test_no_import_cycle(graph):
  assert cycles(graph) == []


def test_eval_imports_nothing_of_train(graph):
  assert not [(m, t) for m, e in graph.items() if subpackage(m) == "eval" for t in e if subpackage(t) == "train"]


def _write(root: pathlib.Path, files: dict[str, str]) -> None:
  for rel, text in files.items():
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_checker_finds_an_upward_import_a_sideways_one_and_a_cycle(tmp_path):
  _write(tmp_path, {
      "pkg/__init__.py": "",
      "pkg/train/__init__.py": "",
      "pkg/train/loop.py": "from pkg.eval import runner\nfrom pkg.train import util\n",
      "pkg/train/util.py": "import pkg.train.loop\n",  # a cycle inside train
      "pkg/eval/__init__.py": "",
      "pkg/eval/runner.py": "def f():\n  from pkg.train.loop import x\n",  # function-local, upward
      "pkg/rl/__init__.py": "",
      "pkg/rl/loss.py": "from ..rollout import engine\n",  # relative, sideways (same layer)
      "pkg/rollout/__init__.py": "",
      "pkg/rollout/engine.py": "import launch.train\n",  # an entry point
  })
  g = import_graph(tmp_path, "pkg")
  assert g["pkg.train.loop"] == {"pkg.eval.runner": 1, "pkg.train.util": 2}
  assert g["pkg.rl.loss"] == {"pkg.rollout.engine": 1}
  bad = layer_violations(g, (("train",), ("eval",), ("rl", "rollout")))
  assert bad == ["pkg.eval.runner:2 -> pkg.train.loop ('train' is above 'eval')",
                 "pkg.rl.loss:1 -> pkg.rollout.engine ('rollout' is in the same layer as 'rl')",
                 "pkg.rollout.engine:1 -> launch.train (the library never imports an entry point)"]
  assert cycles(g) == [["pkg.eval.runner", "pkg.train.loop", "pkg.train.util"]]
