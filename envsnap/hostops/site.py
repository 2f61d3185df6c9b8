"""sitecustomize.py written back where the host's python reads it, through the write policy.

Restore's sitecustomize task and explain's states both write it here, one way. The path a
snapshot records is compared, never trusted: the host's python (the one this host runs
envsnap with) is asked for its site-packages folders, which of them are its own (inside its
venv, no link out of it), and the sitecustomize it loads now. Only its own folders are
written: the recorded path when it is `<own folder>/sitecustomize.py`, else (a colleague's
venv) this python's own file. A sitecustomize outside them (Debian's
/usr/lib/python3.X/sitecustomize.py, a link into /etc, which every python3.X of the host
loads, and which shadows a venv's own) is written only as `host_wide` (--host-wide) asks, at
its real path; else one line says why and what works instead.
The write goes through the write policy (treefile.py: no symlink followed), and what it
replaces, or that nothing was there, is saved in `backup` so the rollback undoes it.
"""
from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from envsnap.hostops import treefile
from envsnap.hostops.files import FileState
from envsnap.hostops.hostwide import HostWideRefused, startup_gate
from envsnap.hostops.shell import Shell

NAME = "sitecustomize.py"


class SiteRefused(Exception):
    """sitecustomize is not written (or put back) here; the message says why."""


# What works where the python's own sitecustomize.py would never run (said in a refusal).
WAYS = ("ways that work: a .pth startup line in the venv's site-packages, usercustomize "
        "where the user site is on, or the server's env through --serve")


def linked(path: str, real: str | None) -> str:
    return f"{path} (-> {real})" if real and real != path else path


def destination(site: treefile.SitePython, recorded: str,
                host_wide: bool = False) -> tuple[str, str]:
    """(the folder to write sitecustomize.py into, a note said after its path); SiteRefused
    with one line and the next step where it is not written.

    Only this python's own folders (a venv's site-packages, no link out) are written, unless
    `host_wide`: then a sitecustomize every python of the host loads, at its real path."""
    loaded = site.sitecustomize
    if posixpath.basename(posixpath.normpath(recorded or "/")) != NAME:
        found = ", ".join(site.site_dirs) or "none found"
        raise SiteRefused(f"the snapshot records sitecustomize at {recorded}, which is not in "
                          f"this python's site-packages ({found}): not written; restore it "
                          "by hand")
    if loaded and not site.sitecustomize_own and (site.shadows_own or not site.own_dirs):
        # Debian's stdlib one: it comes before the venv's site-packages, and shadows its file
        shown = linked(loaded, site.sitecustomize_real)
        if own_file(site, recorded):
            def refusal(words: str) -> str:
                return (f"the venv's own {recorded} would be shadowed by {shown}: it would "
                        f"never run; not written: {WAYS}; or --host-wide writes {shown} "
                        f"({words})")
        else:
            def refusal(words: str) -> str:
                return (f"sitecustomize: this python loads {shown} ({words}): not written: "
                        f"--host-wide writes it; or {WAYS}")
        note = gated(site, host_wide, refusal)
        return posixpath.dirname(site.sitecustomize_real or loaded), note
    own = {posixpath.join(folder, NAME): folder for folder in site.own_dirs}
    wanted = posixpath.normpath(recorded) if recorded else ""
    if wanted in own:
        return own[wanted], ""
    if site.own_dirs:
        # another python's folders (a colleague's venv): this python's own file instead
        folder = posixpath.dirname(loaded) if loaded and site.sitecustomize_own \
            else site.own_dirs[0]
        return folder, (f" (the snapshot recorded {recorded}; this python loads "
                        f"{posixpath.join(folder, NAME)})")
    if site.site_dirs:
        path = posixpath.join(site.site_dirs[0], NAME)
        return site.site_dirs[0], gated(
            site, host_wide, lambda words: f"sitecustomize: {path} is not in a venv ({words}): "
            "not written: --host-wide writes it; or use a venv's python (--python)")
    raise SiteRefused("sitecustomize: this python reports no site-packages folder: not "
                      "written; restore it by hand")


def gated(site: treefile.SitePython, host_wide: bool, refusal: Callable[[str], str]) -> str:
    """The host-wide gate (hostwide.py) for a sitecustomize outside the python's venv."""
    try:
        return startup_gate(False, host_wide, site.version, refusal)
    except HostWideRefused as exc:
        raise SiteRefused(str(exc)) from None


def own_file(site: treefile.SitePython, recorded: str) -> bool:
    return posixpath.dirname(posixpath.normpath(recorded or "/")) in site.own_dirs


def folders(site: treefile.SitePython) -> list[str]:
    """Every folder `destination` may write into (a host-wide one only as --host-wide
    asked: a rollback puts back only what a restore saved there)."""
    found = list(site.site_dirs)
    loaded = site.sitecustomize_real or site.sitecustomize
    if loaded and posixpath.dirname(loaded) not in found:
        found.append(posixpath.dirname(loaded))
    return found


@dataclass(frozen=True)
class SiteWrite:
    """Where sitecustomize goes and what it held: `before` None when it is already as wanted."""

    path: str
    note: str                   # said after the path: the python's own file was chosen
    before: FileState | None


def write(shell: Shell, data: bytes, recorded: str, backup: str | None,
          dry: bool = False, host_wide: bool = False) -> SiteWrite:
    """`data` written as this python's sitecustomize (`dry`: only where and what it replaces);
    SiteRefused when there is no place for it or the write policy refuses it."""
    found = treefile.site_python(shell)
    if found.sitecustomize and posixpath.normpath(recorded or "/") == found.sitecustomize:
        try:   # the file loaded now is the recorded one, as wanted: nothing to write, anywhere
            now = treefile.read(shell, posixpath.dirname(found.sitecustomize), NAME,
                                follow_last=True)
        except treefile.TreeRefused:
            now = None
        if now is not None and now.exists and now.data == data:
            return SiteWrite(found.sitecustomize, "", None)
    folder, note = destination(found, recorded, host_wide)
    path = posixpath.join(folder, NAME)
    try:
        current = treefile.read(shell, folder, NAME, follow_last=True)
        if current.exists and current.data == data:
            return SiteWrite(path, note, None)
        before = treefile.read(shell, folder, NAME)    # refused if it must not be written
        if not dry:
            treefile.write(shell, folder, NAME, data, backup, record_absent=True)
    except treefile.TreeRefused as exc:
        raise SiteRefused(f"sitecustomize refused: {exc}") from None
    return SiteWrite(path, note, before)


def put_back(shell: Shell, source: str, backup: str | None,
             dry: bool = False) -> tuple[list[str], list[str]]:
    """What an earlier write saved in `source` put back: (files written back, files removed
    that it had made); `dry`: which would be."""
    restored, removed = [], []
    try:
        for folder in folders(treefile.site_python(shell)):
            done = treefile.put_back(shell, folder, source, backup, dry)
            restored += [posixpath.join(folder, name) for name in done.restored]
            removed += [posixpath.join(folder, name) for name in done.removed]
    except treefile.TreeRefused as exc:
        raise SiteRefused(f"sitecustomize: cannot put back: {exc}") from None
    return restored, removed
