"""sitecustomize.py written back where the host's python reads it, through the write policy.

Restore's sitecustomize task and explain's states both write it here, one way. The path a
snapshot records is compared, never trusted: the host's python (the one this host runs
envsnap with) is asked for its own site-packages folders and the sitecustomize it loads
now. The recorded path is written when it is `<one of those folders>/sitecustomize.py` or
the one loaded now; else (another python's sitecustomize.py, a colleague's venv) the one
loaded now, when there is one; else (`~/.bashrc`, say) nothing, with one line saying why.
The write goes through the write policy (treefile.py: no symlink followed), and what it
replaces, or that nothing was there, is saved in `backup` so the rollback undoes it.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass

from envsnap.hostops import treefile
from envsnap.hostops.files import FileState
from envsnap.hostops.shell import Shell

NAME = "sitecustomize.py"


class SiteRefused(Exception):
    """sitecustomize is not written (or put back) here; the message says why."""


def destination(site: treefile.SitePython, recorded: str) -> tuple[str | None, str]:
    """(the site folder to write into, a note); None and why when there is none."""
    own = {posixpath.join(folder, NAME): folder for folder in site.site_dirs}
    if site.sitecustomize and posixpath.basename(site.sitecustomize) == NAME:
        # the one this python loads now, wherever it reports it (Debian's is in the stdlib)
        own[site.sitecustomize] = posixpath.dirname(site.sitecustomize)
    wanted = posixpath.normpath(recorded) if recorded else ""
    if wanted in own:
        return own[wanted], ""
    if posixpath.basename(wanted) == NAME and site.sitecustomize and site.sitecustomize in own:
        # another python's folders (a colleague's venv): this python's own file instead
        return own[site.sitecustomize], (f" (the snapshot recorded {recorded}; this python "
                                         f"loads {site.sitecustomize})")
    return None, (f"the snapshot records sitecustomize at {recorded}, which is not in this "
                  f"python's site-packages ({', '.join(site.site_dirs) or 'none found'}): "
                  "not written; restore it by hand")


def folders(site: treefile.SitePython) -> list[str]:
    """Every folder `destination` may write into."""
    found = list(site.site_dirs)
    if site.sitecustomize and posixpath.dirname(site.sitecustomize) not in found:
        found.append(posixpath.dirname(site.sitecustomize))
    return found


@dataclass(frozen=True)
class SiteWrite:
    """Where sitecustomize goes and what it held: `before` None when it is already as wanted."""

    path: str
    note: str                   # said after the path: the python's own file was chosen
    before: FileState | None


def write(shell: Shell, data: bytes, recorded: str, backup: str | None,
          dry: bool = False) -> SiteWrite:
    """`data` written as this python's sitecustomize (`dry`: only where and what it replaces);
    SiteRefused when there is no place for it or the write policy refuses it."""
    folder, note = destination(treefile.site_python(shell), recorded)
    if folder is None:
        raise SiteRefused(note)
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
