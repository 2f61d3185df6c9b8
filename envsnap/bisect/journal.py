"""A bisect's or an explain's journal: each trial written as it is measured, then the answer
and how the put-back went, one JSON object a line, in the store beside the snapshots
(`journals/<command>-<good>-<bad>-<time>.jsonl`). What a crash, a Ctrl-C or a put-back that
fails would cut short of the output is there, line by line, flushed to disk as it comes.
Ctrl-C ends it with an `interrupted` record: every trial measured so far, the runs that ended
after the last one (the trial cut short), and whether the host was put back.

A store that cannot hold one costs the journal, never the run: the run says so once and
goes on (its answer is printed all the same).

Every record is masked as a snapshot is before it reaches the file (snapshot/mask.py, secrets
only): a trial's env differences, a commit's subject, an error's text may hold a secret.
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Callable, Optional, TypeVar, Union

from envsnap.agent.redact import rekey
from envsnap.errors import StoreError
from envsnap.snapshot.entries import append_entry, create_entry
from envsnap.snapshot.mask import Masker

FOLDER = "journals"
# Secrets masked always, as in any snapshot; hardware ids and home paths kept: the journal
# stays in this user's store, and names the checkouts it put back.
SECRETS = Masker(mask=False)

Event = TypeVar("Event")
# What a record holds: JSON's values
Value = Union[str, int, float, bool, None, Sequence["Value"], Mapping[str, "Value"]]
Record = Optional[tuple[str, Mapping[str, Value]]]   # a kind and its fields, or nothing kept
# The records of a measured trial: explain's, bisect's (an endpoint or a step)
MEASURED = ("trial", "step")
# A run that ended: held, not written, until its trial's record (which holds its value);
# what a Ctrl-C cut short, the interrupted record holds
RUN = "run"


class Journal:
    """`Journal.at(store_root, "explain", labels)` names it; `start()` makes the file (a
    run that is declined leaves none); `write(kind, **fields)` adds a record."""

    def __init__(self, path: Path | None, labels: tuple[str, str] = ("", ""),
                 command: str = "") -> None:
        self.path, self.labels, self.command = path, labels, command
        self.started = False
        self.why_not = "" if path is not None else "no store"
        self.measured: list[Mapping[str, Value]] = []   # each trial's record, in order
        self.runs: list[Mapping[str, Value]] = []       # the runs ended since the last one

    @classmethod
    def at(cls, root: Path, command: str, labels: tuple[str, str]) -> Journal:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        names = "-".join(re.sub(r"[^A-Za-z0-9._-]+", "_", label) for label in labels)
        return cls(root / FOLDER / f"{command}-{names}-{stamp}.jsonl", labels, command)

    def start(self) -> str:
        """The file made, its first record written: the line that names it (or says why
        there is none), for the output."""
        if self.path is not None and not self.started:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # a new file of this user's alone, never one that is there (nor a link)
                create_entry(self.path)
                self.started = True
            except OSError as exc:
                self.why_not, self.path = f"{self.path}: {exc.strerror or exc}", None
            except StoreError as exc:   # it names the path
                self.why_not, self.path = str(exc), None
            self.write("start", command=self.command, good=self.labels[0], bad=self.labels[1])
        return self.said

    @property
    def said(self) -> str:
        """The line that names it, for the output."""
        if self.path is None:
            return f"no journal of this run: {self.why_not}"
        return f"journal: {self.path} (each trial written as it is measured)"

    def write(self, kind: str, /, **fields: Value) -> None:
        if self.path is None or not self.started:
            return
        record = {"event": kind, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  **fields}
        try:   # never through a link, never waiting on a FIFO put there meanwhile
            append_entry(self.path, masked_line(record) + "\n")
        except OSError as exc:   # the disk filled up: the run goes on, the journal stops
            self.why_not, self.path = f"{self.path}: {exc.strerror or exc}", None
        except StoreError as exc:   # a link or a FIFO put in its place: the same
            self.why_not, self.path = str(exc), None

    def recording(self, emit: Callable[[Event], None],
                  record: Callable[[Event], Record]) -> Callable[[Event], None]:
        """`emit`, with each event that `record` turns into (kind, fields) written first."""
        def write_then_emit(event: Event) -> None:
            recorded = record(event)
            if recorded is not None:
                self.keep(*recorded)
            emit(event)
        return write_then_emit

    def keep(self, kind: str, fields: Mapping[str, Value]) -> None:
        """A record written, or a run held until its trial's record (RUN)."""
        if kind == RUN:
            self.runs.append(fields)
            return
        if kind in MEASURED:
            self.measured.append(fields)
            self.runs = []
        self.write(kind, **fields)

    def interrupted(self, problem: str = "") -> None:
        """The last record after Ctrl-C: what was measured so far, and whether the host was
        put back (`problem`: what the put-back could not finish)."""
        self.write("interrupted", measured=list(self.measured), cut_short=list(self.runs),
                   put_back=not problem, **({"problem": problem} if problem else {}))


def masked_line(record: Mapping[str, Value]) -> str:
    """A record as its line in the file, every string in it masked. A marker in the agent's
    own form (an unkeyed digest of the secret) becomes the plain one: none reaches a disk."""
    return rekey(json.dumps(SECRETS.tree(record), sort_keys=True), None)
