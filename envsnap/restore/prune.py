"""`envsnap prune`: restore's own rollback points and their backups, past a retention rule.

Each restore that changes a host leaves two things behind, both kept for the way back: the
host as it was, stored under the label `pre-restore-<time>` (run.py), and what the restore
overwrote, saved on the host in ~/.cache/envsnap/restore-backup/<that label>/
(hostops/treefile.py). They go together: a rollback point without its backup would put
back less than it took.

The rule, per host: the newest `keep` rollback points stay, and so does every one younger
than `days`; the others go. Never removed, whatever the rule says:
- a snapshot whose label is not restore's own form, or that is not signed with the user's key
  (a person named it, or it came from elsewhere);
- a store entry or backup folder that is a symbolic link (left as it is, never followed);
- the rollback point of a restore still open (its journal, safety.py);
- anything of a host where a lock is held now (a restore, bisect or explain is running), or
  that cannot be reached (its backup could not go with the snapshot).

A dry run (`apply` False) reads everything the same way and removes nothing.
"""
from __future__ import annotations

import os
import re
import shlex
import stat
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import NamedTuple

from envsnap.defaults import DEFAULT_PRUNE_DAYS, DEFAULT_PRUNE_KEEP
from envsnap.errors import EnvsnapError, HostError, SnapshotError, UsageError
from envsnap.hostops.locks import LOCKS_DIR
from envsnap.hostops.shell import HostShell
from envsnap.hostops.treefile import BACKUP_DIR, backup_dir
from envsnap.hosts.connect import open_transport
from envsnap.hosts.inventory import Inventory, resolve_hosts
from envsnap.restore.policy import ROLLBACK_PREFIX
from envsnap.restore.safety import JournalBook
from envsnap.snapshot import document as snap
from envsnap.snapshot import provenance
from envsnap.snapshot.store import SUFFIX, Store

# The labels run.py gives: pre-restore-YYYYmmdd-HHMMSS, and -N after it when taken.
ROLLBACK_LABEL = re.compile(re.escape(ROLLBACK_PREFIX) + r"(\d{8}-\d{6})(?:-\d+)?")


class Retention(NamedTuple):
    keep: int = DEFAULT_PRUNE_KEEP      # the newest this many per host stay
    days: float = DEFAULT_PRUNE_DAYS    # and every one younger than this


class RollbackPoint(NamedTuple):
    """One rollback point in the store, and its backup folder on its host."""

    label: str
    host: str                # as reached (what the snapshot records)
    taken: datetime          # when the host was captured, UTC
    path: Path               # the store entry
    size: int                # bytes of the store entry
    backup: str              # its backup folder on the host (~/...)
    backup_size: int = 0     # bytes there (du, in KiB steps); 0 when there is none


class Kept(NamedTuple):
    """A rollback point the rule would let go (or one that cannot be read), kept: why."""

    label: str
    host: str
    why: str


@dataclass
class PruneResult:
    gone: list[RollbackPoint] = field(default_factory=list)   # removed, or would be (dry run)
    kept: list[Kept] = field(default_factory=list)            # kept for a reason of their own
    retained: int = 0            # kept by the rule
    unreachable: list[str] = field(default_factory=list)      # hosts that could not be asked
    applied: bool = False        # False: a dry run, nothing was removed


def prune(store: Store, inventory: Inventory, rule: Retention, apply: bool,
          now: datetime, connect_timeout: float, accept_new_host_keys: bool = False
          ) -> PruneResult:
    """What the rule lets go, found and (with `apply`) removed; see the module's docstring."""
    points, result = rollback_points(store)
    result.applied = apply
    open_labels = open_restores(store)
    candidates: dict[str, list[RollbackPoint]] = {}
    for host, mine in by_host(points).items():
        going = past_rule(mine, rule, now)
        result.retained += len(mine) - len(going)
        for point in going:
            if point.label in open_labels:
                result.kept.append(Kept(point.label, host, "its restore is still open (see "
                                        "`envsnap restore --abort`)"))
            else:
                candidates.setdefault(host, []).append(point)
    for host, going in candidates.items():
        try:
            gone, kept = on_host(store, inventory, host, going, apply, connect_timeout,
                                 accept_new_host_keys)
        except EnvsnapError as exc:
            result.unreachable.append(host)
            gone, kept = [], [Kept(point.label, host, f"host not reached: {exc}")
                              for point in going]
        result.gone += gone
        result.kept += kept
    return result


