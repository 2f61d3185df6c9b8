"""What every task module shares: its declaration, the context it runs in, its result.

A module is a function `run(ctx, args) -> ModuleResult` plus the names of its arguments;
`args` is the module's own TypedDict (GitArgs, ShellArgs, ...), holding the task's rendered
arguments once normalize() has checked their names and choices. Their values are still what
the playbook wrote (YAML after templating), so each is read through as_str, as_bool, ...:
the types name which keys a module reads, the helpers say what each must hold.
`ModuleResult.data` is TaskData, every key a module returns beside the outcome (`register`
exposes them to later tasks).
It reaches the host only through `ctx.transport` (run a shell command, put a file), honours
`ctx.check` (report, change nothing) and `ctx.diff` (fill `diff` with a unified diff), and
never prints. A failure the playbook caused (a bad argument) raises ArgError; a failure on
the host is a result with failed=True and a message a person can act on.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generic, TypedDict, TypeVar, cast

from envsnap import yamlread
from envsnap.errors import ArgError
from envsnap.hostops.shell import DEFAULT_COMMAND_TIMEOUT, OthersCheckouts
from envsnap.hosts.inventory import Host
from envsnap.hosts.transport import Result, Transport
from envsnap.shape import is_mapping
from envsnap.snapshot.store import Store

if TYPE_CHECKING:
    from envsnap.bench.stats import Comparison
    from envsnap.playbook.templating import Variables
    from envsnap.snapshot.records import Bench, Snapshot

FALSE_WORDS = {"", "0", "false", "no", "off", "n", "f"}
TRUE_WORDS = {"1", "true", "yes", "on", "y", "t"}


class SubmoduleMove(TypedDict):
    """What the submodules step did to one submodule, for a rollback."""

    stash: str | None       # its own work, stashed in its own repository
    previous: str | None    # its HEAD before


class TaskData(TypedDict, total=False):
    """What a module returns beside its outcome, each key with the modules that set it."""

    # git
    repo: str
    commit: str
    previous: str | None
    previous_branch: str | None
    stash: str
    message: str
    sha256: str
    head: str | None
    patch_sha256: str
    submodules: dict[str, SubmoduleMove]
    saved: list[str]
    restored: list[str]
    removed: list[str]
    written: list[str]
    not_restorable: list[str]
    # copy, template, env_file, sitecustomize
    dest: str
    backup: str
    path: str
    env: dict[str, str]
    # shell
    cmd: str
    rc: int
    stdout: str
    stderr: str
    # capture, assert_facts
    label: str
    problems: list[str]
    snapshot: Snapshot
    facts: dict[str, object]
    drifted: list[str]
    # bench
    record: Bench
    values: list[float]
    median: float | None
    verdict: Comparison
    # debug
    value: object


@dataclass
class ModuleResult:
    changed: bool = False
    failed: bool = False
    skipped: bool = False
    drift: bool = False      # a failure that is a finding (the host is not as expected)
    msg: str = ""
    diff: str = ""           # unified diff text, filled in diff mode
    data: TaskData = field(default_factory=TaskData)

    def as_dict(self) -> Variables:
        """The result as a template reads it (`result.changed`)."""
        return {**self.data, "changed": self.changed, "failed": self.failed,
                "skipped": self.skipped, "drift": self.drift, "msg": self.msg,
                "diff": self.diff}


def failed(msg: str, repo: str | None = None) -> ModuleResult:
    return ModuleResult(failed=True, msg=msg, data={"repo": repo} if repo else {})


@dataclass
class Context:
    """One host, as one task sees it."""

    host: Host
    transport: Transport
    store: Store
    check: bool = False
    diff: bool = False
    base_dir: Path = Path(".")            # the playbook's folder: `src:` files are relative to it
    timestamp: str = ""                   # the run's start, names backups and labels
    template: Callable[[str], str] = str  # renders a template file with the task's variables
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT
    others: OthersCheckouts | None = None   # --as-root-in-others-checkouts (hostops/shell.py)

    def sh(self, command: str, timeout: float | None = None) -> Result:
        return self.transport.run(command, timeout or self.command_timeout)


Args = TypeVar("Args", bound=Mapping[str, object])   # a module's TypedDict of arguments


@dataclass(frozen=True)
class Module(Generic[Args]):
    name: str
    run: Callable[[Context, Args], ModuleResult]
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    free_form: str | None = None     # `shell: make bench` means {cmd: "make bench"}
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def accepted(self) -> tuple[str, ...]:
        return self.required + self.optional

    def normalize(self, args: object) -> Args:
        """The task's (rendered) arguments as a mapping, checked against the declaration:
        from here on they are the module's own TypedDict."""
        if isinstance(args, str) and self.free_form:
            args = {self.free_form: args}
        if args is None:
            args = {}
        found = yamlread.as_mapping(args)
        if found is None:
            raise ArgError(f"{self.name}: arguments must be a mapping, not {yaml_kind(args)}")
        self.check_names(found)
        self.check_choices(found)
        return cast(Args, dict(found))

    def check_names(self, args: Mapping[str, object]) -> None:
        unknown = sorted(str(name) for name in args if name not in self.accepted)
        if unknown:
            raise ArgError(f"{self.name}: unknown argument {unknown[0]!r} "
                           f"(accepted: {', '.join(self.accepted)})")
        missing = [name for name in self.required if name not in args]
        if missing:
            raise ArgError(f"{self.name}: missing argument {missing[0]!r}")

    def check_choices(self, args: Mapping[str, object]) -> None:
        for name, allowed in self.choices.items():
            value = args.get(name)
            if value is not None and not _templated(value) and value not in allowed:
                raise ArgError(f"{self.name}: {name} {value!r} is not one of "
                               f"{', '.join(allowed)}")


