"""The launch scripts' entry point: a mistake in the command line or the config is one line on stderr.

Every ``launch/*.py`` ends with ``cli.run(main)`` instead of ``absl.app.run(main)``. Errors that are the user's
input are reported as one line, ``<script>: error: <what>`` with where it is (the flag or config field) and the
fix, and exit status 2; ``--traceback`` (anywhere on the command line) or ``CODJAX_TRACEBACK=1`` shows the full
traceback instead. What counts as input:

* a ``--config.a.b=value`` override naming a field the config lacks (ml_collections' "Did you mean" hint is
  kept), or a value of the wrong type; an unknown flag; a missing required flag;
* a ``--config`` file that does not exist or fails to load;
* ``ValueError`` (config validation's ``ConfigError`` among them) and ``FileNotFoundError`` / other
  path errors raised while the script runs.

Any other exception is a bug, not bad input, and keeps its traceback.

``run`` also drops two warnings that every launch printed and that say nothing about the run: transformers'
"PyTorch was not found" (codjax uses transformers for tokenizers only) and JAX's libtpu messages ("Unable to
initialize backend 'tpu' ... libtpu.so", "A Google TPU may be present ... libtpu is not installed": JAX probes
for a TPU on every start and falls back to the platform present). Each is filtered by its own text on its own
logger, so every other warning of those libraries still shows. The filters are installed when this module is
imported, so a launcher that imports it before its other imports silences them from its first line on.
"""

from __future__ import annotations

import logging
import os
import re
import sys

TRACEBACK_FLAG = "--traceback"
TRACEBACK_ENV = "CODJAX_TRACEBACK"
EXIT_BAD_INPUT = 2

# errors of the user's input when they escape ``main``
INPUT_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)

# (logger, text): warnings that are noise on every launch
QUIET = (
    ("transformers", "PyTorch was not found"),
    ("jax._src.xla_bridge", "A Google TPU may be present on this machine"),
    ("jax._src.xla_bridge", "Unable to initialize backend 'tpu'"),
)


class _UsageError(ValueError):
  """A script's ``absl.app.UsageError``, reported in one line like any other bad input."""


class _DropText(logging.Filter):
  def __init__(self, text: str):
    super().__init__()
    self.text = text

  def filter(self, record: logging.LogRecord) -> bool:
    try:
      return self.text not in record.getMessage()
    except Exception:  # a record whose arguments do not format: let it through
      return True


def quiet_known_warnings() -> None:
  """Installs the filters of ``QUIET`` (idempotent); call before the libraries are imported."""
  for name, text in QUIET:
    logger = logging.getLogger(name)
    if not any(isinstance(f, _DropText) and f.text == text for f in logger.filters):
      logger.addFilter(_DropText(text))


quiet_known_warnings()


def _one_line(text: str) -> str:
  return " | ".join(line.strip() for line in str(text).strip().splitlines() if line.strip())


def _config_path(argv) -> str | None:
  for a in argv:
    if a.startswith("--config="):
      return a.split("=", 1)[1]
  return None


def _override_of(argv, key: str) -> str | None:
  """The ``--config.*`` argument whose dotted path names ``key``."""
  for a in argv:
    name = a.split("=", 1)[0]
    if name.startswith("--config.") and key in name[len("--config."):].split("."):
      return a
  return None


def describe(exc: BaseException, argv) -> str | None:
  """The one-line message of ``exc`` when it is bad input (module docstring), else None."""
  from absl import flags

  text = str(exc)
  if "Failed loading config file" in text:
    path = _config_path(argv)
    if path is not None and not os.path.exists(path):
      return f"--config={path}: no such file (give the path of an experiment file, e.g. experiments/<name>.py)"
    last = [line.strip() for line in text.splitlines() if line.strip()][-1]
    return f"--config={path}: the config file failed to load: {last}"
  if isinstance(exc, (KeyError, AttributeError)) and ("Did you mean" in text or _override_of(argv, _key(text))):
    key = _key(text)
    where = _override_of(argv, key) or "a --config override"
    hint = re.search(r'Did you mean "([^"]+)"', text)
    fix = f'; did you mean "{hint.group(1)}"?' if hint else " (--helpfull lists the config's fields)"
    return f'{where}: the config has no field "{key}"{fix}'
  if isinstance(exc, flags.Error):
    return f"{_one_line(text)} (--helpshort lists the flags)"
  if isinstance(exc, INPUT_ERRORS):
    return _one_line(text) or type(exc).__name__
  return None


def _is_command_line_error(exc: BaseException) -> bool:
  from absl import flags

  return isinstance(exc, (flags.Error, KeyError, AttributeError)) or "Failed loading config file" in str(exc)


def _key(text: str) -> str:
  """The missing field's name in ml_collections' KeyError / AttributeError text."""
  m = re.search(r"""['"\\]*([A-Za-z_][\w-]*)""", text)
  return m.group(1) if m else text


def traceback_wanted(argv) -> bool:
  return TRACEBACK_FLAG in argv or os.environ.get(TRACEBACK_ENV, "") not in ("", "0")


def run(main, argv=None) -> None:
  """``absl.app.run(main)`` with bad input reported in one line (module docstring)."""
  quiet_known_warnings()
  from absl import app, flags

  argv = list(sys.argv if argv is None else argv)
  show = traceback_wanted(argv)
  argv = [a for a in argv if a != TRACEBACK_FLAG]

  def entry(args):
    try:
      return main(args)
    except app.UsageError as e:  # absl would print the whole usage text
      raise _UsageError(str(e)) from e

  try:
    app.run(entry, argv=argv, flags_parser=lambda args: flags.FLAGS(args))
  except (SystemExit, KeyboardInterrupt):
    raise
  except Exception as e:
    message = None if show else describe(e, argv)
    if message is None:
      raise
    script = os.path.basename(argv[0]) if argv else "codjax"
    # the command line's own mistakes need no traceback; an error raised while running may
    where = "" if _is_command_line_error(e) else f" ({TRACEBACK_FLAG} or {TRACEBACK_ENV}=1 shows the traceback)"
    print(f"{script}: error: {message}{where}", file=sys.stderr, flush=True)
    sys.exit(EXIT_BAD_INPUT)
