"""The snapshots folder: labels map to YAML files; writes are atomic; names are safe.

A label is `name` or `group/name` (a fleet capture stores `run1/node1`, `run1/node2`, ...).
Anything that could climb out of the store (`..`, absolute paths, odd characters) is refused.
"""
from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import yaml

from envsnap import yamlread
from envsnap.defaults import DEFAULT_STORE
from envsnap.errors import EnvsnapError, SnapshotError, StoreError, UsageError, YamlError
from envsnap.snapshot.document import captured_at, host, hostname, set_signature, validate
from envsnap.snapshot.document import label as recorded_label
from envsnap.snapshot.entries import check_entry, write_entry
from envsnap.snapshot.spec import is_object
from envsnap.text import UNSAFE, did_you_mean

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

SUFFIX = ".yaml"
TIMELINE_SUFFIX = ".timeline"   # a saved timeline (timeline/saved.py): no snapshot reader's
LABEL_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

MAX_SNAPSHOT_MB_VARIABLE = "ENVSNAP_MAX_SNAPSHOT_MB"
DEFAULT_MAX_SNAPSHOT_MB = 64   # a real snapshot is 0.1-5 MB; a bigger file is refused unread


class SnapshotLoader(yamlread.StrictLoader):
    """Snapshots are written by envsnap alone, so they are read strictly: no alias, no
    merge key (yamlread.py)."""

    kind = "a snapshot"


class _BlockDumper(yamlread.SafeDumper):  # type: ignore[misc]
    """Multi-line strings (patches, sitecustomize) as readable `|` blocks; an object met
    twice is written twice, never as an anchor and alias (loading refuses those)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: Any, value: str) -> Any:
    style = "|" if "\n" in value and len(value) > 40 else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def validate_label(label: str) -> str:
    parts = label.split("/")
    if len(parts) > 2 or not all(LABEL_PART.match(part) and ".." not in part for part in parts):
        raise UsageError(f"invalid label {label!r}: use letters, digits, '.', '_', '-' "
                         "(and at most one '/'), not starting with '.' or '-'")
    return label


def label_from_name(name: str) -> str:
    """A safe label part from a host name such as `root@[::1]:2222`."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")
    return cleaned[:100] or "host"


def dump_yaml(document: Mapping[str, Any], ascii_only: bool = False) -> str:
    """ascii_only: every character beyond ASCII as a YAML escape (`"\\u202e"`), the same
    document, for a terminal (show --yaml of one that holds a bidi or zero-width character)."""
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=True, allow_unicode=not ascii_only,
                     default_flow_style=False, width=100)


def visible_yaml(document: Mapping[str, object]) -> str:
    """The YAML of a document a person will read (`show --yaml`, a bundle's snapshots). YAML
    writes a bidi or zero-width character as it is: where the document holds a character
    a terminal or editor would act on, every character beyond ASCII is YAML's own escape
    instead, so the text stays the same document when read back (text.visible would
    change it)."""
    text = dump_yaml(document)
    return dump_yaml(document, ascii_only=True) if UNSAFE.search(text) else text


@contextmanager
def collector_held_off() -> Iterator[None]:
    """The cyclic garbage collector off while snapshots are loaded and compared: a loaded
    snapshot is a tree (aliases are refused), so it holds no cycle to collect, yet each
    collection walks every object alive: a third of the time of loading a thousand (`diff
    --fleet`), a fifth of `envsnap diff` of two large snapshots."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_document(text: str, source: str) -> Any:
    try:
        if source.endswith(".json"):
            return json.loads(text)
        return yamlread.load(text, SnapshotLoader, max_chars=None)   # capped when read
    except RecursionError:   # `[[[[...]]]]` a few thousand deep: small, and no snapshot
        raise SnapshotError(f"{source}: corrupt snapshot (nested too deeply)") from None
    except ValueError as exc:
        raise SnapshotError(f"{source}: corrupt snapshot ({str(exc).splitlines()[0]})") \
            from None
    except YamlError as exc:
        where = f":{exc.line}" if exc.line else ""
        raise SnapshotError(f"{source}{where}: corrupt snapshot ({exc.reason})") from None


def size_setting(variable: str, default_mb: int) -> int:
    """A size cap in bytes from a variable in MiB (ENVSNAP_MAX_SNAPSHOT_MB, the transport's
    ENVSNAP_MAX_AGENT_OUTPUT_MB), else `default_mb`; anything but a size is one line."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default_mb << 20
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = -1.0
    if not 0 < megabytes < 1 << 20:
        raise UsageError(f"{variable}={raw!r}: expected a size in MiB (default {default_mb})")
    return int(megabytes * (1 << 20))


