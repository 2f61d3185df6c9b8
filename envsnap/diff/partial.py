"""Diffing a partial snapshot (one `envsnap import` read from pasted outputs): compare what
both sides know, and say what could not be compared and why.

An imported snapshot knows only what its outputs carry. A section none of them carries has
its collector error say so; a field it lacks inside a section it knows is simply absent.
Neither is a removal: the walk passes over a key the partial side lacks (`Known`), except
inside a collection the import holds whole (meta.imported.complete: `pip list` gives every
package, `nvidia-smi -q` every GPU), where a missing entry is really missing. GPUs a lone
collect_env or topo -m names GPU0.. (it shows no bus) are matched by index. A few fields
only an import records (the conda packages `conda list` gives; the cuDNN libraries
collect_env lists, which captures before the loader's cache was read lack) are unknown to a
capture, not absent from it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from envsnap.snapshot.document import (
    collector_error,
    complete_paths,
    imported,
    is_partial,
    section,
)
from envsnap.snapshot.spec import is_object

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

IMPORT_ONLY = frozenset({"cuda_nccl.cudnn.libraries", "python_env.conda"})
# Facts an older agent did not record: where a capture lacks one, it is unknown there, not
# added or removed (a snapshot taken before an upgrade of envsnap against one after it).
LATER_FACTS = frozenset(
    ["system.toolchain", "cuda_nccl.cudnn.torch"]
    + [f"system.cpu.{name}" for name in ("vendor_id", "family", "model_id", "stepping",
                                         "flags", "address_sizes", "op_modes", "byte_order",
                                         "caches", "vulnerabilities")])
# What a whole capture may lack without having lost it
NOT_IN_EVERY_CAPTURE = IMPORT_ONLY | LATER_FACTS
LATER_SECTIONS = frozenset(fact.split(".")[0] for fact in LATER_FACTS)


class Known(NamedTuple):
    """What each side of one section knows: a partial side's missing key is unknown."""

    section: str
    partial: tuple[bool, bool]
    complete: tuple[frozenset[str], frozenset[str]]

    def unknown_in(self, side: int, path: tuple[str, ...]) -> bool:
        """The key at `path`, which side `side` (0: before, 1: after) lacks, is unknown
        there rather than gone."""
        holder = ".".join((self.section,) + path[:-1])
        if not self.partial[side]:
            return f"{holder}.{path[-1]}" in NOT_IN_EVERY_CAPTURE
        return holder not in self.complete[side]


def known_of(name: str, a: Snapshot, b: Snapshot) -> Known | None:
    """None when both sides are whole captures of a section every agent records alike
    (the plain walk)."""
    if not (is_partial(a) or is_partial(b)):
        return Known(name, (False, False), (frozenset(), frozenset())) \
            if name in LATER_SECTIONS else None
    return Known(name, (is_partial(a), is_partial(b)), (complete_paths(a), complete_paths(b)))


def any_partial(a: Snapshot, b: Snapshot) -> bool:
    return is_partial(a) or is_partial(b)


def by_index(nvidia: Mapping[str, Any]) -> dict[str, Any]:
    """GPUs (and topology) keyed GPU<index>, the one key both sides then share."""
    gpus = nvidia.get("gpus", {})
    name = {bus: f"GPU{gpu.get('index')}" if is_object(gpu) else bus
            for bus, gpu in gpus.items()}
    return {**nvidia, "gpus": {name[bus]: gpu for bus, gpu in gpus.items()},
            "topology": {name.get(k, k): {name.get(p, p): link for p, link in peers.items()}
                         for k, peers in nvidia.get("topology", {}).items()}}


def comparable_nvidia(before: Mapping[str, Any], after: Mapping[str, Any]
                      ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """Both sides by index when either names its GPUs without a bus."""
    named = any(str(key).startswith("GPU") for side in (before, after)
                for key in side.get("gpus", {}))
    return (by_index(before), by_index(after)) if named else (before, after)


def why_unknown(document: Snapshot) -> str:
    tools = dict.fromkeys(str(s.get("tool")) for s in
                          (imported(document) or {}).get("sources", {}).values())
    return "not in a " + " or ".join(tools) + " output"


def held_by(documents: list[Snapshot], sections: list[str]) -> dict[str, dict[str, None]]:
    """The sections any of `documents` holds (read, not failed), each with every field any
    of them holds, in order."""
    held: dict[str, dict[str, None]] = {}
    for name in sections:
        for document in documents:
            if not collector_error(document, name):
                held.setdefault(name, {}).update(dict.fromkeys(section(document, name)))
    return held


def unknown_against(document: Snapshot, held: Mapping[str, Mapping[str, None]],
                    sections: list[str]) -> list[str]:
    """What is `held` elsewhere that the partial `document` does not know: whole sections,
    and the fields of a section both hold (python_env.customize: sitecustomize)."""
    names = []
    for name in sections:
        if name not in held:
            continue
        if collector_error(document, name):
            names.append(name)
            continue
        mine = section(document, name)
        names += [f"{name}.{key}" for key in held[name] if key not in mine]
    return names


def unknown_there(document: Snapshot, other: Snapshot, sections: list[str]) -> list[str]:
    """What `other` holds that the partial `document` does not know."""
    return unknown_against(document, held_by([other], sections), sections)


def uncompared_notes(a: Snapshot, b: Snapshot, sections: list[str]) -> list[str]:
    """One line a partial side: "not in a torch collect_env output: env, git, ..."."""
    notes = []
    for document, other in ((a, b), (b, a)):
        if is_partial(document):
            names = unknown_there(document, other, sections)
            if names:
                notes.append(f"could not compare, {why_unknown(document)}: "
                             + ", ".join(names))
    return notes


class Uncompared(NamedTuple):
    """The members of a fleet of one kind of paste (one `why`) and what could not be
    compared on them: on every one (`names`), and on some alone (`more`, by member)."""

    why: str                                          # "not in a torch collect_env output"
    members: tuple[str, ...]
    names: tuple[str, ...]                            # env, git, system.boot_id, ...
    more: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def as_json(self) -> dict[str, object]:
        return {"why": self.why, "members": list(self.members), "names": list(self.names),
                "more": [{"member": member, "names": list(names)}
                         for member, names in self.more]}


def fleet_uncompared(documents: list[Snapshot], members: list[str],
                     sections: list[str]) -> list[Uncompared]:
    """What could not be compared on the fleet's partial members, against what the others
    hold, said once per kind of paste (its tools: why_unknown) rather than once a member."""
    if not any(is_partial(document) for document in documents):
        return []                # a fleet of captures: nothing to say, nothing walked
    held = held_by(documents, sections)
    kinds: dict[str, list[tuple[str, list[str]]]] = {}
    for member, document in zip(members, documents):
        names = unknown_against(document, held, sections) if is_partial(document) else []
        if names:
            kinds.setdefault(why_unknown(document), []).append((member, names))
    return [one_kind(why, found) for why, found in kinds.items()]


def one_kind(why: str, found: list[tuple[str, list[str]]]) -> Uncompared:
    common = tuple(n for n in found[0][1] if all(n in names for _, names in found))
    more = tuple((member, tuple(n for n in names if n not in common))
                 for member, names in found if len(names) > len(common))
    return Uncompared(why, tuple(member for member, _ in found), common, more)


def knows(document: Snapshot, where: str, patterns: list[tuple[str, ...]]) -> bool:
    """A check of `unchanged` (its section, its paths) that a partial side can vouch for."""
    if not is_partial(document):
        return True
    held = section(document, where)
    return any(pattern[0] in held for pattern in patterns)
