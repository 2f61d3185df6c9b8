"""Pasted files of one host -> one snapshot, marked partial and imported.

Each file is told apart by its content (`reader_for`), read whole by its reader into
envsnap's own fields, and the readings are merged: GPUs named GPU0.. (collect_env, topo -m)
take the bus id another file of the host gives that index. What no file carries is
recorded as unknown, never as empty: a section none carries is `{}` with its collector
error saying which tools were read ("not in a torch collect_env output"), the way a failed
collector's section is; inside a section a field simply is absent, and meta.imported says
which collections were given whole (`complete`), so a diff can tell "unknown" from
"removed". Strings pass through the agent's secret detector before anything is stored
(a pasted output may hold tokens), and are rekeyed under the user's masking key as a
capture's are, so equal secrets still compare equal."""
from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from envsnap import __version__
from envsnap.agent import redact
from envsnap.agent.sections import SECTIONS
from envsnap.agent.util import GZIP_MAGIC, read_unpacked
from envsnap.errors import SnapshotError, UsageError
from envsnap.imports import collect_env, conda, paste, pip, sglang, smi, vllm
from envsnap.imports.reading import Reading, Unreadable, merge
from envsnap.snapshot.document import SCHEMA, section_digest
from envsnap.snapshot.mask import masking_key
from envsnap.snapshot.spec import is_object

if TYPE_CHECKING:
    from envsnap.snapshot.records import Facts, ImportSource, Nvidia, Snapshot

Reader = Callable[[str, str], Reading]
READERS: dict[str, Reader] = {
    "torch collect_env": collect_env.read, "vLLM collect_env": vllm.read,
    "SGLang check_env": sglang.read,
    "nvidia-smi": smi.read_table, "nvidia-smi -q": smi.read_q,
    "nvidia-smi -q -x": smi.read_xml, "nvidia-smi topo -m": smi.read_topology,
    "rocm-smi --showtopo": smi.read_rocm_topology,
    "pip list": pip.read_list, "pip list json": pip.read_list_json,
    "pip freeze": pip.read_freeze, "pip inspect": pip.read_inspect,
    "uv pip list": pip.read_list, "uv pip list json": pip.read_list_json,
    "conda list": conda.read_list, "conda list --export": conda.read_export,
}
MAX_BYTES = 64 * 1024 * 1024
HEAD_BYTES = 256 * 1024       # enough of a file to tell what it is (kind_of reads its head)


@dataclass
class Source:
    name: str            # the file as given
    text: str


def kind_of(text: str) -> str | None:
    """Which tool's output this is, by its content; None: none envsnap reads."""
    if vllm.looks_like(text):
        return "vLLM collect_env"
    if sglang.looks_like(text):
        return "SGLang check_env"
    # conda's lists start with `# ` lines, which pip freeze allows too: conda is asked first
    return (("torch collect_env" if collect_env.looks_like(text) else None)
            or smi.looks_like(text) or pip.json_kind(text) or conda.kind(text)
            or pip.text_kind(text))


def reader_for(text: str, source: str) -> Reader:
    kind = kind_of(text)
    if kind is None:
        first = next((line for line in text.splitlines() if line.strip()), "")
        raise Unreadable(source, 1, f"not an output envsnap reads ({first[:60]!r}): torch "
                         "collect_env, nvidia-smi (table, -q, -q -x, topo -m), pip list "
                         "(columns, json), pip freeze, pip inspect, uv pip list, conda list "
                         "(and --export)")
    return READERS[kind]


def read_source(path: str) -> Source:
    """A pasted file's text, unpacked where it is gzip: read and unpacked only up to the cap,
    so a small .gz that unpacks to gigabytes is refused at MAX_BYTES, in the time and memory
    that many bytes take."""
    try:
        with open(path, "rb") as handle:   # a pipe too: `import <(nvidia-smi -q)`
            packed = handle.peek(2)[:2] == GZIP_MAGIC
            data = read_unpacked(handle, MAX_BYTES)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except (EOFError, zlib.error):
        raise Unreadable(path, 1, "a truncated or corrupt gzip file") from None
    if len(data) > MAX_BYTES:
        raise UsageError(f"{path}: over {MAX_BYTES >> 20} MiB"
                         f"{' unpacked' if packed else ''}: not a pasted output")
    return Source(path, data.decode("utf-8", "replace"))


CUTTABLE = {"torch collect_env", "vLLM collect_env", "SGLang check_env", "nvidia-smi",
            "nvidia-smi topo -m"}


