"""The ``gpu`` extra (``pip install -e '.[gpu]'``) resolves to ONE CUDA major version for JAX and vLLM.

setup.py pins ``jax[cuda12]`` with ``vllm==0.19.1``, whose ``torch==2.10.0`` is the last torch with CUDA 12
wheels on PyPI (see the comment above ``GPU`` in setup.py). A later vllm pulls torch 2.11+, whose wheels are
CUDA 13 (``cuda-toolkit`` 13, ``nvidia-*-cu13``), next to JAX's ``nvidia-*-cu12``: two cuDNN/NCCL/cuBLAS stacks
in one environment. The slow test asks pip to resolve the core requirements plus the extra together
(``pip install --dry-run --ignore-installed --report``: nothing is installed or cached, though pip reads each
resolved wheel, ~3.5 GB in all, since the index here serves no PEP 658 metadata) and checks the resolved set.
It needs the package index: when the index cannot be reached the test fails at once, in one line saying so.

The requirements are read from setup.py with ``ast`` (the source of truth; an installed egg-info can be
stale), without running it."""

import ast
import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUP_PY = os.path.join(REPO, "setup.py")

JAX_PLUGIN = re.compile(r"jax-cuda(\d+)-(plugin|pjrt)")
CU_SUFFIX = re.compile(r".+-cu(\d+)")
# Distributions whose version starts with the CUDA version they belong to.
CUDA_VERSIONED = {"cuda-toolkit", "cuda-bindings", "cuda-python", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc",
                  "nvidia-cuda-cupti", "nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvjitlink", "nvidia-nvvm"}
# CUDA libraries that are published without a -cuNN suffix only from CUDA 13 on (CUDA 12's are
# nvidia-cublas-cu12, ...): such a name in the set means CUDA 13 or later.
UNSUFFIXED_SINCE_13 = {"nvidia-cublas", "nvidia-cufft", "nvidia-curand", "nvidia-cusolver", "nvidia-cusparse",
                       "nvidia-cufile", "nvidia-nvtx", "nvidia-npp", "nvidia-nvjpeg"}


def _norm(name: str) -> str:
  return re.sub(r"[-_.]+", "-", name).lower()


def setup_requirements() -> tuple[list[str], dict[str, list[str]]]:
  """``(install_requires, extras_require)`` of setup.py, read with ``ast`` (module-level list assignments
  such as ``CORE = [...]`` are followed)."""
  tree = ast.parse(open(SETUP_PY).read(), SETUP_PY)
  names = {}
  for node in tree.body:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
      try:
        names[node.targets[0].id] = ast.literal_eval(node.value)
      except ValueError:
        pass

  def value(node):
    if isinstance(node, ast.Name):
      return names[node.id]
    if isinstance(node, ast.Dict):
      return {ast.literal_eval(k): value(v) for k, v in zip(node.keys, node.values)}
    return ast.literal_eval(node)

  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup":
      kw = {k.arg: k.value for k in node.keywords}
      return value(kw["install_requires"]), value(kw["extras_require"])
  raise AssertionError("no setup(...) call in setup.py")


def cuda_major(name: str, version: str) -> int | None:
  """The CUDA major version a resolved distribution belongs to, or None when it is not CUDA-specific."""
  name = _norm(name)
  m = JAX_PLUGIN.fullmatch(name)
  if m:
    return int(m.group(1))
  m = CU_SUFFIX.fullmatch(name)
  if m and (name.startswith(("nvidia-", "cuda-", "cupy-")) or "cutlass" in name):
    return int(m.group(1))
  if name in CUDA_VERSIONED:
    return int(version.split(".")[0])
  if name in UNSUFFIXED_SINCE_13:
    return 13
  return None


def cuda_majors(resolved: dict[str, str]) -> dict[int, list[str]]:
  """CUDA major version -> the resolved ``name==version`` that belong to it."""
  out: dict[int, list[str]] = {}
  for name, version in sorted(resolved.items()):
    major = cuda_major(name, version)
    if major is not None:
      out.setdefault(major, []).append(f"{name}=={version}")
  return out


