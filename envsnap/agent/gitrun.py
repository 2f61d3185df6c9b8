"""Running git for the collector: shared flags and environment, timeouts, capped output."""
from __future__ import annotations

import os
import threading
from typing import IO, TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Tuple

from .gitparse import PatchFiles
from .util import CollectorError, run

if TYPE_CHECKING:
    import subprocess  # imported where a command runs: a capture of no repo runs none

# Reads must not depend on the user's taste (quoting, prefixes, signatures, colours), and a
# checkout owned by another user (the usual root vs. ml-user split) must still be read.
CONFIG_FLAGS = ["-c", "safe.directory=*", "-c", "core.quotepath=off", "-c", "color.ui=never",
                "-c", "diff.relative=false", "-c", "log.showSignature=false"]
# The agent's own environment must not redirect git to another repository.
REPO_LOCATING_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
                     "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE")
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
    """The git executable with the flags, environment and timeout that every read shares."""

    def __init__(self, exe: str, timeout: float) -> None:
        self.exe = exe
        self.timeout = timeout
        self.env = {k: v for k, v in os.environ.items() if k not in REPO_LOCATING_ENV}
        # GIT_OPTIONAL_LOCKS=0 is --no-optional-locks, but older gits ignore it, not fail;
        # GIT_NO_LAZY_FETCH keeps a partial clone from fetching blobs while we only look.
        self.env.update({"LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0",
                         "GIT_NO_LAZY_FETCH": "1"})

    def argv(self, cwd: str, args: List[str]) -> List[str]:
        return [self.exe, "-C", cwd] + CONFIG_FLAGS + args

    def run(self, cwd: str, args: List[str]) -> Tuple[int, bytes, bytes]:
        try:
            return run(self.argv(cwd, args), timeout=self.timeout, env=self.env)
        except CollectorError:  # util's message spells out every -c flag: say it shorter
            raise CollectorError(timed_out(args, self.timeout)) from None

    def stream(self, cwd: str, args: List[str], cap: int, patch: bool = False) -> Stream:
        """stdout kept up to `cap`; with patch=True, each file's part is measured too."""
        stream = run_capped(self.argv(cwd, args), cap, self.timeout, self.env, patch)
        if stream is None:
            raise CollectorError(timed_out(args, self.timeout))
        return stream


def timed_out(args: List[str], timeout: float) -> str:
    return "git %s timed out after %gs" % (args[0] if args else "", timeout)


def run_capped(argv: List[str], cap: int, timeout: float, env: Dict[str, str],
               patch: bool = False) -> Optional[Stream]:
    """Like util.run, but a 5 GB staged file costs a hash, not 5 GB of memory; None: timed out."""
    import subprocess
    import tempfile  # on use: with shutil and bz2, a few ms of the agent's start-up

    expired = threading.Event()
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=errors, env=env)
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
