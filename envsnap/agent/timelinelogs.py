"""The host's own records of change, for `envsnap timeline`: package logs, kernel messages, boot.

Each reader returns records with the time the host's tool wrote (`time`, epoch seconds) and
what it wrote, in fields: a package name and its architecture apart (the secret detector
reads `gir1.2-secret-1:amd64` as a credential), a command line masked (the runner masks every
string again on the way out); the controller (envsnap/timeline/) says what each means.
Logs are read from their end and reading stops at the first entry older than the window: a
dpkg.log of ten years costs what its last hour costs. Rotated logs (dpkg.log.1,
dpkg.log.2.gz, ...) are opened only while the newer one still reached into the window.

Times in dpkg.log, apt's history.log and conda's history are the host's local time: they are
turned into epoch seconds here, on the host, where that zone is known.

`root` (the timeline's `root` setting) is where / is for the files read here; tests point it
at a folder of recorded logs. The commands (journalctl, dmesg, rpm) run only when it is /.
"""
from __future__ import annotations

import os
import re
import time
import zlib
from typing import Any, Callable, Dict, Iterator, List, Optional

from .redact import redact_text
from .util import open_regular, read_text, read_unpacked, run

Record = Dict[str, Any]
DPKG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ")
APT_START = re.compile(r"^Start-Date: (\d{4}-\d\d-\d\d)\s+(\d\d:\d\d:\d\d)", re.MULTILINE)
# rsyslog's RFC 3339 stamps, and `dmesg --time-format iso` (a comma before the fraction)
ISO_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,](\d+))?"
                      r"(Z|[+-]\d\d:?\d\d)? ")
DMESG_TIME = re.compile(r"^\[\s*(\d+\.\d+)\] ")
UNIX_TIME = re.compile(r"^(\d+\.\d+) ")
# Kernel messages that say something about a GPU or its PCIe link; the rest is not kept.
KERNEL_WORDS = re.compile(r"NVRM|Xid|nvidia|AER|PCIe Bus Error|[Ll]ink (?:is )?(?:down|up)|"
                          r"[Ll]ink [Ss]peed|downgrad|fallen off the bus|GPU|pcieport|"
                          r"bandwidth", re.IGNORECASE)
MAX_RECORDS = 2000
MAX_BLOCK_LINES = 100000   # of one apt or conda history block; a real one has hundreds
BLOCK = 1 << 15
MAX_UNPACKED = 64 << 20     # of one rotated .gz log: what a paste may hold, too


