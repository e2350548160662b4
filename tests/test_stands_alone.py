"""The repository stands alone: every tracked text file points only at things inside it, and speaks about the
code and its results, not about how the code was produced.

Scanned: the files ``git ls-files`` lists with a text suffix (this file excepted: it spells the patterns).
Each finding names file and line:
  * a relative Markdown link ``[text](path)`` whose target does not exist (resolved from the linking file);
  * in Markdown and notebooks, and in the comments and docstrings of Python files (their code's strings are
    data, not citations):
  * a cited repository path (``codjax/...``, ``docs/...``, ``launch/...``, ``experiments/...``,
    ``benchmarks/...``, ``tests/...``, ``notebooks/...``) that does not exist; paths with wildcards or
    placeholders (``*``, ``{...}``, ``<...>``) are patterns, not citations, and are skipped;
  * a dotted ``codjax.`` name whose module does not exist, or whose first name after the module is not
    defined at the module's top level;
  * a pointer to documents outside the repository (the parent directory's notes, note file names);
  * process words: numbered work periods or issues of this project, ordinal work periods, the notes kept
    beside the project. Issues of other projects (a vLLM issue by number) are citations and stay, and so do the
    sampler's numbered sessions (the conversations the engine holds).
The checks are tested on a small fake tree with one finding of each kind.
"""

from __future__ import annotations

import ast
import functools
import io
import pathlib
import re
import subprocess
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".txt", ".ini", ".cfg", ".toml", ".yaml", ".yml", ".jinja", ".sh"}
TEXT_NAMES = {"run", "README"}  # .ci/run
PATH_ROOTS = ("codjax", "docs", "launch", "experiments", "benchmarks", "tests", "notebooks")

LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
# a path with a suffix of the project's own files, or a folder (trailing slash); other suffixes are data of
# the tests (a simulated terminal's docs/a.txt)
CITED_PATH = re.compile(r"(?<![\w./-])((?:%s)/(?:[\w.-]+/)*(?:[\w-]+(?:\.(?:py|md|ipynb|json|jinja|sh))?/?))(?!\w|\.\w)"
                        % "|".join(PATH_ROOTS))
DOTTED = re.compile(r"(?<![\w.])(codjax(?:\.[A-Za-z_]\w*)+)")
NOTE_NAMES = ("orbit" "_evo", "cod" "_reference", "jax" "_anchors", "platform" "_notes", "tiny_demo" "_notes")
OUTSIDE = re.compile(r"\.\./shared|shared/(?:spec|seeds)|\bseeds/0\d\d_|"
                     r"\b(?:%s)\b|\barchitecture\.md\b" % "|".join(NOTE_NAMES))
ORDINALS = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|"
            "fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|twenty-\\w+|thirtieth|"
            "\\d+(?:st|nd|rd|th)")
OTHER_PROJECTS = ("vllm|verl|slime|megatron-lm|megatron|jax|flax|xla|transformers|pytorch|torch|orbax|tunix|"
                  "maxtext|levanter|prime-rl|github|gem|alfworld|textworld|trinity-rft|openxla|pytest|numpy")
PROCESS = re.compile(
    r"(?<![\w-])(?:%s)(?:'s)?\s+(?:work\s+)?(?:session|work period)s?\b" % ORDINALS
    + r"|\b(?:in|since|during|until|before|after|by)\s+(?:the\s+)?(?:work\s+)?(?:session|work period)s?\s+#?\d+"
    + r"|\b(?:session|work period)s?\s+\d+'s\b|\bsessions\s+\d+\s*[-\u2013]\s*\d+|^#+\s*session\s+\d+"
    + r"|\bissues?\s+#?\d+\b"
    + r"|\bissue's\b"
    + r"|\bworking[ -]notes?\b"
    + r"|(?<!\w)\[mine\]",
    re.IGNORECASE)
OTHER_ISSUE = re.compile(r"\b(?:%s)(?:'s)?(?:\s+github)?\s+issues?\s+#?\d+" % OTHER_PROJECTS, re.IGNORECASE)


