"""The safety net around a restore: the checkouts it locks and a journal beside the store.

The locks themselves are hostops.locks (bisect and explain take the same ones). The journal
is a small JSON file in the store, one per host and set of checkouts: it survives a Ctrl-C,
a lost connection or kill -9 of the controller, and tells the next run that touches those
checkouts that a restore was interrupted, what it was restoring and where the rollback
point is.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict, get_args

from envsnap.errors import StoreError, UsageError
from envsnap.snapshot import document as snap
from envsnap.snapshot.entries import write_entry
from envsnap.snapshot.store import Store, label_from_name
from envsnap.text import dump_json

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot
JOURNAL_DIR = ".journal"

# How a new restore relates to an interrupted one (check_pending).
Pending = Literal["resume", "rollback"]
# Where a restore was when its journal was last written (plain strings in the JSON).
JournalState = Literal["planning", "applying", "verifying"]


def touched_by(document: Snapshot, only: list[str] | None = None) -> list[str]:
    """The checkouts a restore of `document` writes (`only` those when it restores some),
    as recorded: its lock and journal names. sitecustomize takes no lock of its own: every
    system python of Debian and Ubuntu has one, so a lock on it would serialise all restores
    of a host again; two restores that both rewrite it differently are told by verify."""
    return sorted(path for path in snap.repos_with_head(document)
                  if only is None or path in only)


@dataclass
class Journal:
    label: str               # the snapshot being restored
    host: str
    pre_restore: str         # the rollback point: `envsnap restore <pre_restore>`
    started: str
    state: JournalState = "planning"  # planning -> applying -> verifying; removed when done
    # What the restore writes (touched_by); empty in a journal from before per-checkout
    # locks, which then stands for the whole host.
    touched: list[str] = field(default_factory=list)
    # The command that runs this restore again, where `envsnap restore <label>` does not
    # (restore --repo P --at T: its target is made, not stored).
    resume: str | None = None

    def overlaps(self, touched: list[str]) -> bool:
        return not self.touched or not touched or bool(set(self.touched) & set(touched))


class JournalFieldsRequired(TypedDict):
    label: str
    host: str
    pre_restore: str
    started: str


class JournalFields(JournalFieldsRequired, total=False):
    """A journal file's JSON, as JournalBook.write puts it there (state and touched may be
    missing from a journal of an older envsnap)."""

    state: JournalState
    touched: list[str]
    resume: str


def journal_from(text: str) -> Journal:
    """The journal a file holds; ValueError or TypeError when it is not one write() wrote
    (a journal is trusted to say which checkouts are locked, so its fields are checked)."""
    fields: JournalFields = json.loads(text)
    journal = Journal(**fields)
    named = (journal.label, journal.host, journal.pre_restore, journal.started)
    if not all(isinstance(value, str) for value in named) \
            or journal.state not in get_args(JournalState) \
            or not isinstance(journal.touched, list) \
            or not all(isinstance(path, str) for path in journal.touched) \
            or not isinstance(journal.resume, (str, type(None))):
        raise ValueError("not a restore journal of this envsnap")
    return journal


class JournalBook:
    """The store's .journal folder: .journal/<host>/<what it touches>.json, one per host and
    set of checkouts (.journal/<host>.json: a journal of the whole host, as written before)."""

    def __init__(self, store: Store) -> None:
        self.folder = Path(store.root) / JOURNAL_DIR

    def host_path(self, host: str) -> Path:
        return self.folder / f"{label_from_name(host)}.json"

    def path(self, journal: Journal) -> Path:
        if not journal.touched:
            return self.host_path(journal.host)
        digest = hashlib.sha256("\0".join(journal.touched).encode("utf-8", "surrogateescape"))
        return self.folder / label_from_name(journal.host) / f"{digest.hexdigest()[:16]}.json"

    def read(self, host: str, touched: list[str]) -> Journal | None:
        """The pending journal of `host` that touches any of `touched`, if there is one."""
        paths = [self.host_path(host)]
        folder = self.folder / label_from_name(host)
        if folder.is_dir():
            paths += sorted(folder.glob("*.json"))
        for path in paths:
            journal = self.read_one(path)
            if journal is not None and journal.overlaps(touched):
                return journal
        return None

    def read_one(self, path: Path) -> Journal | None:
        try:
            return journal_from(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except OSError as exc:   # a folder of that name, or one we may not read
            raise UsageError(f"restore journal {path} is unreadable "
                             f"({exc.strerror}); look at it, then delete it") from None
        except (ValueError, TypeError) as exc:
            raise UsageError(f"restore journal {path} is unreadable ({exc}); "
                             "look at it, then delete it") from None

    def write(self, journal: Journal) -> None:
        path = self.path(journal)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_entry(path, dump_json(asdict(journal)))
        except OSError as exc:
            raise StoreError(f"cannot write restore journal {path}: {exc.strerror}") from None

    def start(self, journal: Journal, replacing: Journal | None) -> None:
        """Write a new restore's journal; the interrupted one it rolls back (`replacing`) is
        removed once the new one is written, wherever it was kept."""
        self.write(journal)
        if replacing is not None and self.path(replacing) != self.path(journal):
            self.clear(replacing)

    def clear(self, journal: Journal) -> None:
        self.path(journal).unlink(missing_ok=True)

    def pending(self) -> list[Journal]:
        """Every journal in the store, of every host (what `restore --abort` looks through)."""
        if not self.folder.is_dir():
            return []
        paths = sorted(self.folder.glob("*.json")) + sorted(self.folder.glob("*/*.json"))
        return [journal for journal in map(self.read_one, paths) if journal is not None]


def check_pending(journal: Journal | None, label: str) -> Pending | None:
    """How a new restore relates to an interrupted one: None (none pending), "resume" (the
    same snapshot again) or "rollback" (its pre-restore point); anything else is refused."""
    if journal is None:
        return None
    if label == journal.label:
        return "resume"
    if label == journal.pre_restore:
        return "rollback"
    raise UsageError(f"an interrupted restore of {journal.label!r} on {journal.host} "
                     f"(started {journal.started}, state {journal.state}) is pending: "
                     f"{way_out(journal)}")


def way_out(journal: Journal) -> str:
    """What the user types to get past a pending journal, said wherever one is left."""
    return (f"run `{journal.resume or f'envsnap restore {journal.label}'}` to resume it, or "
            f"`envsnap restore --abort --host {journal.host}` to roll it back "
            f"(to {journal.pre_restore})")