def tolerant(kind: str) -> paste.Read:
    """The kind's reader, told whether the paste stops short (those that can read a part)."""
    reader = READERS[kind]
    if kind in CUTTABLE:
        return cast("paste.Read", reader)
    return lambda text, source, cut: reader(text, source)


@dataclass
class Pasted:
    """One file as read: the reports in it, what was passed over, what broke a report."""

    source: Source
    readings: list[Reading]
    parts: list[tuple[int, int]]         # each reading's first and last line (1-based)
    skipped: list[paste.Skipped]
    broken: list[paste.Skipped]
    cut: list[str]


def read_pasted(source: Source) -> Pasted:
    """Every report in a file, read as far as each goes; Unreadable when none could be."""
    found = paste.find_reports(source.text, kind_of)
    pasted = Pasted(source, [], [], list(found.skipped), [], [])
    first_error: Unreadable | None = None
    for part in found.parts:
        kind = kind_of("\n".join(part.lines)) or part.hint
        if kind is None:
            pasted.skipped += paste.prose(part.lines, part.lines, 0, len(part.lines))
            continue
        done = paste.read_part(part, source.name, tolerant(kind),
                               repair=kind not in paste.WHOLE_KINDS,
                               rejoin=kind in paste.REJOIN_KINDS)
        if done.reading is None:      # its lines are said to be passed over, and why
            first_error = first_error or done.error
            why = f"not read ({done.error.why})" if done.error else "not read"
            pasted.skipped += [paste.Skipped(part.first + k + 1, line, why)
                               for k, line in enumerate(part.lines) if line.strip()]
            continue
        pasted.readings.append(done.reading)
        pasted.parts.append((part.first + 1, part.first + len(part.lines)))
        pasted.skipped += done.skipped
        pasted.broken += done.broken
        pasted.cut += [done.cut] if done.cut else []
    if not pasted.readings:
        if first_error is not None:
            raise first_error
        reader_for(source.text, source.name)       # names why nothing is a report
        raise Unreadable(source.name, 1, "no report envsnap reads in it")
    pasted.skipped.sort(key=lambda s: s.line)
    return pasted


def read_all(sources: list[Source]) -> list[Reading]:
    """Every file read first: one file of which nothing could be read stores nothing."""
    return [reading for pasted in map(read_pasted, sources) for reading in pasted.readings]


# ---- merging the readings ------------------------------------------------------------------

def bus_by_index(readings: list[Reading]) -> dict[str, str]:
    found: dict[str, str] = {}
    for reading in readings:
        for key, gpu in reading.facts.get("nvidia", {}).get("gpus", {}).items():
            if not key.startswith("GPU") and isinstance(gpu.get("index"), int):
                found.setdefault(f"GPU{gpu['index']}", key)
    return found


def rekeyed(nvidia: Nvidia, bus_of: dict[str, str]) -> Nvidia:
    """GPU0.. -> bus ids where another file gave them, in gpus and topology alike."""
    nvidia = nvidia.copy()
    if "gpus" in nvidia:
        nvidia["gpus"] = {bus_of.get(k, k): v for k, v in nvidia["gpus"].items()}
    if "topology" in nvidia:
        nvidia["topology"] = {bus_of.get(k, k): {bus_of.get(p, p): link for p, link in
                                                 peers.items()}
                              for k, peers in nvidia["topology"].items()}
    return nvidia


def as_merged(reading: Reading, bus_of: dict[str, str]) -> Facts:
    """A copy of a reading's facts (readings stay as read), its GPUs under their bus ids."""
    facts: Facts = json.loads(json.dumps(reading.facts))
    if "nvidia" in facts:
        facts["nvidia"] = rekeyed(facts["nvidia"], bus_of)
    return facts


def value_at(facts: object, path: tuple[str, ...]) -> object:
    for key in path:
        facts = facts.get(key) if is_object(facts) else None
    return facts


def first_conflict(have: object, more: object, path: tuple[str, ...] = ()
                   ) -> tuple[tuple[str, ...], object, object] | None:
    """The first fact two files both state, differently: (path, theirs, this one's)."""
    if is_object(have) and is_object(more):
        for key in more.keys() & have.keys():
            found = first_conflict(have[key], more[key], path + (str(key),))
            if found:
                return found
        return None
    if have is not None and more is not None and have != more:
        return path, have, more
    return None


