"""N snapshots of a fleet -> the facts on which some hosts disagree with the majority.

Facts are compared by path (bus id, package, env var, repo path), never by position, and
facts that are unique to a host by nature (hostname, boot id, pids, uuids, serials, times)
are left out: one GPU at PCIe Gen4 x8 on one node of 32 stands out, the 32 hostnames do not.
Sections whose digests and values agree on every host are skipped without being walked.
"""
from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envsnap.diff import rules
from envsnap.diff.benchmark import FleetBenchmark, fleet_benchmark
from envsnap.diff.compare import SKIP_KEYS, configured_hot_paths, digest, is_mapping, unwrap
from envsnap.diff.findings import ADDED, CHANGED, REMOVED, Detail, Finding, FindingKind
from envsnap.diff.gitexplain import explain
from envsnap.diff.gpumerge import merge_alike
from envsnap.diff.hotpaths import hot_patterns
from envsnap.diff.keys import (
    env_view,
    python_env_view,
    records_variable,
    repo_view,
    variable_at,
)
from envsnap.diff.partial import (
    NOT_IN_EVERY_CAPTURE,
    Uncompared,
    by_index,
    fleet_uncompared,
    known_of,
)
from envsnap.diff.patch_summary import summarise_tree
from envsnap.errors import EnvsnapError, SnapshotError, UsageError
from envsnap.snapshot.document import (
    collector_error,
    env,
    git,
    has_section,
    is_partial,
    meta,
    nvidia,
    python_env,
    section,
    section_names,
)
from envsnap.snapshot.store import Store

if TYPE_CHECKING:
    from envsnap.snapshot.records import Gpu, Snapshot

# Keys whose values differ from host to host by nature, wherever they appear.
HOST_UNIQUE = frozenset(["hostname", "boot_id", "uuid", "serial", "board_id", "pid",
                         "start_epoch", "start_since_boot_s", "time", "captured_at",
                         "machine_id", "seconds"])
ABSENT: Any = "(absent)"
PRESENT: Any = "(present)"


@dataclass(frozen=True)
class Disagreement:
    """One fact path: the majority value, and every other value with its hosts."""

    section: str
    path: tuple[str, ...]
    majority: Any
    majority_hosts: list[str]
    others: list[tuple[Any, list[str]]]
    total: int
    rank: int = 0
    why: str = ""
    # a HEAD that differs: the pairwise diff's explanation, the majority's repo -> this one's
    detail: Detail = field(default_factory=Detail)

    @property
    def tie(self) -> bool:
        """No value holds more hosts than the next: "majority" is only the first of equals."""
        return bool(self.others) and len(self.others[0][1]) == len(self.majority_hosts)

    def as_json(self) -> dict[str, object]:
        """Patches summarised (size, hash, files): a fleet report is read across hosts."""
        return {"section": self.section, "path": list(self.path),
                "where": Finding(self.section, self.path, None, None).where,
                "majority": summarise_tree(self.majority),
                "majority_count": len(self.majority_hosts),
                "majority_hosts": self.majority_hosts, "total": self.total,
                "tie": self.tie, "rank": self.rank, "why": self.why,
                "others": [{"value": summarise_tree(value), "hosts": hosts}
                           for value, hosts in self.others],
                **({"detail": self.detail} if self.detail else {})}


@dataclass
class FleetReport:
    hosts: list[str]
    disagreements: list[Disagreement]
    not_captured: list[tuple[str, str, str]]  # (section, host, error)
    # each host's benchmark runs against the others' (None unless two hosts hold runs)
    benchmark: FleetBenchmark | None = None
    # members that could not be read (source, why): named, and left out of the comparison
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)   # sections --section did not compare
    # what pasted members do not carry and others do: once per kind of paste
    uncompared: list[Uncompared] = field(default_factory=list)

    @property
    def drift(self) -> bool:
        return bool(self.disagreements or self.not_captured)

    @property
    def regression(self) -> bool:
        """Some host's runs are a regression against the others' (--fail-on regression)."""
        return self.benchmark is not None and self.benchmark.regression


def host_names(documents: list[Snapshot], sources: list[str]) -> list[str]:
    """meta.host when it tells the hosts apart (a fleet capture), else labels or files."""
    for key in ("host", "label"):
        names = [str(meta(d).get(key) or "") for d in documents]
        if all(names) and len(set(names)) == len(names):
            return names
    return sources


SNAPSHOT_SUFFIXES = (".yaml", ".yml", ".json")
# pasted outputs a folder of users' reports holds (diff reads them as imports)
PASTE_SUFFIXES = (".txt", ".log", ".xml", ".gz")


