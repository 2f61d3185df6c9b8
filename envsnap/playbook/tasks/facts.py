"""`capture` (a snapshot of the host, saved in the store) and `assert_facts` (the
pre-benchmark gate: fail when a fact is not what it must be).

Both run the capture agent through the task's own transport: no second connection. What
`capture` (and `bench` with a label) saves goes through hosts.capture.save_snapshot, the
path `envsnap capture` takes: signed, stored atomically, a label saved meanwhile refused.
assert_facts compares dotted paths for equality only; ranking drift is the diff's business.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypedDict, cast

from envsnap.defaults import DEFAULT_COLLECTOR_TIMEOUT
from envsnap.errors import ArgError, UsageError
from envsnap.hosts.capture import CaptureOptions, save_snapshot, snapshot_document
from envsnap.hosts.inventory import name_list, with_vars
from envsnap.playbook.tasks.base import (
    Context,
    Module,
    ModuleResult,
    TaskData,
    as_bool,
    as_mapping,
    as_number,
    failed,
    is_scalar,
)
from envsnap.shape import is_mapping
from envsnap.snapshot.spec import is_object
from envsnap.snapshot.store import label_from_name, validate_label
from envsnap.text import plural

if TYPE_CHECKING:
    from envsnap.snapshot.records import Snapshot

CAPTURE_ARGS = ("repos", "procs", "python", "collector_timeout")
TOKEN = re.compile(r"""\.?(?:\[(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<index>\d+))\]"""
                   r"""|(?P<name>[^.\[\]]+))""")
MISSING = object()
TOP_LEVEL = ("schema", "meta", "facts", "volatile", "digests")


class CaptureFields(TypedDict, total=False):
    """What a capture on the host takes (CAPTURE_ARGS), as the host vars of the same names."""

    repos: object        # checkouts to record: a list, or one comma-separated string
    procs: object        # process names whose workers to record
    python: object       # the interpreter whose packages to record
    collector_timeout: object   # seconds per collector


class CaptureArgs(CaptureFields, total=False):
    label: object        # the snapshot's name in the store (default: host and time)
    force: object        # replace a snapshot of that name


class AssertFactsArgs(CaptureFields, total=False):
    that: object         # dotted path -> the value it must hold
    same_as: object      # a snapshot (name or document) whose `paths` values must hold
    paths: object        # dotted paths, read in same_as
    snapshot: object     # the facts to check (default: the host as it is now)


def take_snapshot(ctx: Context, args: CaptureFields, label: str) -> Snapshot:
    """The host as it is now, as a snapshot document (not saved)."""
    for listed in ("repos", "procs"):
        try:
            name_list(args.get(listed), listed)
        except UsageError as exc:   # the task's args, not the host: the playbook's fault
            raise ArgError(str(exc)) from None
    host = with_vars(ctx.host, {name: args.get(name) for name in ("repos", "procs", "python")})
    seconds = as_number(args, "collector_timeout", 0.0) or DEFAULT_COLLECTOR_TIMEOUT
    if seconds < 0:
        raise ArgError(f"collector_timeout must be more than 0 seconds, not {seconds:g}")
    return snapshot_document(ctx.transport, host, label, CaptureOptions(collector_timeout=seconds))


def capture(ctx: Context, args: CaptureArgs) -> ModuleResult:
    label = validate_label(str(args.get("label") or f"{label_from_name(ctx.host.name)}-"
                                                    f"{ctx.timestamp}"))
    if ctx.check:
        return ModuleResult(changed=True, msg=f"would capture {ctx.host.name} as {label}",
                            data={"label": label})
    if ctx.store.exists(label) and not as_bool(args, "force"):
        return failed(f"snapshot {label!r} already exists (force: true replaces it)")
    saved = save_snapshot(ctx.store, take_snapshot(ctx, args, label), label,
                          replace=as_bool(args, "force"))
    said = f"saved {label} -> {saved.path}" + "".join(f"; problem: {p}"
                                                      for p in saved.problems)
    return ModuleResult(changed=True, msg=said, data={"label": label, "path": str(saved.path),
                                                      "problems": saved.problems,
                                                      "snapshot": saved.document})


# ---- assert_facts -------------------------------------------------------------------------------

def assert_facts(ctx: Context, args: AssertFactsArgs) -> ModuleResult:
    """`that: {path: value}`, and/or `same_as: SNAPSHOT` with `paths: [...]`: each path must
    hold what it holds in that snapshot (absent in both counts as the same)."""
    expected = expectations(ctx, args)
    document = source_document(ctx, args)
    found = {path: lookup(document, path) for path in expected}
    drifted = [path for path, value in expected.items() if not same(found[path], value)]
    shown: dict[str, object] = {path: None if value is MISSING else value
                                for path, value in found.items()}
    if drifted:
        lines = [f"{path}: expected {describe(expected[path])}, found {describe(found[path])}"
                 for path in drifted]
        return ModuleResult(failed=True, drift=True, msg="drifted: " + "; ".join(lines),
                            data=TaskData(facts=shown, drifted=drifted))
    return ModuleResult(msg=f"{plural(len(expected), 'fact')} as expected",
                        data=TaskData(facts=shown))


def expectations(ctx: Context, args: AssertFactsArgs) -> dict[str, object]:
    expected = {str(path): value for path, value in as_mapping(args, "that").items()}
    paths = args.get("paths") or []
    if isinstance(paths, str) or not isinstance(paths, list):
        raise ArgError("assert_facts: paths must be a list of dotted paths")
    if paths:
        if args.get("same_as") is None:
            raise ArgError("assert_facts: paths needs same_as (the snapshot to compare with)")
        reference = load_document(ctx, args["same_as"])
        expected.update({str(path): lookup(reference, str(path)) for path in paths})
    if not expected:
        raise ArgError("assert_facts: give that: {path: value}, or same_as with paths")
    return expected


def source_document(ctx: Context, args: AssertFactsArgs) -> Snapshot:
    """The facts to check: a given snapshot, or the host as it is now."""
    if args.get("snapshot") is None:
        return take_snapshot(ctx, args, label="assert-facts")
    return load_document(ctx, args["snapshot"])


def load_document(ctx: Context, source: object) -> Snapshot:
    """A snapshot's name in the store, or the document itself: the play's `snapshot`
    variable, which the runner loaded (validated) from the store."""
    return cast("Snapshot", source) if is_mapping(source) else ctx.store.load(str(source))


def split_path(path: str) -> list[str | int]:
    """`facts.git.repos["/root/sglang"].head` -> [facts, git, repos, /root/sglang, head]"""
    parts: list[str | int] = []
    position = 0
    while position < len(path):
        match = TOKEN.match(path, position)
        if not match or match.end() == position:
            raise ArgError(f"assert_facts: cannot read the path {path!r} at {path[position:]!r}")
        index = match["index"]
        parts.append(int(index) if index is not None else
                     next(v for v in (match["dq"], match["sq"], match["name"]) if v is not None))
        position = match.end()
    return parts


def lookup(document: Snapshot, path: str) -> object:
    """The value at `path` from the document's root; a path not starting with a top-level
    key (meta, facts, ...) is read under facts: `nvidia.driver` means `facts.nvidia.driver`."""
    parts = split_path(path)
    if parts and parts[0] not in TOP_LEVEL:
        parts.insert(0, "facts")
    value: object = document
    for part in parts:
        if is_object(value) and isinstance(part, str) and part in value:   # its keys: text
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        else:
            return MISSING
    return value


def same(actual: object, expected: object) -> bool:
    """Equal, or equal as text: YAML reads `2.27` as a number where a fact holds "2.27"."""
    if actual is MISSING or expected is MISSING:
        return actual is expected
    return bool(actual == expected) or (
        is_scalar(actual) and str(actual) == str(expected))


def describe(value: object) -> str:
    return "nothing (no such fact)" if value is MISSING else repr(value)


CAPTURE = Module[CaptureArgs](name="capture", run=capture,
                              optional=("label", "force", *CAPTURE_ARGS))
ASSERT_FACTS = Module[AssertFactsArgs](name="assert_facts", run=assert_facts,
                      optional=("that", "same_as", "paths", "snapshot", *CAPTURE_ARGS))
