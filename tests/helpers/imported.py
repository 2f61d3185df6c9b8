"""What the import tests share: the agent's recorded output saved as the capture it was,
and the comparison of imported facts with the agent's, leaf by leaf."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from envsnap.snapshot.document import build
from envsnap.snapshot.store import Store

DATA = Path(__file__).resolve().parent.parent / "data"
H200 = DATA / "h200"
EVIDENCE = DATA / "h200-evidence"
MISSING = object()


def save_capture(store: str, folder: Path, label: str,
                 edit: Callable[[dict[str, Any]], None] | None = None) -> None:
    """The agent's recorded output (folder/agent.json) as the capture it was, signed."""
    output = json.loads((folder / "agent.json").read_text())
    if edit:
        edit(output["collectors"])
    document = build(output, label=label, host="local", address="local",
                     captured_at="2026-12-01T14:03:07+00:00", config={})
    Store(store).save(document, label)


def agent_collectors(folder: Path) -> dict[str, Any]:
    collectors: dict[str, Any] = json.loads((folder / "agent.json").read_text())["collectors"]
    return collectors


def leaves(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, path + (key,))
    else:
        yield path, value


def at(tree: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return MISSING
        tree = tree[key]
    return tree


def by_index(nvidia: dict[str, Any]) -> dict[str, Any]:
    """GPUs keyed GPU<index>, the one key a lone collect_env or topo -m output has."""
    return {**nvidia, "gpus": {f"GPU{gpu.get('index')}": gpu
                               for gpu in nvidia.get("gpus", {}).values()}}


def mismatches(imported: dict[str, Any], agent: dict[str, Any]) -> tuple[int, list[str]]:
    """(facts compared, those that differ): each leaf the import read against the agent's
    value at the same place. cuDNN's libraries are left to the caller: the agent reads
    cuDNN's header, not its libraries."""
    compared, wrong = 0, []
    for section, facts in imported.items():
        truth = agent[section]["facts"]
        if section == "nvidia" and any(k.startswith("GPU") for k in facts.get("gpus", {})):
            facts, truth = by_index(facts), by_index(truth)
        for path, value in leaves(facts):
            if facts == {} or path[:2] == ("cudnn", "libraries"):
                continue
            compared += 1
            if at(truth, path) != value:
                wrong.append(f"{section}.{'.'.join(path)}: {value!r} vs {at(truth, path)!r}")
    return compared, wrong
