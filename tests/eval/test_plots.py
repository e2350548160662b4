"""``codjax.eval.plots.repo_path``: the notebooks' run paths name the same folder from the repository root and
from ``notebooks/`` (where Jupyter starts the kernel)."""

import os

from codjax.eval.plots import repo_path


def _checkout(root):
  (root / "codjax").mkdir(parents=True)
  (root / "notebooks").mkdir()
  (root / "setup.py").write_text("")
  return root


def test_a_relative_path_is_taken_from_the_repository_root(tmp_path):
  root = _checkout(tmp_path / "clone")
  want = os.path.join(str(root), "runs", "tiny")
  assert repo_path("runs/tiny", start=str(root / "notebooks")) == want
  assert repo_path("runs/tiny", start=str(root)) == want


def test_an_absolute_path_is_kept_and_outside_a_checkout_the_start_folder_is_used(tmp_path):
  root = _checkout(tmp_path / "clone")
  assert repo_path("/data/runs/a", start=str(root / "notebooks")) == "/data/runs/a"
  elsewhere = tmp_path / "elsewhere"
  elsewhere.mkdir()
  assert repo_path("runs/tiny", start=str(elsewhere)) == os.path.join(str(elsewhere), "runs", "tiny")
  # a folder with only one of the two markers is not a checkout
  (elsewhere / "setup.py").write_text("")
  assert repo_path("x", start=str(elsewhere)) == os.path.join(str(elsewhere), "x")
