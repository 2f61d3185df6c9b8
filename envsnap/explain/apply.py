"""A chosen set of differences in place: GOOD's state plus those differences from the host now.

Checkouts move through bisect's Tree (tree.py): the user's work is stashed on entry, HEAD and
branch remembered, and all of it put back on exit whatever happened (an error, Ctrl-C). The
patch in place at a state is GOOD's or the current one, applied with hostops.patch (as
restore's git task applies one) and taken back out before the next checkout. Env variables
change no file: they travel with the benchmark (BenchSpec.env) or the server's start
(ServeSpec.env). sitecustomize is written by hostops.site, as restore's sitecustomize task
writes it (its write policy; what was there saved in a backup folder on the first write),
and put back from that backup on exit. A .pth file gets GOOD's startup lines in place of
its own (its sys.path lines kept) through the same write policy (hostops.treefile), and is
put back byte for byte from its backup on exit. Package versions are pinned with
hostops.pip, as restore --pip pins them.
"""
from __future__ import annotations

import posixpath
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Callable

from envsnap.agent.python_env import startup_lines
from envsnap.bench.run import EnvChanges
from envsnap.bisect.tree import Tree
from envsnap.errors import HostError
from envsnap.explain.differences import Differences
from envsnap.hostops import site as sitecustomize
from envsnap.hostops import treefile
from envsnap.hostops.files import FileState
from envsnap.hostops.hostwide import (
    HostWideRefused,
    host_wide_words,
    pth_refusal,
    startup_file,
    startup_gate,
)
from envsnap.hostops.patch import Patch, apply, remove, upload
from envsnap.hostops.pip import pin_packages
from envsnap.hostops.shell import Shell
from envsnap.hostops.signals import sigint_deferred
from envsnap.text import plural


@dataclass(frozen=True)
class RepoState:
    path: str
    head: str
    patch: Patch | None


@dataclass(frozen=True)
class SiteState:
    path: str
    content: str | None      # None: no sitecustomize (an empty one stands for it)


@dataclass(frozen=True)
class PthState:
    path: str
    lines: tuple[str, ...] | None   # the startup lines wanted; None: the file as found


@dataclass(frozen=True)
class State:
    repos: tuple[RepoState, ...]
    benchmark_env: EnvChanges
    server_env: EnvChanges
    site: SiteState | None = None   # None: sitecustomize is not a difference
    packages: tuple[tuple[str, str], ...] = ()   # name, version wanted (with --pip)
    pth: tuple[PthState, ...] = ()   # the .pth files that are differences


def state_for(found: Differences, applied: frozenset[int]) -> State:
    """GOOD's state, with the differences at `applied` (indexes into found.items) taken from
    the host now. A commit range joined with its patch (run.join_inseparable) brings both."""
    taken = [item for index, item in enumerate(found.items) if index in applied]
    moved = {item.name for item in taken if item.kind == "commits"}
    patched = {item.name for item in taken if item.kind == "patch"} | \
        {item.name for item in taken if item.kind == "commits" and item.with_patch}
    repos = tuple(RepoState(ends.path,
                            ends.current_head if ends.path in moved else ends.good_head,
                            ends.current_patch if ends.path in patched else ends.good_patch)
                  for ends in found.repos)
    env: dict[str, list[tuple[str, str | None]]] = {"benchmark": [], "server": []}
    site, packages, pth = None, [], []
    for index, item in enumerate(found.items):
        if item.kind == "package":
            packages.append((item.name, str(item.current if index in applied else item.good)))
        if item.kind == "env":
            env[item.target].append((item.name, item.current if index in applied else item.good))
        if item.kind == "sitecustomize" and found.site is not None:
            site = SiteState(found.site.path, found.site.current if index in applied
                             else found.site.good)
        if item.kind == "pth":
            pth.append(PthState(item.name, None if index in applied
                                else found.pth[item.name].good))
    return State(repos, tuple(env["benchmark"]), tuple(env["server"]), site, tuple(packages),
                 tuple(pth))


