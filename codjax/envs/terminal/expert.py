"""Scripted TerminalSimulator policies that act only through the conversation text.

The expert reads the local OS, the remote user/host and the task sentence from the system prompt, recognises the
task template from its wording, and plays a fixed command plan for it (one command per turn; Windows uses
copy/move/del/ren and zip where Unix uses cp/mv/rm/tar; remote-side work goes through ``ssh`` ... ``exit``;
transfers use ``scp``). Terminal tasks share no hidden structure, so there is nothing to explore; the hint is
a list of validated command recipes (one bullet per task kind and OS, the commands of the last successful
episode of that kind, as in the CoD paper's Appendix C Table 9), carried forward from the previous hint.

The random baseline answers a uniformly random command name from the prompt's list with up to two arguments
drawn from the quoted paths of the task sentence.
"""

from __future__ import annotations

import random
import re

from codjax.envs import cod_protocol as proto
from codjax.envs.experts import TextPolicy
from codjax.envs.helpers import split_trajectory
from codjax.envs.terminal.commands import COMMAND_LIST
from codjax.envs.terminal.tasks import EXT

_OS_RE = re.compile(r"\(type: (\w+), hostname: localhost\)")
_TASK_RE = re.compile(r"## Task\n(.*?)\n\n## How to answer", re.DOTALL)
_URL = r"(\S+?@[\d.]+):(/\S*?)"
_Q = r"'([^']+)'"
MAX_HINT_BULLETS = 12

# template name -> pattern over the task sentence (codjax.envs.terminal.tasks wording)
_PATTERNS = [
    ("pack_upload_extract", re.compile(rf"^Pack {_Q} into a (\S+) archive, upload it to {_URL}/, and extract it there "
                                       rf"\(the files must end up in {_Q}\)$")),
    ("pack_upload", re.compile(rf"^Pack {_Q} into the (\S+) archive {_Q} and upload it to {_URL}/$")),
    ("pack", re.compile(rf"^Pack the directory {_Q} into the (\S+) archive {_Q} in {_Q}( on the remote server)?$")),
    ("download_extract", re.compile(rf"^Download {_Q} from {_URL}/ and extract its contents into {_Q}$")),
    ("download_rename", re.compile(rf"^Download {_Q} from {_URL}/ into {_Q} and name it {_Q} there$")),
    ("download", re.compile(rf"^Download '{_URL}' to {_Q}$")),
    ("mkdir_upload", re.compile(rf"^Create the directory {_Q} on the remote server, then upload {_Q} into it$")),
    ("mkdir", re.compile(rf"^Create the directory structure {_Q}( on the remote server)?$")),
    ("upload_chmod", re.compile(rf"^Upload {_Q} to {_URL}/ and set the uploaded file's permissions to (\d+)$")),
    ("upload_delete_source", re.compile(rf"^Upload {_Q} to {_URL}/ and then delete the local copy$")),
    ("upload", re.compile(rf"^Upload {_Q} to {_URL}$")),
    ("rename_remote", re.compile(rf"^Rename {_Q} to {_Q} in remote {_URL}$")),
    ("rename", re.compile(rf"^Rename {_Q} to {_Q} in (\S+)$")),
    ("move", re.compile(rf"^Move {_Q} into the directory {_Q}( on the remote server)?$")),
    ("chmod_remote", re.compile(rf"^Change the permissions of '{_URL}' to (\d+)$")),
    ("chmod", re.compile(rf"^Change the permissions of {_Q} to (\d+)$")),
    ("delete_remote", re.compile(rf"^Delete the file '{_URL}'$")),
    ("delete", re.compile(rf"^Delete the file {_Q}$")),
    ("copy", re.compile(rf"^Copy {_Q} to {_Q}( on the remote server)?$")),
    ("backup_replace", re.compile(rf"^On the remote server, rename {_Q} to {_Q} as a backup, then upload the new "
                                  rf"version from {_Q} to {_Q}$")),
]


