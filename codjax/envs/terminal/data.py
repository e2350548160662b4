"""TerminalSimulator tasks from explicit data (the form the LLM evolver writes; Environment Evolution paper,
arXiv 2609.04128, Sec. 4.1; docs/methods/environment_evolution.md).

A task as JSON data (every key required unless marked optional)::

  {"os": "linux" | "mac" | "windows",          # the local machine
   "host": "192.168.1.N", "user": "deploy",     # the remote Linux server and its user
   "instruction": "...",                        # the task sentence shown to the agent
   "local":  [ITEM, ...], "remote": [ITEM, ...],   # the initial file systems
   "checks": [CHECK, ...],                      # goal conditions, all must hold
   "oracle": ["command line", ...]}             # the reference solution, one line per turn

  ITEM  = {"path": P, "type": "dir"}
        | {"path": P, "type": "file", "content": S, "perm": "644" (optional)}
        | {"path": P, "type": "archive", "format": "tar" | "tar.gz" | "zip", "entries": {"dir/a.txt": S, ...}}
  CHECK = {"kind": "file_exists" | "file_not_exists" | "dir_exists" | "permission_equals" | "archive_contains",
           "machine": "local" | "remote", "path": P,
           "content": S (optional, file_exists), "value": "755" (permission_equals),
           "entries": {"dir/a.txt": S, ...} (archive_contains)}

Rules (a violation is a ``ValueError`` naming it; nothing here touches the host):

* Paths are absolute in the machine's own spelling (``/home/user/x`` on Linux/macOS and the remote,
  ``C:\\Users\\user\\x`` or ``C:/Users/user/x`` on Windows). Every name is 1-64 characters of letters,
  digits, ``.``, ``_``, ``-`` and does not start with a dot, so ``..`` and hidden names cannot occur. Local
  paths lie under the local home; remote paths under ``/home/<user>``, ``/var/www``, ``/opt``, ``/srv`` or
  ``/tmp`` (system trees such as ``/etc`` are refused).
* Sizes are bounded (``LIMITS``): instruction length, items, content length, archive members, checks, oracle
  lines, path depth.
* Oracle lines use only the simulator's commands (``commands.COMMAND_LIST``) in every ``&&``/``;`` segment,
  with no pipes, redirects or command substitution: anything meant for a real host is refused.

``task_from_data(data)`` returns a ``TerminalTaskSpec`` (its ``oracle`` holds the oracle lines);
``validate_data`` returns the canonical data (defaults filled in).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from codjax.envs.terminal.commands import ALIASES, COMMAND_LIST, split_chain
from codjax.envs.terminal.fs import LINUX, OS_TYPES, WINDOWS, File, Path
from codjax.envs.terminal.tasks import HOMES, Check, TerminalTaskSpec

LIMITS = {"instruction_chars": 1500, "items": 40, "content_chars": 400, "entries": 12, "checks": 16,
          "oracle_lines": 40, "line_chars": 300, "depth": 10}
CHECK_KINDS = ("file_exists", "file_not_exists", "dir_exists", "permission_equals", "archive_contains")
ARCHIVE_KINDS = ("tar", "tar.gz", "zip")
COMMANDS = frozenset(n.strip() for n in COMMAND_LIST.split(",")) | frozenset(ALIASES)
REMOTE_ROOTS = (("var", "www"), ("opt",), ("srv",), ("tmp",))
_NAME_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$")
_HOST_RE = re.compile(r"^192\.168\.1\.(\d{1,3})$")
_USER_RE = re.compile(r"^[a-z][a-z0-9_-]{0,15}$")
_PERM_RE = re.compile(r"^[0-7]{3}$")
_HOST_OPS_RE = re.compile(r"[|<>`]|\$\(")


def _text(value: Any, what: str, limit: int, allow_empty: bool = False) -> str:
  if not isinstance(value, str):
    raise ValueError(f"{what} must be a string, got {type(value).__name__}")
  if len(value) > limit:
    raise ValueError(f"{what} is longer than {limit} characters ({len(value)})")
  if not allow_empty and not value.strip():
    raise ValueError(f"{what} is empty")
  if any(not (c.isprintable() or c in "\n\t") for c in value):
    raise ValueError(f"{what} holds non-printable characters")
  return value


def _names(parts: list[str], what: str) -> Path:
  if len(parts) > LIMITS["depth"]:
    raise ValueError(f"{what} is deeper than {LIMITS['depth']} levels")
  for p in parts:
    if p in ("", ".", ".."):
      raise ValueError(f"{what} holds an empty, '.' or '..' component (path traversal is refused)")
    if not _NAME_RE.match(p):
      raise ValueError(f"{what} holds the name {p[:40]!r} (letters, digits, '.', '_', '-' only; no leading dot)")
  return tuple(parts)


def parse_path(text: Any, os_type: str, what: str = "path") -> Path:
  """A machine path string -> the simulator's path tuple (module docstring rules, without the root rule)."""
  text = _text(text, what, 400)
  if os_type == WINDOWS:
    t = text.replace("/", "\\")
    if not re.match(r"^[A-Za-z]:\\", t):
      raise ValueError(f"{what} {text[:60]!r} must be an absolute Windows path like C:\\Users\\user\\...")
    return (t[0].upper(),) + _names(t[3:].rstrip("\\").split("\\"), what)
  if not text.startswith("/"):
    raise ValueError(f"{what} {text[:60]!r} must be an absolute path starting with /")
  return _names(text[1:].rstrip("/").split("/"), what)