class PipPins:
    """`with PipPins(shell, installed, note) as pins:` ... `pins.put(state)` ...: packages
    pinned to a state's versions with restore's pip pinning; on exit, each one changed is
    pinned back to the version found, whatever happened."""

    def __init__(self, shell: Shell, installed: dict[str, str],
                 note: Callable[[str], None]) -> None:
        self.shell, self.note = shell, note
        self.found = dict(installed)     # name -> version when explain started
        self.now = dict(installed)       # name -> version pinned last

    def __enter__(self) -> PipPins:
        return self

    def put(self, wanted: tuple[tuple[str, str], ...]) -> None:
        self.pin({name: version for name, version in wanted if self.now.get(name) != version})

    def pin(self, versions: dict[str, str]) -> None:
        if not versions:
            return
        with sigint_deferred():   # a pip killed half way leaves a package half installed
            for name in versions:
                self.now[name] = "?"   # until pip says it is done
            pin_packages(self.shell,
                         [f"{name}=={version}" for name, version in sorted(versions.items())])
            self.now.update(versions)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        back = {name: version for name, version in self.found.items()
                if self.now.get(name) != version}
        if not back:
            return
        try:
            self.pin(back)
        except HostError as exc:
            pins = " ".join(f"{name}=={version}" for name, version in sorted(back.items()))
            raise HostError(f"{exc}; pin them back by hand: {self.shell.host.python} -m pip "
                            f"install --no-deps {pins}") from error
        self.note(f"{self.shell.host.name}: {plural(len(back), 'package')} pinned back: "
                  + ", ".join(f"{name}=={version}" for name, version in sorted(back.items())))


class SiteFile:
    """`with SiteFile(shell, note) as site:` ... `site.put(state)` ...: sitecustomize switched
    between states; on exit, what was there before the first write is put back (or the file
    removed when there was none), whatever happened."""

    def __init__(self, shell: Shell, note: Callable[[str], None],
                 host_wide: bool = False) -> None:
        self.shell, self.note, self.host_wide = shell, note, host_wide
        self.backup = treefile.backup_dir(f"explain-{uuid.uuid4().hex[:12]}")
        self.written = False
        self.content: str | None = None

    def __enter__(self) -> SiteFile:
        return self

    def put(self, wanted: SiteState) -> None:
        if self.written and self.content == wanted.content:
            return
        with sigint_deferred():
            self.written = True   # a write that fails half way is put back too
            try:
                content = (wanted.content or "").encode("utf-8", "surrogateescape")
                sitecustomize.write(self.shell, content, wanted.path, self.backup,
                                    host_wide=self.host_wide)
            except sitecustomize.SiteRefused as exc:
                raise HostError(f"{self.shell.host.name}: {exc}") from None
            self.content = wanted.content

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if not self.written:
            return
        with sigint_deferred():
            try:
                sitecustomize.put_back(self.shell, self.backup, None)
            except sitecustomize.SiteRefused as exc:
                raise HostError(f"{self.shell.host.name}: sitecustomize could not be put back "
                                f"({exc}); what was there is kept in {self.backup}") from error
            treefile.drop_backup(self.shell, self.backup)
        self.note(f"{self.shell.host.name}: sitecustomize put back as it was")


def with_startup_lines(found: FileState, lines: tuple[str, ...]) -> bytes | None:
    """The file as found with its startup lines replaced by `lines` (after its sys.path
    lines: site.py adds those whatever the order); None when nothing would be left."""
    text = found.data.decode("utf-8", "surrogateescape") if found.exists else ""
    kept = [line for line in text.splitlines(keepends=True) if not startup_lines(line)]
    if kept and not kept[-1].endswith(("\n", "\r")):
        kept[-1] += "\n"
    result = "".join(kept + [f"{line}\n" for line in lines])
    return result.encode("utf-8", "surrogateescape") if result.strip() else None