class _Ctx:
  """OS-dependent command spellings for one task."""

  def __init__(self, os_type: str, dest: str):
    self.win = os_type == "windows"
    self.dest = dest  # user@host

  def join(self, a: str, b: str) -> str:
    return f"{a}\\{b}" if self.win else f"{a}/{b}"

  def split(self, path: str) -> tuple[str, str]:
    sep = "\\" if self.win else "/"
    head, _, tail = path.rpartition(sep)
    return (head if head and not head.endswith(":") else head + sep), tail

  def mv(self, a: str, b: str) -> str:
    return f"move /y {a} {b}" if self.win else f"mv {a} {b}"

  def cp(self, a: str, b: str) -> str:
    return f"copy /y {a} {b}" if self.win else f"cp {a} {b}"

  def rm(self, a: str) -> str:
    return f"del {a}" if self.win else f"rm {a}"

  def mkdir(self, a: str) -> str:
    return f"mkdir {a}" if self.win else f"mkdir -p {a}"

  def remote(self, *cmds: str) -> list[str]:
    return [f"ssh {self.dest}", *cmds, "exit"]


def pack_cmd(fmt: str, archive: str, folder: str) -> str:
  return {"tar": f"tar -cf {archive} {folder}", "tar.gz": f"tar -czf {archive} {folder}",
          "zip": f"zip -r {archive} {folder}"}[fmt]


def unpack_cmd(archive: str) -> str:
  if archive.endswith(".tar.gz"):
    return f"tar -xzf {archive}"
  return f"tar -xf {archive}" if archive.endswith(".tar") else f"unzip {archive}"


def plan_commands(system: str) -> tuple[str, list[str]] | None:
  """(task kind, command plan) for the task stated in a TerminalSimulator system prompt."""
  os_m, task_m = _OS_RE.search(system), _TASK_RE.search(system)
  user_m = re.search(r"- Remote username: (\S+)", system)
  host_m = re.search(r"- Remote server: (\S+)", system)
  if not (os_m and task_m and user_m and host_m):
    return None
  c = _Ctx(os_m.group(1), f"{user_m.group(1)}@{host_m.group(1)}")
  task = task_m.group(1).strip()
  for kind, pat in _PATTERNS:
    m = pat.match(task)
    if m:
      return kind.replace("_remote", ""), _PLANS[kind](c, *m.groups())
  return None


def _plan_pack(c: _Ctx, src: str, fmt: str, archive: str, base: str, remote: str | None) -> list[str]:
  folder = src.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
  cmds = [f"cd {base}", pack_cmd(fmt, archive, folder)]
  return c.remote(*cmds) if remote else cmds


def _plan_pack_upload_extract(c: _Ctx, src: str, fmt: str, dest: str, rdir: str, _final: str) -> list[str]:
  parent, folder = c.split(src)
  archive = folder + EXT[fmt]
  return [f"cd {parent}", pack_cmd(fmt, archive, folder), f"scp {archive} {dest}:{rdir}/",
          *c.remote(f"cd {rdir}", unpack_cmd(archive))]


def _plan_local_or_remote(local_cmd, remote_cmd):
  def plan(c: _Ctx, *groups):
    remote = groups[-1]
    return c.remote(remote_cmd(c, *groups[:-1])) if remote else [local_cmd(c, *groups[:-1])]
  return plan


_PLANS = {
    "upload": lambda c, lp, dest, rpath: [f"scp {lp} {dest}:{rpath}"],
    "download": lambda c, dest, rpath, lp: [f"scp {dest}:{rpath} {lp}"],
    "rename": lambda c, old, new, d: [c.mv(c.join(d, old), c.join(d, new))],
    "rename_remote": lambda c, old, new, dest, d: c.remote(f"mv {d}/{old} {d}/{new}"),
    "move": _plan_local_or_remote(lambda c, s, d: c.mv(s, d), lambda c, s, d: f"mv {s} {d}"),
    "chmod": lambda c, p, perm: [f"chmod {perm} {p}"],
    "chmod_remote": lambda c, dest, p, perm: c.remote(f"chmod {perm} {p}"),
    "delete": lambda c, p: [c.rm(p)],
    "delete_remote": lambda c, dest, p: c.remote(f"rm {p}"),
    "copy": _plan_local_or_remote(lambda c, s, d: c.cp(s, d), lambda c, s, d: f"cp {s} {d}"),
    "pack": _plan_pack,
    "mkdir": _plan_local_or_remote(lambda c, p: c.mkdir(p), lambda c, p: f"mkdir -p {p}"),
    "pack_upload": lambda c, src, fmt, archive, dest, rdir: [
        f"cd {c.split(src)[0]}", pack_cmd(fmt, archive, c.split(src)[1]), f"scp {archive} {dest}:{rdir}/"],
    "download_extract": lambda c, archive, dest, rdir, ldir: [
        f"scp {dest}:{rdir}/{archive} {ldir}", f"cd {ldir}", unpack_cmd(archive)],
    "mkdir_upload": lambda c, rdir, lp: [*c.remote(f"mkdir -p {rdir}"), f"scp {lp} {c.dest}:{rdir}/"],
    "upload_chmod": lambda c, lp, dest, rdir, perm: [
        f"scp {lp} {dest}:{rdir}/", *c.remote(f"chmod {perm} {rdir}/{c.split(lp)[1]}")],
    "upload_delete_source": lambda c, lp, dest, rdir: [f"scp {lp} {dest}:{rdir}/", c.rm(lp)],
    "pack_upload_extract": _plan_pack_upload_extract,
    "download_rename": lambda c, old, dest, rdir, ldir, new: [f"scp {dest}:{rdir}/{old} {c.join(ldir, new)}"],
    "backup_replace": lambda c, rpath, bak, lp, rpath2: [
        *c.remote(f"mv {rpath} {rpath.rsplit('/', 1)[0]}/{bak}"), f"scp {lp} {c.dest}:{rpath2}"],
}