def test_gpu_extra_is_pinned():
  core, extras = setup_requirements()
  gpu = extras["gpu"]
  assert any(r.startswith("transformers") and "<5.20" in r for r in core), core
  assert "jax[cuda12]>=0.10.2,<0.11" in gpu, gpu
  assert "vllm==0.19.1" in gpu, gpu


def test_cuda_major_classifier_flags_the_mixed_stack():
  # What `vllm>=0.22` with jax[cuda12] resolved to (pip dry run, 2026-12-02; docs/platform.md): vllm 0.33.0 on
  # torch 2.14.0 (CUDA 13 wheels) next to JAX's CUDA 12 plugin.
  mixed = {"jax": "0.10.2", "jax-cuda12-plugin": "0.10.2", "jax-cuda12-pjrt": "0.10.2",
           "nvidia-cudnn-cu12": "9.28.0.1", "nvidia-nccl-cu12": "2.32.3", "nvidia-cuda-runtime-cu12": "12.9.79",
           "torch": "2.14.0", "cuda-toolkit": "13.0.3", "cuda-bindings": "13.0.3", "nvidia-cublas": "13.1.0.3",
           "nvidia-cudnn-cu13": "9.24.0.43", "nvidia-nccl-cu13": "2.30.7", "vllm": "0.33.0", "numpy": "2.3.5"}
  assert sorted(cuda_majors(mixed)) == [12, 13]
  one = {k: v for k, v in mixed.items() if not (k.endswith("cu13") or k in ("cuda-toolkit", "cuda-bindings",
                                                                               "nvidia-cublas"))}
  assert sorted(cuda_majors(one)) == [12]
  assert cuda_major("nvidia-cuda-runtime", "13.0.96") == 13 and cuda_major("triton", "3.6.0") is None


# The resolver that runs: a recent pip, run from its wheel (pip's documented "python pip.whl/pip" bootstrap),
# fetched into the test's temporary directory by the environment's pip. The index here serves no PEP 658
# metadata, so every resolved wheel (~3.5 GB: torch, vllm, cuDNN, cuBLAS, ...) is downloaded and read; pip 26
# does that in ~70 s where the environment's pip 23.2 takes ~150 s, and both resolve the same set.
RESOLVER_PIP = "pip>=25.1,<27"


def _pip_failed(what: str, cmd: list[str], out) -> None:
  pytest.fail(f"{what} (this test needs the package index, PyPI or its mirror, reachable; it installs "
              f"nothing). Command:\n  {' '.join(cmd)}\nexit {out.returncode}; stderr tail:\n"
              f"{out.stderr[-4000:]}")


DEFAULT_INDEX = "https://pypi.org/simple"


def index_url() -> str:
  """The package index pip uses here: ``PIP_INDEX_URL``, else an ``index-url`` of pip's configuration (the
  install section's before the global one), else PyPI."""
  if os.environ.get("PIP_INDEX_URL"):
    return os.environ["PIP_INDEX_URL"].split()[0]
  out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60)
  found = dict(re.findall(r"^(\w+)\.index-url='([^']*)'$", out.stdout, re.M))
  url = found.get("install") or found.get("global")
  return url.split()[0] if url else DEFAULT_INDEX


def require_index(url: str, timeout_s: float = 20.0) -> None:
  """Fails the test, in one line, unless the index answers for pip's own project page: the resolution below
  reads every resolved wheel from it, so this test cannot run offline."""
  import urllib.error
  import urllib.request

  page = url.rstrip("/") + "/pip/"
  try:
    with urllib.request.urlopen(page, timeout=timeout_s) as r:
      r.read(1)
    return
  except (urllib.error.URLError, OSError, ValueError) as e:
    why = f"{type(e).__name__}: {getattr(e, 'reason', None) or e}"
  pytest.fail(f"the package index {url} cannot be reached ({why}): this test resolves the gpu extra with pip "
              "against the index (~3.5 GB of wheels read) and cannot run offline", pytrace=False)


