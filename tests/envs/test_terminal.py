"""TerminalSimulator: task generation, the in-memory shell, goal checks, rewards, the expert, host isolation."""

import builtins
import os
import random
import shutil
import subprocess

import pytest

from codjax.envs import derive_seed, make
from codjax.envs.terminal.commands import Shell
from codjax.envs.terminal.env import FAIL_FEEDBACK, FORMAT_FEEDBACK, PARSE_ERROR_OUTPUT, SUCCESS_FEEDBACK
from codjax.envs.terminal.expert import TerminalExpert, plan_commands
from codjax.envs.terminal.fs import File, Machine
from codjax.envs.terminal.tasks import TEMPLATES, generate_task


def _cmd(c):
  return f"run it\n<answer>{c}</answer>"


def _shell(os_type="linux"):
  home = {"linux": ("home", "user"), "mac": ("Users", "user"), "windows": ("C", "Users", "user")}[os_type]
  local = Machine(os_type, "localhost", "user", home)
  local.makedirs(home + ("docs",))
  local.write(home + ("docs", "a.txt"), "A")
  remote = Machine("linux", "192.168.1.20", "admin", ("home", "admin"))
  remote.makedirs(("home", "admin"))
  remote.makedirs(("var", "www"))
  return Shell(local, remote)


def _play(task, policy, rng=None):
  system, obs = task.reset()
  msgs = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
  while True:
    reply = policy.respond(msgs, rng or random.Random(0))
    r = task.step(reply)
    msgs.append({"role": "assistant", "content": reply})
    if r.done:
      return r, msgs
    msgs.append({"role": "user", "content": r.observation})


def test_task_generation_is_deterministic_and_covers_templates():
  a, b = generate_task(12345), generate_task(12345)
  assert (a.description, a.checks, a.local, a.remote) == (b.description, b.checks, b.local, b.remote)
  kinds = {generate_task(derive_seed(1, k)).kind for k in range(400)}
  assert kinds == set(TEMPLATES)
  composite = sum(generate_task(derive_seed(2, k)).composite for k in range(400))
  assert 150 < composite < 250
  fam = make("terminal_simulator")
  assert [t.reset() for t in fam.sample_pack(7, 3)] == [t.reset() for t in fam.sample_pack(7, 3)]


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
def test_expert_solves_every_template_on_every_os(kind):
  fam = make("terminal_simulator", task_kind=kind)
  seen = set()
  for k in range(12):
    task = fam.sample_pack(derive_seed(3, k), 1)[0]
    assert not task.goal_reached()
    r, _ = _play(task, TerminalExpert())
    assert r.reward == 1.0 and r.info["feedback"] == SUCCESS_FEEDBACK, task.spec.description
    seen.add(task.spec.os_type)
  assert seen == {"linux", "mac", "windows"}


def test_prompts_and_step_limit():
  fam = make("terminal_simulator", agent_max_steps=2, task_kind="upload")
  task = fam.sample_pack(1, 1)[0]
  system, obs = task.reset()
  assert task.spec.description in system and "You have 2 steps" in system and "<answer>COMMAND</answer>" in system
  assert obs.startswith("Step 1/2\n\n") and obs.endswith(task.shell.prompt())
  r = task.step(_cmd("pwd"))
  assert not r.done and r.observation.startswith("Step 2/2\n\n/") and r.reward == 0.0
  r = task.step(_cmd("whoami"))
  assert r.done and r.reward == 0.0 and r.info["feedback"] == FAIL_FEEDBACK and r.info["raw_reward"] == 0.0


@pytest.mark.parametrize("text", ["no tags", "<answer>   </answer>", "<answer>ls</answer><answer>pwd</answer>"])
def test_format_error(text):
  task = make("terminal_simulator").sample_pack(1, 1)[0]
  task.reset()
  r = task.step(text)
  assert r.done and r.reward == 0.0 and r.info["format_error"] and r.info["feedback"] == FORMAT_FEEDBACK
  assert r.observation == PARSE_ERROR_OUTPUT


def test_prompt_strings():
  assert _shell("linux").prompt() == "user@localhost:~$ "
  assert _shell("mac").prompt() == "user@MacBook ~ % "
  sh = _shell("windows")
  assert sh.prompt() == "C:\\Users\\user>"
  sh.run_line("cd docs")
  assert sh.prompt() == "C:\\Users\\user\\docs>"


