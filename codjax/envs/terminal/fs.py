"""Pure in-memory file systems for the TerminalSimulator (no host file system is ever touched).

A ``Machine`` holds a tree of ``Dir``/``File`` nodes, a working directory and the user's environment variables.
Paths are tuples of names from the root; Windows machines keep the drive letter as the first name (``("C",
"Users", "user")`` displays as ``C:\\Users\\user``). ``resolve`` turns what a user types into such a tuple
(absolute or relative to the working directory, ``.`` and ``..`` folded, never above the root), so no user
path can name anything outside the simulated tree.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

Path = tuple[str, ...]

LINUX, MAC, WINDOWS = "linux", "mac", "windows"
OS_TYPES = (WINDOWS, MAC, LINUX)


@dataclasses.dataclass
class File:
  content: str = ""
  perm: str = "644"
  owner: str = "user"
  archive_type: str | None = None  # "tar" | "tar.gz" | "zip" | "gzip"
  entries: dict[str, str] | None = None  # archive member path -> content

  def copy(self, owner: str | None = None) -> "File":
    return File(self.content, self.perm, owner or self.owner, self.archive_type,
                dict(self.entries) if self.entries is not None else None)

  @property
  def size(self) -> int:
    return sum(len(v) for v in self.entries.values()) if self.entries is not None else len(self.content)


@dataclasses.dataclass
class Dir:
  children: dict[str, "Dir | File"] = dataclasses.field(default_factory=dict)
  perm: str = "755"
  owner: str = "user"

  def copy(self, owner: str | None = None) -> "Dir":
    return Dir({k: v.copy(owner) for k, v in self.children.items()}, self.perm, owner or self.owner)


Node = Dir | File


class FsError(Exception):
  """A file-system failure; ``kind`` is one of 'missing', 'notdir', 'isdir', 'exists', 'notempty'."""

  def __init__(self, kind: str, path: Path):
    super().__init__(kind)
    self.kind = kind
    self.path = path


@dataclasses.dataclass
class Machine:
  """One simulated computer: OS type, identity, file tree, working directory and environment."""

  os_type: str
  hostname: str
  username: str
  home: Path
  root: Dir = dataclasses.field(default_factory=Dir)
  cwd: Path = ()

  def __post_init__(self):
    if not self.cwd:
      self.cwd = self.home

  @property
  def windows(self) -> bool:
    return self.os_type == WINDOWS

  # -- paths ---------------------------------------------------------------------------------------
  def display(self, path: Path) -> str:
    if self.windows:
      return f"{path[0]}:\\" + "\\".join(path[1:]) if path else "C:\\"
    return "/" + "/".join(path)

  def env_vars(self) -> dict[str, str]:
    home = self.display(self.home)
    if self.windows:
      return {"USERPROFILE": home, "USERNAME": self.username, "CD": self.display(self.cwd), "HOMEPATH": home}
    return {"HOME": home, "USER": self.username, "PWD": self.display(self.cwd)}

  def resolve(self, text: str) -> Path:
    """User path -> absolute path tuple (module docstring)."""
    if self.windows:
      t = text.replace("/", "\\")
      if len(t) >= 2 and t[1] == ":" and t[0].isalpha():
        parts, base = t[2:].split("\\"), (t[0].upper(),)
      elif t.startswith("\\"):
        parts, base = t.split("\\"), self.cwd[:1]
      else:
        parts, base = t.split("\\"), self.cwd
      floor = 1
    else:
      if text.startswith("/"):
        parts, base = text.split("/"), ()
      else:
        parts, base = text.split("/"), self.cwd
      floor = 0
    out = list(base)
    for p in parts:
      if p in ("", "."):
        continue
      if p == "..":
        if len(out) > floor:
          out.pop()
      else:
        out.append(p)
    return tuple(out)

  # -- nodes ---------------------------------------------------------------------------------------
  def get(self, path: Path) -> Node | None:
    node: Node = self.root
    for name in path:
      if not isinstance(node, Dir) or name not in node.children:
        return None
      node = node.children[name]
    return node

  def is_dir(self, path: Path) -> bool:
    return isinstance(self.get(path), Dir)

  def is_file(self, path: Path) -> bool:
    return isinstance(self.get(path), File)

  def parent_dir(self, path: Path) -> Dir:
    """The directory that holds ``path`` (raises FsError when it is missing or not a directory)."""
    node = self.get(path[:-1])
    if node is None:
      raise FsError("missing", path[:-1])
    if not isinstance(node, Dir):
      raise FsError("notdir", path[:-1])
    return node

  def makedirs(self, path: Path) -> None:
    node = self.root
    for i, name in enumerate(path):
      child = node.children.get(name)
      if child is None:
        child = node.children[name] = Dir(owner=self.username)
      elif not isinstance(child, Dir):
        raise FsError("notdir", path[:i + 1])
      node = child

  def mkdir(self, path: Path) -> None:
    parent = self.parent_dir(path)
    if not path or path[-1] in parent.children:
      raise FsError("exists", path)
    parent.children[path[-1]] = Dir(owner=self.username)

  def put(self, path: Path, node: Node) -> None:
    if not path:
      raise FsError("isdir", path)
    parent = self.parent_dir(path)
    if isinstance(parent.children.get(path[-1]), Dir):
      raise FsError("isdir", path)
    parent.children[path[-1]] = node

  def write(self, path: Path, content: str, perm: str = "644") -> File:
    f = File(content=content, perm=perm, owner=self.username)
    self.put(path, f)
    return f

  def remove(self, path: Path, recursive: bool = False) -> None:
    if not path:
      if not recursive:
        raise FsError("isdir", path)
      self.root.children.clear()
      return
    parent = self.parent_dir(path)
    node = parent.children.get(path[-1])
    if node is None:
      raise FsError("missing", path)
    if isinstance(node, Dir) and not recursive:
      raise FsError("isdir", path)
    del parent.children[path[-1]]

  def walk_files(self, path: Path) -> Iterator[tuple[Path, File]]:
    """(relative path, file) for every file below ``path``, in sorted order."""
    node = self.get(path)
    if isinstance(node, File):
      yield (), node
      return
    if isinstance(node, Dir):
      for name in sorted(node.children):
        for rel, f in self.walk_files(path + (name,)):
          yield (name,) + rel, f

  def walk(self, path: Path) -> Iterator[Node]:
    node = self.get(path)
    if node is None:
      return
    yield node
    if isinstance(node, Dir):
      for name in sorted(node.children):
        yield from self.walk(path + (name,))
