"""`envsnap timeline`'s mode of the agent: the evidence of change already on the host, with times.

One exec, like a capture. Each source is read in its own thread with the collectors' timeout
and reports its own error, so an unreadable journal never loses the reflogs:

- git: each checkout's HEAD reflog (read from the file's end, like the capture) with the
  commits each move brought in and the files they touched; the stash reflog's lines, and
  its file's time and the stashes it lists now (a pop or drop leaves no line: see
  stash_records);
- python: the interpreter's .dist-info/.egg-info folders with their RECORD's mtime and
  INSTALLER (pip, uv, conda, ...), each site folder's distributions now (what a package a
  snapshot recorded and no folder holds any more is told by), and conda-meta/history where
  there is one;
- files: sitecustomize/usercustomize as the interpreter finds them, its .pth files,
  /etc/nccl.conf, ~/.nccl.conf, /etc/environment: mtime, digest, and any backup envsnap made;
- procs: each --proc worker's start time and its env now (agent/env.py's reading);
- with nothing named (`discover`): the running Python processes, their interpreters and
  checkouts, and the store's recorded ones (agent/discover.py), read as if named;
- units: each worker's systemd unit, when its /proc/PID/cgroup names one (a `.service`),
  and the mtime and digest of its unit file and drop-ins (systemd.unit(5)'s folders);
- dpkg, apt, rpm, kernel, host: agent/timelinelogs.py.

Nothing is written and nothing but git and the log readers runs.
"""
from __future__ import annotations

import glob
import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import gitparse, timelinelogs
from .discover import discover, site_dirs_of
from .env import ProcTable, find_processes, processes_by_pid
from .envnames import DEFAULT_NAMES, DEFAULT_PREFIXES
from .git import tail_lines
from .gitrun import Git
from .gitsafe import refusal
from .python_env import (
    CUSTOMIZE_MODULES,
    describe_module,
    normalise_name,
    site_directories,
    target_sys_path,
)
from .util import CollectorError, sha256_file, which

REFLOG_LINES = 2000       # newest reflog lines looked at per checkout
MOVE_COMMITS = 50         # commits listed per reflog move
BACKUP_INFIX = ".envsnap-backup-"   # hostops/files.py names its backups so
CONFIG_FILES = ("/etc/nccl.conf", "/etc/environment")
Source = Dict[str, Any]


def collect(config: Dict[str, Any]) -> Dict[str, Any]:
    since = float(config.get("since") or 0.0)
    until = float(config.get("until") or time.time() + 60)
    root = str(config.get("root") or "/")
    repos = [str(p) for p in config.get("repos") or []]
    procs = [str(p) for p in config.get("procs") or []]
    pythons: List[str] = []
    pids: List[int] = []
    looked: Optional[Dict[str, Any]] = None
    table: Optional[ProcTable] = None
    if config.get("discover"):   # nothing named: the running Python and the store's records
        table = ProcTable()
        looked = discover(table, repos, [str(p) for p in config.get("pythons") or []],
                          config.get("here"))
        repos, pythons, pids = looked["repos"], looked["pythons"], looked["pids"]
    readers: Dict[str, Callable[[], Optional[Source]]] = {
        "git": lambda: read_git(repos, since, until),
        "python": lambda: read_python(since, until, pythons),
        "files": lambda: read_files(root),
        "procs": lambda: read_procs(procs, pids, table),
        "units": lambda: read_units(root, procs, pids, table),
        "dpkg": lambda: timelinelogs.read_dpkg(root, since, until),
        "apt": lambda: timelinelogs.read_apt(root, since, until),
        "rpm": lambda: timelinelogs.read_rpm(root, since, until),
        "kernel": lambda: timelinelogs.read_kernel(root, since, until),
        "host": lambda: read_host(root),
    }
    sources = run_all(readers, float(config.get("timeout") or 20.0))
    found = {"now": time.time(), "since": since, "until": until, "sources": sources}
    if looked is not None:
        found["looked_at"] = looked
    return found