def test_chains_and_rejected_operators():
  sh = _shell()
  assert sh.run_line("cd nowhere && pwd") == "bash: cd: nowhere: No such file or directory"
  assert sh.run_line("cd nowhere ; pwd").splitlines()[-1] == "/home/user"
  assert sh.run_line("cd docs && pwd && cd .. && pwd") == "/home/user/docs\n/home/user"
  assert sh.run_line("echo 'a;b && c'") == "a;b && c"
  assert sh.run_line("ls | cat").startswith("Error: pipes")
  assert sh.run_line("echo hi > f").startswith("Error: redirects")
  assert sh.run_line("echo $(whoami)").startswith("Error: command substitution")
  assert sh.run_line("echo `whoami`").startswith("Error: command substitution")
  assert sh.run_line("echo \"unterminated") == "bash: syntax error: unexpected end of file"
  assert sh.run_line("frobnicate now") == "bash: frobnicate: command not found"
  assert sh.run_line("echo ~ $HOME ${USER}") == "/home/user /home/user user"


def test_windows_commands():
  sh = _shell("windows")
  assert sh.run_line("tar -cf x.tar docs") == ("'tar' is not recognized as an internal or external command,\n"
                                               "operable program or batch file.")
  assert "is not recognized" in sh.run_line("chmod 755 docs\\a.txt")
  assert sh.run_line("echo %USERPROFILE%") == "C:\\Users\\user"
  sh.run_line("mkdir C:\\Users\\user\\x\\y\\z")  # cmd.exe creates intermediate directories
  assert sh.local.is_dir(("C", "Users", "user", "x", "y", "z"))
  assert sh.run_line("copy docs\\a.txt docs\\b.txt") == "        1 file(s) copied."
  assert sh.run_line("ren docs\\b.txt c.txt") == "" and sh.local.is_file(("C", "Users", "user", "docs", "c.txt"))
  assert sh.run_line("ren docs\\c.txt a.txt") == "A duplicate file name exists, or the file cannot be found."
  assert sh.run_line("del docs\\missing.txt") == "Could Not Find C:\\Users\\user\\docs\\missing.txt"
  assert "Directory of C:\\Users\\user\\docs" in sh.run_line("dir docs")
  assert sh.run_line("cd ..\\..\\..\\..") == "" and sh.prompt() == "C:\\>"


def test_remote_session_transfers_and_errors():
  sh = _shell()
  assert sh.run_line("scp docs/a.txt admin@192.168.1.20:/var/www/").endswith("transferred")
  assert sh.remote.get(("var", "www", "a.txt")).content == "A"
  assert sh.run_line("scp admin@192.168.1.20:/var/www/a.txt docs/b.txt").endswith("transferred")
  assert sh.local.get(("home", "user", "docs", "b.txt")).content == "A"
  assert sh.run_line("scp docs/a.txt root@192.168.1.20:/tmp") == \
      "root@192.168.1.20: Permission denied (publickey,password)."
  refused = "ssh: connect to host 10.0.0.1 port 22: Connection refused"
  assert sh.run_line("scp docs/a.txt admin@10.0.0.1:/tmp") == refused
  assert sh.run_line("scp docs nope@x") == "scp: use cp for a local-to-local copy"
  assert sh.run_line("scp docs admin@192.168.1.20:") == "scp: docs: not a regular file"
  assert sh.run_line("ssh admin@192.168.1.20").startswith("Welcome to Ubuntu")
  assert sh.prompt() == "admin@192.168.1.20:~$ "
  assert "must be run from the local machine" in sh.run_line("scp a b")
  sh.run_line("mkdir -p /opt/app/logs && chmod 700 /opt/app/logs && touch /opt/app/logs/x")
  assert sh.remote.get(("opt", "app", "logs")).perm == "700" and sh.remote.is_file(("opt", "app", "logs", "x"))
  assert sh.run_line("chmod 7777 /opt") == "chmod: invalid mode: '7777'"
  assert sh.run_line("exit") == "Connection to 192.168.1.20 closed."
  assert sh.prompt() == "user@localhost:~$ "
  assert sh.run_line('ssh admin@192.168.1.20 "rm /var/www/a.txt"') == "" and not sh.connected
  assert sh.remote.get(("var", "www", "a.txt")) is None


def test_archives():
  sh = _shell()
  sh.run_line("mkdir -p proj/sub && cp docs/a.txt proj/ && cp docs/a.txt proj/sub/b.txt")
  assert sh.run_line("tar -czf p.tar.gz proj") == ""
  node = sh.local.get(("home", "user", "p.tar.gz"))
  assert node.archive_type == "tar.gz" and node.entries == {"proj/a.txt": "A", "proj/sub/b.txt": "A"}
  assert sh.run_line("tar -tzf p.tar.gz") == "proj/a.txt\nproj/sub/b.txt"
  assert sh.run_line("mkdir out && tar -xzf p.tar.gz -C out") == ""
  assert sh.local.get(("home", "user", "out", "proj", "sub", "b.txt")).content == "A"
  assert sh.run_line("tar cf q.tar -C proj sub") == "" and set(sh.local.get(("home", "user", "q.tar")).entries) == {
      "sub/b.txt"}
  assert sh.run_line("zip -r p proj").startswith("  adding: proj/a.txt")
  assert sh.run_line("unzip p.zip -d z").startswith("Archive:  p.zip")
  assert sh.local.get(("home", "user", "z", "proj", "a.txt")).content == "A"
  assert sh.run_line("tar -xf p.zip").startswith("tar: This does not look like a tar archive")
  assert sh.run_line("unzip p.tar.gz").endswith("is not a zip archive.")
  assert sh.run_line("gzip docs/a.txt") == "" and sh.local.get(("home", "user", "docs", "a.txt")) is None
  assert sh.run_line("gunzip docs/a.txt.gz") == "" and sh.local.get(("home", "user", "docs", "a.txt")).content == "A"
  assert "Cowardly" in sh.run_line("tar -cf e.tar")


