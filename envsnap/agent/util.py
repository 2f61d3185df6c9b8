"""Small helpers shared by the collectors: run a command, read a file, hash bytes."""
from __future__ import annotations

import hashlib
import os
import subprocess
from typing import Dict, List, Optional, Tuple

DEFAULT_CMD_TIMEOUT = 10.0


class CollectorError(Exception):
    """A fact could not be read; the message is recorded in the snapshot."""


def run(argv: List[str], timeout: float = DEFAULT_CMD_TIMEOUT, cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None) -> Tuple[int, bytes, bytes]:
    """Run argv without a shell; return (exit code, stdout, stderr) as bytes.

    A missing program is exit 127, like a shell would say; a hang raises CollectorError.
    """
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout, cwd=cwd, env=env)
    except FileNotFoundError:
        return 127, b"", ("%s: not found" % argv[0]).encode()
    except subprocess.TimeoutExpired:
        raise CollectorError("%s timed out after %.0fs" % (" ".join(argv), timeout)) from None
    return proc.returncode, proc.stdout, proc.stderr


def run_text(argv: List[str], timeout: float = DEFAULT_CMD_TIMEOUT,
             cwd: Optional[str] = None) -> Optional[str]:
    """stdout of a command as text, or None when it fails or is missing."""
    code, out, _ = run(argv, timeout=timeout, cwd=cwd)
    if code != 0:
        return None
    return out.decode("utf-8", "replace")


def read_text(path: str, limit: int = 1 << 20) -> Optional[str]:
    """A file's text (at most `limit` bytes), or None when it is absent or unreadable."""
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def read_first_line(path: str) -> Optional[str]:
    text = read_text(path, limit=4096)
    return text.strip().splitlines()[0] if text and text.strip() else None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str) -> Optional[str]:
    try:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


def which(program: str) -> Optional[str]:
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(folder, program)
        if folder and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def decode_path(raw: bytes) -> str:
    """File names are bytes on Linux; keep undecodable ones readable and reversible."""
    return raw.decode("utf-8", "backslashreplace")
