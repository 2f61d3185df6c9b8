"""A bug-report bundle: one tar.gz with the report and the snapshots it was made from.

    envsnap-report-<label>/report.md
    envsnap-report-<label>/report.html
    envsnap-report-<label>/snapshots/<label>.yaml      (and the --vs snapshot)
    envsnap-report-<label>/bench/<label>.json          each snapshot's bench record, if any
    envsnap-report-<label>/charts/<name>.svg           the report's charts (report/charts.py)

The snapshots are masked like the report (mask.masked_document: their digests recomputed,
so they still diff). The same inputs give the same bytes: members in this fixed order, every
time stamp the subject's capture time, owner 0, mode 0644, and a gzip header without a name
or a time, so a bundle can be compared, cached or signed.
"""
from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envsnap.errors import StoreError
from envsnap.report.charts import Chart, svg_file
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.mask import Masker, masked_document
from envsnap.snapshot.provenance import unsigned
from envsnap.snapshot.store import atomic_write, label_from_name, visible_yaml
from envsnap.text import dump_json, visible

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot


@dataclass(frozen=True)
class Member:
    name: str
    data: bytes


def members(label: str, documents: list[Snapshot], rendered: dict[str, str],
            masker: Masker, charts: Sequence[Chart] = ()) -> list[Member]:
    """rendered: {"md": text, "html": text}; documents: the subject first, then --vs."""
    root = f"envsnap-report-{label_from_name(label)}"
    # for people, as `report -o` writes it: control characters escaped (build.save_text)
    found = [Member(f"{root}/report.{form}", visible(text).encode("utf-8"))
             for form, text in sorted(rendered.items(), key=lambda item: item[0] != "md")]
    # Unsigned: a bundle is handed on, so whoever unpacks it (its maker too) holds a foreign
    # snapshot that restore shows whole before it acts on it (snapshot/provenance.py).
    shown = [masked_document(document, masker) for document in documents]
    names = unique_names(shown)
    found += [Member(f"{root}/snapshots/{name}.yaml",
                     visible_yaml(unsigned(document)).encode("utf-8"))
              for name, document in zip(names, shown)]
    records = [(name, snapshot.bench(document)) for name, document in zip(names, shown)]
    found += [Member(f"{root}/bench/{name}.json", json_bytes(record))
              for name, record in records if record is not None]
    return found + chart_members(root, charts)


def chart_members(root: str, charts: Sequence[Chart]) -> list[Member]:
    """One .svg per chart, named after it; two charts of one name stay apart."""
    found: list[Member] = []
    for chart in charts:
        name = label_from_name(chart.name)
        taken = {member.name for member in found}
        path = next(f"{root}/charts/{name}{suffix}.svg" for suffix in
                    [""] + [f"-{n}" for n in range(2, len(charts) + 2)]
                    if f"{root}/charts/{name}{suffix}.svg" not in taken)
        found.append(Member(path, svg_file(chart).encode("utf-8")))
    return found


def unique_names(documents: list[Snapshot]) -> list[str]:
    """A file name per snapshot from its label; two snapshots of one label stay apart."""
    names: list[str] = []
    for index, document in enumerate(documents):
        name = label_from_name(snapshot.label(document, "snapshot"))
        names.append(name if name not in names else f"{name}-{index + 1}")
    return names


def json_bytes(value: Any) -> bytes:
    return dump_json(value).encode("utf-8")


def epoch_of(captured_at: Any) -> int:
    try:
        return int(datetime.fromisoformat(str(captured_at)).timestamp())
    except ValueError:
        return 0


def tar_gz(found: list[Member], mtime: int) -> bytes:
    raw = io.BytesIO()
    # gzip's own header carries a file name and a time: both left out for equal bytes
    with gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for member in found:
                info = tarfile.TarInfo(member.name)
                info.size, info.mtime, info.mode = len(member.data), mtime, 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(member.data))
    return raw.getvalue()


def write_bundle(path: str | Path, label: str, documents: list[Snapshot],
                 rendered: dict[str, str], masker: Masker,
                 charts: Sequence[Chart] = ()) -> list[str]:
    """Write the bundle atomically; the names of its members, in order."""
    found = members(label, documents, rendered, masker, charts)
    mtime = epoch_of(snapshot.captured_at(documents[0]))
    write_bytes(Path(path), tar_gz(found, mtime))
    return [member.name for member in found]


def write_bytes(path: Path, data: bytes) -> None:
    try:
        atomic_write(path, data, mode=0o644)   # a bundle is made to be handed on
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from None
