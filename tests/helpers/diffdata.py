"""Snapshots for the diff tests: built from the agent output recorded on a real H200
(tests/data/h200/agent.json) through snapshot.build, and edited the way a test needs.

An edited snapshot gets its digests recomputed, as a capture would have recorded them:
the diff trusts recorded digests to skip unchanged sections.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import yaml

from envsnap.snapshot import document as snapshot
from envsnap.snapshot.store import dump_yaml
from helpers.paths import DATA

DATA = DATA / "h200"
H200_BUS = "00000000:00:06.0"


def agent_output() -> dict[str, Any]:
    return json.loads((DATA / "agent.json").read_text())


def h200(label: str = "good", host: str = "h200", gpus: int = 1) -> dict[str, Any]:
    """A snapshot of the recorded H200 host; with gpus > 1, the GPU repeated on more buses."""
    output = agent_output()
    nvidia = output["collectors"]["nvidia"]
    record, reading = nvidia["facts"]["gpus"][H200_BUS], nvidia["volatile"]["gpus"][H200_BUS]
    for index in range(1, gpus):
        bus = f"00000000:{0x10 + index:02X}:00.0"
        nvidia["facts"]["gpus"][bus] = dict(copy.deepcopy(record), index=index)
        nvidia["volatile"]["gpus"][bus] = copy.deepcopy(reading)
    nvidia["facts"]["gpu_count"] = gpus   # as the agent counts them
    return snapshot.build(output, label=label, host=host, address="", captured_at="t",
                          config={"repos": [], "procs": []})


def refresh_digests(document: dict[str, Any]) -> dict[str, Any]:
    document["digests"] = {name: snapshot.section_digest(section)
                           for name, section in document["facts"].items()}
    return document


def edited(document: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    copied = copy.deepcopy(document)
    change(copied)
    return refresh_digests(copied)


def edit_file(path: Path, change: Callable[[dict[str, Any]], Any], to: Path) -> Path:
    """A snapshot file loaded, changed, its digests recomputed, saved under another name."""
    document = yaml.safe_load(path.read_text())
    change(document)
    to.write_text(dump_yaml(refresh_digests(document)))
    return to


def save(document: dict[str, Any], path: Path) -> Path:
    path.write_text(dump_yaml(document))
    return path