class StartupFiles:
    """`with StartupFiles(shell, note) as pth:` ... `pth.put(state.pth)` ...: .pth files switched
    between GOOD's startup lines and the host's; on exit, each one written is put back from
    the backup taken before its first write, byte for byte and mode too (one that did not
    exist removed again), whatever happened."""

    def __init__(self, shell: Shell, note: Callable[[str], None],
                 host_wide: bool = False) -> None:
        self.shell, self.note, self.host_wide = shell, note, host_wide
        self.backup = treefile.backup_dir(f"explain-{uuid.uuid4().hex[:12]}")
        self.site: treefile.SitePython | None = None   # the host's python, asked once
        self.found: dict[str, FileState] = {}       # path -> as explain found it
        self.now: dict[str, bytes | None] = {}      # path -> what it holds (None: no file)
        self.written: set[str] = set()              # the paths written (or removed)

    def __enter__(self) -> StartupFiles:
        return self

    def gate(self, path: str) -> str:
        """The host-wide gate (hostops/hostwide.py) for one .pth: '' for the python's own,
        the host-wide words for one every python of the host loads, as --host-wide asked;
        HostWideRefused without it."""
        if self.site is None:
            self.site = treefile.site_python(self.shell)
        found = startup_file(path, self.site.own_dirs, self.site.version)
        startup_gate(found.own, self.host_wide, found.version, pth_refusal(path))
        return "" if found.own else host_wide_words(found.version)

    def put(self, files: tuple[PthState, ...]) -> None:
        for wanted in files:
            try:
                self.gate(wanted.path)
            except HostWideRefused as exc:
                raise HostError(f"{self.shell.host.name}: {exc}") from None
            folder, name = posixpath.split(wanted.path)
            if wanted.path not in self.found:
                found = self.read(folder, name)
                self.found[wanted.path] = found
                self.now[wanted.path] = found.data if found.exists else None
            found = self.found[wanted.path]
            data = (found.data if found.exists else None) if wanted.lines is None \
                else with_startup_lines(found, wanted.lines)
            if data == self.now[wanted.path]:
                continue
            with sigint_deferred():
                self.written.add(wanted.path)   # one failing half way is put back too
                try:
                    if data is None:
                        treefile.remove(self.shell, folder, name, self.backup)
                    else:
                        treefile.write(self.shell, folder, name, data, self.backup,
                                       record_absent=True)
                except treefile.TreeRefused as exc:
                    raise HostError(f"{self.shell.host.name}: {wanted.path} refused: {exc}") \
                        from None
                self.now[wanted.path] = data

    def read(self, folder: str, name: str) -> FileState:
        try:
            return treefile.read(self.shell, folder, name)
        except treefile.TreeRefused as exc:
            raise HostError(f"{self.shell.host.name}: {folder}/{name} refused: {exc}") from None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if not self.written:
            return
        with sigint_deferred():
            try:
                for folder in sorted({posixpath.dirname(path) for path in self.written}):
                    treefile.put_back(self.shell, folder, self.backup, None)
            except (HostError, treefile.TreeRefused) as exc:
                raise HostError(f"{self.shell.host.name}: .pth files could not be put back "
                                f"({exc}); what was there is kept in {self.backup}") from error
            treefile.drop_backup(self.shell, self.backup)
        self.note(f"{self.shell.host.name}: {plural(len(self.written), '.pth file')} put back as "
                  "found")


class StateTree(Tree):
    """A bisect Tree whose patch changes from state to state: GOOD's, the current one, none.
    Each patch is uploaded once; all are removed from the host on exit."""

    def __init__(self, shell: Shell, top: str, message: str, note: Callable[[str], None],
                 keep_untracked: bool = False) -> None:
        super().__init__(shell, top, None, message, note, keep_untracked, command="explain")
        self.uploaded: dict[str, str] = {}   # patch sha256 -> its temp file, quoted
        self.patch_at: str | None = None     # sha256 of the patch in place

    def put(self, head: str, patch: Patch | None) -> None:
        """Check `head` out with `patch` on top; GitFailure if it does not apply there."""
        wanted = patch.sha256 if patch is not None else None
        if self.at == head and self.patch_at == wanted:
            return
        with sigint_deferred():
            self.put_away()          # the patch in place comes out first
            self.patch_at = None
            self.move_to(head)
            self.at = head
            if patch is None:
                return
            if patch.sha256 not in self.uploaded:
                self.uploaded[patch.sha256] = upload(self.shell, patch)
            self.patch, self.quoted = patch, self.uploaded[patch.sha256]
            apply(self.shell, self.top, patch, self.quoted)   # checked first: all or nothing
            self.applied, self.patch_at = True, wanted

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        try:
            super().__exit__(kind, error, trace)   # removes the last patch's file
        finally:
            for quoted in self.uploaded.values():
                if quoted != self.quoted:
                    try:
                        remove(self.shell, quoted)
                    except HostError:
                        pass   # a temp file under ~/.cache/envsnap/tmp: not worth failing for
