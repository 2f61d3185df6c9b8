"""What `restore --pip` does to the packages: pure, from the snapshot and the host as it is.

Each package whose version drifted, or that went missing, is pinned back (NAME==VERSION);
each package the snapshot did not have is removed, so the host holds the snapshot's set and
no more. Two are never removed, and are said to remain instead: pip itself (the installer
every pin and removal runs; without it the host could not be put back again) and envsnap
(the tool doing the restore, when it is installed in that python).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from envsnap.snapshot import document as snap

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

# name -> why a package the snapshot did not have stays installed
NEVER_REMOVED = {
    "pip": "pip is the installer restore --pip runs: not removed (pip uninstall pip by hand "
           "if you mean it)",
    "envsnap": "envsnap runs this restore: not removed (pip uninstall envsnap by hand if you "
               "mean it)",
}


@dataclass(frozen=True)
class PipPlan:
    pins: list[str] = field(default_factory=list)        # NAME==VERSION to install
    removals: list[str] = field(default_factory=list)    # NAMEs to uninstall
    kept: dict[str, str] = field(default_factory=dict)   # NAME -> why it stays as it is


def pip_plan(snapshot: Snapshot, live: Snapshot) -> PipPlan:
    """The pins and removals that bring the live packages back to the snapshot's."""
    extra = sorted(set(snap.packages(live)) - set(snap.packages(snapshot)))
    return PipPlan(pins=snap.package_pins(snapshot, live),
                   removals=[name for name in extra if name not in NEVER_REMOVED],
                   kept={name: NEVER_REMOVED[name] for name in extra if name in NEVER_REMOVED})


def changed_names(plan: PipPlan) -> set[str]:
    """The names the plan changes (a pin's name, a removal's)."""
    return {pin.split("==", 1)[0] for pin in plan.pins} | set(plan.removals)
