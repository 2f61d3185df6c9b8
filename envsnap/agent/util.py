"""Small helpers shared by the collectors: run a command, read a file, hash bytes.

subprocess and hashlib are imported where they are used: a capture of a plain host (no GPU,
no checkout) runs no command and hashes a few small files, and the two imports would be a
large part of the agent's start-up (hashlib loads and starts OpenSSL).
"""
from __future__ import annotations

import functools
import importlib
import io
import os

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Tuple, Union

DEFAULT_CMD_TIMEOUT = 10.0


class CollectorError(Exception):
    """A fact could not be read; the message is recorded in the snapshot."""


def run(argv: List[str], timeout: float = DEFAULT_CMD_TIMEOUT, cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        options: Optional[Dict[str, Any]] = None) -> Tuple[int, bytes, bytes]:
    """Run argv without a shell; return (exit code, stdout, stderr) as bytes. `options` are
    more of subprocess's (the user a command runs as: agent/gitsafe.py).

    A missing program is exit 127, like a shell would say; a hang raises CollectorError.
    """
    import subprocess

    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout, cwd=cwd, env=env,
                              **(options or {}))
    except FileNotFoundError:
        return 127, b"", ("%s: not found" % argv[0]).encode()
    except subprocess.TimeoutExpired:
        raise CollectorError("%s timed out after %.0fs" % (" ".join(argv), timeout)) from None
    return proc.returncode, proc.stdout, proc.stderr


def lone_thread() -> bool:
    """No other Python thread runs here, so a fork of this process may run Python code: a
    fork taken while another thread holds a lock (the import lock, a logger's) inherits that
    lock held, by nobody, forever."""
    import threading

    return threading.active_count() == 1


def read_until(fds: List[int], deadline: float) -> Dict[int, bytes]:
    """{fd: all it gave} for each pipe that reached end of file by the monotonic deadline."""
    import select
    import time

    chunks: Dict[int, List[bytes]] = {fd: [] for fd in fds}
    done: Dict[int, bytes] = {}
    while len(done) < len(fds):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd for fd in fds if fd not in done], [], [], left)
        for fd in ready:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                chunks[fd].append(chunk)
            else:
                done[fd] = b"".join(chunks[fd])
    return done


def exit_code(status: int) -> int:
    """A waitpid status as subprocess says it: the exit code, or minus the killing signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def run_python(what: str, source: str, args: List[str],
               timeout: float = DEFAULT_CMD_TIMEOUT) -> Tuple[int, bytes, bytes]:
    """run([python, "-I", "-S", "-c", source] + args): a short probe in a process of its own
    (a library that crashes it takes the probe, not the facts). Where no other thread runs
    here (a collector the runner forked), that process is a fork of this one, whose start
    costs a fraction of an interpreter's (an H200 host's venv: 8 ms against 35-40 ms); else a
    fresh python. A hang raises CollectorError naming `what`."""
    import sys

    if hasattr(os, "fork") and lone_thread():
        return run_forked(what, source, args, timeout)
    return run([sys.executable, "-I", "-S", "-c", source] + list(args), timeout=timeout)


def run_forked(what: str, source: str, args: List[str],
               timeout: float = DEFAULT_CMD_TIMEOUT) -> Tuple[int, bytes, bytes]:
    """run_python's fork (only where lone_thread()): the source runs with sys.argv
    ["-c"] + args, stdin at end of file, and exits as python would (sys.exit's code or
    message, an uncaught exception's line and 1); a signal that ends it is its exit code
    negated, as run() says it."""
    import signal
    import time

    deadline = time.monotonic() + timeout
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (out_read, out_write, err_read, err_write):
            os.close(fd)
        raise
    if pid == 0:   # the fork: never returns
        run_source(what, source, args, out_write, err_write)
    os.close(out_write)
    os.close(err_write)
    read: Dict[int, bytes] = {}
    try:
        read = read_until([out_read, err_read], deadline)
    finally:
        os.close(out_read)
        os.close(err_read)
        if len(read) < 2:   # a pipe still open at the deadline (it hangs), or interrupted
            os.kill(pid, signal.SIGKILL)
        status = os.waitpid(pid, 0)[1]
    if len(read) < 2:
        raise CollectorError("%s timed out after %.0fs" % (what, timeout))
    return exit_code(status), read[out_read], read[err_read]


def run_source(what: str, source: str, args: List[str], out: int, err: int) -> None:
    """The fork's side of run_forked; never returns (os._exit: the parent's atexit handlers,
    buffers and finally blocks are not the fork's to run)."""
    import sys

    code = 1
    try:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.closerange(3, 1 << 16)   # the parent's pipes are not the probe's to hold open
        # the streams of fds 1 and 2, whatever this process had made of sys.stdout (a
        # test's capture, Ansible's module output)
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)
        sys.argv = ["-c"] + list(args)
        exec(compile(source, "<%s>" % what, "exec"), {"__name__": "__main__"})
        code = 0
    except SystemExit as exc:   # as python exits: None is 0, a message is printed and 1
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            sys.stderr.write("%s\n" % (exc.code,))
    except BaseException as exc:
        sys.stderr.write("%s: %s\n" % (type(exc).__name__, exc))
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def run_text(argv: List[str], timeout: float = DEFAULT_CMD_TIMEOUT,
             cwd: Optional[str] = None) -> Optional[str]:
    """stdout of a command as text, or None when it fails or is missing."""
    code, out, _ = run(argv, timeout=timeout, cwd=cwd)
    if code != 0:
        return None
    return escaped(out)