def at_root(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/")) if root not in ("", "/") else path


def local_epoch(text: str, fmt: str = "%Y-%m-%d %H:%M:%S") -> Optional[float]:
    try:
        return time.mktime(time.strptime(text, fmt))
    except (ValueError, OverflowError):
        return None


# ---- reading from the end ---------------------------------------------------------------------

def lines_backwards(path: str, problems: Optional[List[str]] = None) -> Iterator[str]:
    """A file's lines, last first, read in blocks from its end. A .gz cannot be read
    backwards: it is unpacked into memory, at most MAX_UNPACKED bytes of it (a rotated log
    is small; a few MB can unpack to gigabytes), and a cut one is said in `problems`."""
    if path.endswith(".gz"):
        with open_regular(path) as handle:
            data = read_unpacked(handle, MAX_UNPACKED)
        if len(data) > MAX_UNPACKED:
            data = data[:data.rfind(b"\n", 0, MAX_UNPACKED) + 1]     # no half line at the cut
            if problems is not None:
                problems.append("%s: over %d MiB unpacked: only its first %d MiB read"
                                % (path, MAX_UNPACKED >> 20, MAX_UNPACKED >> 20))
        for line in reversed(data.splitlines()):
            yield line.decode("utf-8", "replace")
        return
    with open_regular(path) as handle:
        end = handle.seek(0, os.SEEK_END)
        rest = b""
        while end > 0:
            start = max(0, end - BLOCK)
            handle.seek(start)
            chunk = handle.read(end - start) + rest
            lines = chunk.split(b"\n")
            rest = lines.pop(0) if start > 0 else b""
            for line in reversed(lines):
                if line:
                    yield line.decode("utf-8", "replace")
            end = start
        if rest:
            yield rest.decode("utf-8", "replace")


def rotated(path: str) -> List[str]:
    """path, path.1, path.2.gz, ... as far as they exist, newest first."""
    found = [path] if os.path.exists(path) else []
    for number in range(1, 100):
        for name in ("%s.%d" % (path, number), "%s.%d.gz" % (path, number)):
            if os.path.exists(name):
                found.append(name)
                break
        else:
            break
    return found


def window_lines(path: str, since: float, until: float,
                 time_of: Callable[[str], Optional[float]],
                 problems: List[str]) -> Iterator[Record]:
    """Lines of `path` and its rotated copies inside [since, until], newest first; reading
    stops at the first dated line older than `since`. A copy that cannot be read is named in
    `problems`, and the older ones are still read."""
    for name in rotated(path):
        try:
            for line in lines_backwards(name, problems):
                when = time_of(line)
                if when is None:
                    continue
                if when < since:
                    return
                if when <= until:
                    yield {"time": when, "file": name, "line": line}
        except (OSError, EOFError, zlib.error) as exc:
            problems.append("%s: %s" % (name, getattr(exc, "strerror", None) or exc))


def capped(records: Iterator[Record]) -> List[Record]:
    out = []
    for record in records:
        out.append(record)
        if len(out) >= MAX_RECORDS:
            break
    return out


# ---- dpkg, apt, rpm, conda --------------------------------------------------------------------

def dpkg_time(line: str) -> Optional[float]:
    match = DPKG_TIME.match(line)
    return local_epoch(match.group(1)) if match else None


DPKG_ACTIONS = ("install", "upgrade", "remove", "purge")


def dpkg_fields(record: Record) -> Optional[Record]:
    """"2024-01-01 12:00:00 upgrade libnccl2:amd64 2.18.3-1 2.21.5-1" -> its fields; other
    lines (status, configure, trigproc) say the same change again and are left out. Package
    and architecture travel apart: a name like gir1.2-secret-1:amd64 reads as a secret."""
    fields = record["line"].split()
    if len(fields) != 6 or fields[2] not in DPKG_ACTIONS:
        return None
    package, _, arch = fields[3].partition(":")
    return {"time": record["time"], "file": record["file"], "action": fields[2],
            "package": package, "arch": arch or None,
            "old": None if fields[4] == "<none>" else fields[4],
            "new": None if fields[5] == "<none>" else fields[5]}


def read_dpkg(root: str, since: float, until: float) -> Dict[str, Any]:
    path = at_root(root, "/var/log/dpkg.log")
    if not rotated(path):
        return {"records": [], "error": None, "absent": path}
    problems: List[str] = []
    found = (dpkg_fields(record) for record in
             window_lines(path, since, until, dpkg_time, problems))
    records = capped(record for record in found if record is not None)
    return {"records": records, "error": "; ".join(problems) or None}


def apt_blocks_backwards(path: str, problems: List[str]) -> Iterator[str]:
    """history.log's blocks (Start-Date ... End-Date), last first. A "block" longer than
    any apt writes (no Start-Date in MAX_BLOCK_LINES lines: not apt's history) ends the
    reading of this file, said in `problems`, rather than grow with the whole file."""
    block: List[str] = []
    for line in lines_backwards(path, problems):
        block.append(line)
        if line.startswith("Start-Date:"):
            yield "\n".join(reversed(block))
            block = []
        elif len(block) > MAX_BLOCK_LINES:
            problems.append("%s: %d lines without a Start-Date: not apt's history; read no "
                            "further" % (path, MAX_BLOCK_LINES))
            return


APT_ACTIONS = ("Install", "Upgrade", "Downgrade", "Remove", "Purge", "Reinstall")
APT_PACKAGE = re.compile(r"([^\s,()]+) \(([^)]*)\)")


def apt_fields(block: str) -> Record:
    """A history.log block: the command that ran (masked), who asked, and each package of
    each action as {package, arch, versions} (apt writes "(old, new)" for an upgrade)."""
    values = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
    changes: Dict[str, List[Record]] = {}
    for action in APT_ACTIONS:
        for name, versions in APT_PACKAGE.findall(values.get(action, "")):
            package, _, arch = name.partition(":")
            changes.setdefault(action, []).append(
                {"package": package, "arch": arch or None,
                 "versions": [part.strip() for part in versions.split(",")]})
    end = values.get("End-Date", "").split()
    return {"commandline": redact_text(values.get("Commandline", "")) or None,
            "requested_by": values.get("Requested-By"), "changes": changes,
            "end": local_epoch(" ".join(end)) if len(end) == 2 else None}


def read_apt(root: str, since: float, until: float) -> Dict[str, Any]:
    path = at_root(root, "/var/log/apt/history.log")
    if not rotated(path):
        return {"records": [], "error": None, "absent": path}
    records: List[Record] = []
    problems: List[str] = []
    for name in rotated(path):
        try:
            if not apt_blocks(name, since, until, records, problems):
                break
        except (OSError, EOFError, zlib.error) as exc:
            problems.append("%s: %s" % (name, getattr(exc, "strerror", None) or exc))
    return {"records": records[:MAX_RECORDS], "error": "; ".join(problems) or None}


def apt_blocks(name: str, since: float, until: float, records: List[Record],
               problems: List[str]) -> bool:
    """Add the blocks of one history file in the window; False once one is older."""
    for block in apt_blocks_backwards(name, problems):
        match = APT_START.search(block)
        when = local_epoch("%s %s" % match.groups()) if match else None
        if when is None:
            continue
        if when < since or len(records) >= MAX_RECORDS:
            return False
        if when <= until:
            records.append(dict(apt_fields(block), time=when, file=name))
    return True


def read_rpm(root: str, since: float, until: float) -> Optional[Dict[str, Any]]:
    """rpm's own install times (epoch), on hosts that have rpm; None elsewhere."""
    if root not in ("", "/") or not os.path.exists("/var/lib/rpm"):
        return None
    code, out, err = run(["rpm", "-qa", "--queryformat",
                          "%{INSTALLTIME} %{NAME} %{VERSION}-%{RELEASE}.%{ARCH}\n"], timeout=30)
    if code != 0:
        return {"records": [], "error": "rpm -qa: %s" % err.decode("utf-8", "replace").strip()}
    records = []
    for line in out.decode("utf-8", "replace").splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0].isdigit() and since <= int(fields[0]) <= until:
            records.append({"time": float(fields[0]), "package": fields[1],
                            "version": fields[2]})
    return {"records": records, "error": None}


