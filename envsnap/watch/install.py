"""`envsnap watch --install` / `--uninstall`: what keeps a watcher running after the person
logs out and across reboots, as a change shown first and made once they agree.

- a systemd user service (Type=simple: the foreground watcher itself, restarted when it
  fails) in ~/.config/systemd/user, enabled with `systemctl --user`, where a user systemd
  runs;
- otherwise two lines in the user's crontab (`crontab -l`, `crontab -`): one at @reboot,
  one every ten minutes, each behind `flock -n` so that only one watcher runs: the second
  starts a watcher that died, and does nothing while one runs.

Each carries a marker naming the watcher (`# envsnap-watch:NAME`; in a unit, its first
line), so --uninstall removes what envsnap installed and nothing else: a unit without the
marker, or a crontab line without it, is the user's own. The command is this envsnap's,
by absolute path, in the folder it was installed from (relative --repo and --store mean
what they meant), with this PATH (the interpreter and the tools a capture finds).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from envsnap.errors import HostError, UsageError
from envsnap.snapshot.entries import write_entry

MARKER = "# envsnap-watch:"
SYSTEMD, CRON = "systemd", "cron"
SCHEDULERS = (SYSTEMD, CRON)
TIMEOUT = 30.0   # seconds a systemctl or crontab command may take
CRON_EVERY = "*/10 * * * *"   # how soon cron starts a watcher that died
KEPT_VARIABLES = ("PATH", "PYTHONPATH")   # what the service inherits from the installer


@dataclass(frozen=True)
class Service:
    """The watcher to keep running: its name, its command line, where and with what."""

    name: str                          # status.watcher_name: names the unit and the lock
    argv: tuple[str, ...]              # absolute envsnap program, then `watch ...`
    workdir: str
    environment: tuple[tuple[str, str], ...]
    lock: str                          # cron's flock file
    log: str                           # cron's output


@dataclass(frozen=True)
class Change:
    """One change to make: a unit file written or removed, or the crontab rewritten."""

    scheduler: str
    target: str                        # the unit's path, or "the crontab"
    old: str | None                    # what stands there now that is changed (None: nothing)
    new: str | None                    # what will stand (None: removed)
    ours: bool                         # whether `old`, if any, is envsnap's (it has the marker)
    crontab: str | None = None         # the whole new crontab (cron only)
    commands: tuple[tuple[str, ...], ...] = ()   # run once the file is in place

    @property
    def needed(self) -> bool:
        return self.old != self.new


# ---- what is written ------------------------------------------------------------------------

def envsnap_program() -> list[str]:
    """This envsnap, by absolute path: its console script when it runs as one, else its
    interpreter with `-m envsnap`."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script) == "envsnap" and os.path.isfile(script):
        return [script]
    return [os.path.abspath(sys.executable), "-m", "envsnap"]


def unit_name(name: str) -> str:
    return "envsnap-watch-" + re.sub(r"[^A-Za-z0-9:_.-]", "-", name) + ".service"