def yaml_kind(value: object) -> str:
    """A value's type in the playbook's words: the loader's LineList is a `list` to its writer."""
    for kind in (list, dict):
        if isinstance(value, kind):
            return kind.__name__
    return type(value).__name__


def _templated(value: object) -> bool:
    return isinstance(value, str) and "{{" in value


# ---- argument helpers -----------------------------------------------------------------------

def as_bool(args: Mapping[str, object], name: str, default: bool = False) -> bool:
    value = args.get(name, default)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in FALSE_WORDS or value is None:
        return False
    if text in TRUE_WORDS:
        return True
    raise ArgError(f"{name} must be true or false, not {value!r}")


def as_str(args: Mapping[str, object], name: str, default: str | None = None) -> str:
    value = args.get(name, default)
    if value is None:
        raise ArgError(f"missing argument {name!r}")
    if not is_scalar(value):
        raise ArgError(f"{name} must be a string, not a {type(value).__name__}")
    return str(value)


def is_scalar(value: object) -> bool:
    """A YAML scalar (text, number, true/false, null), not a mapping or a list: what an
    argument that becomes text may hold."""
    return not (is_mapping(value) or isinstance(value, list))


def finite_number(value: Any) -> float | None:
    """The value as a finite number, or None: NaN or infinity would reach int() or a timer
    and fail there; `true` is no number either."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def as_number(args: Mapping[str, object], name: str, default: float) -> float:
    value = args.get(name)
    if value is None:
        return default
    number = finite_number(value)
    if number is None:
        raise ArgError(f"{name} must be a number, not {value!r}")
    return number


def as_mapping(args: Mapping[str, object], name: str) -> dict[str, object]:
    value = args.get(name) or {}
    found = yamlread.as_mapping(value)
    if found is None:
        raise ArgError(f"{name} must be a mapping, not {type(value).__name__}")
    return dict(found)


def host_path(args: Mapping[str, object], name: str) -> str:
    """A path on the host: absolute or ~/..., since a relative one would mean different
    folders to a local shell (its cwd) and to SSH (the login home)."""
    path = as_str(args, name)
    if not (path.startswith("/") or path == "~" or path.startswith("~/")):
        raise ArgError(f"{name} must be an absolute path or start with ~/, not {path!r}")
    return path.rstrip("/") or "/"