def read_conda_history(prefix: str, since: float, until: float) -> Optional[Dict[str, Any]]:
    """conda-meta/history: "==> 2024-01-01 12:00:00 <==" blocks, each with its command."""
    path = os.path.join(prefix, "conda-meta", "history")
    if not os.path.exists(path):
        return None
    records: List[Record] = []
    problems: List[str] = []
    block: List[str] = []
    try:
        for line in lines_backwards(path, problems):
            if not line.startswith("==> "):
                block.append(line)
                if len(block) > MAX_BLOCK_LINES:   # as apt's: not conda's history
                    problems.append("%s: %d lines without a ==> date <== line; read no "
                                    "further" % (path, MAX_BLOCK_LINES))
                    break
                continue
            when = local_epoch(line.strip("=<> "))
            if when is not None and when < since:
                break
            if when is not None and when <= until:
                records.append({"time": when, "file": path,
                                "block": redact_text("\n".join(reversed(block)))})
            block = []
    except (OSError, EOFError, zlib.error) as exc:
        problems.append("%s: %s" % (path, getattr(exc, "strerror", None) or exc))
    return {"records": records, "error": "; ".join(problems) or None}


# ---- the host: boot, the NVIDIA module, kernel messages ---------------------------------------

def boot_time(root: str) -> Optional[float]:
    for line in (read_text(at_root(root, "/proc/stat")) or "").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None