def fleet_sources(names: list[str], store: Store) -> list[str]:
    """Files, labels, or folders (a fleet capture's LABEL/ in the store) of snapshots.

    A name that is none of these is refused here: a mistyped folder would otherwise count as
    one snapshot and end as "needs at least two", or as a missing label."""
    found: list[str] = []
    for name in names:
        folder = Path(name) if Path(name).is_dir() else store.root / name
        if folder.is_dir():
            found += snapshots_in(folder)
        elif Path(name).is_file() or is_label(store, name):
            found.append(name)
        else:
            raise UsageError(f"{name}: folder does not exist (nor a snapshot file, nor a label "
                             f"or fleet folder in the store {store.root})")
    return found


def snapshots_in(folder: Path) -> list[str]:
    try:
        return sorted(str(p) for p in folder.iterdir()
                      if p.suffix in SNAPSHOT_SUFFIXES + PASTE_SUFFIXES)
    except OSError as exc:   # a folder we may see but not list (mode 000, not our own)
        raise UsageError(f"--fleet {folder}: cannot list the folder: {exc.strerror}") from None


def is_label(store: Store, name: str) -> bool:
    try:
        return store.exists(name)
    except UsageError:   # not even a label's shape (an absolute path, `..`)
        return False


@dataclass(frozen=True)
class Members:
    """A fleet's snapshots as read: those that loaded, with their sources, and the others."""

    documents: list[Snapshot]
    sources: list[str]
    refused: list[tuple[str, EnvsnapError]]   # (source, why it could not be read)


def load_members(store: Store, sources: list[str]) -> Members:
    """Each member loaded, or its refusal kept: one that is no regular file (a FIFO, a
    folder, a device, all of which a folder's listing can hold) is refused unopened, since
    opening a FIFO waits for a writer that may never come."""
    members = Members([], [], [])
    odd = {source: why for source in sources if (why := not_a_file(source)) is not None}
    for source in odd:
        members.refused.append((source, odd[source]))
    regular = [source for source in sources if source not in odd]
    for source, loaded in zip(regular, store.load_each(regular)):
        if isinstance(loaded, EnvsnapError):
            members.refused.append((source, loaded))
        else:
            members.documents.append(loaded)
            members.sources.append(source)
    return members


FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"),
              (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def not_a_file(source: str) -> SnapshotError | None:
    """Why a member that exists as a path is not read: it is no regular file; None for a
    regular file, and for a label (no such path), which the store resolves."""
    try:
        mode = os.stat(source).st_mode
    except OSError:
        return None
    kind = next((name for test, name in FILE_KINDS if test(mode)), None)
    return None if kind is None else SnapshotError(f"{source}: {kind}, not a snapshot file")


def fleet_of(members: Members, sections: tuple[str, ...] = ()) -> FleetReport:
    """The readable members compared, the unreadable ones named in the report; with fewer
    than two readable, nothing is compared, and the first refusal is the error."""
    if len(members.documents) < 2:
        if members.refused:
            raise members.refused[0][1]
        raise UsageError("--fleet needs at least two snapshots")
    report = fleet(members.documents, members.sources, sections)
    report.unreadable = [(source, str(why)) for source, why in members.refused]
    return report


def fleet(documents: list[Snapshot], sources: list[str],
          sections: tuple[str, ...] = ()) -> FleetReport:
    hosts = host_names(documents, sources)
    present = sorted({name for d in documents for name in section_names(d)})
    names = [n for n in present if not sections or n in sections]
    unknown = [n for n in sections if not any(has_section(d, n) for d in documents)]
    if unknown:
        raise UsageError(f"unknown section {', '.join(unknown)}")
    found: list[Disagreement] = []
    missing: list[tuple[str, str, str]] = []
    for name in names:
        captured = []
        for host, document in zip(hosts, documents):
            error = collector_error(document, name)
            if error and is_partial(document):
                continue       # a paste that does not carry the section: unknown, no drift
            if error:
                missing.append((name, host, error))
            else:
                captured.append((host, document))
        first = section(captured[0][1], name) if captured else None
        # digests first; values too, since a hand-edited snapshot keeps its old digest
        if len({digest(d, name) for _, d in captured}) > 1 or \
                any(section(d, name) != first for _, d in captured[1:]):

            found += section_disagreements(name, captured)
    return FleetReport(hosts, sorted(found, key=lambda d: -d.rank), missing,
                       fleet_benchmark(documents, hosts),
                       left_out=[n for n in present if n not in names],
                       uncompared=fleet_uncompared(documents, hosts, names))


# ---- one section ----------------------------------------------------------------------------

def comparable(name: str, document: Snapshot) -> Mapping[str, Any]:
    """A section as hosts are compared: workers by command line, repositories as the diff
    sees them (keys.py)."""
    if name == "env":
        return env_view(env(document))[0]
    if name == "git":
        facts = git(document)
        return dict(facts, repos={path: repo_view(repo)
                                  for path, repo in facts.get("repos", {}).items()})
    if name == "python_env":
        return python_env_view(python_env(document))
    return section(document, name)


def differing(values: dict[str, Any], path: tuple[str, ...] = (),
              unknown: Callable[[str, tuple[str, ...]], bool] = lambda host, path: False
              ) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """(path, {host: value}) wherever hosts disagree, descending only where they do.

    A subtree some hosts lack (a GPU gone from one node) is one disagreement at its root,
    not one per field; below it, the hosts that have it are compared among themselves.
    """
    first = next(iter(values.values()))
    if all(value == first for value in values.values()):
        return
    mappings = {host: value for host, value in values.items() if is_mapping(value)}
    if len(mappings) < len(values):
        yield path, {host: PRESENT if host in mappings else unwrap(value)
                     for host, value in values.items()}
        if len(mappings) < 2:
            return
    keys: dict[str, None] = {}
    for mapping in mappings.values():
        keys.update(dict.fromkeys(mapping))
    for key in keys:
        if key not in HOST_UNIQUE and key not in SKIP_KEYS:
            sub = path + (str(key),)
            # a key a pasted output lacks is unknown there: that host sits this one out
            known = {host: mapping.get(key, ABSENT) for host, mapping in mappings.items()
                     if key in mapping or not unknown(host, sub)}
            if len(known) > 1:
                yield from differing(known, sub, unknown)


def section_disagreements(name: str, captured: list[tuple[str, Snapshot]]
                          ) -> list[Disagreement]:
    views = {host: comparable(name, d) for host, d in captured}
    gpus = {host: nvidia(d).get("gpus", {}) for host, d in captured}
    knowns = {host: known_of(name, d, d) for host, d in captured}
    if name == "nvidia" and any(knowns.values()):
        views = {host: by_index(view) for host, view in views.items()}   # a paste has no bus

    documents = dict(captured)

    def unknown(host: str, path: tuple[str, ...]) -> bool:
        variable = variable_at(path) if name == "env" else None
        if variable is not None and not records_variable(env(documents[host]), variable):
            return True        # outside what that capture records: it sits this one out
        known = knowns[host]
        if known is None:
            return ".".join((name,) + path) in NOT_IN_EVERY_CAPTURE
        return known.unknown_in(0, path)
    rows = [rate(name, path, group(values), len(values), gpus, captured)
            for path, values in differing(views, unknown=unknown)]
    host, first = captured[0]
    return merge_alike(rows, gpus[host], nvidia(first).get("gpu_count"), how_hosts_split)


def how_hosts_split(row: Disagreement) -> str:
    return json.dumps([row.majority, row.majority_hosts, row.others], sort_keys=True,
                      default=str)


def group(values: dict[str, Any]) -> list[tuple[Any, list[str]]]:
    """(value, hosts) biggest group first; values that are not hashable are grouped by JSON."""
    groups: dict[str, tuple[Any, list[str]]] = {}
    for host, value in values.items():
        key = json.dumps(value, sort_keys=True, default=str)
        groups.setdefault(key, (value, []))[1].append(host)
    return sorted(groups.values(), key=lambda g: -len(g[1]))


def rate(name: str, path: tuple[str, ...], groups: list[tuple[Any, list[str]]], total: int,
         gpus: dict[str, dict[str, Gpu]], captured: list[tuple[str, Snapshot]]) -> Disagreement:
    """Ranked like a pairwise finding: the majority as before, the biggest minority as after."""
    (majority, hosts), (other, other_hosts) = groups[0], groups[1]
    kind: FindingKind = ADDED if majority is ABSENT else REMOVED if other is ABSENT else CHANGED
    detail = head_explained(path, hosts[0], other_hosts[0], dict(captured)) \
        if name == "git" and kind == CHANGED else Detail()
    finding = Finding(name, path, None if majority is ABSENT else majority,
                      None if other is ABSENT else other, kind, detail=detail)
    context = rules.Context(names=("the majority", other_hosts[0]), same_host=False,
                            gpus_after=gpus.get(other_hosts[0], {}))
    rating = rules.rate(finding, context)
    return Disagreement(name, path, majority, hosts, groups[1:], total, rating.rank, rating.why,
                        detail)


def head_explained(path: tuple[str, ...], majority_host: str, other_host: str,
                   documents: dict[str, Snapshot]) -> Detail:
    """A node on another commit is explained as `diff` explains it, from a host of the
    majority to the first of the others: same commits, same rank, same words."""
    if len(path) != 3 or path[0] != "repos" or path[2] != "head":
        return Detail()
    before, after = documents.get(majority_host), documents.get(other_host)
    if before is None or after is None:
        return Detail()
    old, new = (git(d).get("repos", {}).get(path[1]) for d in (before, after))
    if old is None or new is None:
        return Detail()
    return explain(old, new, hot_patterns(configured_hot_paths(before, after)))