def run_all(readers: Dict[str, Callable[[], Optional[Source]]], timeout: float
            ) -> Dict[str, Source]:
    results: Dict[str, Source] = {}

    def one(name: str) -> None:
        started = time.monotonic()
        try:
            found = readers[name]()
        except Exception as exc:  # one unreadable source must never lose the others
            found = {"records": [], "error": "%s: %s" % (type(exc).__name__, exc)}
        if found is not None:
            found["seconds"] = round(time.monotonic() - started, 4)
            results[name] = found

    threads = [threading.Thread(target=one, args=(name,), daemon=True) for name in readers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for name, thread in zip(readers, threads):
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            results[name] = {"records": [], "error": "timed out after %gs" % timeout}
    return {name: results[name] for name in readers if name in results}


# ---- git ------------------------------------------------------------------------------------

def read_git(repos: List[str], since: float, until: float) -> Optional[Source]:
    if not repos:
        return None
    exe = which("git")
    if exe is None:
        return {"records": [], "error": "git not found"}
    git = Git(exe, 10.0)
    records: List[Dict[str, Any]] = []
    errors = []
    for given in repos:
        path = os.path.abspath(os.path.expanduser(given))
        try:
            # as its owner where envsnap is root (gitsafe.py); these reads never look at
            # the work tree, so no filter can run and no driver needs switching off
            records.extend(repo_records(git.for_checkout(path), path, since, until))
        except (CollectorError, OSError) as exc:
            errors.append("%s: %s" % (path, exc))
    return {"records": records, "error": "; ".join(errors) or None}


def repo_records(git: Git, path: str, since: float, until: float) -> List[Dict[str, Any]]:
    code, out, err = git.run(path, ["rev-parse", "--absolute-git-dir", "--git-common-dir"])
    if code != 0:
        raise CollectorError(refusal(path, err) or err.decode("utf-8", "replace").strip()
                             or "not a git checkout")
    git_dir, common = out.decode("utf-8", "replace").splitlines()[:2]
    common = os.path.join(path, common)   # relative to where git ran; an absolute one stays
    records = []
    head_log = os.path.join(git_dir, "logs", "HEAD")
    lines = tail_lines(head_log, REFLOG_LINES)[0] if os.path.exists(head_log) else []
    for entry in gitparse.parse_reflog(lines):
        if since <= entry["time"] <= until:
            entry.update(repo=path, ref="HEAD", commits=moved_commits(git, path, entry))
            records.append(entry)
    records.extend(stash_records(os.path.join(common, "logs", "refs", "stash"), path,
                                 since, until))
    return records


def moved_commits(git: Git, path: str, entry: Dict[str, Any]) -> Dict[str, Any]:
    """The commits a move brought in (old..new) with their files, and how many it left."""
    old, new = entry["old"], entry["new"]
    if old in gitparse.ZERO_SHA or old == new:
        return {"added": [], "removed": 0}
    code, out, _ = git.run(path, ["log", "--no-renames", "--name-only", "-n",
                                  str(MOVE_COMMITS), "--format=%x1e%H%x1f%ct%x1f%s",
                                  "%s..%s" % (old, new)])
    added = parse_moved(out.decode("utf-8", "replace")) if code == 0 else []
    code, out, _ = git.run(path, ["rev-list", "--count", "%s..%s" % (new, old)])
    removed = int(out.strip() or 0) if code == 0 else 0
    code, out, _ = git.run(path, ["rev-list", "--count", "%s..%s" % (old, new)])
    total = int(out.strip() or 0) if code == 0 else len(added)
    return {"added": added, "added_total": total, "removed": removed}


def parse_moved(text: str) -> List[Dict[str, Any]]:
    commits = []
    for block in text.split("\x1e")[1:]:
        head, _, files = block.partition("\n")
        sha, when, subject = (head.split("\x1f") + ["", ""])[:3]
        commits.append({"sha": sha, "time": int(when or 0), "subject": subject,
                        "files": [line for line in files.splitlines() if line]})
    return commits


def stash_records(log: str, repo: str, since: float, until: float) -> List[Dict[str, Any]]:
    """Stash pushes from the stash reflog, and the file's state: its mtime, the stashes it
    lists now (their commits), and whether the file was written after its newest line.

    A pop or drop rewrites the file without a line of its own; so does nothing else but a
    push, whose line git stamps early, in whole seconds: a push that takes over a second
    leaves the same gap. Which it was is told by a stored snapshot's stash list (the timeline
    compares), never guessed from the time here."""
    if not os.path.exists(log):
        return deleted_stash_log(log, repo, since, until)
    entries = gitparse.parse_reflog(tail_lines(log, REFLOG_LINES)[0], ref="stash")
    records = [dict(entry, repo=repo, ref="stash") for entry in entries
               if since <= entry["time"] <= until]
    mtime = os.stat(log).st_mtime
    newest = max((entry["time"] for entry in entries), default=0)
    if since <= mtime <= until:
        records.append({"repo": repo, "ref": "stash", "time": mtime, "state": True,
                        "rewritten": mtime > newest + 1, "file": log, "left": len(entries),
                        "shas": [entry["new"] for entry in entries]})
    return records


def deleted_stash_log(log: str, repo: str, since: float, until: float) -> List[Dict[str, Any]]:
    """No stash reflog: none was ever pushed, or the last one was popped or dropped, which
    deletes the file; its folder's mtime is when an entry of it last came or went."""
    try:
        mtime = os.stat(os.path.dirname(log)).st_mtime
    except OSError:
        return []
    if not since <= mtime <= until:
        return []
    return [{"repo": repo, "ref": "stash", "time": mtime, "state": True, "rewritten": False,
             "deleted": True, "file": log, "left": 0, "shas": []}]


# ---- python ---------------------------------------------------------------------------------

def read_python(since: float, until: float, others: Optional[List[str]] = None) -> Source:
    """The agent's interpreter's packages; and those of `others` (found running, or the
    store's), each read from the folders its path leads to (it is not run), once a folder.
    `held`: each folder's distributions now, by name (PEP 503), what a package a snapshot
    recorded and no folder holds any more is told by (an uninstall leaves no record)."""
    import sys

    held: Dict[str, List[str]] = {}
    read: Dict[str, str] = {}   # a folder's real path -> the name it was read by
    records = []
    for interpreter, folders in [(None, site_directories())] + \
            [(other, site_dirs_of(other)) for other in others or []]:
        unread = []
        for folder in folders:
            real = os.path.realpath(folder)
            if real not in read:
                read[real] = folder
                unread.append(folder)
            # a venv's lib64 is its lib: one folder, read once, known by both names
            held.setdefault(folder, held.setdefault(read[real], []))
        records.extend(folder_records(unread, since, until, interpreter, held))
    found: Source = {"records": records, "error": None, "held": held,
                     "interpreter": sys.executable, "site_dirs": site_directories()}
    conda = timelinelogs.read_conda_history(sys.prefix, since, until)
    if conda is not None:
        found["conda"] = conda["records"]
        found["error"] = conda["error"]
    return found


def folder_records(folders: List[str], since: float, until: float,
                   interpreter: Optional[str], held: Dict[str, List[str]]
                   ) -> List[Dict[str, Any]]:
    records = []
    for folder in folders:
        names = held.setdefault(folder, [])   # a folder not there holds nothing now
        for meta in glob.glob(os.path.join(glob.escape(folder), "*.dist-info")) + \
                glob.glob(os.path.join(glob.escape(folder), "*.egg-info")):
            names.append(normalise_name(os.path.basename(meta).rsplit(".", 1)[0]
                                        .partition("-")[0]))
            record = dist_record(meta)
            if record is not None and since <= record["time"] <= until:
                if interpreter is not None:
                    record["interpreter"] = interpreter
                records.append(record)
    return records


def dist_record(meta: str) -> Optional[Dict[str, Any]]:
    """A distribution's install time: its RECORD's mtime (written last by pip), else the
    folder's; `name-version.dist-info` gives the name and version."""
    stem = os.path.basename(meta).rsplit(".", 1)[0]
    name, _, version = stem.partition("-")
    record_file = os.path.join(meta, "RECORD")
    try:
        when = os.stat(record_file if os.path.exists(record_file) else meta).st_mtime
    except OSError:
        return None
    installer = None
    try:
        with open(os.path.join(meta, "INSTALLER"), "r", encoding="utf-8", errors="replace") as f:
            installer = f.read(100).strip() or None
    except OSError:
        pass
    return {"time": when, "folder": meta, "name": name, "version": version.split("-")[0],
            "installer": installer, "has_record": os.path.exists(record_file)}


# ---- files ----------------------------------------------------------------------------------

def watched_files(root: str) -> List[str]:
    paths = []
    search_path = target_sys_path()
    for name in CUSTOMIZE_MODULES:
        found = describe_module(name, search_path)
        if found and found.get("path"):
            paths.append(str(found["path"]))
    for folder in site_directories():
        paths.extend(sorted(glob.glob(os.path.join(folder, "*.pth"))))
    paths.extend(timelinelogs.at_root(root, path) for path in CONFIG_FILES)
    paths.append(os.path.expanduser("~/.nccl.conf"))
    return paths


def read_files(root: str) -> Source:
    records = []
    for path in watched_files(root):
        try:
            status = os.stat(path)
        except OSError:
            continue
        backups = sorted(glob.glob(glob.escape(path) + BACKUP_INFIX + "*"))
        records.append({"time": status.st_mtime, "path": path, "size": status.st_size,
                        "sha256": sha256_file(path), "backups": backups})
    return {"records": records, "error": None}


# ---- processes and the host -----------------------------------------------------------------

def workers(patterns: List[str], pids: List[int], table: Optional[ProcTable]
            ) -> Tuple[Dict[str, Any], int]:
    """The --proc workers and the Python processes found running (discover.py), by pid."""
    found, omitted = find_processes(patterns, (DEFAULT_PREFIXES, DEFAULT_NAMES)) \
        if patterns else ({}, 0)
    if pids and table is not None:
        found.update(processes_by_pid(table, [pid for pid in pids if str(pid) not in found],
                                      (DEFAULT_PREFIXES, DEFAULT_NAMES)))
    return found, omitted


def read_procs(patterns: List[str], pids: Optional[List[int]] = None,
               table: Optional[ProcTable] = None) -> Optional[Source]:
    if not patterns and not pids:
        return None
    found, omitted = workers(patterns, pids or [], table)
    records = [dict(facts, pid=int(pid), time=facts.get("start_epoch"))
               for pid, facts in found.items() if facts.get("start_epoch") is not None]
    return {"records": records, "error": None, "omitted": omitted}


SYSTEM_UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system",
                    "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
                    "/lib/systemd/system")
