"""TerminalSimulator task generation and goal checks, a pure function of the task seed (CoD paper, Sec. 3.2.1;
after the authors' shiweijiezero/Trinity-RFT `trinity/common/workflows/connect_the_dots/terminal/task_gen.py`
and `goal_check.py`).

``random.Random(seed)`` draws, in order: the local OS (windows/mac/linux), the remote host
``192.168.1.{10..99}`` and user, whether the task is composite (probability ``composite_ratio``), its template,
then names and paths from fixed pools. Single templates: upload, download, rename, move, chmod, delete, copy,
pack, mkdir. Composite: pack_upload, download_extract, mkdir_upload, upload_chmod, upload_delete_source,
pack_upload_extract, download_rename, backup_replace. Local Windows packing uses zip and local Windows chmod
tasks move to the remote (no chmod/tar there). Up to three distractor files sit next to the task's files. File
contents are ``[Content of NAME | seed=SEED | size=1024]``. The goal is a list of checks that must all hold:
file exists (with exact content), file absent, directory exists, permission equals, archive contains (members
with exact content).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from codjax.envs.terminal.fs import LINUX, MAC, OS_TYPES, WINDOWS, Dir, File, Machine, Path

SINGLE = ("upload", "download", "rename", "move", "chmod", "delete", "copy", "pack", "mkdir")
COMPOSITE = ("pack_upload", "download_extract", "mkdir_upload", "upload_chmod", "upload_delete_source",
             "pack_upload_extract", "download_rename", "backup_replace")
FILENAMES = ("report.txt", "data.csv", "image.png", "config.json", "notes.md", "script.sh", "log.txt", "readme.txt",
             "database.db", "output.log", "results.csv", "document.pdf", "settings.ini", "main.py", "index.html",
             "style.css", "app.js", "server.py", "deploy.sh", "backup.sql", "photo.jpg", "diagram.svg",
             "metrics.json", "requirements.txt", "Makefile")
DIRNAMES = ("projects", "documents", "downloads", "backups", "config", "data", "logs", "workspace", "reports",
            "media", "scripts", "output", "staging", "archive", "temp", "src", "build", "dist", "assets", "uploads")
REMOTE_USERS = ("admin", "deploy", "user", "webmaster", "devops", "ops", "ubuntu")
PERMISSIONS = ("644", "755", "600", "700", "664", "640", "444", "750")
ARCHIVE_FORMATS = ("tar", "tar.gz", "zip")
EXT = {"tar": ".tar", "tar.gz": ".tar.gz", "zip": ".zip"}
HOMES = {WINDOWS: ("C", "Users", "user"), MAC: ("Users", "user"), LINUX: ("home", "user")}


@dataclasses.dataclass(frozen=True)
class Check:
  kind: str  # file_exists | file_not_exists | dir_exists | permission_equals | archive_contains
  remote: bool
  path: Path
  content: str | None = None
  value: str | None = None
  entries: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass
class TerminalTaskSpec:
  """One task: machines' initial content, the description shown to the agent and the goal checks."""

  seed: int
  os_type: str
  kind: str
  composite: bool
  host: str
  user: str
  description: str = ""
  checks: list[Check] = dataclasses.field(default_factory=list)
  local: list[tuple[Path, Any]] = dataclasses.field(default_factory=list)  # (path, None=dir | File)
  remote: list[tuple[Path, Any]] = dataclasses.field(default_factory=list)
  oracle: list[str] = dataclasses.field(default_factory=list)  # reference command lines (tasks built from data)

  @property
  def local_home(self) -> Path:
    return HOMES[self.os_type]

  @property
  def remote_home(self) -> Path:
    return ("home", self.user)

  def build(self) -> tuple[Machine, Machine]:
    """Fresh local and remote machines for this task."""
    local = Machine(self.os_type, "localhost", "user", self.local_home)
    remote = Machine(LINUX, self.host, self.user, self.remote_home)
    for m, items in ((local, self.local), (remote, self.remote)):
      m.makedirs(m.home)
      for path, node in items:
        if node is None:
          m.makedirs(path)
        else:
          m.makedirs(path[:-1])
          m.put(path, node.copy())
    return local, remote


