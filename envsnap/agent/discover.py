"""What `envsnap timeline` looks at when the user named nothing: the host's running Python.

One pass over /proc (env.ProcTable) finds the Python processes this user may read: each
one's interpreter (/proc/PID/exe; the command line's own path when it leads there, so a
venv's python is named as the venv's, not as the base it links to), and the git work trees
its cwd and its script lie in (a `.git` looked for upward: no git runs here). The
checkouts the store recorded for this host come in with the config; the folder the
timeline runs in (locally) is looked at first, the store's next, the newest processes' after.
Nothing is signalled, nothing is run; another user's process cannot be read (its exe and cwd
are closed to us), so it is only counted, and said; a checkout another user owns (root sees
their processes) is counted too, never read: its git config is theirs.

Bounded: at most MAX_CHECKOUTS checkouts, MAX_PYTHONS interpreters and MAX_WORKERS
processes; the rest are counted, never silently dropped.
"""
from __future__ import annotations

import glob
import os
import re

from .env import ProcTable, envsnap_processes, read_link

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

MAX_CHECKOUTS = 20
MAX_PYTHONS = 10
MAX_WORKERS = 32
PYTHON_NAME = re.compile(r"^python[0-9.]*$")
NO_SCRIPT_OPTIONS = ("-m", "-c")          # what follows is a module or a program, not a file
VALUED_OPTIONS = ("-X", "-W", "-Q")


def is_python(path: str) -> bool:
    return bool(PYTHON_NAME.match(os.path.basename(path)))


def script_of(argv: List[str]) -> Optional[str]:
    """The script file a python command line runs, as written, or None (-m, -c, none)."""
    words = iter(argv[1:])
    for word in words:
        if word in NO_SCRIPT_OPTIONS:
            return None
        if word in VALUED_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def interpreter_of(argv: List[str], exe: str) -> str:
    """The command line's interpreter where it is the same file as the exe (a venv's
    bin/python links to its base: the venv is what names its packages), else the exe."""
    first = argv[0] if argv else ""
    if os.path.isabs(first) and is_python(first) and os.path.realpath(first) == exe:
        return first
    return exe


def work_tree_of(path: str, seen: Dict[str, Optional[str]]) -> Optional[str]:
    """The nearest folder at or above `path` holding a `.git` (a work tree, or a linked one
    whose .git is a file), or None; `seen` keeps what each folder gave."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    walked = []
    found: Optional[str] = None
    while folder and folder not in seen:
        walked.append(folder)
        if os.path.exists(os.path.join(folder, ".git")):
            found = folder
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    else:
        found = seen.get(folder) if folder else None
    for each in walked:
        seen[each] = found
    return found


def discover(table: ProcTable, given_repos: List[str], given_pythons: List[str],
             here: Optional[str]) -> Dict[str, Any]:
    """The checkouts, interpreters and Python processes to read, and what was not read: the
    folder it runs in first (the user stands in it), then the store's, then the newest
    processes' (a worker restarted lately is the likeliest to matter)."""
    import sys

    own = envsnap_processes(table, None)
    seen: Dict[str, Optional[str]] = {}
    top_here = work_tree_of(here, seen) if here else None
    repos: List[str] = ([top_here] if top_here else []) + [
        os.path.abspath(os.path.expanduser(repo)) for repo in given_repos]
    pythons: List[str] = list(given_pythons)
    workers: List[int] = []
    unreadable = 0
    foreign: List[str] = []
    from_procs = set()
    for pid in sorted(table.argv, key=lambda pid: (-table.stat[pid][1], pid)):
        argv = table.argv[pid]
        if pid in own:
            continue
        exe = read_link("/proc/%d/exe" % pid)
        if exe is None:
            unreadable += 1   # another user's, or gone: its files are closed to us
            continue
        if not is_python(exe):
            continue
        workers.append(pid)
        pythons.append(interpreter_of(argv, exe))
        cwd = read_link("/proc/%d/cwd" % pid)
        script = script_of(argv)
        places = [cwd] + ([os.path.join(cwd or "/", script)] if script else [])
        for place in places:
            top = work_tree_of(place, seen) if place else None
            if top is not None and not is_mine(top):
                foreign.append(top)   # another user's config would steer git: not read
            elif top is not None:
                repos.append(top)
                from_procs.add(top)
    repos = unique(repos)
    pythons = [python for python in unique(pythons) if python != sys.executable]
    return {
        "repos": repos[:MAX_CHECKOUTS], "repos_left": max(0, len(repos) - MAX_CHECKOUTS),
        "repos_from_procs": len([repo for repo in repos[:MAX_CHECKOUTS] if repo in from_procs]),
        "pythons": pythons[:MAX_PYTHONS], "pythons_left": max(0, len(pythons) - MAX_PYTHONS),
        "pids": workers[:MAX_WORKERS], "pids_left": max(0, len(workers) - MAX_WORKERS),
        "unreadable": unreadable, "foreign_repos": len(set(foreign) - set(repos)),
    }


def is_mine(folder: str) -> bool:
    try:
        return os.stat(folder).st_uid == os.geteuid()
    except OSError:
        return False


def unique(items: List[str]) -> List[str]:
    found: List[str] = []
    for item in items:
        if item not in found:
            found.append(item)
    return found


def site_dirs_of(interpreter: str) -> List[str]:
    """An interpreter's site-packages folders found from its path alone (it is not run):
    PREFIX/lib*/pythonX.Y/{site,dist}-packages and Debian's PREFIX/lib/python3/dist-packages,
    where PREFIX holds bin/python (a venv's pyvenv.cfg folder, or /usr, /usr/local...)."""
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(interpreter)))
    found: List[str] = []
    for pattern in ("lib/python3*/site-packages", "lib64/python3*/site-packages",
                    "lib/python3*/dist-packages"):
        found.extend(sorted(glob.glob(os.path.join(glob.escape(prefix), pattern))))
    return [folder for folder in unique(found) if os.path.isdir(folder)]