def rollback_points(store: Store) -> tuple[list[RollbackPoint], PruneResult]:
    """The store's rollback points (its top folder: run.py saves them there), each read
    without following a link; those that cannot be pruned, as kept, in the result."""
    result = PruneResult()
    points: list[RollbackPoint] = []
    try:
        entries = sorted(os.scandir(store.root), key=lambda entry: entry.name)
    except FileNotFoundError:
        return points, result
    except OSError as exc:
        raise UsageError(f"cannot list store {store.where}: {exc.strerror}") from None
    for entry in entries:
        label = entry.name[:-len(SUFFIX)]
        match = ROLLBACK_LABEL.fullmatch(label)
        if not entry.name.endswith(SUFFIX) or match is None:
            continue     # not restore's own label: a person's snapshot, never touched
        found = rollback_point(store, entry, label, match.group(1))
        if isinstance(found, Kept):
            result.kept.append(found)
        else:
            points.append(found)
    return points, result


def rollback_point(store: Store, entry: os.DirEntry[str], label: str,
                   stamp: str) -> RollbackPoint | Kept:
    info = entry.stat(follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        return Kept(label, "?", "a symbolic link: left alone, not followed")
    if not stat.S_ISREG(info.st_mode):
        return Kept(label, "?", "not a regular file: left alone")
    try:
        document = store.load(entry.path)
    except (SnapshotError, UsageError) as exc:
        return Kept(label, "?", f"unreadable ({exc}): left alone")
    host = snap.host(document)
    if not provenance.verify_as_user(document).mine:
        return Kept(label, host, "not signed with your key: not a rollback point of yours")
    return RollbackPoint(label, host, taken_at(snap.captured_at(document), stamp),
                         Path(entry.path), info.st_size, backup_dir(label))


def taken_at(captured: str | None, stamp: str) -> datetime:
    """When the rollback point was captured: as it records, else as its label says (UTC)."""
    try:
        when = datetime.fromisoformat(captured or "")
        return when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    except ValueError:
        return datetime.strptime(stamp, "%Y%m%d-%H%M%S").replace(tzinfo=timezone.utc)


def open_restores(store: Store) -> set[str]:
    """The rollback points of restores still open: each journal's, and a rollback's target."""
    labels: set[str] = set()
    for journal in JournalBook(store).pending():
        labels |= {journal.pre_restore, journal.label}
    return labels


def by_host(points: list[RollbackPoint]) -> dict[str, list[RollbackPoint]]:
    hosts: dict[str, list[RollbackPoint]] = {}
    for point in points:
        hosts.setdefault(point.host, []).append(point)
    return hosts


def past_rule(points: list[RollbackPoint], rule: Retention,
              now: datetime) -> list[RollbackPoint]:
    """Of one host's rollback points, those the rule lets go, oldest first: neither among the
    newest `keep` nor younger than `days`."""
    newest_first = sorted(points, key=lambda point: (point.taken, point.label), reverse=True)
    young = now - timedelta(days=rule.days)
    going = [point for point in newest_first[rule.keep:] if point.taken <= young]
    return going[::-1]


# The host's side, one script for the look and one for the removal. `$locks` held: a
# restore, bisect or explain is running, and may be rolling back to one of these points.
# A backup folder that is a link, or below a link, is reported and never entered.
HOST_PRELUDE = f"""locks="$HOME"/{shlex.quote(LOCKS_DIR)}
if [ -d "$locks" ] && [ -n "$(ls -A "$locks" 2>/dev/null)" ]; then
  printf 'locked %s\\n' "$(ls -A "$locks" | head -3 | tr '\\n' ' ')"; exit 0
fi
base="$HOME"/{shlex.quote(BACKUP_DIR.removeprefix("~/"))}
for up in "$HOME/.cache" "$HOME/.cache/envsnap" "$base"; do
  [ -L "$up" ] && {{ printf 'linked %s\\n' "$up"; exit 0; }}
done
"""
LOOK = HOST_PRELUDE + """for l in "$@"; do d="$base/$l"
  if [ -L "$d" ]; then printf 'link %s\\n' "$l"
  elif [ -d "$d" ]; then printf 'dir %s %s\\n' "$l" "$(du -sk "$d" | cut -f1)"
  else printf 'none %s\\n' "$l"; fi
done
"""
REMOVE = HOST_PRELUDE + """for l in "$@"; do d="$base/$l"
  if [ -d "$d" ] && [ ! -L "$d" ]; then rm -rf -- "$d" || exit 1; fi
  printf 'removed %s\\n' "$l"
done
"""


def on_host(store: Store, inventory: Inventory, host_name: str, going: list[RollbackPoint],
            apply: bool, connect_timeout: float, accept_new_host_keys: bool
            ) -> tuple[list[RollbackPoint], list[Kept]]:
    """Of one host's rollback points past the rule, those that go (with the size of their
    backups) and those kept; with `apply`, the ones that go are removed: the store entry
    first (a backup left without its point is only space; a point without its backup would
    roll back less), then the backup folder."""
    hosts = resolve_hosts([host_name], inventory)
    if len(hosts) != 1:
        raise UsageError(f"{host_name!r} names {len(hosts)} hosts: pass the inventory its "
                         "restores ran with")
    labels = [point.label for point in going]
    with open_transport(hosts[0], connect_timeout, accept_new_host_keys) as transport:
        shell = HostShell(hosts[0], transport)
        looked = host_script(shell, LOOK, labels)
        refusal = host_refusal(looked)
        if refusal is not None:
            return [], [Kept(label, host_name, refusal) for label in labels]
        sizes = backup_sizes(looked)
        gone = [point._replace(backup_size=sizes[point.label]) for point in going
                if point.label in sizes]
        kept = [Kept(point.label, host_name, "its backup folder on the host is a symbolic "
                                             "link: left alone, not followed")
                for point in going if point.label not in sizes]
        if apply and gone:
            gone, kept = remove(shell, gone, kept)
    return gone, kept


def host_script(shell: HostShell, script: str, labels: list[str]) -> list[str]:
    result = shell.sh(f"sh -c {shlex.quote(script)} sh {' '.join(map(shlex.quote, labels))}")
    if result.exit_code != 0:
        raise HostError(f"{shell.host.name}: the backups could not be read or removed "
                        f"(exit {result.exit_code}): {result.stderr.strip()[-200:]}")
    return result.stdout.splitlines()


def host_refusal(lines: list[str]) -> str | None:
    """Why nothing of the host may go now, from the script's first line, if so."""
    first = lines[0] if lines else ""
    if first.startswith("locked "):
        return (f"a lock is held on the host ({first[7:].strip()} in ~/{LOCKS_DIR}): a "
                "restore, bisect or explain is running")
    if first.startswith("linked "):
        return f"{first[7:]} on the host is a symbolic link: left alone, not followed"
    return None


def backup_sizes(lines: list[str]) -> dict[str, int]:
    """label -> bytes of its backup (0: none there); a label whose folder is a link is left
    out."""
    sizes: dict[str, int] = {}
    for line in lines:
        kind, _, rest = line.partition(" ")
        label, _, kib = rest.partition(" ")
        if kind == "dir":
            sizes[label] = int(kib) * 1024 if kib.isdigit() else 0
        elif kind == "none":
            sizes[label] = 0
    return sizes


def remove(shell: HostShell, gone: list[RollbackPoint], kept: list[Kept]
           ) -> tuple[list[RollbackPoint], list[Kept]]:
    """Each store entry (unlinked as the entry it still is: never through a link), then the
    backups on the host, which the host's script checks for locks and links once more."""
    removed: list[RollbackPoint] = []
    for point in gone:
        try:
            if not stat.S_ISREG(os.lstat(point.path).st_mode):
                kept.append(Kept(point.label, point.host, "changed meanwhile: left alone"))
                continue
            os.unlink(point.path)
        except OSError as exc:
            kept.append(Kept(point.label, point.host, f"not removed: {exc.strerror}"))
            continue
        removed.append(point)
    if removed:
        said = host_script(shell, REMOVE, [point.label for point in removed])
        refusal = host_refusal(said)
        if refusal is not None:   # the store entries are gone; their backups stay
            kept += [Kept(point.label, point.host, f"its backup stays: {refusal}")
                     for point in removed]
    return removed, kept
