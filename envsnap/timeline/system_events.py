"""The agent's evidence about the system -> events: dpkg, apt, rpm, boot, the NVIDIA module,
kernel messages naming a GPU or its PCIe link (agent/timelinelogs.py reads them).

apt's history.log and dpkg.log say one upgrade twice: apt's block (with the command that ran
and who ran it) becomes one event, and each dpkg line one event per package, since dpkg alone
also sees `dpkg -i` and unattended upgrades. The kernel's messages are sorted into the few
kinds that matter (an Xid, an AER error, a link that retrained slower or narrower, a GPU
fallen off the bus, the driver loaded) by the patterns below.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from envsnap.timeline.model import FILE_TIME, KERNEL_CLOCK, RECORDED, Event
from envsnap.timeline.roles import package_role

if TYPE_CHECKING:
    from envsnap.timeline.evidence import (
        AptRecord,
        DistRecord,
        DpkgRecord,
        HostSource,
        KernelRecord,
        RpmRecord,
    )

KERNEL_KINDS = (
    ("GPU fallen off the bus", re.compile(r"fallen off the bus", re.IGNORECASE)),
    ("Xid error", re.compile(r"\bXid\b")),
    ("PCIe AER error", re.compile(r"AER|PCIe Bus Error")),
    ("PCIe link speed/width", re.compile(r"bandwidth|[Ll]ink [Ss]peed|downgrad|limited by")),
    ("PCIe link down/up", re.compile(r"[Ll]ink (?:is )?(?:down|up)")),
    ("NVIDIA driver loaded", re.compile(r"NVRM: loading|nvidia: module license|"
                                        r"nvidia-nvlink: Nvlink Core is being initialized")),
)
ROUTINE_KINDS = ("NVIDIA driver loaded", "GPU/PCIe message")
SAME_MESSAGE_S = 1.5
BOOT_SETTLE_S = 120.0    # the kernel's and the driver's own start, persistence mode included
NVRM_VERSION = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")


def role_of(package: str) -> str | None:
    role = package_role(package)
    return f"system: {role}" if role else None


def dpkg_events(records: list[DpkgRecord]) -> list[Event]:
    events = []
    for record in records:
        package, action, old, new = (record["package"], record["action"], record["old"],
                                     record["new"])
        versions = f"{old} -> {new}" if old and new else (new or old or "")
        arch = f":{record['arch']}" if record.get("arch") else ""
        events.append(Event(
            time=float(record["time"]), kind="system-package", subject=package,
            what=f"dpkg {action} {package} {versions}",
            evidence=f"{record['file']}: {action} {package}{arch} {old or '<none>'} "
                     f"{new or '<none>'}",
            exactness=RECORDED, role=role_of(package), test=apt_undo(action, package, old)))
    return events


def apt_undo(action: str, package: str, old: str | None) -> str:
    if action in ("upgrade", "remove", "purge") and old:
        return f"apt-get install {package}={old}"
    if action == "install":
        return f"apt-get remove {package}"
    return "no older version recorded"


def inside_apt(dpkg: list[DpkgRecord], apt: list[AptRecord]
               ) -> tuple[list[DpkgRecord], list[DpkgRecord]]:
    """dpkg lines written during an apt run (its block's start to end) and the others: apt's
    event says those changes once, with its command; dpkg's alone (`dpkg -i`) stay."""
    spans = [(r["time"], r.get("end") or r["time"]) for r in apt]
    inside: list[DpkgRecord] = []
    alone: list[DpkgRecord] = []
    for record in dpkg:
        covered = any(start <= record["time"] <= end for start, end in spans)
        (inside if covered else alone).append(record)
    return inside, alone


APT_INSTALLERS = (None, "", "debian", "apt", "dpkg")   # what a distro's package leaves there


def apt_written(dists: list[DistRecord], apt: list[AptRecord]
                ) -> tuple[dict[int, list[DistRecord]], list[DistRecord]]:
    """The Python distributions apt's runs wrote (dated inside a run's block, a second either
    side, and left by no pip or uv: a distro's python3-* package), by the run's index in
    `apt`, and the others: apt's event names them, and they are no pip run of their own."""
    spans = [(r["time"] - 1, (r.get("end") or r["time"]) + 1) for r in apt]
    written: dict[int, list[DistRecord]] = {}
    others: list[DistRecord] = []
    for dist in dists:
        run = next((index for index, (start, end) in enumerate(spans)
                    if start <= dist["time"] <= end), None) \
            if dist.get("installer") in APT_INSTALLERS else None
        if run is None:
            others.append(dist)
        else:
            written.setdefault(run, []).append(dist)
    return written, others


def apt_details(record: AptRecord) -> tuple[str, ...]:
    """The packages of an apt run that matter to a GPU job, with their versions."""
    lines = []
    for action, packages in (record.get("changes") or {}).items():
        for package in packages:
            role = package_role(package["package"])
            if role:
                lines.append(f"{action.lower()} {package['package']} "
                             f"{' -> '.join(v for v in package['versions'] if v != 'automatic')}"
                             f" [{role}]")
    return tuple(lines[:20])


def apt_undo_lines(record: AptRecord) -> str | None:
    pins = [f"{p['package']}={p['versions'][0]}"
            for action in ("Upgrade", "Downgrade") for p in
            (record.get("changes") or {}).get(action, []) if package_role(p["package"])]
    return f"apt-get install {' '.join(pins)}" if pins else None


def apt_events(records: list[AptRecord],
               python: dict[int, list[DistRecord]] | None = None) -> list[Event]:
    """An event per apt run; `python`: the Python distributions each wrote (apt_written)."""
    events = []
    for index, record in enumerate(records):
        dists = (python or {}).get(index, [])
        changes = record.get("changes") or {}
        parts = [f"{action.lower()} {len(packages)}" for action, packages in changes.items()]
        found = [(p["package"], package_role(p["package"])) for packages in changes.values()
                 for p in packages]
        roles = sorted({role for _, role in found if role})
        command = record.get("commandline") or "(no command line)"
        by = f" by {record['requested_by']}" if record.get("requested_by") else ""
        events.append(Event(
            time=float(record["time"]), kind="system-package", subject="apt",
            what=f"apt: {command}{by}: {', '.join(parts) or 'nothing'}",
            evidence=f"{record['file']}: Start-Date block, Commandline: {command}",
            exactness=RECORDED, test=apt_undo_lines(record),
            details=apt_details(record) + tuple(
                f"python package {dist['name']} {dist['version']} ({dist['folder']})"
                for dist in dists),
            role="system: " + ", ".join(roles) if roles else None))
    return events


def rpm_events(records: list[RpmRecord]) -> list[Event]:
    return [Event(time=float(r["time"]), kind="system-package", subject=r["package"],
                  what=f"rpm installed {r['package']} {r['version']}",
                  evidence=f"rpm -qa INSTALLTIME of {r['package']}-{r['version']}",
                  exactness=RECORDED, role=role_of(r["package"]),
                  test="rpm records no older version: `dnf history` may")
            for r in records]


def kernel_kind(line: str) -> str:
    for kind, pattern in KERNEL_KINDS:
        if pattern.search(line):
            return kind
    return "GPU/PCIe message"


def unique_messages(records: list[KernelRecord]) -> list[KernelRecord]:
    """One record per message: the journal, dmesg and kern.log may each hold it, their times
    a second apart at most (dmesg's boot time keeps whole seconds); the first source read,
    the journal's or dmesg's, is the one kept."""
    kept: list[KernelRecord] = []
    seen: dict[str, list[float]] = {}
    for r in records:
        message, when = r.get("message", r["line"]), float(r["time"])
        if any(abs(when - other) <= SAME_MESSAGE_S for other in seen.get(message, [])):
            continue
        seen.setdefault(message, []).append(when)
        kept.append(r)
    return kept


def kernel_events(records: list[KernelRecord]) -> list[Event]:
    """An event each (one record per message: unique_messages)."""
    return [Event(time=float(r["time"]), kind="kernel-message", subject=r["file"],
                  what=f"kernel: {kernel_kind(r['line'])}", evidence=f"{r['file']}: {r['line']}",
                  exactness=KERNEL_CLOCK if r.get("since_boot") else RECORDED)
            for r in records]


def of_the_boot(record: KernelRecord, boot: float) -> bool:
    """A routine line of the boot itself: one of its first BOOT_SETTLE_S that tells of no
    trouble (an Xid, an AER error, a slower link or a lost GPU at boot stays its own event)."""
    return boot - SAME_MESSAGE_S <= float(record["time"]) <= boot + BOOT_SETTLE_S and \
        kernel_kind(record["line"]) in ROUTINE_KINDS


def nvidia_version(proc_version: str | None) -> str | None:
    """The driver version in /proc/driver/nvidia/version's first line."""
    match = NVRM_VERSION.search(proc_version or "")
    return match.group(1) if match else None


def host_events(source: HostSource, kernel: list[KernelRecord], since: float, until: float
                ) -> list[Event]:
    """The boot, the NVIDIA module's load and the kernel's messages. The routine lines of the
    boot (the kernel's banner, the driver's loading) are folded into the boot's event, which
    lists them with -v; every other message is its own event."""
    boot = source.get("boot")
    if boot is not None and not since <= boot <= until:
        boot = None
    at_boot: list[KernelRecord] = []
    others: list[KernelRecord] = []
    for record in unique_messages(kernel):
        (at_boot if boot is not None and of_the_boot(record, boot) else others).append(record)
    events = kernel_events(others)
    if boot is not None:
        lines = tuple(f"{r['file']}: {r['line']}"
                      for r in sorted(at_boot, key=lambda r: float(r["time"])))
        events.append(Event(time=float(boot), kind="boot", subject="host",
                            what="host booted",
                            evidence="/proc/stat btime", exactness=RECORDED, details=lines,
                            folded=len(lines)))
    module = source.get("nvidia") or {}
    loaded = module.get("sysfs_time")
    if module.get("loaded") and loaded is not None and since <= loaded <= until:
        version = module.get("version") or nvidia_version(module.get("proc_version"))
        events.append(Event(time=float(loaded), kind="kernel-module", subject="nvidia",
                            what=f"NVIDIA kernel module {version or '?'} loaded",
                            evidence="/sys/module/nvidia: mtime", exactness=FILE_TIME,
                            role="system: NVIDIA driver"))
    return events