def _run(cmd: list[str], what: str, cwd, timeout: int):
  try:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
  except subprocess.TimeoutExpired:
    pytest.fail(f"{what}: no answer within {timeout} s (is the package index reachable?): {' '.join(cmd)}")
  if out.returncode != 0:
    _pip_failed(what, cmd, out)
  return out


def _resolve(requirements: list[str], tmp_path) -> dict:
  """pip's installation report (https://pip.pypa.io/en/stable/reference/installation-report/) for
  ``requirements`` resolved together, as if into an empty environment of this interpreter, with the machine's
  pip configuration (indexes, find-links, constraints). Nothing is installed and no cache is written."""
  common = ["--disable-pip-version-check", "--no-cache-dir", "--progress-bar", "off", "--timeout", "60",
            "--retries", "2"]
  wheels = tmp_path / "pip"
  _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet", *common,
        "--dest", str(wheels), RESOLVER_PIP], f"downloading {RESOLVER_PIP} failed", tmp_path, 300)
  (pip_wheel,) = wheels.glob("pip-*.whl")
  report = tmp_path / "report.json"
  cmd = [sys.executable, str(pip_wheel / "pip"), "install", "--dry-run", "--ignore-installed", "--quiet",
         *common, "--report", str(report), *requirements]
  _run(cmd, "pip could not resolve the core requirements + the gpu extra", tmp_path, 780)
  return json.loads(report.read_text())


@pytest.mark.slow
def test_gpu_extra_resolves_to_one_cuda_major(tmp_path):
  core, extras = setup_requirements()
  require_index(index_url())
  report = _resolve(core + extras["gpu"], tmp_path)
  resolved = {_norm(i["metadata"]["name"]): i["metadata"]["version"] for i in report["install"]}
  requires = {_norm(i["metadata"]["name"]): i["metadata"].get("requires_dist", []) for i in report["install"]}
  summary = json.dumps({k: v for k, v in resolved.items() if cuda_major(k, v) is not None or k in (
      "jax", "jaxlib", "vllm", "torch", "transformers", "triton")}, indent=1, sort_keys=True)

  # JAX: one version across jax, jaxlib and its CUDA 12 plugin
  assert resolved["jax"] == resolved["jaxlib"] == "0.10.2", summary
  assert resolved.get("jax-cuda12-plugin") == resolved.get("jax-cuda12-pjrt") == resolved["jax"], summary
  assert not any(JAX_PLUGIN.fullmatch(n) and not n.startswith("jax-cuda12-") for n in resolved), summary
  # vLLM and the torch it pins (a PyPI CUDA build, not a local +cpu wheel)
  assert resolved["vllm"] == "0.19.1", summary
  assert resolved["torch"] == "2.10.0", summary
  assert any(re.match(r"torch\s*==\s*2\.10\.0(\s|;|$)", r) for r in requires["vllm"]), requires["vllm"]
  # the core pin: transformers>=5.16.1,<5.20
  major, minor = (int(x) for x in resolved["transformers"].split(".")[:2])
  assert (5, 16) <= (major, minor) < (5, 20), summary

  # One CUDA stack: every CUDA-specific distribution belongs to the jax plugin's CUDA major (12) ...
  majors = cuda_majors(resolved)
  assert list(majors) == [12], f"want CUDA 12 only, resolved:\n{json.dumps(majors, indent=1)}"
  # ... including every CUDA library torch asks for (its wheel is built against them), and that set is real.
  torch_cuda = [r for r in requires["torch"] if re.match(r"(nvidia-|cuda-)", _norm(r))]
  assert torch_cuda, requires["torch"]
  for req in torch_cuda:
    name = _norm(re.match(r"[A-Za-z0-9._-]+", req).group(0))
    assert name in resolved and cuda_major(name, resolved[name]) == 12, (req, summary)
  for lib in ("nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-cublas-cu12"):
    assert lib in resolved, summary