def show_path(path: Path, os_type: str) -> str:
  if os_type == WINDOWS:
    return f"{path[0]}:\\" + "\\".join(path[1:])
  return "/" + "/".join(path)


def _rooted(path: Path, remote: bool, os_type: str, user: str, what: str) -> Path:
  if remote:
    roots = (("home", user),) + REMOTE_ROOTS
  else:
    roots = (HOMES[os_type],)
  if not any(path[:len(r)] == r and len(path) > len(r) for r in roots):
    shown = ", ".join(show_path(r, LINUX if remote else os_type) for r in roots)
    raise ValueError(f"{what} {show_path(path, LINUX if remote else os_type)!r} lies outside the allowed trees "
                     f"({shown})")
  return path


def _entries(value: Any, what: str) -> dict[str, str]:
  if not isinstance(value, Mapping) or not value:
    raise ValueError(f"{what} must be a non-empty object of member path -> content")
  if len(value) > LIMITS["entries"]:
    raise ValueError(f"{what} holds more than {LIMITS['entries']} members")
  out = {}
  for k, v in value.items():
    rel = _names(_text(k, f"{what} member", 200).split("/"), f"{what} member {k[:40]!r}")
    out["/".join(rel)] = _text(v, f"{what} member content", LIMITS["content_chars"], allow_empty=True)
  return out


def check_command_line(line: Any, what: str = "oracle line") -> str:
  """The line itself when it only uses simulator commands (module docstring), else ValueError."""
  line = _text(line, what, LIMITS["line_chars"])
  if "\n" in line:
    raise ValueError(f"{what} holds a newline (one command line per turn)")
  if _HOST_OPS_RE.search(line):
    raise ValueError(f"{what} {line[:60]!r} uses a pipe, redirect or command substitution")
  for cmd, _ in split_chain(line):
    word = cmd.split()[0] if cmd.split() else ""
    if not word:
      continue
    if word not in COMMANDS and word.lower() not in ALIASES:
      raise ValueError(f"{what} {line[:60]!r} runs {word[:30]!r}, which is not a simulator command")
  return line


def _item(raw: Any, remote: bool, os_type: str, user: str, i: int) -> dict:
  side = "remote" if remote else "local"
  what = f"{side} item {i}"
  if not isinstance(raw, Mapping):
    raise ValueError(f"{what} must be an object")
  kind = raw.get("type", "file")
  path = _rooted(parse_path(raw.get("path"), LINUX if remote else os_type, f"{what} path"), remote, os_type,
                 user, f"{what} path")
  out = {"path": show_path(path, LINUX if remote else os_type), "type": kind}
  if kind == "dir":
    return out
  if kind == "file":
    perm = raw.get("perm", "644")
    if not isinstance(perm, str) or not _PERM_RE.match(perm):
      raise ValueError(f"{what} perm must be three octal digits, got {perm!r}")
    out.update(content=_text(raw.get("content", ""), f"{what} content", LIMITS["content_chars"], allow_empty=True),
               perm=perm)
    return out
  if kind == "archive":
    if raw.get("format") not in ARCHIVE_KINDS:
      raise ValueError(f"{what} format must be one of {ARCHIVE_KINDS}, got {raw.get('format')!r}")
    out.update(format=raw["format"], entries=_entries(raw.get("entries"), f"{what} entries"))
    return out
  raise ValueError(f"{what} type must be dir, file or archive, got {kind!r}")