def merged_facts(readings: list[Reading], sources: list[Source]) -> Facts:
    """One host's facts from all its files; two files that state one fact differently are
    not of one host (or one moment), and are refused rather than one silently winning."""
    bus_of = bus_by_index(readings)
    facts: Facts = {}
    for number, reading in enumerate(readings):
        more = as_merged(reading, bus_of)
        conflict = first_conflict(facts, more)
        if conflict:
            path, theirs, ours = conflict
            earlier = next(s.name for s, r in zip(sources, readings)
                           if value_at(as_merged(r, bus_of), path) == theirs)
            raise SnapshotError(f"{sources[number].name}: {'.'.join(path)} is {ours!r} here "
                                f"but {theirs!r} in {earlier}: these files are not of one "
                                "host at one time; import them apart")
        merge(facts, more)
    return facts


def strings_in(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif is_object(value):
        for key, item in value.items():
            yield str(key)
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def masked(facts: Facts) -> Facts:
    """The agent's detector over every string, then its markers keyed as a capture's.

    First over all of them at once, a line each: the detector reads a line at a time, so
    when it masks nothing there (the common case) it masks nothing in any one of them, and
    the one pass costs a large paste a small fraction of a call per string."""
    every = "\n".join(strings_in(facts))
    was = redact.Markers.digests
    redact.Markers.digests = True
    try:
        if redact.redact_text(every) == every:
            return facts
        marked = redact.redact_document(facts)
    finally:
        redact.Markers.digests = was
    return cast("Facts", json.loads(redact.rekey(json.dumps(marked), masking_key())))


def unknown_why(readings: list[Reading]) -> str:
    tools = list(dict.fromkeys(reading.tool for reading in readings))
    return "not in a " + " or ".join(tools) + " output"


def source_records(pastes: list[Pasted]) -> dict[str, ImportSource]:
    """A record a report: a file's name, or `name:first-last` where it holds several."""
    records: dict[str, ImportSource] = {}
    for pasted in pastes:
        source = pasted.source
        digest = hashlib.sha256(source.text.encode("utf-8", "surrogatepass")).hexdigest()
        several = len(pasted.readings) > 1
        for reading, (first, last) in zip(pasted.readings, pasted.parts):
            name = Path(source.name).name + (f":{first}-{last}" if several else "")
            while name in records:          # two files of one name from two folders
                name += "'"
            records[name] = {
                "sha256": digest, "tool": reading.tool, "format": reading.format,
                "version": reading.version,
                "lines": last - first + 1 if several else len(source.text.splitlines())}
    return records


def pasted_snapshot(path: str, captured_at: str) -> Snapshot | None:
    """A file given where a snapshot is expected (`envsnap diff their-paste.txt mine`),
    imported in memory and stored nowhere; None when it is no output envsnap reads."""
    file = Path(path)
    try:
        if file.suffix in (".yaml", ".yml") or not file.is_file() or \
                file.stat().st_size > MAX_BYTES:
            return None        # a snapshot, or too big to be a paste: its own error stands
        with file.open("rb") as stream:
            head = stream.read(HEAD_BYTES)
    except OSError:
        return None
    if head[:2] != GZIP_MAGIC and not paste.find_reports(head.decode("utf-8", "replace"),
                                                         kind_of).parts:
        return None
    source = read_source(path)
    return imported_snapshot([source], label=path, host="imported", captured_at=captured_at)


def imported_snapshot(sources: list[Source], *, label: str, host: str,
                      captured_at: str) -> Snapshot:
    return snapshot_of([read_pasted(source) for source in sources], label=label, host=host,
                       captured_at=captured_at)


def snapshot_of(pastes: list[Pasted], *, label: str, host: str, captured_at: str) -> Snapshot:
    readings = [reading for pasted in pastes for reading in pasted.readings]
    sources = [pasted.source for pasted in pastes for _ in pasted.readings]
    facts = masked(merged_facts(readings, sources))
    sections = cast("dict[str, dict[str, object]]", facts)   # each section by its name
    why = unknown_why(readings)
    for name in SECTIONS:
        sections.setdefault(name, {})
    collectors = {name: {"seconds": None, "error": None if sections[name] else why}
                  for name in sections}
    complete = sorted({path for reading in readings for path in reading.complete})
    document = {
        "schema": SCHEMA,
        "meta": {"label": label, "host": host, "address": None, "captured_at": captured_at,
                 "envsnap_version": __version__, "collectors": collectors,
                 "imported": {"partial": True, "complete": complete,
                              "sources": source_records(pastes)}},
        "facts": facts,
        "digests": {name: section_digest(section) for name, section in sections.items()},
    }
    return cast("Snapshot", document)
