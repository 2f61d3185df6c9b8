"""Running git for the collector: timeouts and capped output. Its command line, environment
and user come from gitsafe, which says why (nothing the checkout configured runs)."""
from __future__ import annotations

import os
import threading
from typing import IO, TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Tuple

from . import gitsafe
from .gitparse import PatchFiles
from .util import CollectorError, run

if TYPE_CHECKING:
    import subprocess  # imported where a command runs: a capture of no repo runs none

READ_BLOCK = 1 << 16


class Stream(NamedTuple):
    """A command's stdout hashed whole but kept only up to a cap."""
    code: int
    head: bytes
    size: int
    sha256: str
    stderr: bytes
    files: Optional[Dict[str, Any]] = None   # a patch's files: PatchFiles.finish()


class Git:
    """The git executable with the flags, environment, user and timeout that every read shares.

    `for_checkout` gives the one for a checkout (as its owner where envsnap is root), and
    `with_drivers` the one that also switches off the drivers its config names."""

    def __init__(self, exe: str, timeout: float, identity: Optional[gitsafe.Identity] = None,
                 drivers: Optional[List[str]] = None) -> None:
        self.exe = exe
        self.timeout = timeout
        self.identity = identity
        self.drivers = drivers or []
        self.env = gitsafe.read_env(dict(os.environ), identity)
        self.options = gitsafe.popen_options(identity)

    def for_checkout(self, path: str) -> "Git":
        return Git(self.exe, self.timeout, gitsafe.identity_of(path))

    def with_drivers(self, path: str, listing: Tuple[int, bytes, bytes]) -> "Git":
        """From `git config -z --get-regexp gitsafe.DRIVER_PATTERN` (exit 1: none set); a
        checkout whose config cannot be read is not read at all: CollectorError."""
        code, out, err = listing
        if code not in (0, 1):
            said = gitsafe.refusal(path, err)
            lines = err.decode("utf-8", "replace").strip().splitlines()
            owner = " (read as its owner, uid %d)" % self.identity.uid if self.identity else ""
            raise CollectorError(said or "git config failed%s: %s"
                                 % (owner, lines[0] if lines else "exit %d" % code))
        try:
            drivers = gitsafe.driver_flags(out)
        except gitsafe.Unsafe as exc:
            raise CollectorError(str(exc)) from None
        return Git(self.exe, self.timeout, self.identity, drivers)

    def argv(self, cwd: str, args: List[str]) -> List[str]:
        return gitsafe.read_argv(self.exe, cwd, args, self.drivers)

    def run(self, cwd: str, args: List[str]) -> Tuple[int, bytes, bytes]:
        try:
            return run(self.argv(cwd, args), timeout=self.timeout, env=self.env,
                       options=self.options)
        except CollectorError:  # util's message spells out every -c flag: say it shorter
            raise CollectorError(timed_out(args, self.timeout)) from None

    def stream(self, cwd: str, args: List[str], cap: int, patch: bool = False) -> Stream:
        """stdout kept up to `cap`; with patch=True, each file's part is measured too."""
        stream = run_capped(self.argv(cwd, args), cap, self.timeout, self.env, patch,
                            self.options)
        if stream is None:
            raise CollectorError(timed_out(args, self.timeout))
        return stream


def timed_out(args: List[str], timeout: float) -> str:
    return "git %s timed out after %gs" % (args[0] if args else "", timeout)


def run_capped(argv: List[str], cap: int, timeout: float, env: Dict[str, str],
               patch: bool = False,
               options: Optional[Dict[str, Any]] = None) -> Optional[Stream]:
    """Like util.run, but a 5 GB staged file costs a hash, not 5 GB of memory; None: timed out."""
    import subprocess
    import tempfile  # on use: with shutil and bz2, a few ms of the agent's start-up

    expired = threading.Event()
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=errors, env=env, **(options or {}))
        timer = threading.Timer(timeout, expire, (proc, expired))
        timer.start()
        try:
            sections = PatchFiles() if patch else None
            head, size, digest = drain(proc.stdout, cap, sections)  # type: ignore[arg-type]
            code = proc.wait()
        finally:
            timer.cancel()
            stop(proc)
        errors.seek(0)
        stderr = errors.read()
    if expired.is_set():
        return None
    return Stream(code, head, size, digest, stderr,
                  sections.finish() if sections is not None else None)


def expire(proc: "subprocess.Popen[bytes]", expired: threading.Event) -> None:
    expired.set()
    proc.kill()


def drain(stream: IO[bytes], cap: int,
          sections: Optional[PatchFiles] = None) -> Tuple[bytes, int, str]:
    import hashlib

    digest = hashlib.sha256()
    head = bytearray()
    size = 0
    for block in iter(lambda: stream.read(READ_BLOCK), b""):
        digest.update(block)
        if sections is not None:
            sections.feed(block)
        size += len(block)
        if len(head) < cap:
            head += block[:cap - len(head)]
    return bytes(head), size, digest.hexdigest()


def stop(proc: "subprocess.Popen[bytes]") -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