def nvidia_module(root: str) -> Dict[str, Any]:
    """The loaded module's version (/proc/driver/nvidia/version, /sys/module/nvidia) and its
    folder's time in sysfs, made when the module was loaded (a file time, not a record)."""
    folder = at_root(root, "/sys/module/nvidia")
    if not os.path.isdir(folder):
        return {"loaded": False}
    try:
        mtime: Optional[float] = os.stat(folder).st_mtime
    except OSError:
        mtime = None
    return {"loaded": True, "sysfs_time": mtime,
            "version": (read_text(os.path.join(folder, "version")) or "").strip() or None,
            "proc_version": read_text(at_root(root, "/proc/driver/nvidia/version"))}


def kernel_line_time(line: str, boot: Optional[float]) -> Optional[float]:
    """The time of a kernel message line: syslog's ISO stamp, journalctl's short-unix, or
    dmesg's seconds since boot (needs the boot time)."""
    iso = ISO_TIME.match(line)
    if iso:
        return iso_epoch(*iso.groups())
    unix = UNIX_TIME.match(line)
    if unix:
        return float(unix.group(1))
    since_boot = DMESG_TIME.match(line)
    if since_boot and boot is not None:
        return boot + float(since_boot.group(1))
    return None


def kernel_message(line: str) -> str:
    """The message without its stamp and, in syslog's and the journal's forms, the host's
    name and "kernel:": the same message read from two sources reads the same."""
    for stamp in (ISO_TIME, UNIX_TIME, DMESG_TIME):
        match = stamp.match(line)
        if match:
            rest = line[match.end():]
            return rest.split(" kernel: ", 1)[1] if " kernel: " in rest else rest
    return line


def iso_epoch(stamp: str, fraction: Optional[str], zone: Optional[str]) -> Optional[float]:
    """Epoch seconds of an ISO stamp split by ISO_TIME (by hand: Python 3.8's fromisoformat
    takes neither a comma nor a zone without its colon); no zone is the host's local time."""
    import calendar

    try:
        parts = time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    seconds = float("0." + fraction) if fraction else 0.0
    if zone is None:
        return time.mktime(parts) + seconds
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (
        int(zone[1:3]) * 3600 + int(zone[-2:]) * 60)
    return calendar.timegm(parts) + seconds - offset


def kernel_sources(root: str, since: float) -> List[Dict[str, Any]]:
    """Where kernel messages are read: the journal, else dmesg (live hosts), then the
    syslog files kern.log and dmesg (live or recorded)."""
    sources: List[Dict[str, Any]] = []
    if root in ("", "/"):
        code, out, err = run(["journalctl", "-k", "-o", "short-unix", "--no-pager", "-q",
                              "--since", "@%d" % int(since)], timeout=20)
        if code == 0 and out.strip():
            sources.append({"name": "journalctl -k", "lines": out.decode("utf-8", "replace")})
        else:
            code, out, err = run(["dmesg"], timeout=20)
            sources.append({"name": "dmesg", "lines": out.decode("utf-8", "replace")}
                           if code == 0 else
                           {"name": "dmesg", "error": err.decode("utf-8", "replace").strip()
                            or "exit %d" % code})
    for path in ("/var/log/kern.log", "/var/log/dmesg"):
        full = at_root(root, path)
        if os.path.exists(full):
            sources.append({"name": full, "path": full})
    return sources


def read_kernel(root: str, since: float, until: float) -> Dict[str, Any]:
    boot = boot_time(root)
    records: List[Record] = []
    errors: List[str] = []
    for source in kernel_sources(root, since):
        if "error" in source:
            errors.append("%s: %s" % (source["name"], source["error"]))
            continue
        lines: Iterator[str] = (lines_backwards(source["path"], errors) if "path" in source
                                else reversed(source["lines"].splitlines()))
        try:
            for line in lines:
                when = kernel_line_time(line, boot)
                if when is None:
                    continue
                if when < since:
                    break
                if when <= until and KERNEL_WORDS.search(line):
                    records.append({"time": when, "file": source["name"],
                                    "line": redact_text(line),
                                    "message": redact_text(kernel_message(line)),
                                    "since_boot": bool(DMESG_TIME.match(line))})
        except (OSError, EOFError, zlib.error) as exc:
            errors.append("%s: %s" % (source["name"], getattr(exc, "strerror", None) or exc))
    return {"records": records[:MAX_RECORDS], "error": "; ".join(errors) or None,
            "boot": boot}