def content_of(name: str, seed: int) -> str:
  return f"[Content of {name} | seed={seed} | size=1024]"


class _Gen:
  """Helpers shared by the templates (names, paths and display strings)."""

  def __init__(self, rng: random.Random, spec: TerminalTaskSpec):
    self.rng = rng
    self.spec = spec

  def local_dir(self) -> Path:
    return self.spec.local_home + (self.rng.choice(DIRNAMES),)

  def remote_dir(self) -> Path:
    u = self.spec.user
    options = [("home", u, self.rng.choice(DIRNAMES)), ("var", "www", "html"), ("opt", self.rng.choice(DIRNAMES)),
               ("home", u)]
    return self.rng.choice(options)

  def show_local(self, path: Path) -> str:
    if self.spec.os_type == WINDOWS:
      return f"{path[0]}:\\" + "\\".join(path[1:])
    return "/" + "/".join(path)

  @staticmethod
  def show_remote(path: Path) -> str:
    return "/" + "/".join(path)

  def url(self, path: Path, slash: bool = False) -> str:
    return f"{self.spec.user}@{self.spec.host}:/{'/'.join(path)}" + ("/" if slash else "")

  def add(self, remote: bool, path: Path, node: Any) -> None:
    (self.spec.remote if remote else self.spec.local).append((path, node))

  def file(self, remote: bool, path: Path, content: str, perm: str = "644") -> None:
    self.add(remote, path, File(content=content, perm=perm, owner=self.spec.user if remote else "user"))

  def distractors(self, remote: bool, base: Path, count: int = 3) -> None:
    used = {p for p, _ in (self.spec.remote if remote else self.spec.local)}
    for i in range(count):
      name = self.rng.choice(FILENAMES)
      if base + (name,) not in used:
        self.file(remote, base + (name,), content_of(name, self.spec.seed + 1 + i))
        used.add(base + (name,))

  def check(self, kind: str, remote: bool, path: Path, **kw: Any) -> None:
    self.spec.checks.append(Check(kind, remote, path, **kw))

  def two_names(self) -> tuple[str, str]:
    a = self.rng.choice(FILENAMES)
    b = self.rng.choice(FILENAMES)
    while b == a:
      b = self.rng.choice(FILENAMES)
    return a, b

  def archive_format(self, local_windows: bool) -> str:
    fmt = self.rng.choice(ARCHIVE_FORMATS)
    return "zip" if local_windows and fmt.startswith("tar") else fmt

  def pack_tree(self, remote: bool, base: Path) -> tuple[str, dict[str, str]]:
    dir_name = self.rng.choice(DIRNAMES)
    members = {}
    for f in self.rng.sample(FILENAMES, self.rng.randint(2, 4)):
      content = content_of(f, self.spec.seed)
      self.file(remote, base + (dir_name, f), content)
      members[f"{dir_name}/{f}"] = content
    return dir_name, members


# ------------------------------------------------------------------------------------------------ templates


def _upload(g: _Gen) -> None:
  name = g.rng.choice(FILENAMES)
  ldir, rdir = g.local_dir(), g.remote_dir()
  content = content_of(name, g.spec.seed)
  g.file(False, ldir + (name,), content)
  g.distractors(False, ldir)
  g.add(True, rdir, None)
  g.spec.description = f"Upload '{g.show_local(ldir + (name,))}' to {g.url(rdir + (name,))}"
  g.check("file_exists", True, rdir + (name,), content=content)


def _download(g: _Gen) -> None:
  name = g.rng.choice(FILENAMES)
  ldir, rdir = g.local_dir(), g.remote_dir()
  content = content_of(name, g.spec.seed)
  g.add(False, ldir, None)
  g.distractors(False, ldir)
  g.file(True, rdir + (name,), content)
  g.distractors(True, rdir)
  g.spec.description = f"Download '{g.url(rdir + (name,))}' to '{g.show_local(ldir + (name,))}'"
  g.check("file_exists", False, ldir + (name,), content=content)


def _where(g: _Gen, remote: bool, path: Path) -> str:
  return g.url(path) if remote else g.show_local(path)


