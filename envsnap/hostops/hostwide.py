"""The host-wide gate: the one decision every writer of a python startup file passes.

A startup file (a `.pth` of site-packages, sitecustomize.py, usercustomize.py) runs in every
start of the pythons that read its folder. Inside a python's own venv that is that python
alone; anywhere else (the system python's site-packages, Debian's
/usr/lib/python3.X/sitecustomize.py) it is every python3.X of the host, other users' included.
Such a file is written only when the user said so: `--host-wide` (restore, explain), or
`host_wide: true` (a playbook's env_file and sitecustomize tasks). Restore's sitecustomize
(hostops/site.py), explain's `.pth` and sitecustomize switching (explain/apply.py) and the
env_file task all ask `startup_gate`; each says in its own words what works instead.
"""
from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass

FLAG = "--host-wide"


class HostWideRefused(Exception):
    """A startup file every python of the host loads is not written: nobody said host-wide."""


def host_wide_words(version: str) -> str:
    """What a plan and a refusal say about such a file."""
    return f"host-wide: loaded by every python{version} on this host"


def startup_gate(own: bool, host_wide: bool, version: str,
                 refusal: Callable[[str], str], flag: str = FLAG) -> str:
    """'' for a python's own startup file; for one every python of the host loads, the note
    said after its path when `host_wide` was given, else HostWideRefused with the line
    `refusal` makes from the host-wide words."""
    if own:
        return ""
    words = host_wide_words(version)
    if host_wide:
        return f" ({words}, as {flag} asked)"
    raise HostWideRefused(refusal(words))


@dataclass(frozen=True)
class StartupFile:
    """A startup file a command would write, and whether its python alone loads it."""

    path: str
    own: bool          # inside the python's own venv (its own site-packages, no link out)
    version: str       # the python's X.Y, for the words


def startup_file(path: str, own_dirs: Sequence[str], version: str) -> StartupFile:
    """A `.pth` or customize file at `path`: its python's own only in one of `own_dirs`."""
    folder = posixpath.dirname(posixpath.normpath(path))
    return StartupFile(path, folder in {posixpath.normpath(own) for own in own_dirs}, version)


def pth_refusal(path: str) -> Callable[[str], str]:
    """The line that refuses switching a `.pth` outside the python's venv."""
    return lambda words: (f"{path} is not in this python's venv ({words}): its startup lines "
                          f"are not switched: {FLAG} switches them (put back at the end)")