USER_UNIT_DIRS = ("~/.config/systemd/user", "/etc/systemd/user", "/run/systemd/user",
                  "/usr/lib/systemd/user")


def read_units(root: str, patterns: List[str], pids: Optional[List[int]] = None,
               table: Optional[ProcTable] = None) -> Optional[Source]:
    """The unit files of the workers systemd runs: what a restart of the unit starts it with."""
    if not patterns and not pids:
        return None
    found, _ = workers(patterns, pids or [], table)
    records: List[Dict[str, Any]] = []
    for pid in sorted(found, key=int):
        try:
            with open(timelinelogs.at_root(root, "/proc/%s/cgroup" % pid), "rb") as handle:
                cgroup = handle.read(65536).decode("utf-8", "replace")
        except OSError:
            continue   # gone meanwhile, or another user's: no unit is known
        unit = cgroup_unit(cgroup)
        if unit is None:
            continue
        for path in unit_files(root, unit[0], unit[1]):
            try:
                status = os.stat(path)
            except OSError:   # a drop-in that is a dangling link
                continue
            records.append({"time": status.st_mtime, "path": path, "size": status.st_size,
                            "sha256": sha256_file(path), "unit": unit[0], "pid": int(pid)})
    return {"records": records, "error": None}


def cgroup_unit(text: str) -> Optional[Tuple[str, bool]]:
    """The service a /proc/PID/cgroup names (cgroups(7): `ID:controllers:path`, the unified
    `0::` line or v1's `name=systemd` one), and whether it is a user's (under user@UID)."""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[1] in ("", "name=systemd"):
            names = [name for name in parts[2].split("/") if name]
            services = [name for name in names if name.endswith(".service")
                        and not name.startswith("user@")]
            if services:
                return services[-1], any(name.startswith("user@") for name in names)
    return None


def unit_files(root: str, unit: str, user: bool) -> List[str]:
    """The unit's file (the first folder holding it wins, as systemd reads them) and every
    drop-in `UNIT.d/*.conf` of every folder."""
    folders = [os.path.expanduser(folder) if folder.startswith("~") else
               timelinelogs.at_root(root, folder)
               for folder in (USER_UNIT_DIRS if user else SYSTEM_UNIT_DIRS)]
    fragment = [os.path.join(folder, unit) for folder in folders
                if os.path.isfile(os.path.join(folder, unit))][:1]
    drop_ins = [path for folder in folders
                for path in sorted(glob.glob(os.path.join(glob.escape(folder), unit + ".d",
                                                          "*.conf")))]
    return fragment + drop_ins


def read_host(root: str) -> Source:
    return {"records": [], "error": None, "boot": timelinelogs.boot_time(root),
            "nvidia": timelinelogs.nvidia_module(root)}