def tracked_files(root: pathlib.Path) -> list[pathlib.Path]:
  out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
  names = [n for n in out.decode().split("\0") if n]
  return [root / n for n in names
          if (pathlib.Path(n).suffix in TEXT_SUFFIXES or pathlib.Path(n).name in TEXT_NAMES) and (root / n).is_file()]


@functools.lru_cache(maxsize=None)
def _top_level_names(path: pathlib.Path) -> frozenset[str]:
  names = set()
  for node in ast.parse(path.read_text()).body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      names.add(node.name)
    elif isinstance(node, ast.Assign):
      names |= {t.id for t in ast.walk(node) if isinstance(t, ast.Name)}
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
      names.add(node.target.id)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":  # lazy names (codjax.rollout's engines)
      return frozenset({"*"})
    elif isinstance(node, (ast.If, ast.Try)):  # TYPE_CHECKING / optional-import blocks
      names |= {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
      names |= {(a.asname or a.name).split(".")[0] for n in ast.walk(node)
                if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
      names |= {t.id for n in ast.walk(node) if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
  return frozenset(names)


def dotted_problem(root: pathlib.Path, dotted: str) -> str | None:
  """Why ``codjax.a.b.name`` names nothing in the tree under ``root`` (None when it resolves)."""
  parts = dotted.split(".")
  path = root / parts[0]
  for i, part in enumerate(parts[1:], start=1):
    if (path / part).is_dir() and part != "__pycache__":  # a package (codjax/agents is a namespace package)
      path = path / part
      continue
    if (path / f"{part}.py").is_file():
      path = path / f"{part}.py"
      names = _top_level_names(path)
      if i + 1 < len(parts) and not parts[i + 1].startswith("__") and "*" not in names and parts[i + 1] not in names:
        return f"{'.'.join(parts[:i + 1])} defines no {parts[i + 1]!r}"
      return None
    init = path / "__init__.py"
    if path.is_dir() and init.is_file():
      names = _top_level_names(init)
      if part in names or part.startswith("__") or "*" in names:
        return None
      return f"no module or name {'.'.join(parts[:i + 1])}"
    return f"no module {'.'.join(parts[:i + 1])}"
  return None


def prose_segments(text: str) -> dict[int, list[str]] | None:
  """The prose of a Python source by line: its comments and docstrings, where a cited path or name is a citation;
  string literals in code are data (a test's fake ``experiments/no_such_file.py``). None when the source does
  not parse (then every line counts whole)."""
  try:
    tree = ast.parse(text)
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
  except (SyntaxError, tokenize.TokenError):
    return None
  out: dict[int, list[str]] = {}
  for t in tokens:
    if t.type == tokenize.COMMENT:
      out.setdefault(t.start[0], []).append(t.string)
  lines = text.splitlines()
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
      first = node.body[0]
      if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        for ln in range(first.lineno, first.end_lineno + 1):
          out.setdefault(ln, []).append(lines[ln - 1])
  return out


def scan(root: pathlib.Path, files: list[pathlib.Path]) -> dict[str, list[str]]:
  """Findings by kind ("link", "path", "name", "outside", "process"): 'file:line: what'."""
  found: dict[str, list[str]] = {"link": [], "path": [], "name": [], "outside": [], "process": []}
  for f in files:
    rel = f.relative_to(root).as_posix()
    try:
      text = f.read_text()
    except UnicodeDecodeError:
      continue
    prose = prose_segments(text) if f.suffix == ".py" else None
    for ln, line in enumerate(text.splitlines(), start=1):
      where = f"{rel}:{ln}"
      cited = line if prose is None else " ".join(prose.get(ln, ()))  # paths and names: in prose only
      if f.suffix in (".md", ".ipynb"):
        for target in LINK.findall(line):
          target = target.split("#")[0]
          if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.endswith("\\n"):
            continue
          if not (f.parent / target).exists():
            found["link"].append(f"{where}: link to a missing file {target}")
      for path in CITED_PATH.findall(cited):
        if any(c in cited[cited.find(path):cited.find(path) + len(path) + 1] for c in "*{<") or "*" in path:
          continue
        if "." not in path.rsplit("/", 1)[-1] and not path.endswith("/") and path.count("/") < 2:
          continue  # "codjax/torch ratios": a bare word pair, not a path
        if not (root / path.rstrip("/.")).exists():
          found["path"].append(f"{where}: cites a missing path {path}")
      for dotted in DOTTED.findall(cited):
        why = dotted_problem(root, dotted.rstrip("."))
        if why:
          found["name"].append(f"{where}: {dotted}: {why}")
      for m in OUTSIDE.finditer(line):
        found["outside"].append(f"{where}: points outside the repository: {m.group(0)!r}")
      allowed = [m.span() for m in OTHER_ISSUE.finditer(line)]
      for m in PROCESS.finditer(line):
        if not any(a <= m.start() and m.end() <= b for a, b in allowed):
          found["process"].append(f"{where}: speaks of how the code was produced: {m.group(0)!r}")
  return found


@pytest.fixture(scope="module")
def findings():
  files = [f for f in tracked_files(ROOT) if f.resolve() != pathlib.Path(__file__).resolve()]
  assert len(files) > 300  # the scan saw the repository (about 400 text files)
  assert any(f.name == "README.md" for f in files) and any(f.suffix == ".ipynb" for f in files)
  return scan(ROOT, files)


@pytest.mark.parametrize("kind", ["link", "path", "name", "outside", "process"])
def test_the_repository_has_no_finding_of_kind(findings, kind):
  assert findings[kind] == [], "\n".join(findings[kind])


def test_the_scan_finds_one_of_each_kind(tmp_path):
  (tmp_path / "codjax" / "models").mkdir(parents=True)
  (tmp_path / "codjax" / "__init__.py").write_text("")
  (tmp_path / "codjax" / "models" / "__init__.py").write_text("from codjax.models.qwen3 import Qwen3\n")
  (tmp_path / "codjax" / "models" / "qwen3.py").write_text("class Qwen3:\n  pass\n\n\nPRESETS = {}\n")
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs" / "a.md").write_text(
      "See [b](b.md), [the model](../codjax/models/qwen3.py), [web](https://example.org/x.md) and [c](c.md#x).\n"
      "Cites `codjax/models/qwen3.py`, `codjax/models/gone.py`, `experiments/*.py` and docs/{a,b}.md.\n"
      "Names codjax.models.qwen3.Qwen3.forward, codjax.models.Qwen3, codjax.models.qwen3.Missing, codjax.gone.\n"
      "Notes: §O.md C.5 and ../§H/spec/x.md.\n"
      "The twenty-third §S, §I 23's goal, (§I 7), in §S 21; vLLM §I 4168, Megatron-LM §I 12,\n"
      "the next turn of §S 1, BEATS[mine], docs/a.txt.\n"
      .replace("§S", "sess" "ion").replace("§I", "iss" "ue").replace("§O", NOTE_NAMES[0]).replace("§H", "sha" "red"))
  (tmp_path / "docs" / "b.md").write_text("fine\n")
  (tmp_path / "docs" / "c.py").write_text('"""Reads codjax/models/gone2.py."""\n\nPATH = "codjax/models/data_only.py"  '
                                          '# see codjax.models.qwen3.Gone\n')
  found = scan(tmp_path, [tmp_path / "docs" / "a.md", tmp_path / "docs" / "b.md", tmp_path / "docs" / "c.py"])
  assert found["link"] == ["docs/a.md:1: link to a missing file c.md"]
  assert found["path"] == ["docs/a.md:2: cites a missing path codjax/models/gone.py",
                           "docs/c.py:1: cites a missing path codjax/models/gone2.py"]
  assert found["name"] == ["docs/a.md:3: codjax.models.qwen3.Missing: codjax.models.qwen3 defines no 'Missing'",
                           "docs/a.md:3: codjax.gone: no module or name codjax.gone",
                           "docs/c.py:3: codjax.models.qwen3.Gone: codjax.models.qwen3 defines no 'Gone'"]
  assert [x.split(": ", 2)[2] for x in found["outside"]] == [f"'{NOTE_NAMES[0]}'", "'../" "shared'"]
  s, i = "sess" "ion", "iss" "ue"  # spelled in pieces: this file is scanned by the gate it implements
  assert [x.split(": ", 2)[2] for x in found["process"]] == [f"'twenty-third {s}'", f"'{i} 23'", f"'{i} 7'",
                                                              f"'in {s} 21'"]
