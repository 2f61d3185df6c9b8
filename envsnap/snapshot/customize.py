"""The customize story of a snapshot in words: which sitecustomize/usercustomize runs, which
never does and why, as `show`, the report and `diff` say it.

Python imports the first `sitecustomize` on sys.path. On stock Debian and Ubuntu the standard
library's folder holds one (/usr/lib/python3.X/sitecustomize.py, a link into /etc), and it
comes before a venv's site-packages: the venv's own file is dead. That file is named by where
it lives ("venv sitecustomize.py"), the winner by its path and where its link leads:

    venv sitecustomize.py is shadowed by /usr/lib/python3.11/sitecustomize.py
    (-> /etc/python3.11/sitecustomize.py): it never runs
"""
from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from envsnap.snapshot import document as snap

if TYPE_CHECKING:
    from envsnap.snapshot.records import ShadowedCustomize, Snapshot

# What each startup option or variable of a worker's command line does to its customize files.
FLAG_EFFECTS = {
    "-S": "no site: neither sitecustomize nor usercustomize nor a .pth line runs",
    "-s": "no user site: usercustomize never runs",
    "-I": "isolated: no user site (usercustomize never runs), PYTHON* variables ignored",
    "-P": "safe path: the script's folder is not on sys.path",
    "PYTHONNOUSERSITE": "no user site: usercustomize never runs",
    "PYTHONSAFEPATH": "safe path: the script's folder is not on sys.path",
}


def inside(path: str, folder: str | None) -> bool:
    return bool(folder) and posixpath.normpath(path).startswith(
        posixpath.normpath(str(folder)).rstrip("/") + "/")


def linked(path: str | None, real: str | None) -> str:
    """`path`, and where it leads when it is a link: "/usr/lib/x.py (-> /etc/x.py)"."""
    return f"{path} (-> {real})" if real and path and real != path else str(path)


def place(document: Snapshot, path: str) -> str:
    """A customize file named by where it lives: "venv sitecustomize.py", "user site
    usercustomize.py", else its path."""
    interpreter = snap.python_env(document).get("interpreter", {})
    name = posixpath.basename(path)
    if interpreter.get("venv") and inside(path, interpreter.get("prefix")):
        return f"venv {name}"
    if inside(path, snap.user_site(document).get("path")):
        return f"user site {name}"
    return path


def shadowed_sentence(document: Snapshot, path: str, record: ShadowedCustomize) -> str:
    return (f"{place(document, path)} is shadowed by "
            f"{linked(record.get('shadowed_by'), record.get('shadowed_by_real'))}: "
            "it never runs")


def story(document: Snapshot) -> list[str]:
    """What runs and what does not, one sentence each: the shadowed files, a usercustomize
    the user site being off keeps from running, the workers' startup options."""
    said = [shadowed_sentence(document, path, record)
            for path, record in sorted(snap.customize_shadowed(document).items())]
    user = snap.python_env(document).get("customize", {}).get("usercustomize")
    if snap.user_site(document).get("enabled") is False and user and user.get("path"):
        said.append(f"{place(document, str(user['path']))} never runs: the user site is off")
    for pid, process in sorted(snap.env(document).get("processes", {}).items()):
        for flag in snap.python_startup_flags(process):
            said.append(f"worker {pid} runs with {flag}: {FLAG_EFFECTS[flag.split('=')[0]]}")
    return said
