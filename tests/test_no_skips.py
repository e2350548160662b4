"""The suite cannot pass by skipping (tests/conftest.py, pytest.ini): a skipped or xfailed test fails the run and
is named, an ``importorskip`` of a module that raises ImportError fails, and a run of the whole suite that
collects fewer tests than the floor fails while a subset run is not held to it. Each case runs pytest in a
subprocess on a small suite that uses this repository's own pytest.ini and conftest.py."""

import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a dozen pytest subprocesses

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PASSING = "def test_one():\n  assert 1 + 1 == 2\n\n\ndef test_two():\n  assert 'a' * 2 == 'aa'\n"


def _suite(tmp_path, files, floor):
  """A copy of this repository's pytest setup in ``tmp_path`` with ``files`` ({name: source}) under tests/."""
  shutil.copy(os.path.join(ROOT, "pytest.ini"), tmp_path / "pytest.ini")
  (tmp_path / "tests").mkdir()
  shutil.copy(os.path.join(HERE, "conftest.py"), tmp_path / "tests" / "conftest.py")
  (tmp_path / "tests" / "collected_floor.txt").write_text(f"# floor\n{floor}\n")
  for name, source in files.items():
    (tmp_path / "tests" / name).write_text(source)
  return tmp_path


def _pytest(root, *args, pythonpath=None):
  env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS" and not k.startswith("PYTEST_XDIST")}
  if pythonpath:
    env["PYTHONPATH"] = os.pathsep.join([pythonpath] + [p for p in [env.get("PYTHONPATH")] if p])
  out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *args],
                       cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)
  return out.returncode, out.stdout + out.stderr


def test_a_skip_or_xfail_anywhere_fails_the_run_and_names_each(tmp_path):
  root = _suite(tmp_path, {
      "test_ok.py": PASSING,
      "test_skips.py": ("import pytest\n\n\ndef test_skips_inside():\n  pytest.skip('not today')\n\n\n"
                        "@pytest.mark.skip(reason='marked')\ndef test_marked_skip():\n  pass\n\n\n"
                        "@pytest.mark.xfail(reason='known bad')\ndef test_xfails():\n  assert False\n\n\n"
                        "@pytest.mark.xfail(reason='thought bad')\ndef test_xpasses():\n  pass\n"),
      "test_module_skip.py": "import pytest\n\npytest.skip('whole module', allow_module_level=True)\n",
  }, floor=6)
  rc, out = _pytest(root)
  assert rc == 1, out
  assert "5 test(s) skipped or xfailed" in out, out
  for line in ("tests/test_skips.py::test_skips_inside: skipped (not today)",
               "tests/test_skips.py::test_marked_skip: skipped (marked)",
               "tests/test_skips.py::test_xfails: xfailed (known bad)",
               "tests/test_skips.py::test_xpasses: xpassed (thought bad)",
               "tests/test_module_skip.py: skipped (whole module)"):
    assert line in out, (line, out)
  rc, out = _pytest(root, "-n", "2")  # xdist workers: their reports reach the controller, which decides
  assert rc == 1 and "5 test(s) skipped or xfailed" in out and "tests/test_module_skip.py: skipped (" in out, out
  rc, out = _pytest(root, "tests/test_ok.py")  # the passing file alone: a clean run
  assert rc == 0 and "2 passed" in out and "skipped or xfailed" not in out, out


def test_importorskip_of_a_module_that_raises_import_error_fails(tmp_path):
  (tmp_path / "lib" / "brokenmod").mkdir(parents=True)
  (tmp_path / "lib" / "brokenmod" / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
  (tmp_path / "suite").mkdir()
  root = _suite(tmp_path / "suite", {
      "test_uses.py": "import pytest\n\n\ndef test_uses_it():\n  pytest.importorskip('brokenmod')\n",
  }, floor=1)
  rc, out = _pytest(root, pythonpath=str(tmp_path / "lib"))
  assert rc == 1, out
  if tuple(int(x) for x in pytest.__version__.split(".")[:2]) >= (8, 2):
    # pytest warns (PytestDeprecationWarning) before it skips; pytest.ini makes that warning an error
    assert "1 failed" in out and "broken on purpose" in out, out
  else:  # pytest 8.0/8.1 skip silently: the skip itself fails the run
    assert "tests/test_uses.py::test_uses_it: skipped (" in out, out


def test_the_whole_suite_is_held_to_the_floor_and_a_subset_is_not(tmp_path):
  root = _suite(tmp_path, {"test_a.py": PASSING, "test_b.py": PASSING}, floor=5)
  for args in ((), ("tests",)):  # no arguments (testpaths) or the testpaths by hand: the whole suite
    rc, out = _pytest(root, *args)
    assert rc == 1 and "collected 4 tests, fewer than the floor of 5" in out, (args, out)
  for args in (("tests/test_a.py",), ("-k", "one"), ("-m", "not slow"), ("tests/test_a.py::test_one",),
               ("--deselect", "tests/test_b.py::test_two")):
    rc, out = _pytest(root, *args)
    assert rc == 0 and "fewer than the floor" not in out, (args, out)
  (root / "tests" / "collected_floor.txt").write_text("4\n")
  rc, out = _pytest(root)
  assert rc == 0 and "4 passed" in out, out
  (root / "tests" / "collected_floor.txt").write_text("3\n")
  rc, out = _pytest(root)
  assert rc == 0 and "above the floor of 3" in out, out


def test_a_bad_floor_file_is_a_one_line_error(tmp_path):
  root = _suite(tmp_path, {"test_a.py": PASSING}, floor="many")
  rc, out = _pytest(root)
  assert rc == pytest.ExitCode.USAGE_ERROR and "expected one non-negative integer" in out, out
  assert "Traceback" not in out, out