def read_text(path: str, limit: int = 1 << 20) -> Optional[str]:
    """A file's text (at most `limit` bytes), or None when it is absent or unreadable."""
    try:
        with open(path, "rb") as handle:
            return escaped(handle.read(limit))
    except OSError:
        return None


GZIP_MAGIC = b"\x1f\x8b"


def open_regular(path: str) -> io.BufferedReader:
    """A regular file opened to read; a FIFO, a device or a folder is refused (OSError)
    before it is read: opened without blocking, so a FIFO nobody writes to cannot hang it."""
    import errno
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file")
    return os.fdopen(fd, "rb")


def read_unpacked(handle: io.BufferedReader, limit: int) -> bytes:
    """What an open file holds, unpacked where it is gzip (told by its first bytes, peeked at,
    so a pipe is read too), at most `limit + 1` bytes: one more than `limit` says there was
    more. Unpacked as a stream that stops there, so a few MB that unpack to gigabytes cost
    `limit` bytes of memory and the time to unpack those.
    OSError, EOFError or zlib.error when the file or its gzip stream is unreadable."""
    import gzip  # on use: a capture reads no packed file

    if handle.peek(2)[:2] == GZIP_MAGIC:
        with gzip.GzipFile(fileobj=handle, mode="rb") as unpacked:
            return unpacked.read(limit + 1)
    return handle.read(limit + 1)


def read_first_line(path: str) -> Optional[str]:
    text = read_text(path, limit=4096)
    return text.strip().splitlines()[0] if text and text.strip() else None


def sha256_bytes(data: bytes) -> str:
    """The sha256 of a few small bytes (a .pth file, a sitecustomize.py, a secret's marker)."""
    return str(small_sha256()(data).hexdigest())


@functools.lru_cache(maxsize=1)
def small_sha256() -> Any:
    """The interpreter's own sha256 (_sha256; _sha2 from 3.12), the same digest as hashlib's
    without OpenSSL's start, which costs more than hashing all a capture's small files;
    hashlib's where the build has none (hashlib's is the fast one for large files: git)."""
    for name in ("_sha2", "_sha256"):
        try:
            return importlib.import_module(name).sha256
        except ImportError:
            continue
    import hashlib

    return hashlib.sha256


def sha256_file(path: str) -> Optional[str]:
    import hashlib  # the fast one: a file can be large (an untracked checkpoint in a repo)

    try:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


def listed(folder: str, accept: Callable[[str], bool]) -> List[str]:
    """The paths of `folder`'s entries whose name `accept` takes, in the folder's own order:
    glob.glob(folder + "/pattern") for a literal folder and a pattern that is no hidden name
    (hidden names are left out, as glob leaves them); [] where it cannot be listed. Without
    glob and fnmatch: their import and a regex per pattern cost every capture ~1 ms."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, name) for name in names
            if not name.startswith(".") and accept(name)]


def which(program: str) -> Optional[str]:
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(folder, program)
        if folder and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def escaped(raw: Union[bytes, str]) -> str:
    """The host's bytes as text, the one way every channel takes: env names and values (of
    the shell and of workers), paths and file names, argv, commit subjects, the output of
    a command or a benchmark.

    Valid UTF-8 stays as it is; each byte that is not becomes the four characters \\xNN
    (Python's "backslashreplace"): b"IN\\xffFO" -> "IN\\\\xffFO". A str is what Python
    made of OS bytes (os.environ, os.readlink, sys.argv: PEP 383), its lone surrogates the
    bytes it could not decode, so a variable of this shell reads the same as the same bytes
    in /proc/PID/environ.

    Why this escape: it is ASCII, so JSON, YAML, a terminal and markdown carry it unchanged
    and a diff shows which byte it was. U+FFFD ("replace") loses the byte and makes two
    names equal; lone surrogates ("surrogateescape") are no UTF-8 at all, so the snapshot
    could not be written (a capture failed with exit 3, a bench with exit 70).

    Stable: the same bytes give the same text on every path (local, SSH, bench, --serve)
    and in every run, and escaping escaped text changes nothing, so equal bytes diff as
    equal. It round-trips: turning each \\xNN (NN 80 to ff) back into its byte gives the
    bytes again, unless they held such a four-character sequence as text already."""
    if isinstance(raw, str):
        if raw.isascii():
            return raw   # the usual case, and O(1) for a str
        try:
            raw.encode("utf-8")
            return raw
        except UnicodeEncodeError:
            raw = os_bytes(raw)
    return raw.decode("utf-8", "backslashreplace")


def os_bytes(text: str) -> bytes:
    """The bytes a str of OS data was decoded from: its lone surrogates are the bytes that
    were no UTF-8 (PEP 383)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:   # a surrogate no byte made (a JSON "\\ud800"): its UTF-8
        return text.encode("utf-8", "surrogatepass")


def escaped_document(value: Any) -> Any:
    """escaped() on every string of what the agent returns, mapping keys too: the pass
    before redaction, so no channel holds an undecodable byte another one escapes."""
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, dict):
        return {escaped(k) if isinstance(k, str) else k: escaped_document(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escaped_document(item) for item in value]
    return value