def _messages(messages: list[dict]) -> tuple[str, list[str], list[str]]:
  system = next((m["content"] for m in messages if m.get("role") == "system"), "")
  return (system, [m["content"] for m in messages if m.get("role") == "user"],
          [m["content"] for m in messages if m.get("role") == "assistant"])


def _hint_bullets(hint: str) -> list[str]:
  text = (hint or "").removeprefix(proto.HINT_PREFIX)
  return [line[2:].strip() for line in text.splitlines()
          if line.startswith("- ") and ":" in line and proto.HINT_START not in line and proto.HINT_END not in line]


class TerminalExpert(TextPolicy):
  """Plays the command plan of the recognised task (module docstring)."""

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    if proto.is_update_prompt(messages):
      return self._update(messages)
    system, _, acts = _messages(messages)
    planned = plan_commands(system)
    if planned is None:
      return "unknown task; look around\n<answer>ls</answer>"
    kind, cmds = planned
    i = len(acts)
    if i >= len(cmds):
      return f"{kind}: plan done; check\n<answer>{'dir' if ' type: windows' in system else 'ls'}</answer>"
    return f"{kind} step {i + 1}/{len(cmds)}\n<answer>{cmds[i]}</answer>"

  def _update(self, messages: list[dict[str, str]]) -> str:
    user = next(m["content"] for m in messages if m.get("role") == "user"
                and m.get("content", "").startswith(proto.PREV_HINTS_HEADER))
    parsed = proto.parse_update_user_prompt(user)
    bullets = _hint_bullets(parsed.prev_hint)
    planned = plan_commands(parsed.trajectory.split("\n\nStep 1:\n", 1)[0])
    _, acts = split_trajectory(parsed.trajectory)
    os_m = _OS_RE.search(parsed.trajectory)
    note = "no new recipe"
    if planned is not None and os_m and parsed.feedback.startswith("Success"):
      cmds = [a for a in (proto.extract_answer(x) for x in acts) if a]
      key = f"{planned[0]} ({os_m.group(1)})"
      bullets = [b for b in bullets if not b.startswith(key + ":")] + [f"{key}: " + " ; ".join(c.strip() for c in cmds)]
      bullets = bullets[-MAX_HINT_BULLETS:]
      note = f"validated {key}"
    return proto.format_hint_block(bullets, reasoning=note)


class TerminalRandom(TextPolicy):
  """A random command from the prompt's list with up to two arguments from the task's quoted paths."""

  def respond(self, messages: list[dict[str, str]], rng: random.Random) -> str:
    if proto.is_update_prompt(messages):
      return proto.format_hint_block(["nothing learned"], reasoning="random policy")
    system, _, _ = _messages(messages)
    task = _TASK_RE.search(system)
    words = re.findall(r"'([^']+)'|(\S+@[\d.]+:\S+)", task.group(1) if task else "")
    pool = [a or b for a, b in words] or ["."]
    names = [n.strip() for n in COMMAND_LIST.split(",")]
    args = [rng.choice(pool) for _ in range(rng.randint(0, 2))]
    return "random\n<answer>" + " ".join([rng.choice(names), *args]) + "</answer>"
