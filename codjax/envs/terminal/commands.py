"""The TerminalSimulator shell: command lines, chains and the simulated command set (CoD paper, Sec. 3.2.1;
after the authors' shiweijiezero/Trinity-RFT `trinity/common/workflows/connect_the_dots/terminal/commands.py`).

A command line is expanded (``~``, ``$HOME``/``${USER}``/``$PWD`` on Unix, ``%USERPROFILE%``/``%USERNAME%``/``%CD%``
on Windows), rejected when it holds an unquoted pipe, redirect or command substitution (``|``, ``>``, ``<``,
backticks, ``$(``), split on unquoted ``&&`` and ``;`` (bash semantics: a command after ``&&`` runs only when the
last executed command succeeded), tokenised like a shell (``shlex``; Windows keeps backslashes) and dispatched.
Aliases: dir->ls, type->cat, copy->cp, move->mv, del->rm, ren/rename->mv (within the source's directory).
chmod, touch, rsync, tar, gzip and gunzip exist only on Linux/macOS and on the (Linux) remote; scp and rsync run
only on the local machine. Errors imitate bash (``bash: x: command not found``) or cmd.exe (``'x' is not
recognized as an internal or external command, ...``).

Everything acts on the in-memory ``Machine`` trees of ``fs.py``; nothing here reaches the host: no process,
file, network or environment access, and no evaluation of user text.
"""

from __future__ import annotations

import re
import shlex
from typing import Callable

from codjax.envs.terminal.fs import WINDOWS, Dir, File, FsError, Machine, Path

UNIX_ONLY = frozenset({"chmod", "touch", "rsync", "tar", "gzip", "gunzip"})
LOCAL_ONLY = frozenset({"scp", "rsync"})
ALIASES = {"dir": "ls", "type": "cat", "copy": "cp", "move": "mv", "del": "rm", "ren": "mv", "rename": "mv"}
COMMAND_LIST = ("ls, dir, cd, pwd, cat, type, mkdir, chmod, cp, copy, mv, move, rm, del, ren, touch, scp, rsync, "
                "ssh, exit, whoami, echo, tar, zip, unzip, gzip, gunzip")
MAX_LINE = 4000  # longer command lines are refused (bash: "argument list too long")
_PERM_RE = re.compile(r"^[0-7]{3}$")


class Result:
  """Output text and success of one command."""

  __slots__ = ("out", "ok")

  def __init__(self, out: str = "", ok: bool = True):
    self.out = out
    self.ok = ok


def _err(text: str) -> Result:
  return Result(text, False)


def _quote_scan(text: str) -> list[tuple[str, bool]]:
  """(char, quoted) pairs; single and double quotes toggle quoting (the quote chars are themselves quoted)."""
  out, single, double = [], False, False
  for ch in text:
    if ch == "'" and not double:
      single = not single
      out.append((ch, True))
    elif ch == '"' and not single:
      double = not double
      out.append((ch, True))
    else:
      out.append((ch, single or double))
  return out


def split_chain(text: str) -> list[tuple[str, str | None]]:
  """Splits on unquoted ``&&`` and ``;``: [(command, operator before it)]."""
  scanned = _quote_scan(text)
  parts, cur, op, i = [], [], None, 0
  while i < len(scanned):
    ch, quoted = scanned[i]
    if not quoted and ch == ";":
      parts.append(("".join(cur), op))
      cur, op = [], ";"
    elif not quoted and ch == "&" and i + 1 < len(scanned) and scanned[i + 1] == ("&", False):
      parts.append(("".join(cur), op))
      cur, op = [], "&&"
      i += 1
    else:
      cur.append(ch)
    i += 1
  parts.append(("".join(cur), op))
  return [(c.strip(), o) for c, o in parts]