def max_snapshot_bytes() -> int:
    """The size cap: ENVSNAP_MAX_SNAPSHOT_MB (MiB), else 64 MiB."""
    return size_setting(MAX_SNAPSHOT_MB_VARIABLE, DEFAULT_MAX_SNAPSHOT_MB)


def read_snapshot_text(path: Path) -> str:
    """A snapshot file's text, refused unread when it is over the cap: parsing costs about
    10x its size in memory, and a stranger's file can be any size (or a device that never
    ends, hence the bounded read rather than a stat alone)."""
    limit = max_snapshot_bytes()
    try:
        with path.open("rb") as handle:
            known_size = os.fstat(handle.fileno()).st_size   # 0 for a pipe or a device
            data = handle.read(limit + 1) if known_size <= limit else b""
    except OSError as exc:
        raise SnapshotError(f"cannot read {path}: {exc.strerror or exc}") from None
    if max(known_size, len(data)) > limit:
        raise SnapshotError(f"{path}: larger than {limit / (1 << 20):g} MiB, refused unread "
                            f"(a snapshot is a few MB; {MAX_SNAPSHOT_MB_VARIABLE} raises the "
                            "cap)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"cannot read {path}: not UTF-8 text (byte {exc.start})") from None


def holds_snapshot(path: Path) -> bool:
    """Whether an existing regular file is a snapshot (a mapping with schema, meta and facts at
    the top): what an output option (`report -o`) must never overwrite."""
    if not path.is_file():
        return False
    try:
        document = parse_document(read_snapshot_text(path), str(path))
    except (OSError, SnapshotError):
        return False
    return is_object(document) and {"schema", "meta", "facts"} <= document.keys()


def atomic_write(path: Path, content: str | bytes, mode: int | None = None) -> None:
    """A file the user named (`report -o`, `--plot`, a bundle), never a store entry (those go
    through entries.write_entry). Write beside the target then rename: a crash never leaves
    half a file (a new file is 0600 unless `mode` says otherwise). A target that exists and
    is no regular file (a device, a FIFO, /dev/stdout) is written in place, as named: a
    rename would put a file where the device was."""
    import tempfile  # on use: reading snapshots (`envsnap diff`) never writes one

    data = content.encode("utf-8") if isinstance(content, str) else content
    if path.exists() and not path.is_file():
        with path.open("wb") as out:
            out.write(data)
        return
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_new(path: Path, content: str) -> bool:
    """Write a file that must not exist yet, all at once or not at all: written beside it,
    then linked into place. A link never replaces, so of two writers (two nodes writing one
    label into a shared folder) one wins and the other gets False; nothing is overwritten.
    Where links are not supported, the name is claimed with O_EXCL first."""
    import tempfile

    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(content.encode("utf-8"))
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        except OSError:   # no hard links here (some network and FUSE file systems)
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                return False
            try:
                os.replace(temporary, path)
            except OSError:
                path.unlink(missing_ok=True)   # the empty claim would hold the label
                raise
        return True
    finally:
        Path(temporary).unlink(missing_ok=True)


def is_file(path: Path) -> bool:
    """Path.is_file, but a folder on the way that may not be searched (mode 000, another
    user's) or a name too long is said in one line, not taken for "no such snapshot"."""
    try:
        return path.is_file()
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from None


class Entry(NamedTuple):
    label: str
    host: str             # as reached: an inventory name, user@host:port, or local
    hostname: str | None  # the machine's own name, as it reported it
    captured_at: str
    path: Path

    @property
    def host_shown(self) -> str:
        """The host as reached, and its own name where that says nothing: every machine
        captures itself as `local`, so snapshots of two machines would read alike."""
        if self.host == "local" and self.hostname:
            return f"{self.host} ({self.hostname})"
        return self.host


STORE_VARIABLE = "ENVSNAP_STORE"
GITIGNORE = ("# envsnap's snapshot store: snapshots describe hosts (names, paths, env, code);\n"
             "# keep them out of commits. Delete this file to commit them anyway.\n*\n")


class Store:
    """The folder of snapshots. `root` None: $ENVSNAP_STORE, else ./snapshots; `chosen_by`
    says how it was picked, so every message can say where a snapshot was looked for."""

    def __init__(self, root: str | Path | None = None, chosen_by: str = "--store") -> None:
        self.is_default = root is None and not os.environ.get(STORE_VARIABLE)
        if root is None:
            from_environment = os.environ.get(STORE_VARIABLE)
            root = from_environment or DEFAULT_STORE
            chosen_by = f"${STORE_VARIABLE}" if from_environment else \
                f"the default ./{DEFAULT_STORE}; --store or ${STORE_VARIABLE} picks another"
        self.root = Path(root)
        self.chosen_by = chosen_by

    @property
    def where(self) -> str:
        """`/abs/path (how it was chosen)`, for messages."""
        return f"{self.root.absolute()} ({self.chosen_by})"

    def labels(self) -> list[str]:
        """Every label in the store, for "did you mean" (an unreadable store: none)."""
        try:
            return [path.relative_to(self.root).with_suffix("").as_posix()
                    for path in self.root.rglob(f"*{SUFFIX}")]
        except OSError:
            return []

    def path_for(self, label: str) -> Path:
        return self.root / (validate_label(label) + SUFFIX)

    def timeline_path(self, label: str) -> Path:
        return self.root / (validate_label(label) + TIMELINE_SUFFIX)

    def exists(self, label: str) -> bool:
        """A snapshot or a saved timeline holds the label: a label names one thing."""
        return self.path_for(label).exists() or self.timeline_path(label).exists()

    def check_writable(self) -> None:
        """Fail before any host is contacted, not after the capture is done."""
        import tempfile

        try:
            created = not self.root.exists()
            self.root.mkdir(parents=True, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=self.root, prefix=".probe-")
            probe.close()
            if created and inside_git_checkout(self.root):
                write_entry(self.root / ".gitignore", GITIGNORE, mode=0o644)
        except OSError as exc:
            raise StoreError(f"store {self.where} is not writable: {exc.strerror}") from None

    def save(self, document: Snapshot, label: str, replace: bool = True) -> Path:
        """Store a snapshot envsnap made for this user (a capture, a bench record, a rollback
        point, one adopted with `envsnap trust`): signed with the user's key, so restore
        knows it for theirs (provenance.py). Every save signs the document as it is now: an
        edit envsnap makes (set_bench, set_label) is signed with it. The signature is stamped
        on `document` too, so it stays what the file holds. Without `replace`, a label that
        exists by now (another capture saved it meanwhile) is refused, never overwritten."""
        # on use: signing loads hmac and the key, which a command that only reads (diff) never
        # needs at start-up
        from envsnap.snapshot import provenance

        path = self.path_for(label)
        validate(document, f"snapshot {label!r} (not saved)")   # nothing ill-typed is signed
        check_entry(path)
        signature = provenance.signature(document, provenance.user_key())
        set_signature(document, **signature)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if replace:
                write_entry(path, dump_yaml(document))
            elif not write_new(path, dump_yaml(document)):
                raise StoreError(f"snapshot {label!r} was saved in {self.where} by another "
                                 "capture meanwhile; this one is not saved (give each task "
                                 "its own label, e.g. with {rank}, or use --force)")
        except OSError as exc:
            raise StoreError(f"cannot write {path}: {exc.strerror}") from None
        return path

    def resolve(self, label_or_path: str) -> Path:
        """A label in the store, or a path to a snapshot file."""
        candidate = Path(label_or_path)
        if label_or_path.endswith((".yaml", ".yml", ".json")) and is_file(candidate):
            return candidate
        if is_file(candidate) and os.sep in label_or_path:
            return candidate
        try:
            path = self.path_for(label_or_path)
        except UsageError:
            raise UsageError(f"no snapshot {label_or_path!r}: not a label in {self.where} "
                             "and not a file") from None
        if is_file(path):
            return path
        check_entry(path)
        if is_file(candidate):   # no such label: a file of that name here, as typed
            return candidate
        fleet = path.with_suffix("")
        if fleet.is_dir():
            raise UsageError(fleet_hint(label_or_path, fleet))
        raise UsageError(f"no snapshot labelled {label_or_path!r} in {self.where}"
                         f"{did_you_mean(label_or_path, self.labels())}; envsnap list shows "
                         "what there is")

    def load(self, label_or_path: str) -> Snapshot:
        path = self.resolve(label_or_path)
        return validate(parse_document(read_snapshot_text(path), str(path)), str(path))

    def load_all(self, labels_or_paths: list[str]) -> list[Snapshot]:
        """Many snapshots at once; the first that cannot be read is raised."""
        loaded = self.load_each(labels_or_paths)
        for each in loaded:
            if isinstance(each, EnvsnapError):
                raise each
        return cast("list[Snapshot]", loaded)

    def load_each(self, labels_or_paths: list[str]) -> list[Snapshot | EnvsnapError]:
        """Many snapshots at once (`diff --fleet`), each one's refusal in its place (one bad
        member of a fleet's folder is named, not the fleet lost), with the cyclic garbage
        collector held off meanwhile (`collector_held_off`)."""
        with collector_held_off():
            return [self.load_or_refusal(name) for name in labels_or_paths]

    def load_or_refusal(self, label_or_path: str) -> Snapshot | EnvsnapError:
        try:
            return self.load(label_or_path)
        except (SnapshotError, StoreError) as exc:
            return exc

    def entries(self) -> list[Entry]:
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store {self.where} is not a folder")
        if self.root.is_dir():
            try:   # rglob skips a folder it cannot list: "no snapshots" would be a lie
                os.scandir(self.root).close()
            except OSError as exc:
                raise StoreError(f"cannot list store {self.where}: {exc.strerror}") from None
        found = []
        for path in sorted(self.root.rglob(f"*{SUFFIX}")):
            label = path.relative_to(self.root).with_suffix("").as_posix()
            try:
                document = self.load(str(path))
            except (SnapshotError, UsageError):
                found.append(Entry(label, "?", None, "(unreadable)", path))
                continue
            found.append(Entry(label, host(document), hostname(document),
                               captured_at(document) or "?", path))
        return found


def fleet_hint(label: str, folder: Path) -> str:
    """A label that is a fleet's folder: what it holds and the two commands that read it."""
    members = sorted(path.stem for path in folder.glob(f"*{SUFFIX}"))
    listed = ", ".join(f"{label}/{name}" for name in members[:3]) + \
        (", ..." if len(members) > 3 else "")
    first = f"{label}/{members[0]}" if members else f"{label}/HOST"
    return (f"{label!r} is a fleet's folder of {len(members)} snapshots ({listed}): name one "
            f"(envsnap show {first}), or compare them: envsnap diff --fleet {label}")


def inside_git_checkout(folder: Path) -> bool:
    """A folder in a git work tree (a `.git` in it or a parent): a store made there would
    otherwise show up in `git status` and end in a commit."""
    where = folder.absolute()
    return any((parent / ".git").exists() for parent in (where, *where.parents))


# ---- adopting a foreign snapshot (`envsnap trust`) ------------------------------------------

def adoption_label(store: Store, source: str, document: Snapshot,
                   wanted: str | None, force: bool) -> str:
    """The label a trusted snapshot is stored under: --label, else the label it is stored
    under already (trusted in place), else the one it records. Another snapshot of that label
    is never replaced unless forced."""
    path = store.resolve(source).resolve()
    in_place = stored_label(store, path)
    if wanted is None and in_place is not None:
        return in_place
    chosen = validate_label(wanted) if wanted is not None else \
        label_from_name(recorded_label(document, path.stem))
    target = store.path_for(chosen)
    if target.exists() and not force and target.resolve() != path:
        raise UsageError(f"a snapshot labelled {chosen!r} is already in {store.where}: pass "
                         "--label NEW, or --force to replace it")
    return chosen


def stored_label(store: Store, path: Path) -> str | None:
    """The label of a file that is in the store, else None."""
    try:
        inside = path.relative_to(store.root.resolve())
    except ValueError:
        return None
    if inside.suffix != SUFFIX:
        return None
    try:
        return validate_label(inside.with_suffix("").as_posix())
    except UsageError:
        return None