def test_archive_members_cannot_escape_extraction_dir():
  sh = _shell()
  sh.local.put(("home", "user", "evil.tar"), File("x", archive_type="tar", entries={"../../../etc/passwd": "pwn"}))
  sh.run_line("mkdir box && tar -xf evil.tar -C box")
  assert sh.local.get(("etc",)) is None and sh.local.get(("home", "user", "box", "etc", "passwd")).content == "pwn"


def test_hostile_commands_leave_host_untouched(tmp_path, monkeypatch):
  sentinel = tmp_path / "sentinel"
  sentinel.mkdir()
  (sentinel / "keep.txt").write_text("keep")
  before = sorted(os.listdir(sentinel)), (sentinel / "keep.txt").read_text(), os.getcwd()

  def forbidden(*a, **k):
    raise AssertionError("host access")

  for mod, name in [(builtins, "open"), (os, "system"), (os, "remove"), (os, "unlink"), (os, "rmdir"),
                    (os, "mkdir"), (os, "makedirs"), (os, "rename"), (os, "chdir"), (os, "chmod"),
                    (shutil, "rmtree"), (shutil, "copy"), (shutil, "move"), (subprocess, "Popen"),
                    (subprocess, "run")]:
    monkeypatch.setattr(mod, name, forbidden)
  s = str(sentinel)
  hostile = ["rm -rf /", f"rm -rf {s}", f"rm -rf {s}/keep.txt", f"echo $(rm -rf {s})", f"`rm -rf {s}`",
             f"touch {s}/new.txt", f"mkdir {s}/d", f"cat {s}/keep.txt", f"cp {s}/keep.txt /tmp/x",
             f"chmod 000 {s}/keep.txt", "curl http://example.com -o /tmp/x", "wget http://example.com",
             "cd ../../../../../../ && rm -rf *", f"echo pwn > {s}/keep.txt", f"scp {s}/keep.txt admin@1.2.3.4:/",
             "python -c 'import os; os.system(\"rm -rf /\")'", "sudo rm -rf / --no-preserve-root",
             "del /s /q C:\\", ":(){ :|:& };:", "rm -rf ~ && rm -rf $HOME", f"tar -xf {s}/keep.txt -C /"]
  for kind in ("upload", "pack_upload_extract"):
    for task in make("terminal_simulator", task_kind=kind).sample_pack(5, 3):
      task.reset()
      for cmd in hostile:
        r = task.step(_cmd(cmd))
        assert isinstance(r.observation, str)
        if r.done:
          break
  monkeypatch.undo()
  assert (sorted(os.listdir(sentinel)), (sentinel / "keep.txt").read_text(), os.getcwd()) == before


def test_expert_plan_parsing_and_hints():
  task = make("terminal_simulator", task_kind="pack_upload").sample_pack(4, 1)[0]
  system, _ = task.reset()
  kind, cmds = plan_commands(system)
  assert kind == "pack_upload" and cmds[-1].startswith("scp ")
  fam = make("terminal_simulator")
  from codjax.agents.cod import run_text_packs
  from codjax.envs.experts import make_policy
  trajs = run_text_packs(make_policy("terminal_simulator"), fam, [derive_seed(8, k) for k in range(6)], 4)
  assert all(t.task_rewards.tolist() == [1.0] * 4 for t in trajs)
  assert all(h.startswith("Hints: - ") and "(" in h for t in trajs for h in t.hints[1:])
  assert all(len(t.hints[3].splitlines()) >= 2 for t in trajs)  # recipes accumulate across the pack
  rnd = run_text_packs(make_policy("terminal_simulator", "random"), fam, [derive_seed(8, k) for k in range(6)], 4)
  assert sum(t.task_rewards.sum() for t in rnd) <= 3


@pytest.mark.parametrize("params", [dict(preset="x"), dict(agent_max_steps=0), dict(composite_ratio=2.0),
                                    dict(task_kind="teleport"), dict(colour="red")])
def test_bad_params_raise(params):
  with pytest.raises(ValueError):
    make("terminal_simulator", **params)