def _rename(g: _Gen) -> None:
  remote = g.rng.choice([True, False])
  old, new = g.two_names()
  content = content_of(old, g.spec.seed)
  d = g.remote_dir() if remote else g.local_dir()
  g.file(remote, d + (old,), content)
  g.distractors(remote, d)
  where = f"remote {g.url(d)}" if remote else g.show_local(d)
  g.spec.description = f"Rename '{old}' to '{new}' in {where}"
  g.check("file_not_exists", remote, d + (old,))
  g.check("file_exists", remote, d + (new,), content=content)


def _two_dirs(g: _Gen, remote: bool) -> tuple[Path, Path]:
  pick = g.remote_dir if remote else g.local_dir
  src = pick()
  dst = pick()
  while dst == src:
    dst = pick()
  return src, dst


def _move(g: _Gen) -> None:
  remote = g.rng.choice([True, False])
  name = g.rng.choice(FILENAMES)
  content = content_of(name, g.spec.seed)
  src, dst = _two_dirs(g, remote)
  g.file(remote, src + (name,), content)
  g.add(remote, dst, None)
  g.distractors(remote, src)
  show = g.show_remote if remote else g.show_local
  g.spec.description = (f"Move '{show(src + (name,))}' into the directory '{show(dst)}'"
                        + (" on the remote server" if remote else ""))
  g.check("file_not_exists", remote, src + (name,))
  g.check("file_exists", remote, dst + (name,), content=content)


def _chmod(g: _Gen) -> None:
  remote = g.rng.choice([True, False]) or g.spec.os_type == WINDOWS
  name = g.rng.choice(FILENAMES)
  content = content_of(name, g.spec.seed)
  old = g.rng.choice(PERMISSIONS)
  new = g.rng.choice(PERMISSIONS)
  while new == old:
    new = g.rng.choice(PERMISSIONS)
  d = g.remote_dir() if remote else g.local_dir()
  g.file(remote, d + (name,), content, perm=old)
  g.distractors(remote, d)
  g.spec.description = f"Change the permissions of '{_where(g, remote, d + (name,))}' to {new}"
  g.check("permission_equals", remote, d + (name,), value=new)


def _delete(g: _Gen) -> None:
  remote = g.rng.choice([True, False])
  name = g.rng.choice(FILENAMES)
  d = g.remote_dir() if remote else g.local_dir()
  g.file(remote, d + (name,), content_of(name, g.spec.seed))
  g.distractors(remote, d)
  g.spec.description = f"Delete the file '{_where(g, remote, d + (name,))}'"
  g.check("file_not_exists", remote, d + (name,))


def _copy(g: _Gen) -> None:
  remote = g.rng.choice([True, False])
  name = g.rng.choice(FILENAMES)
  content = content_of(name, g.spec.seed)
  src, dst = _two_dirs(g, remote)
  g.file(remote, src + (name,), content)
  g.add(remote, dst, None)
  show = g.show_remote if remote else g.show_local
  g.spec.description = (f"Copy '{show(src + (name,))}' to '{show(dst + (name,))}'"
                        + (" on the remote server" if remote else ""))
  g.check("file_exists", remote, src + (name,), content=content)
  g.check("file_exists", remote, dst + (name,), content=content)


def _pack(g: _Gen) -> None:
  remote = g.rng.choice([True, False])
  fmt = g.archive_format(not remote and g.spec.os_type == WINDOWS)
  base = g.remote_dir() if remote else g.local_dir()
  dir_name, members = g.pack_tree(remote, base)
  archive = dir_name + EXT[fmt]
  show = g.show_remote if remote else g.show_local
  g.spec.description = (f"Pack the directory '{show(base + (dir_name,))}' into the {fmt} archive '{archive}' in "
                        f"'{show(base)}'" + (" on the remote server" if remote else ""))
  g.check("archive_contains", remote, base + (archive,), entries=tuple(sorted(members.items())))


