"""What a person does about drift that a restore leaves: one line that fits the kind of
difference, pure. A package is pinned back or removed (or said why it stays); a sitecustomize
that never runs is named with the file that runs in its place, not sent to pip.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envsnap.diff.findings import ADDED, REMOVED, Finding
from envsnap.snapshot import customize as customize_words
from envsnap.snapshot import document as snap

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

BY_SECTION = {
    "nvidia": "reinstall the recorded driver / kernel module, reboot; check PCIe seating and "
              "BIOS link settings; check cooling and power limits (nvidia-smi -q -d PERFORMANCE)",
    "cuda_nccl": "reinstall the recorded CUDA / NCCL / torch versions (or restore with --pip)",
    "system": "kernel, boot parameters, limits and governors are set outside envsnap",
    "env": "set these variables where the workers start (shell profile, service unit), or "
           "persist them with the env_file task (playbooks/examples/story-host.yml); a "
           "server `bench --serve` recorded: `restore --rerun --serve` starts it with them",
}

# python_env, by the first part of the fact's path
PIN = "pin the packages back (envsnap restore --pip, or pip install NAME==VER)"
REMOVE = ("remove the packages the snapshot did not have (envsnap restore --pip, or pip "
          "uninstall NAME)")
BY_PYTHON_FACT = {
    "editable": "install the package from the source the snapshot records (pip install -e "
                "PATH), or uninstall the one now in its place",
    "direct_urls": "install the package from the URL the snapshot records",
    "shadowed": "a package installed twice on sys.path: remove the copy the snapshot did not "
                "have (pip uninstall NAME from that python, or delete its folder)",
    "startup_pth": "put the .pth startup file back as the snapshot records it (it runs in "
                   "every python of that site-packages), by hand",
    "customize": "put the customize file back by hand as the snapshot records it",
    "sys_path": "a .pth line or PYTHONPATH adds or drops folders on sys.path: put them back "
                "by hand (python -c 'import sys; print(sys.path)' shows it)",
}
PYTHON_ITSELF = ("another python, or the same one set up otherwise: run with the recorded "
                 "interpreter (--python) or recreate its venv")


@dataclass(frozen=True)
class Left:
    """Drift a restore leaves, with what to do about it."""

    finding: Finding
    advice: str


def advice_for(finding: Finding, snapshot: Snapshot, live: Snapshot,
               kept: Mapping[str, str]) -> str:
    """`kept`: why restore --pip left a package as it is (never removed, pip's own words)."""
    if finding.section != "python_env":
        return BY_SECTION.get(finding.section, "change it by hand")
    fact = finding.path[0] if finding.path else ""
    if fact == "packages":
        name = finding.path[1] if len(finding.path) > 1 else ""
        if name in kept:
            return f"{name}: {kept[name]}"
        return REMOVE if finding.kind == ADDED else PIN
    if fact == "customize_shadowed" and len(finding.path) > 1:
        return shadowed_advice(finding, snapshot, live)
    return BY_PYTHON_FACT.get(fact, PYTHON_ITSELF)


def shadowed_advice(finding: Finding, snapshot: Snapshot, live: Snapshot) -> str:
    """A customize file that never runs (an earlier one on sys.path is imported): which one
    shadows it, and that a change to it does nothing while that holds."""
    path = finding.path[1]
    side = snapshot if finding.kind == REMOVED else live
    record = snap.customize_shadowed(side).get(path)
    name = customize_words.place(side, path)
    if record is None or not record.get("shadowed_by"):
        return f"{name} never runs: put it back by hand as the snapshot records it if needed"
    by = customize_words.linked(record.get("shadowed_by"), record.get("shadowed_by_real"))
    if finding.kind == REMOVED:
        return (f"{name} is gone; it was shadowed by {by} and never ran, so that has no "
                "effect: put it back by hand as the snapshot records it if you need the file")
    return (f"{name} never runs: {by} comes first on sys.path and runs in its place, so this "
            "difference has no effect while it does; restore writes only the sitecustomize "
            f"that runs: edit {path} by hand to match the snapshot if you need it")