class Shell:
  """A local machine, a remote Linux server reachable by ssh/scp, and the current session."""

  def __init__(self, local: Machine, remote: Machine):
    self.local = local
    self.remote = remote
    self.connected = False
    self._handlers: dict[str, Callable[[list[str], Machine, str], Result]] = {
        "ls": self._ls, "cd": self._cd, "pwd": self._pwd, "cat": self._cat, "mkdir": self._mkdir,
        "chmod": self._chmod, "cp": self._cp, "mv": self._mv, "rm": self._rm, "touch": self._touch,
        "echo": self._echo, "whoami": self._whoami, "ssh": self._ssh, "exit": self._exit, "scp": self._scp,
        "rsync": self._rsync, "tar": self._tar, "zip": self._zip, "unzip": self._unzip, "gzip": self._gzip,
        "gunzip": self._gunzip,
    }

  @property
  def machine(self) -> Machine:
    return self.remote if self.connected else self.local

  @property
  def win(self) -> bool:
    """True when commands run in the Windows cmd.exe session."""
    return self.machine.os_type == WINDOWS

  def prompt(self) -> str:
    m = self.machine
    if m.os_type == WINDOWS:
      return f"{m.display(m.cwd)}>"
    path = m.display(m.cwd)
    home = m.display(m.home)
    short = "~" + path[len(home):] if path == home or path.startswith(home + "/") else path
    if m.os_type == "mac":
      return f"{m.username}@MacBook {short} % "
    return f"{m.username}@{m.hostname}:{short}$ "

  # -- command lines -------------------------------------------------------------------------------
  def run_line(self, line: str) -> str:
    """Executes one command line and returns its output."""
    line = line.strip()
    if not line:
      return ""
    if len(line) > MAX_LINE:
      return "bash: argument list too long" if not self.win else "The command line is too long."
    line = self._expand(line)
    scanned = _quote_scan(line)
    unquoted = "".join(ch if not q else " " for ch, q in scanned)
    if "`" in unquoted or "$(" in unquoted:
      return "Error: command substitution is not supported in this environment."
    if "|" in unquoted:
      return "Error: pipes (|) are not supported in this environment."
    if ">" in unquoted or "<" in unquoted:
      return "Error: redirects (>, >>, <) are not supported in this environment."
    outputs, ok = [], True
    for cmd, op in split_chain(line):
      if not cmd or (op == "&&" and not ok):
        continue
      res = self.run_command(cmd)
      ok = res.ok
      if res.out:
        outputs.append(res.out)
    return "\n".join(outputs)

  def _expand(self, line: str) -> str:
    m = self.machine
    env = m.env_vars()
    if m.os_type == WINDOWS:
      for k, v in env.items():
        line = re.sub(f"%{k}%", lambda _: v, line, flags=re.IGNORECASE)
      return line
    home = env["HOME"]
    line = re.sub(r"(?<![\w~:/\\])~(?=/|\s|$|;|&)", lambda _: home, line)
    for k in sorted(env, key=len, reverse=True):
      line = line.replace("${" + k + "}", env[k]).replace("$" + k, env[k])
    return line

  def run_command(self, cmd: str) -> Result:
    try:
      if self.win:
        tokens = [t[1:-1] if len(t) >= 2 and t[0] == t[-1] == '"' else t for t in shlex.split(cmd, posix=False)]
      else:
        tokens = shlex.split(cmd, posix=True)
    except ValueError:
      return _err("bash: syntax error: unexpected end of file" if not self.win
                  else "The syntax of the command is incorrect.")
    if not tokens:
      return Result()
    name, args = tokens[0], tokens[1:]
    key = name.lower() if self.win else name
    handler_name = ALIASES.get(key, key)
    handler = self._handlers.get(handler_name)
    if handler is None or (handler_name in UNIX_ONLY and self.win) or (
        handler_name in LOCAL_ONLY and self.connected):
      if handler is not None and self.connected:
        return _err(f"bash: {name}: must be run from the local machine; use 'exit' to disconnect first.")
      return self._not_found(name)
    try:
      return handler(args, self.machine, key)
    except FsError as e:
      return _err(f"{handler_name}: {self.machine.display(e.path)}: {_FS_MESSAGES[e.kind]}")

  def _not_found(self, name: str) -> Result:
    name = name if len(name) <= 40 else name[:40] + "..."
    if self.win:
      return _err(f"'{name}' is not recognized as an internal or external command,\noperable program or batch file.")
    return _err(f"bash: {name}: command not found")

  # -- argument helpers ----------------------------------------------------------------------------
  def _split_args(self, args: list[str]) -> tuple[set[str], list[str]]:
    """Flags (letters of ``-x``/``--long``; on Windows also ``/x``) and operands."""
    flags, ops = set(), []
    for a in args:
      if a.startswith("--") and len(a) > 2:
        flags.add(a[2:])
      elif a.startswith("-") and len(a) > 1:
        flags.update(a[1:])
      elif self.win and re.fullmatch(r"/[A-Za-z]", a):
        flags.add(a[1].lower())
      else:
        ops.append(a)
    return flags, ops

  def _missing(self, cmd: str, text: str) -> Result:
    if self.win:
      return _err("The system cannot find the file specified.")
    return _err(f"{cmd}: cannot access '{text}': No such file or directory")

  # -- commands ------------------------------------------------------------------------------------
  def _ls(self, args: list[str], m: Machine, name: str) -> Result:
    flags, ops = self._split_args(args)
    out, ok = [], True
    for text in ops or ["."]:
      path = m.resolve(text)
      node = m.get(path)
      if node is None:
        out.append(self._missing("ls", text).out)
        ok = False
      elif isinstance(node, File):
        out.append(self._long(path[-1], node) if "l" in flags else path[-1])
      elif self.win:
        out.append(self._dir_listing(m, path, node))
      else:
        names = sorted(n for n in node.children if "a" in flags or not n.startswith("."))
        if "l" in flags:
          out.append("\n".join(self._long(n, node.children[n]) for n in names))
        else:
          out.append("  ".join(n + "/" if isinstance(node.children[n], Dir) else n for n in names))
    return Result("\n".join(x for x in out if x), ok)

  @staticmethod
  def _long(name: str, node: Dir | File) -> str:
    mode = int(node.perm, 8)
    bits = "".join(("r" if mode >> s & 4 else "-") + ("w" if mode >> s & 2 else "-") + ("x" if mode >> s & 1 else "-")
                   for s in (6, 3, 0))
    size = 4096 if isinstance(node, Dir) else node.size
    kind = "d" if isinstance(node, Dir) else "-"
    return f"{kind}{bits} 1 {node.owner} {node.owner} {size:>8} Jan 15 10:30 {name}"

  @staticmethod
  def _dir_listing(m: Machine, path: Path, node: Dir) -> str:
    lines = [" Volume in drive C has no label.", f" Directory of {m.display(path)}", ""]
    files = dirs = total = 0
    for n in sorted(node.children):
      child = node.children[n]
      if isinstance(child, Dir):
        dirs += 1
        lines.append(f"01/15/2024  10:30 AM    <DIR>          {n}")
      else:
        files += 1
        total += child.size
        lines.append(f"01/15/2024  10:30 AM          {child.size:>8} {n}")
    lines.append(f"               {files} File(s)    {total:>10} bytes")
    lines.append(f"               {dirs} Dir(s)   500,000,000 bytes free")
    return "\n".join(lines)

  def _cd(self, args: list[str], m: Machine, name: str) -> Result:
    _, ops = self._split_args(args)
    if not ops:
      if self.win:
        return Result(m.display(m.cwd))
      m.cwd = m.home
      return Result()
    path = m.resolve(ops[0])
    node = m.get(path)
    if node is None:
      return _err("The system cannot find the path specified." if self.win
                  else f"bash: cd: {ops[0]}: No such file or directory")
    if not isinstance(node, Dir):
      return _err("The directory name is invalid." if self.win else f"bash: cd: {ops[0]}: Not a directory")
    m.cwd = path
    return Result()

  def _pwd(self, args: list[str], m: Machine, name: str) -> Result:
    return Result(m.display(m.cwd))

  def _cat(self, args: list[str], m: Machine, name: str) -> Result:
    _, ops = self._split_args(args)
    if not ops:
      return _err("The syntax of the command is incorrect." if self.win else "cat: missing operand")
    out, ok = [], True
    for text in ops:
      node = m.get(m.resolve(text))
      if node is None:
        out.append("The system cannot find the file specified." if self.win
                   else f"cat: {text}: No such file or directory")
        ok = False
      elif isinstance(node, Dir):
        out.append("Access is denied." if self.win else f"cat: {text}: Is a directory")
        ok = False
      elif node.archive_type:
        out.append(f"[Binary file - {node.archive_type} archive, {len(node.entries or {})} entries]")
      else:
        out.append(node.content)
    return Result("\n".join(out), ok)

  def _mkdir(self, args: list[str], m: Machine, name: str) -> Result:
    flags, ops = self._split_args(args)
    if not ops:
      return _err("The syntax of the command is incorrect." if self.win else "mkdir: missing operand")
    parents = "p" in flags or "parents" in flags or self.win  # cmd.exe creates intermediate directories
    out = []
    for text in ops:
      path = m.resolve(text)
      node = m.get(path)
      if node is not None:
        if not (parents and isinstance(node, Dir)) or self.win:
          out.append(f"A subdirectory or file {text} already exists." if self.win
                     else f"mkdir: cannot create directory '{text}': File exists")
        continue
      try:
        m.makedirs(path) if parents else m.mkdir(path)
      except FsError as e:
        out.append(f"mkdir: cannot create directory '{text}': " + _FS_MESSAGES[e.kind])
    return Result("\n".join(out), not out)

  def _chmod(self, args: list[str], m: Machine, name: str) -> Result:
    flags, ops = self._split_args(args)
    if len(ops) < 2:
      return _err("chmod: missing operand")
    mode, targets = ops[0], ops[1:]
    if not _PERM_RE.match(mode):
      return _err(f"chmod: invalid mode: '{mode[:20]}'")
    out = []
    for text in targets:
      path = m.resolve(text)
      if m.get(path) is None:
        out.append(f"chmod: cannot access '{text}': No such file or directory")
        continue
      for node in (m.walk(path) if "R" in flags or "recursive" in flags else [m.get(path)]):
        node.perm = mode
    return Result("\n".join(out), not out)

  def _copy_target(self, m: Machine, src: Path, dst_text: str) -> Path:
    dst = m.resolve(dst_text)
    return dst + (src[-1],) if m.is_dir(dst) else dst

  def _cp(self, args: list[str], m: Machine, name: str) -> Result:
    flags, ops = self._split_args(args)
    if len(ops) < 2:
      return _err("The syntax of the command is incorrect." if self.win else "cp: missing destination operand")
    src = m.resolve(ops[0])
    node = m.get(src)
    if node is None:
      return _err("The system cannot find the file specified." if self.win
                  else f"cp: cannot stat '{ops[0]}': No such file or directory")
    if isinstance(node, Dir) and not ({"r", "R", "recursive"} & flags):
      return _err(f"cp: -r not specified; omitting directory '{ops[0]}'")
    dst = self._copy_target(m, src, ops[1])
    if dst[:len(src)] == src:
      return _err(f"cp: cannot copy a directory, '{ops[0]}', into itself")
    try:
      m.put(dst, node.copy(m.username))
    except FsError:
      return _err("The system cannot find the path specified." if self.win
                  else f"cp: cannot create regular file '{ops[1]}': No such file or directory")
    return Result("        1 file(s) copied." if self.win else "")

  def _mv(self, args: list[str], m: Machine, name: str) -> Result:
    _, ops = self._split_args(args)
    if len(ops) < 2:
      return _err("The syntax of the command is incorrect." if self.win else "mv: missing destination operand")
    src = m.resolve(ops[0])
    node = m.get(src)
    if node is None:
      return _err("The system cannot find the file specified." if self.win
                  else f"mv: cannot stat '{ops[0]}': No such file or directory")
    if name in ("ren", "rename"):
      if any(c in ops[1] for c in "\\/:"):
        return _err("The syntax of the command is incorrect.")
      dst = src[:-1] + (ops[1],)
      if m.get(dst) is not None:
        return _err("A duplicate file name exists, or the file cannot be found.")
    else:
      dst = self._copy_target(m, src, ops[1])
    if dst[:len(src)] == src:
      return _err(f"mv: cannot move '{ops[0]}' to a subdirectory of itself")
    try:
      m.put(dst, node)
    except FsError:
      return _err("The system cannot find the path specified." if self.win
                  else f"mv: cannot move '{ops[0]}' to '{ops[1]}': No such file or directory")
    m.remove(src, recursive=True)
    return Result("        1 file(s) moved." if self.win and name == "move" else "")

  def _rm(self, args: list[str], m: Machine, name: str) -> Result:
    flags, ops = self._split_args(args)
    if not ops:
      return _err("The syntax of the command is incorrect." if self.win else "rm: missing operand")
    recursive = bool({"r", "R", "recursive", "s"} & flags)
    out = []
    for text in ops:
      path = m.resolve(text)
      node = m.get(path)
      if node is None:
        if "f" not in flags:
          out.append(f"Could Not Find {m.display(path)}" if self.win
                     else f"rm: cannot remove '{text}': No such file or directory")
        continue
      if isinstance(node, Dir) and not recursive:
        out.append("Access is denied." if self.win else f"rm: cannot remove '{text}': Is a directory")
        continue
      m.remove(path, recursive=True)
    return Result("\n".join(out), not out)

  def _touch(self, args: list[str], m: Machine, name: str) -> Result:
    _, ops = self._split_args(args)
    if not ops:
      return _err("touch: missing file operand")
    for text in ops:
      path = m.resolve(text)
      if m.get(path) is None:
        try:
          m.write(path, "")
        except FsError:
          return _err(f"touch: cannot touch '{text}': No such file or directory")
    return Result()

  def _echo(self, args: list[str], m: Machine, name: str) -> Result:
    return Result(" ".join(args)[:2000])

  def _whoami(self, args: list[str], m: Machine, name: str) -> Result:
    return Result(m.username)

  def _ssh(self, args: list[str], m: Machine, name: str) -> Result:
    if self.connected:
      return _err("bash: already connected to a remote host; use 'exit' first.")
    ops, i = [], 0
    while i < len(args):
      if args[i] in ("-p", "-i", "-l", "-o") and i + 1 < len(args):
        i += 2
        continue
      if not args[i].startswith("-"):
        ops.append(args[i])
      i += 1
    if not ops:
      return _err("usage: ssh [-p port] [-i identity_file] destination [command]")
    user, _, host = ops[0].rpartition("@")
    user = user or self.local.username
    if host != self.remote.hostname:
      return _err(f"ssh: connect to host {host[:60]} port 22: Connection refused" if re.fullmatch(r"[\d.]+", host)
                  else f"ssh: Could not resolve hostname {host[:60]}: Name or service not known")
    if user != self.remote.username:
      return _err(f"{user[:40]}@{host}: Permission denied (publickey,password).")
    if len(ops) > 1:  # ssh host command: run one command line remotely, stay local
      self.connected = True
      try:
        out = self.run_line(" ".join(ops[1:]))
      finally:
        self.connected = False
      return Result(out)
    self.connected = True
    return Result(f"Welcome to Ubuntu 22.04 LTS ({host})\nLast login: Mon Jan 15 10:30:00 2024")

  def _exit(self, args: list[str], m: Machine, name: str) -> Result:
    if self.connected:
      self.connected = False
      return Result(f"Connection to {self.remote.hostname} closed.")
    return Result()

  def _remote_spec(self, text: str) -> tuple[bool, str] | Result:
    """``user@host:path`` -> (True, path); a plain path -> (False, path); errors as a Result."""
    m = re.match(r"^([^@/\\:]+)@([^:/\\]+):(.*)$", text)
    if not m:
      return False, text
    user, host, path = m.groups()
    if host != self.remote.hostname:
      return _err(f"ssh: connect to host {host[:60]} port 22: Connection refused")
    if user != self.remote.username:
      return _err(f"{user[:40]}@{host}: Permission denied (publickey,password).")
    return True, path or "~"

  def _transfer(self, cmd: str, ops: list[str], recursive: bool) -> Result:
    if len(ops) < 2:
      return _err(f"usage: {cmd} [-r] source target")
    specs = [self._remote_spec(o) for o in ops[:2]]
    for s in specs:
      if isinstance(s, Result):
        return s
    (src_remote, src_text), (dst_remote, dst_text) = specs
    if src_remote == dst_remote:
      return _err(f"{cmd}: copying between two remote hosts is not supported" if src_remote
                  else f"{cmd}: use cp for a local-to-local copy")
    src_m = self.remote if src_remote else self.local
    dst_m = self.remote if dst_remote else self.local
    src = _remote_path(src_m, src_text) if src_remote else src_m.resolve(src_text)
    node = src_m.get(src)
    if node is None:
      return _err(f"{cmd}: {src_text}: No such file or directory")
    if isinstance(node, Dir) and not recursive:
      return _err(f"{cmd}: {src_text}: not a regular file")
    dst = _remote_path(dst_m, dst_text) if dst_remote else dst_m.resolve(dst_text)
    if dst_m.is_dir(dst):
      dst = dst + (src[-1],)
    try:
      dst_m.put(dst, node.copy(dst_m.username))
    except FsError:
      return _err(f"{cmd}: {dst_text}: No such file or directory")
    return Result(f"{src[-1]}                    100% {node.size if isinstance(node, File) else 4096}     "
                  "transferred")

  def _scp(self, args: list[str], m: Machine, name: str) -> Result:
    ops, recursive, i = [], False, 0
    while i < len(args):
      a = args[i]
      if a in ("-P", "-i", "-o") and i + 1 < len(args):
        i += 2
        continue
      if a.startswith("-") and len(a) > 1:
        recursive = recursive or "r" in a or "R" in a
      else:
        ops.append(a)
      i += 1
    return self._transfer("scp", ops, recursive)

  def _rsync(self, args: list[str], m: Machine, name: str) -> Result:
    ops = [a for a in args if not a.startswith("-")]
    res = self._transfer("rsync", ops, recursive=True)
    if res.ok:
      return Result("sending incremental file list\n" + ops[0].rstrip("/").split("/")[-1] +
                    "\n\nsent 1024 bytes  received 42 bytes  2132.00 bytes/sec\ntotal size is 1024  speedup is 0.96")
    return res

  # -- archives ------------------------------------------------------------------------------------
  def _collect(self, m: Machine, texts: list[str], cmd: str) -> dict[str, str] | Result:
    """Archive members for the given paths: a file by its name, a directory as ``name/relative``."""
    entries: dict[str, str] = {}
    for text in texts:
      path = m.resolve(text)
      node = m.get(path)
      if node is None:
        return _err(f"tar: {text}: Cannot open: No such file or directory" if cmd == "tar"
                    else f"zip warning: name not matched: {text}\n\nzip error: Nothing to do!")
      base = path[-1] if path else ""
      for rel, f in m.walk_files(path):
        entries["/".join((base,) + rel) if base else "/".join(rel)] = f.content
    return entries

  def _write_archive(self, m: Machine, text: str, kind: str, entries: dict[str, str], cmd: str) -> Result | None:
    path = m.resolve(text)
    try:
      m.put(path, File(content=f"[{kind} archive]", owner=m.username, archive_type=kind, entries=entries))
    except FsError:
      return _err(f"tar: {text}: Cannot open: No such file or directory" if cmd == "tar"
                  else f"zip I/O error: No such file or directory\nzip error: Could not create output file ({text})")
    return None

  def _extract(self, m: Machine, dest: Path, entries: dict[str, str]) -> None:
    for rel, content in entries.items():
      path = dest + tuple(p for p in rel.split("/") if p not in ("", ".", ".."))
      if not path[len(dest):]:
        continue
      m.makedirs(path[:-1])
      m.put(path, File(content=content, owner=m.username))

  def _tar(self, args: list[str], m: Machine, name: str) -> Result:
    if not args:
      return _err("tar: You must specify one of the '-Acdtrux' options")
    mode, gz, archive, chdir, files, want = None, False, None, None, [], None
    for i, a in enumerate(args):
      if want == "f":
        archive, want = a, None
        continue
      if want == "C":
        chdir, want = a, None
        continue
      if a.startswith("--"):
        opt, _, val = a[2:].partition("=")
        mode = {"create": "c", "extract": "x", "get": "x", "list": "t"}.get(opt, mode)
        gz = gz or opt in ("gzip", "gunzip", "ungzip")
        if opt == "file":
          archive, want = (val, None) if val else (None, "f")
        if opt == "directory":
          chdir, want = (val, None) if val else (None, "C")
      elif a.startswith("-") or (i == 0 and re.fullmatch(r"[cxtzvfC]+", a)):
        for ch in a.lstrip("-"):
          if ch in "cxt":
            mode = ch
          elif ch == "z":
            gz = True
          elif ch in "fC":
            want = ch
      else:
        files.append(a)
    if archive is None:
      return _err("tar: Refusing to read archive contents from terminal (missing -f option?)")
    if mode is None:
      return _err("tar: You must specify one of the '-Acdtrux' options")
    base = m.cwd
    if chdir is not None:
      base = m.resolve(chdir)
      if not m.is_dir(base):
        return _err(f"tar: {chdir}: Cannot open: No such file or directory")
    archive_path = m.resolve(archive)
    if mode == "c":
      if not files:
        return _err("tar: Cowardly refusing to create an empty archive")
      saved, m.cwd = m.cwd, base
      try:
        entries = self._collect(m, files, "tar")
      finally:
        m.cwd = saved
      if isinstance(entries, Result):
        return entries
      return self._write_archive(m, archive, "tar.gz" if gz else "tar", entries, "tar") or Result()
    node = m.get(archive_path)
    if not isinstance(node, File):
      return _err(f"tar: {archive}: Cannot open: No such file or directory")
    if not node.archive_type or not node.archive_type.startswith("tar"):
      return _err("tar: This does not look like a tar archive\ntar: Exiting with failure status due to previous errors")
    if mode == "t":
      return Result("\n".join(sorted(node.entries or {})))
    self._extract(m, base, node.entries or {})
    return Result()

  def _zip(self, args: list[str], m: Machine, name: str) -> Result:
    flags, ops = self._split_args(args)
    if len(ops) < 2:
      return _err("zip error: Nothing to do! (missing archive name or files)")
    archive, texts = ops[0], ops[1:]
    if not archive.endswith(".zip"):
      archive += ".zip"
    if not ({"r", "R"} & flags):
      dirs = [t for t in texts if m.is_dir(m.resolve(t))]
      texts = [t for t in texts if t not in dirs]
      if not texts:
        return _err("zip warning: no files added (directories need -r)\nzip error: Nothing to do!")
    entries = self._collect(m, texts, "zip")
    if isinstance(entries, Result):
      return entries
    err = self._write_archive(m, archive, "zip", entries, "zip")
    return err or Result("\n".join(f"  adding: {e} (stored 0%)" for e in entries))

  def _unzip(self, args: list[str], m: Machine, name: str) -> Result:
    archive, dest, i = None, None, 0
    while i < len(args):
      if args[i] == "-d" and i + 1 < len(args):
        dest, i = args[i + 1], i + 2
        continue
      if not args[i].startswith("-") and archive is None:
        archive = args[i]
      i += 1
    if archive is None:
      return _err("UnZip: missing archive name (usage: unzip file.zip [-d exdir])")
    node = m.get(m.resolve(archive))
    if not isinstance(node, File):
      return _err(f"unzip:  cannot find or open {archive}, {archive}.zip or {archive}.ZIP.")
    if node.archive_type != "zip":
      return _err(f"  End-of-central-directory signature not found.  {archive} is not a zip archive.")
    target = m.resolve(dest) if dest is not None else m.cwd
    m.makedirs(target)
    self._extract(m, target, node.entries or {})
    return Result(f"Archive:  {archive}\n" + "\n".join(f"  extracting: {e}" for e in node.entries or {}))

  def _gzip(self, args: list[str], m: Machine, name: str) -> Result:
    _, ops = self._split_args(args)
    if not ops:
      return _err("gzip: compressed data not written to a terminal.")
    for text in ops:
      path = m.resolve(text)
      node = m.get(path)
      if node is None:
        return _err(f"gzip: {text}: No such file or directory")
      if isinstance(node, Dir):
        return _err(f"gzip: {text} is a directory -- ignored")
      m.put(path[:-1] + (path[-1] + ".gz",), File(content="[gzip data]", perm=node.perm, owner=node.owner,
                                                 archive_type="gzip", entries={path[-1]: node.content}))
      m.remove(path)
    return Result()

  def _gunzip(self, args: list[str], m: Machine, name: str) -> Result:
    _, ops = self._split_args(args)
    if not ops:
      return _err("gzip: compressed data not read from a terminal.")
    for text in ops:
      path = m.resolve(text)
      node = m.get(path)
      if node is None:
        return _err(f"gzip: {text}: No such file or directory")
      if not isinstance(node, File) or node.archive_type != "gzip":
        return _err(f"gzip: {text}: not in gzip format")
      for member, content in (node.entries or {}).items():
        m.put(path[:-1] + (member.split("/")[-1],), File(content=content, owner=m.username))
      m.remove(path)
    return Result()


def _remote_path(m: Machine, text: str) -> Path:
  """Remote scp paths are relative to the remote home unless absolute (``~`` is the home)."""
  if text == "~" or text.startswith("~/"):
    text = text[2:] if text.startswith("~/") else ""
  if text.startswith("/"):
    return m.resolve(text)
  saved, m.cwd = m.cwd, m.home
  try:
    return m.resolve(text)
  finally:
    m.cwd = saved


_FS_MESSAGES = {"missing": "No such file or directory", "notdir": "Not a directory", "isdir": "Is a directory",
                "exists": "File exists", "notempty": "Directory not empty"}