def _mkdir(g: _Gen) -> None:
  remote = g.rng.choice([True, False])
  parts = tuple(g.rng.sample(DIRNAMES, g.rng.randint(2, 4)))
  target = (g.spec.remote_home if remote else g.spec.local_home) + parts
  show = g.show_remote if remote else g.show_local
  g.spec.description = f"Create the directory structure '{show(target)}'" + (" on the remote server" if remote
                                                                            else "")
  g.check("dir_exists", remote, target)


def _pack_upload(g: _Gen) -> None:
  fmt = g.archive_format(g.spec.os_type == WINDOWS)
  ldir, rdir = g.local_dir(), g.remote_dir()
  dir_name, members = g.pack_tree(False, ldir)
  g.add(True, rdir, None)
  archive = dir_name + EXT[fmt]
  g.spec.description = (f"Pack '{g.show_local(ldir + (dir_name,))}' into the {fmt} archive '{archive}' and upload "
                        f"it to {g.url(rdir, slash=True)}")
  g.check("archive_contains", True, rdir + (archive,), entries=tuple(sorted(members.items())))


def _download_extract(g: _Gen) -> None:
  fmt = g.archive_format(g.spec.os_type == WINDOWS)
  ldir, rdir = g.local_dir(), g.remote_dir()
  dir_name = g.rng.choice(DIRNAMES)
  files = g.rng.sample(FILENAMES, g.rng.randint(2, 4))
  members = {f"{dir_name}/{f}": content_of(f, g.spec.seed) for f in files}
  archive = dir_name + EXT[fmt]
  g.add(True, rdir + (archive,), File(content=f"[{fmt} archive]", owner=g.spec.user, archive_type=fmt,
                                      entries=dict(members)))
  g.add(False, ldir, None)
  g.spec.description = (f"Download '{archive}' from {g.url(rdir, slash=True)} and extract its contents into "
                        f"'{g.show_local(ldir)}'")
  for rel, content in members.items():
    g.check("file_exists", False, ldir + tuple(rel.split("/")), content=content)


def _mkdir_upload(g: _Gen) -> None:
  name = g.rng.choice(FILENAMES)
  content = content_of(name, g.spec.seed)
  ldir = g.local_dir()
  rdir = g.spec.remote_home + tuple(g.rng.sample(DIRNAMES, g.rng.randint(2, 3)))
  g.file(False, ldir + (name,), content)
  g.distractors(False, ldir)
  g.spec.description = (f"Create the directory '{g.show_remote(rdir)}' on the remote server, then upload "
                        f"'{g.show_local(ldir + (name,))}' into it")
  g.check("dir_exists", True, rdir)
  g.check("file_exists", True, rdir + (name,), content=content)


def _upload_chmod(g: _Gen) -> None:
  name = g.rng.choice(FILENAMES)
  content = content_of(name, g.spec.seed)
  ldir, rdir = g.local_dir(), g.remote_dir()
  perm = g.rng.choice(["755", "700", "600", "444"])
  g.file(False, ldir + (name,), content)
  g.add(True, rdir, None)
  g.spec.description = (f"Upload '{g.show_local(ldir + (name,))}' to {g.url(rdir, slash=True)} and set the "
                        f"uploaded file's permissions to {perm}")
  g.check("file_exists", True, rdir + (name,), content=content)
  g.check("permission_equals", True, rdir + (name,), value=perm)


def _upload_delete_source(g: _Gen) -> None:
  name = g.rng.choice(FILENAMES)
  content = content_of(name, g.spec.seed)
  ldir, rdir = g.local_dir(), g.remote_dir()
  g.file(False, ldir + (name,), content)
  g.distractors(False, ldir)
  g.add(True, rdir, None)
  g.spec.description = (f"Upload '{g.show_local(ldir + (name,))}' to {g.url(rdir, slash=True)} and then delete "
                        "the local copy")
  g.check("file_exists", True, rdir + (name,), content=content)
  g.check("file_not_exists", False, ldir + (name,))


