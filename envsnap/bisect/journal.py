"""A bisect's or an explain's journal: each trial written as it is measured, then the answer
and how the put-back went, one JSON object a line, in the store beside the snapshots
(`journals/<command>-<good>-<bad>-<time>.jsonl`). What a crash, a Ctrl-C or a put-back that
fails would cut short of the output is there, line by line, flushed to disk as it comes.

A store that cannot hold one costs the journal, never the run: the run says so once and
goes on (its answer is printed all the same).
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Callable, Optional, TypeVar, Union

from envsnap.errors import StoreError
from envsnap.snapshot.entries import append_entry, create_entry

FOLDER = "journals"

Event = TypeVar("Event")
# What a record holds: JSON's values
Value = Union[str, int, float, bool, None, Sequence["Value"], Mapping[str, "Value"]]
Record = Optional[tuple[str, Mapping[str, Value]]]   # a kind and its fields, or nothing kept


class Journal:
    """`Journal.at(store_root, "explain", labels)` names it; `start()` makes the file (a
    run that is declined leaves none); `write(kind, **fields)` adds a record."""

    def __init__(self, path: Path | None, labels: tuple[str, str] = ("", ""),
                 command: str = "") -> None:
        self.path, self.labels, self.command = path, labels, command
        self.started = False
        self.why_not = "" if path is not None else "no store"

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
            append_entry(self.path, json.dumps(record, sort_keys=True) + "\n")
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
                self.write(recorded[0], **recorded[1])
            emit(event)
        return write_then_emit
