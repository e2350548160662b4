"""TerminalSimulator (CoD paper, Sec. 3.2.1) as an evolvable environment (registry name ``terminal_simulator``;
the parameterisation is codjax's choice: docs/methods/environment_evolution.md).

**Pairs.** A task is its execution sequence: one (scenario, skill) pair per file operation, in order.

* scenario = where the operation runs: the local machine's OS (``linux``, ``mac``, ``windows``) or the
  ``remote`` Linux server (reached with ``ssh`` ... ``exit``). One task has one local machine, so all local
  scenarios of a sequence name the same OS.
* skill = the operation: ``upload``, ``download`` (local only: ``scp`` runs on the local machine), ``copy``,
  ``move``, ``rename``, ``delete``, ``mkdir``, ``chmod`` (not on Windows), ``pack``, ``extract`` (Windows:
  zip only; elsewhere tar, tar.gz or zip by the instance seed).

Reference frequencies (``SCENARIO_FREQ``, ``SKILL_FREQ``) rank common settings and operations above rare ones
(Linux > remote > macOS > Windows; transfers > copy/move/rename/delete > mkdir > chmod > pack > extract);
``skill_prob`` renormalises the skill frequencies over the skills a scenario allows.

**Mapping.** A point becomes ``make("terminal_simulator", task_data=DATA, agent_max_steps=H)``: DATA is the
task as JSON data (``codjax.envs.terminal.data``) and H = oracle lines + ``SLACK``. For an LLM-written task
DATA is ``point.data``; for a generated point ``compose(pairs, seed)`` writes it: one independent operation per
pair, each in its own directories (a unique directory name per step), a numbered instruction, goal checks
that hold only after the operation (deletions also keep a neighbour file, copies keep the source), and the
oracle's command lines (consecutive remote operations share one ``ssh`` session). Harder by construction: a
remote operation costs two more turns (``ssh``/``exit``), pack and extract two turns (``cd`` + the archiver),
rarer skills and scenarios score higher novelty/rarity, and every extra pair adds its turns.

**Oracle.** The reference solution is the task's own oracle lines (the Environment Evolution paper's Oracle
solution, Sec. 4.1), played by
``ScriptOracle``: ``tasks()`` records each built task's system prompt with its lines, and the oracle answers
the next line for the system prompt it sees (falling back to the scripted ``TerminalExpert`` for prompts it
has not recorded). **Quality** (``task_problems``): the goal must not hold initially; no vacuous check
(``file_not_exists`` of a path that never existed); a required content or archive member must exist in some
initial file; a permission check names an existing or produced file; every check names a path (and a
permission value) the instruction mentions (self-contained); the local OS of the data matches the pairs;
the oracle has at least one line per pair. The answer strings (no leak) are the oracle lines.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Sequence

from codjax.envs.base import TaskEnv, derive_seed
from codjax.envs.experts import TextPolicy
from codjax.envs.terminal.data import show_path, task_from_data, validate_data
from codjax.envs.terminal.expert import TerminalExpert, pack_cmd, unpack_cmd
from codjax.envs.terminal.fs import LINUX, WINDOWS, File
from codjax.envs.terminal.tasks import DIRNAMES, EXT, FILENAMES, HOMES, PERMISSIONS, REMOTE_USERS, check_goal
from codjax.evolve.base import EnvPoint, Pair, Parameterisation
from codjax.evolve.registry import register

LOCAL_SCENARIOS = ("linux", "mac", "windows")
SCENARIO_FREQ = {"linux": 0.40, "remote": 0.30, "mac": 0.18, "windows": 0.12}
SKILL_FREQ = {"upload": 0.20, "download": 0.16, "copy": 0.12, "move": 0.11, "rename": 0.10, "delete": 0.10,
              "mkdir": 0.08, "chmod": 0.06, "pack": 0.04, "extract": 0.03}
TRANSFERS = ("upload", "download")
SLACK = 3  # turns beyond the oracle's
MAX_PAIRS = 8
MAX_SCRIPTS = 4096  # oracle scripts remembered (the most recent tasks built)

# lineage roots: the generator's templates as pair sequences ("L" = the seed's local OS)
SEED_SEQUENCES = (
    (("L", "upload"),), (("L", "download"),), (("L", "rename"),), (("L", "move"),), (("remote", "chmod"),),
    (("L", "delete"),), (("L", "copy"),), (("L", "pack"),), (("L", "mkdir"),),
    (("L", "pack"), ("L", "upload")), (("L", "download"), ("L", "extract")),
    (("remote", "mkdir"), ("L", "upload")), (("L", "upload"), ("remote", "chmod")),
    (("L", "upload"), ("L", "delete")), (("L", "pack"), ("L", "upload"), ("remote", "extract")),
    (("L", "download"), ("L", "rename")), (("remote", "rename"), ("L", "upload")),
)


def skill_allowed(skill: str, scenario: str) -> bool:
  if scenario == "remote" and skill in TRANSFERS:
    return False
  return not (scenario == WINDOWS and skill == "chmod")


def local_os(pairs: Sequence[Pair]) -> str:
  """The local OS a pair sequence names (Linux when it names none)."""
  return next((p.scenario for p in pairs if p.scenario in LOCAL_SCENARIOS), LINUX)


# ------------------------------------------------------------------------------------------------ composer


@dataclasses.dataclass
class _Ctx:
  os: str
  host: str
  user: str
  dirs: list[str]  # unused unique directory names (one per step directory)
  local: list[dict] = dataclasses.field(default_factory=list)
  remote: list[dict] = dataclasses.field(default_factory=list)
  checks: list[dict] = dataclasses.field(default_factory=list)

  def base(self, remote: bool, rng: random.Random) -> tuple:
    name = self.dirs.pop()
    if remote:
      return rng.choice([("home", self.user, name), ("opt", name), ("srv", name)])
    return HOMES[self.os] + (name,)

  def show(self, remote: bool, path: tuple) -> str:
    return show_path(path, LINUX if remote else self.os)

  def file(self, remote: bool, path: tuple, content: str, perm: str = "644") -> None:
    (self.remote if remote else self.local).append(
        {"path": self.show(remote, path), "type": "file", "content": content, "perm": perm})

  def dir(self, remote: bool, path: tuple) -> None:
    (self.remote if remote else self.local).append({"path": self.show(remote, path), "type": "dir"})

  def check(self, kind: str, remote: bool, path: tuple, **kw: Any) -> None:
    self.checks.append({"kind": kind, "machine": "remote" if remote else "local", "path": self.show(remote, path),
                        **kw})

  def win(self, remote: bool) -> bool:
    return not remote and self.os == WINDOWS

  def url(self, path: tuple) -> str:
    return f"{self.user}@{self.host}:{show_path(path, LINUX)}"


def _content(name: str, seed: int, k: int) -> str:
  return f"[Content of {name} | seed={seed} | step={k}]"


def _names(rng: random.Random, n: int) -> list[str]:
  return rng.sample(FILENAMES, n)


def _on(remote: bool) -> str:
  return " on the remote server" if remote else ""


def _upload(c: _Ctx, rng, remote, seed, k):
  name, other = _names(rng, 2)
  ldir, rdir = c.base(False, rng), c.base(True, rng)
  content = _content(name, seed, k)
  c.file(False, ldir + (name,), content)
  c.file(False, ldir + (other,), _content(other, seed, k))
  c.dir(True, rdir)
  c.check("file_exists", True, rdir + (name,), content=content)
  return (f"Upload '{c.show(False, ldir + (name,))}' to {c.url(rdir)}/",
          [f"scp {c.show(False, ldir + (name,))} {c.url(rdir)}/"])


def _download(c: _Ctx, rng, remote, seed, k):
  name, other = _names(rng, 2)
  rdir, ldir = c.base(True, rng), c.base(False, rng)
  content = _content(name, seed, k)
  c.file(True, rdir + (name,), content)
  c.file(True, rdir + (other,), _content(other, seed, k))
  c.dir(False, ldir)
  c.check("file_exists", False, ldir + (name,), content=content)
  return (f"Download {c.url(rdir + (name,))} into the directory '{c.show(False, ldir)}'",
          [f"scp {c.url(rdir + (name,))} {c.show(False, ldir)}"])


def _two_dirs(c: _Ctx, rng, remote, seed, k, verb: str):
  name = _names(rng, 1)[0]
  src, dst = c.base(remote, rng), c.base(remote, rng)
  content = _content(name, seed, k)
  c.file(remote, src + (name,), content)
  c.dir(remote, dst)
  s, d = c.show(remote, src + (name,)), c.show(remote, dst + (name,))
  win = c.win(remote)
  return name, src, dst, content, s, d, win


def _copy(c: _Ctx, rng, remote, seed, k):
  name, src, dst, content, s, d, win = _two_dirs(c, rng, remote, seed, k, "copy")
  c.check("file_exists", remote, src + (name,), content=content)
  c.check("file_exists", remote, dst + (name,), content=content)
  return f"Copy '{s}' to '{d}'{_on(remote)}", [f"copy /y {s} {d}" if win else f"cp {s} {d}"]


def _move(c: _Ctx, rng, remote, seed, k):
  name, src, dst, content, s, d, win = _two_dirs(c, rng, remote, seed, k, "move")
  c.check("file_not_exists", remote, src + (name,))
  c.check("file_exists", remote, dst + (name,), content=content)
  return f"Move '{s}' to '{d}'{_on(remote)}", [f"move /y {s} {d}" if win else f"mv {s} {d}"]


def _rename(c: _Ctx, rng, remote, seed, k):
  old, new = _names(rng, 2)
  d = c.base(remote, rng)
  content = _content(old, seed, k)
  c.file(remote, d + (old,), content)
  c.check("file_not_exists", remote, d + (old,))
  c.check("file_exists", remote, d + (new,), content=content)
  a, b = c.show(remote, d + (old,)), c.show(remote, d + (new,))
  return (f"Rename '{a}' to '{new}' (in the same directory){_on(remote)}",
          [f"move /y {a} {b}" if c.win(remote) else f"mv {a} {b}"])


def _delete(c: _Ctx, rng, remote, seed, k):
  name, keep = _names(rng, 2)
  d = c.base(remote, rng)
  c.file(remote, d + (name,), _content(name, seed, k))
  c.file(remote, d + (keep,), _content(keep, seed, k))
  c.check("file_not_exists", remote, d + (name,))
  c.check("file_exists", remote, d + (keep,), content=_content(keep, seed, k))
  p = c.show(remote, d + (name,))
  return (f"Delete the file '{p}'{_on(remote)}, keeping '{keep}' next to it",
          [f"del {p}" if c.win(remote) else f"rm {p}"])


def _mkdir(c: _Ctx, rng, remote, seed, k):
  top = c.base(remote, rng)
  target = top + tuple(rng.sample(DIRNAMES, rng.randint(1, 2)))
  c.check("dir_exists", remote, target)
  p = c.show(remote, target)
  return f"Create the directory structure '{p}'{_on(remote)}", [f"mkdir {p}" if c.win(remote) else f"mkdir -p {p}"]


def _chmod(c: _Ctx, rng, remote, seed, k):
  name = _names(rng, 1)[0]
  old, new = rng.sample(PERMISSIONS, 2)
  d = c.base(remote, rng)
  c.file(remote, d + (name,), _content(name, seed, k), perm=old)
  c.check("permission_equals", remote, d + (name,), value=new)
  p = c.show(remote, d + (name,))
  return f"Change the permissions of '{p}'{_on(remote)} to {new}", [f"chmod {new} {p}"]


def _fmt(c: _Ctx, rng, remote) -> str:
  fmt = rng.choice(("tar", "tar.gz", "zip"))
  return "zip" if c.win(remote) else fmt


def _pack(c: _Ctx, rng, remote, seed, k):
  fmt = _fmt(c, rng, remote)
  base = c.base(remote, rng)
  folder = rng.choice(DIRNAMES)
  entries = {}
  for f in _names(rng, rng.randint(2, 3)):
    c.file(remote, base + (folder, f), _content(f, seed, k))
    entries[f"{folder}/{f}"] = _content(f, seed, k)
  archive = folder + EXT[fmt]
  c.check("archive_contains", remote, base + (archive,), entries=entries)
  return (f"Pack the directory '{c.show(remote, base + (folder,))}' into the {fmt} archive '{archive}' in "
          f"'{c.show(remote, base)}'{_on(remote)}", [f"cd {c.show(remote, base)}", pack_cmd(fmt, archive, folder)])


def _extract(c: _Ctx, rng, remote, seed, k):
  fmt = _fmt(c, rng, remote)
  base = c.base(remote, rng)
  folder = rng.choice(DIRNAMES)
  entries = {f"{folder}/{f}": _content(f, seed, k) for f in _names(rng, rng.randint(2, 3))}
  archive = folder + EXT[fmt]
  (c.remote if remote else c.local).append({"path": c.show(remote, base + (archive,)), "type": "archive",
                                            "format": fmt, "entries": entries})
  for rel, content in entries.items():
    c.check("file_exists", remote, base + tuple(rel.split("/")), content=content)
  return (f"Extract the {fmt} archive '{c.show(remote, base + (archive,))}' in its own directory{_on(remote)}",
          [f"cd {c.show(remote, base)}", unpack_cmd(archive)])


STEPS = {"upload": _upload, "download": _download, "copy": _copy, "move": _move, "rename": _rename,
         "delete": _delete, "mkdir": _mkdir, "chmod": _chmod, "pack": _pack, "extract": _extract}


def compose(pairs: Sequence[Pair], seed: int) -> dict:
  """The task data of a generated point (module docstring); ValueError for a sequence outside the vocabulary."""
  if not 1 <= len(pairs) <= MAX_PAIRS:
    raise ValueError(f"a terminal task has 1..{MAX_PAIRS} pairs, got {len(pairs)}")
  os_type = local_os(pairs)
  for p in pairs:
    if p.scenario not in SCENARIO_FREQ or p.skill not in SKILL_FREQ:
      raise ValueError(f"unknown pair {p.to_json()}")
    if p.scenario in LOCAL_SCENARIOS and p.scenario != os_type:
      raise ValueError(f"the pairs name two local machines ({os_type} and {p.scenario})")
    if not skill_allowed(p.skill, p.scenario):
      raise ValueError(f"skill {p.skill!r} is not available in scenario {p.scenario!r}")
  rng = random.Random(derive_seed(int(seed), 7101))
  ctx = _Ctx(os_type, f"192.168.1.{rng.randint(10, 99)}", rng.choice(REMOTE_USERS), rng.sample(DIRNAMES, 2 * MAX_PAIRS))
  sentences: list[str] = []
  blocks: list[tuple[bool, list[str]]] = []  # (remote, commands): consecutive remote steps share a session
  for k, p in enumerate(pairs):
    remote = p.scenario == "remote"
    text, cmds = STEPS[p.skill](ctx, random.Random(derive_seed(int(seed), k, 7102)), remote, int(seed), k)
    sentences.append(text)
    if blocks and blocks[-1][0] == remote:
      blocks[-1][1].extend(cmds)
    else:
      blocks.append((remote, list(cmds)))
  oracle: list[str] = []
  for remote, cmds in blocks:
    oracle += [f"ssh {ctx.user}@{ctx.host}", *cmds, "exit"] if remote else cmds
  instruction = (sentences[0] if len(sentences) == 1 else
                 "Carry out these file operations in order:\n" + "\n".join(f"{i + 1}. {s}"
                                                                            for i, s in enumerate(sentences)))
  return {"os": os_type, "host": ctx.host, "user": ctx.user, "instruction": instruction, "local": ctx.local,
          "remote": ctx.remote, "checks": ctx.checks, "oracle": oracle}


# ------------------------------------------------------------------------------------------------ quality


def task_problems(data: Any) -> list[str]:
  """Quality problems of task data (module docstring); a data that does not validate gives one problem."""
  try:
    d = validate_data(data)
    spec = task_from_data(d)
  except ValueError as e:
    return [f"invalid task data: {e}"]
  local, remote = spec.build()
  problems = []
  if check_goal(spec, local, remote):
    problems.append("vacuous checks: the goal already holds in the initial file systems")
  contents = set()
  for m in (local, remote):
    for node in m.walk(()):
      if isinstance(node, File):
        contents.update(node.entries.values() if node.entries is not None else [node.content])
  produced = {(c.remote, c.path) for c in spec.checks if c.kind in ("file_exists", "dir_exists")}
  text = d["instruction"]
  for i, (c, raw) in enumerate(zip(spec.checks, d["checks"])):
    m = remote if c.remote else local
    node = m.get(c.path)
    if c.kind == "file_not_exists" and node is None:
      problems.append(f"vacuous check {i}: {raw['path']!r} does not exist initially, so file_not_exists holds "
                      "without any work")
    if c.kind == "file_exists" and c.content is not None and c.content not in contents:
      problems.append(f"check {i} references missing files: no initial file holds the content it requires")
    if c.kind == "archive_contains" and any(v not in contents for _, v in c.entries):
      problems.append(f"check {i} references missing files: an archive member's content is in no initial file")
    if c.kind == "permission_equals":
      if node is None and (c.remote, c.path) not in produced:
        problems.append(f"check {i} references a missing file: {raw['path']!r} neither exists nor is produced")
      if c.value not in text:
        problems.append(f"not self-contained: check {i}'s permission {c.value} is not stated in the instruction")
    home = spec.remote_home if c.remote else spec.local_home
    below = c.path[len(home):] if c.path[:len(home)] == home else c.path
    if not any(name in text for name in below):
      problems.append(f"not self-contained: the instruction never names the path of check {i} ({raw['path']!r})")
  return problems


# ------------------------------------------------------------------------------------------------ oracle


class ScriptOracle(TextPolicy):
  """Plays the recorded oracle lines of the task whose system prompt it sees (module docstring)."""

  def __init__(self, scripts: dict[str, list[str]]):
    self.scripts = scripts
    self.fallback = TerminalExpert()

  def respond(self, messages, rng) -> str:
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    lines = self.scripts.get(system)
    if lines is None:
      return self.fallback.respond(messages, rng)
    i = sum(1 for m in messages if m.get("role") == "assistant")
    if i >= len(lines):
      return "oracle finished\n<answer>pwd</answer>"
    return f"oracle step {i + 1}/{len(lines)}\n<answer>{lines[i]}</answer>"


# ------------------------------------------------------------------------------------------------ parameterisation


@register
class TerminalParams(Parameterisation):
  """TerminalSimulator tasks as (scenario, skill) sequences (module docstring)."""

  name = "terminal_simulator"
  env_name = "terminal_simulator"
  scenario_freq = SCENARIO_FREQ
  skill_freq = SKILL_FREQ
  min_pairs = 1
  max_pairs = MAX_PAIRS

  def __init__(self):
    self.scripts: dict[str, list[str]] = {}  # system prompt -> oracle lines of the tasks built so far

  def data(self, point: EnvPoint) -> dict:
    """The point's task data: its own (LLM-written) or the composer's (generated)."""
    return point.data if point.data is not None else compose(point.pairs, point.seed)

  def env_params(self, point: EnvPoint) -> dict:
    d = validate_data(self.data(point))
    return {"task_data": d, "agent_max_steps": len(d["oracle"]) + SLACK}

  def seed_pairs(self, index: int) -> tuple[Pair, ...]:
    seq = SEED_SEQUENCES[index % len(SEED_SEQUENCES)]
    os_type = LOCAL_SCENARIOS[(index // len(SEED_SEQUENCES)) % len(LOCAL_SCENARIOS)]
    return tuple(Pair(os_type if s == "L" else s, k) for s, k in seq)

  def skill_prob(self, skill: str, scenario: str) -> float:
    if skill not in SKILL_FREQ:
      raise ValueError(f"unknown skill {skill!r}; known: {sorted(SKILL_FREQ)}")
    allowed = {k: f for k, f in SKILL_FREQ.items() if skill_allowed(k, scenario)}
    return allowed.get(skill, 0.0) / sum(allowed.values())

  def compatible(self, pairs: Sequence[Pair]) -> bool:
    return (super().compatible(pairs) and all(skill_allowed(p.skill, p.scenario) for p in pairs)
            and len({p.scenario for p in pairs if p.scenario in LOCAL_SCENARIOS}) <= 1)

  def _record(self, tasks: Sequence[TaskEnv]) -> None:
    for t in tasks:
      system = t.reset()[0]
      self.scripts.pop(system, None)
      self.scripts[system] = list(t.spec.oracle)
    while len(self.scripts) > MAX_SCRIPTS:  # keep the most recently built tasks' scripts
      self.scripts.pop(next(iter(self.scripts)))

  def family(self, point: EnvPoint):
    """The environment family; its task's oracle script is recorded, so the oracle also plays tasks that
    others build from this family (the trainer's task source, the difficulty measurement)."""
    fam = super().family(point)
    self._record(fam.sample_pack(point.seed, 1))
    return fam

  def tasks(self, point: EnvPoint, num_tasks: int = 1) -> list[TaskEnv]:
    out = super().family(point).sample_pack(point.seed, num_tasks)
    self._record(out)
    return out

  def oracle(self):
    return ScriptOracle(self.scripts)

  def constant_action(self) -> str:
    return "look around\n<answer>ls</answer>"

  def answer_strings(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    del tasks
    try:
      lines = validate_data(self.data(point))["oracle"]
    except ValueError:
      return []
    return [x for x in lines if len(x) >= 12 and not x.startswith("ssh ")]

  def quality_problems(self, point: EnvPoint, tasks: Sequence[TaskEnv]) -> list[str]:
    del tasks
    data = self.data(point)
    problems = task_problems(data)
    if not problems:
      if data["os"] != local_os(point.pairs) and any(p.scenario in LOCAL_SCENARIOS for p in point.pairs):
        problems.append(f"the task's local OS {data['os']!r} is not the one its pairs name "
                        f"({local_os(point.pairs)!r})")
      if len(data["oracle"]) < len(point.pairs):
        problems.append(f"the oracle has {len(data['oracle'])} lines for {len(point.pairs)} pairs")
    return problems


__all__ = ["SCENARIO_FREQ", "SKILL_FREQ", "ScriptOracle", "TerminalParams", "compose", "local_os", "skill_allowed",
           "task_problems"]