def _pack_upload_extract(g: _Gen) -> None:
  fmt = g.archive_format(g.spec.os_type == WINDOWS)
  ldir, rdir = g.local_dir(), g.remote_dir()
  dir_name, members = g.pack_tree(False, ldir)
  g.add(True, rdir, None)
  g.spec.description = (f"Pack '{g.show_local(ldir + (dir_name,))}' into a {fmt} archive, upload it to "
                        f"{g.url(rdir, slash=True)}, and extract it there (the files must end up in "
                        f"'{g.show_remote(rdir + (dir_name,))}')")
  for rel, content in members.items():
    g.check("file_exists", True, rdir + tuple(rel.split("/")), content=content)


def _download_rename(g: _Gen) -> None:
  old, new = g.two_names()
  content = content_of(old, g.spec.seed)
  ldir, rdir = g.local_dir(), g.remote_dir()
  g.file(True, rdir + (old,), content)
  g.add(False, ldir, None)
  g.spec.description = (f"Download '{old}' from {g.url(rdir, slash=True)} into '{g.show_local(ldir)}' and name it "
                        f"'{new}' there")
  g.check("file_exists", False, ldir + (new,), content=content)
  g.check("file_not_exists", False, ldir + (old,))


def _backup_replace(g: _Gen) -> None:
  name = g.rng.choice(FILENAMES)
  old_content = content_of(name, g.spec.seed)
  new_content = content_of(name, g.spec.seed + 99999)
  ldir, rdir = g.local_dir(), g.remote_dir()
  g.file(False, ldir + (name,), new_content)
  g.file(True, rdir + (name,), old_content)
  g.spec.description = (f"On the remote server, rename '{g.show_remote(rdir + (name,))}' to '{name}.bak' as a "
                        f"backup, then upload the new version from '{g.show_local(ldir + (name,))}' to "
                        f"'{g.show_remote(rdir + (name,))}'")
  g.check("file_exists", True, rdir + (name + ".bak",), content=old_content)
  g.check("file_exists", True, rdir + (name,), content=new_content)


TEMPLATES = {
    "upload": _upload, "download": _download, "rename": _rename, "move": _move, "chmod": _chmod,
    "delete": _delete, "copy": _copy, "pack": _pack, "mkdir": _mkdir, "pack_upload": _pack_upload,
    "download_extract": _download_extract, "mkdir_upload": _mkdir_upload, "upload_chmod": _upload_chmod,
    "upload_delete_source": _upload_delete_source, "pack_upload_extract": _pack_upload_extract,
    "download_rename": _download_rename, "backup_replace": _backup_replace,
}


def generate_task(seed: int, composite_ratio: float = 0.5, kind: str | None = None) -> TerminalTaskSpec:
  """The task of ``seed`` (module docstring); ``kind`` forces a template."""
  rng = random.Random(seed)
  os_type = rng.choice(OS_TYPES)
  host = f"192.168.1.{rng.randint(10, 99)}"
  user = rng.choice(REMOTE_USERS)
  if kind is None:
    composite = rng.random() < composite_ratio
    kind = rng.choice(COMPOSITE if composite else SINGLE)
  elif kind not in TEMPLATES:
    raise ValueError(f"unknown terminal task kind {kind!r}; known: {sorted(TEMPLATES)}")
  spec = TerminalTaskSpec(seed=seed, os_type=os_type, kind=kind, composite=kind in COMPOSITE, host=host, user=user)
  TEMPLATES[kind](_Gen(rng, spec))
  return spec


def check_goal(spec: TerminalTaskSpec, local: Machine, remote: Machine) -> bool:
  """True when every goal check holds."""
  for c in spec.checks:
    m = remote if c.remote else local
    node = m.get(c.path)
    if c.kind == "file_exists":
      ok = isinstance(node, File) and not node.archive_type and (c.content is None or node.content == c.content)
    elif c.kind == "file_not_exists":
      ok = node is None
    elif c.kind == "dir_exists":
      ok = isinstance(node, Dir)
    elif c.kind == "permission_equals":
      ok = node is not None and node.perm == c.value
    elif c.kind == "archive_contains":
      ok = (isinstance(node, File) and node.archive_type is not None and node.entries is not None
            and all(node.entries.get(k) == v for k, v in c.entries))
    else:
      raise ValueError(f"unknown check kind {c.kind!r}")
    if not ok:
      return False
  return True