def systemd_word(word: str) -> str:
    """One word of ExecStart= or Environment=, as systemd reads it back: bare when plain,
    else in double quotes; its specifiers (%) and variables ($) kept literal."""
    word = word.replace("%", "%%").replace("$", "$$")
    if word and re.fullmatch(r"[A-Za-z0-9_./:=@+,%$-]+", word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unit_text(service: Service) -> str:
    environment = "".join(f"Environment={systemd_word(f'{name}={value}')}\n"
                          for name, value in service.environment)
    return (f"{MARKER}{service.name} (written by envsnap watch --install; "
            "envsnap watch --uninstall removes it)\n"
            "[Unit]\n"
            f"Description=envsnap watch {service.name}\n"
            "After=network-online.target\n\n"
            "[Service]\n"
            "Type=simple\n"
            f"WorkingDirectory={systemd_word(service.workdir)}\n"
            f"{environment}"
            f"ExecStart={' '.join(systemd_word(word) for word in service.argv)}\n"
            "Restart=on-failure\n"
            "RestartSec=60\n\n"
            "[Install]\n"
            "WantedBy=default.target\n")


def cron_command(service: Service, guarded: bool) -> str:
    """The shell command of the cron lines, behind `flock -n` when `guarded`; `%` escaped,
    as cron ends a command at one."""
    environment = " ".join(f"{name}={shlex.quote(value)}" for name, value in service.environment)
    guard = f"flock -n {shlex.quote(service.lock)} " if guarded else ""
    words = " ".join(shlex.quote(word) for word in service.argv)
    command = (f"cd {shlex.quote(service.workdir)} && {environment} {guard}{words} "
               f">>{shlex.quote(service.log)} 2>&1")
    return command.replace("%", "\\%")


def cron_lines(service: Service, guarded: bool) -> str:
    """The watcher's cron lines: at @reboot, and, behind flock, every ten minutes (it
    restarts a watcher that died). Without flock only the first: the watcher's own lock
    would refuse, and log, a second one every ten minutes."""
    marker = f" {MARKER}{service.name}"
    command = cron_command(service, guarded)
    again = f"{CRON_EVERY} {command}{marker}\n" if guarded else ""
    return (f"# envsnap watch {service.name}: envsnap watch --uninstall removes these"
            f"{marker}\n"
            f"@reboot {command}{marker}\n{again}")


def is_ours(line: str, name: str | None) -> bool:
    """A crontab line envsnap wrote: for the watcher `name`, or any (None)."""
    head, found, tail = line.rpartition(MARKER)
    return bool(found) and (name is None or tail.strip() == name) and bool(head)


def without_ours(crontab: str, name: str | None) -> tuple[str, str]:
    """(the crontab less envsnap's lines for `name`, those lines)."""
    kept: list[str] = []
    ours: list[str] = []
    for line in crontab.splitlines(keepends=True):
        (ours if is_ours(line, name) else kept).append(line)
    return "".join(kept), "".join(ours)


# ---- where: systemd or cron -----------------------------------------------------------------

def unit_folder() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(config) / "systemd" / "user"


def user_systemd_runs() -> bool:
    """Whether a systemd user instance answers (`systemctl --user` can enable a unit)."""
    if shutil.which("systemctl") is None:
        return False
    try:
        return subprocess.run(["systemctl", "--user", "show-environment"],
                              capture_output=True, timeout=TIMEOUT).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def chosen_scheduler(asked: str | None) -> str:
    """The scheduler asked for, else systemd where a user instance runs, else cron."""
    if asked == SYSTEMD and not user_systemd_runs():
        raise UsageError("no systemd user instance answers here (systemctl --user): "
                         "--scheduler cron installs a cron line instead")
    if asked is not None:
        return asked
    return SYSTEMD if user_systemd_runs() else CRON


def run_tool(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    if shutil.which(argv[0]) is None:
        raise HostError(f"{argv[0]} is not installed here: no systemd user instance and "
                        f"no {argv[0]}, so nothing can keep a watcher running; run "
                        "`envsnap watch` in a terminal multiplexer instead")
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise HostError(f"{' '.join(argv)} did not answer in {TIMEOUT:g} s") from None
    except OSError as exc:
        raise HostError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None


def read_crontab() -> str:
    """The user's crontab; "" when they have none."""
    done = run_tool(["crontab", "-l"])
    if done.returncode == 0:
        return done.stdout
    if "no crontab" in done.stderr.lower():
        return ""
    raise HostError(f"crontab -l failed: {last_line(done.stderr)}")


def last_line(text: str) -> str:
    return (text.strip().splitlines() or ["(no message)"])[-1]


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HostError(f"cannot read {path}: {exc.strerror or exc}") from None


# ---- the changes ----------------------------------------------------------------------------

def plan_install(service: Service, scheduler: str) -> Change:
    if scheduler == SYSTEMD:
        unit = unit_folder() / unit_name(service.name)
        old = read_text(unit)
        return Change(SYSTEMD, str(unit), old, unit_text(service),
                      ours=old is None or old.startswith(MARKER),
                      commands=(("systemctl", "--user", "daemon-reload"),
                                ("systemctl", "--user", "enable", "--now", unit.name)))
    crontab = read_crontab()
    kept, ours = without_ours(crontab, service.name)
    new = cron_lines(service, guarded=shutil.which("flock") is not None)
    ending = "" if not kept or kept.endswith("\n") else "\n"
    return Change(CRON, "the crontab", ours or None, new, ours=True,
                  crontab=kept + ending + new)


def plan_uninstall(name: str | None) -> list[Change]:
    """What envsnap installed for the watcher `name` (None: for every watcher), to remove."""
    changes = []
    folder = unit_folder()
    wanted = [folder / unit_name(name)] if name is not None else \
        sorted(folder.glob("envsnap-watch-*.service")) if folder.is_dir() else []
    for unit in wanted:
        old = read_text(unit)
        if old is not None and old.startswith(MARKER):
            commands = (("systemctl", "--user", "disable", "--now", unit.name),) \
                if user_systemd_runs() else ()
            changes.append(Change(SYSTEMD, str(unit), old, None, ours=True,
                                  commands=commands))
    if shutil.which("crontab") is not None:
        kept, ours = without_ours(read_crontab(), name)
        if ours:
            changes.append(Change(CRON, "the crontab", ours, None, ours=True, crontab=kept))
    return changes


def apply(change: Change) -> None:
    """Make the change: the file written or removed, then its commands; HostError for a
    command that fails (the file stays as written: the message says which command)."""
    if change.scheduler == CRON:
        assert change.crontab is not None
        done = run_tool(["crontab", "-"], change.crontab)
        if done.returncode != 0:
            raise HostError(f"crontab - failed: {last_line(done.stderr)}")
        return
    unit = Path(change.target)
    if change.new is None:
        run_commands(change.commands)
        unit.unlink(missing_ok=True)
        if user_systemd_runs():
            run_commands((("systemctl", "--user", "daemon-reload"),))
        return
    try:
        unit.parent.mkdir(parents=True, exist_ok=True)
        write_entry(unit, change.new, mode=0o644)
    except OSError as exc:
        raise HostError(f"cannot write {unit}: {exc.strerror or exc}") from None
    run_commands(change.commands)


def run_commands(commands: tuple[tuple[str, ...], ...]) -> None:
    for argv in commands:
        done = run_tool(list(argv))
        if done.returncode != 0:
            raise HostError(f"{' '.join(argv)} failed: {last_line(done.stderr)}")