def _check(raw: Any, os_type: str, user: str, i: int) -> dict:
  what = f"check {i}"
  if not isinstance(raw, Mapping):
    raise ValueError(f"{what} must be an object")
  kind, machine = raw.get("kind"), raw.get("machine")
  if kind not in CHECK_KINDS:
    raise ValueError(f"{what} kind must be one of {CHECK_KINDS}, got {str(kind)[:40]!r}")
  if machine not in ("local", "remote"):
    raise ValueError(f"{what} machine must be 'local' or 'remote', got {str(machine)[:40]!r}")
  remote = machine == "remote"
  path = _rooted(parse_path(raw.get("path"), LINUX if remote else os_type, f"{what} path"), remote, os_type,
                 user, f"{what} path")
  out = {"kind": kind, "machine": machine, "path": show_path(path, LINUX if remote else os_type)}
  if kind == "file_exists" and raw.get("content") is not None:
    out["content"] = _text(raw["content"], f"{what} content", LIMITS["content_chars"], allow_empty=True)
  if kind == "permission_equals":
    if not isinstance(raw.get("value"), str) or not _PERM_RE.match(raw["value"]):
      raise ValueError(f"{what} value must be three octal digits, got {raw.get('value')!r}")
    out["value"] = raw["value"]
  if kind == "archive_contains":
    out["entries"] = _entries(raw.get("entries"), f"{what} entries")
  return out


def validate_data(data: Any) -> dict:
  """The canonical task data (module docstring), or ValueError naming the first violation."""
  if not isinstance(data, Mapping):
    raise ValueError(f"task data must be a JSON object, got {type(data).__name__}")
  missing = [k for k in ("os", "host", "user", "instruction", "local", "remote", "checks", "oracle") if k not in data]
  if missing:
    raise ValueError(f"task data misses {missing}")
  os_type = data["os"]
  if os_type not in OS_TYPES:
    raise ValueError(f"os must be one of {OS_TYPES}, got {str(os_type)[:40]!r}")
  host, user = data["host"], data["user"]
  m = _HOST_RE.match(host) if isinstance(host, str) else None
  if not m or not 10 <= int(m.group(1)) <= 254:
    raise ValueError(f"host must be 192.168.1.N (N in 10..254), got {str(host)[:40]!r}")
  if not isinstance(user, str) or not _USER_RE.match(user):
    raise ValueError(f"user must be a short lowercase name, got {str(user)[:40]!r}")
  out: dict[str, Any] = {"os": os_type, "host": host, "user": user,
                         "instruction": _text(data["instruction"], "instruction", LIMITS["instruction_chars"])}
  for side in ("local", "remote"):
    items = data[side]
    if not isinstance(items, list):
      raise ValueError(f"{side} must be a list of items")
    if len(items) > LIMITS["items"]:
      raise ValueError(f"{side} holds more than {LIMITS['items']} items ({len(items)})")
    out[side] = [_item(x, side == "remote", os_type, user, i) for i, x in enumerate(items)]
  checks, oracle = data["checks"], data["oracle"]
  if not isinstance(checks, list) or not checks:
    raise ValueError("checks must be a non-empty list")
  if len(checks) > LIMITS["checks"]:
    raise ValueError(f"more than {LIMITS['checks']} checks ({len(checks)})")
  out["checks"] = [_check(c, os_type, user, i) for i, c in enumerate(checks)]
  if not isinstance(oracle, list) or not oracle:
    raise ValueError("oracle must be a non-empty list of command lines")
  if len(oracle) > LIMITS["oracle_lines"]:
    raise ValueError(f"oracle holds more than {LIMITS['oracle_lines']} lines ({len(oracle)})")
  out["oracle"] = [check_command_line(c, f"oracle line {i}") for i, c in enumerate(oracle)]
  return out


def task_from_data(data: Any, seed: int = 0) -> TerminalTaskSpec:
  """A ``TerminalTaskSpec`` built from task data (module docstring); ValueError when the data break a rule."""
  d = validate_data(data)
  os_type, user = d["os"], d["user"]
  spec = TerminalTaskSpec(seed=int(seed), os_type=os_type, kind="data", composite=len(d["checks"]) > 1,
                          host=d["host"], user=user, description=d["instruction"], oracle=list(d["oracle"]))
  for side in ("local", "remote"):
    remote = side == "remote"
    owner = user if remote else "user"
    for item in d[side]:
      path = parse_path(item["path"], LINUX if remote else os_type)
      if item["type"] == "dir":
        node = None
      elif item["type"] == "file":
        node = File(content=item["content"], perm=item["perm"], owner=owner)
      else:
        node = File(content=f"[{item['format']} archive]", owner=owner, archive_type=item["format"],
                    entries=dict(item["entries"]))
      (spec.remote if remote else spec.local).append((path, node))
  for c in d["checks"]:
    remote = c["machine"] == "remote"
    spec.checks.append(Check(c["kind"], remote, parse_path(c["path"], LINUX if remote else os_type),
                             content=c.get("content"), value=c.get("value"),
                             entries=tuple(sorted(c.get("entries", {}).items()))))
  try:
    spec.build()
  except Exception as e:  # noqa: BLE001 - e.g. a file placed where a directory must be
    raise ValueError(f"the initial file systems do not build: {type(e).__name__}: {e}") from None
  return spec
