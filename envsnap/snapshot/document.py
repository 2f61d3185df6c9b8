"""The snapshot document: schema, meta, facts apart from volatile readings, section digests.

A snapshot is a plain mapping, kept plain on purpose (it is YAML on disk and attached to bug
reports); this module is the one place that knows its shape:

    schema:   int, see SCHEMA and MIGRATIONS
    meta:     label, host, captured_at, envsnap and agent versions, per-collector timings/errors
    facts:    {section: configuration}        diffed by default
    volatile: {section: readings}             clocks, temperatures, uptime: diffed on request
    digests:  {section: sha256 of facts}      lets a diff skip every unchanged section
    bench:    optional, `envsnap bench`'s record (bench/run.py): the runs measured on the
              state this document holds; not a fact, so never drift
"""
from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, cast

from envsnap import __version__, shape
from envsnap.errors import SnapshotError, UsageError
from envsnap.snapshot.spec import Invalid, got, is_object

if TYPE_CHECKING:   # records.py costs ~5 ms to import, and is read by mypy only
    from envsnap.snapshot.records import (
        Bench,
        CaptureConfig,
        Collector,
        CudaNccl,
        CustomizeFile,
        Env,
        Facts,
        Git,
        HeldBy,
        Imported,
        Meta,
        Nvidia,
        Process,
        PythonEnv,
        Repo,
        ShadowedCustomize,
        Snapshot,
        System,
        UserSite,
        Volatile,
    )

SCHEMA = 1
SERVER_STARTED = "envsnap --serve"   # a worker's "matched" when envsnap started it (the agent's
                                     # benchserve.MATCHED)

# Step-wise migration, pipx style: MIGRATIONS[n] turns a schema-n document into schema n+1.
MIGRATIONS: dict[int, Callable[[dict[str, object]], dict[str, object]]] = {}


def section_digest(section: Any) -> str:
    # hashlib on use: it loads OpenSSL (~2 ms), and `envsnap diff` reads the recorded digests
    import hashlib

    canonical = json.dumps(section, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def build(agent_output: dict[str, Any], *, label: str, host: str, address: str,
          captured_at: str, config: dict[str, Any]) -> Snapshot:
    """Turn the agent's JSON document into a snapshot document; `config` is what the agent
    was asked for (repos, procs, hot_paths, python, timeout).

    Both are taken as schema.py describes them: the agent is the program that description
    was written from (tests/unit/snapshot/test_schema.py checks its captures), and every
    later load checks the saved file again."""
    collectors = agent_output.get("collectors", {})
    facts = {name: result.get("facts", {}) for name, result in collectors.items()}
    volatile = {name: result.get("volatile", {}) for name, result in collectors.items()}
    return {
        "schema": SCHEMA,
        "meta": {
            "label": label,
            "host": host,
            "address": address or "local",
            "captured_at": captured_at,
            "envsnap_version": __version__,
            "agent": agent_output.get("agent", {}),
            "config": cast("CaptureConfig", config),
            "collectors": {name: {"seconds": result.get("seconds"), "error": result.get("error")}
                           for name, result in collectors.items()},
        },
        "facts": cast("Facts", facts),
        "volatile": cast("Volatile", volatile),
        "digests": {name: section_digest(section) for name, section in facts.items()},
    }


def problems(document: Snapshot) -> list[str]:
    """What failed during capture: failed collectors and repos that could not be read.

    Readings a GPU simply does not support are normal and are not listed here.
    """
    found = [f"{name}: {info['error']}" for name, info in sorted(collectors(document).items())
             if info.get("error")]
    found += [f"git: {path}: {why}" for path, why in sorted(unreadable_repos(document).items())]
    return found


# ---- reading a validated document: the one place that knows where things are ---------------

def meta(document: Snapshot) -> Meta:
    # .get, though the schema requires it: readers of a part-built document (tests, the
    # agent's output before build()) get "absent", never a KeyError
    return document.get("meta", {})


def label(document: Snapshot, default: str = "?") -> str:
    return meta(document).get("label") or default


def host(document: Snapshot, default: str = "?") -> str:
    """The name the host was reached by (`root@gpu-box`), as recorded at capture."""
    return meta(document).get("host") or default


def captured_at(document: Snapshot) -> str | None:
    return meta(document).get("captured_at")


def envsnap_version(document: Snapshot) -> str | None:
    return meta(document).get("envsnap_version")


def capture_config(document: Snapshot) -> CaptureConfig:
    """The options the capture ran with (repos, procs, hot_paths, python, timeout)."""
    return meta(document).get("config", {})


def collectors(document: Snapshot) -> dict[str, Collector]:
    return meta(document).get("collectors", {})


def imported(document: Snapshot) -> Imported | None:
    """How an imported snapshot was read (`envsnap import`); None for a capture."""
    return meta(document).get("imported")


def is_partial(document: Snapshot) -> bool:
    """It knows only what some pasted outputs carry: a field it lacks is unknown, not absent."""
    return bool((imported(document) or {}).get("partial"))


def complete_paths(document: Snapshot) -> frozenset[str]:
    """The collections an imported snapshot holds whole ("python_env.packages"): one of
    their entries it lacks is really not there."""
    return frozenset((imported(document) or {}).get("complete", []))


def refuse_partial(document: Snapshot, label: str, what: str) -> None:
    """An imported snapshot is a stranger's paste that knows only part of a host: nothing
    acts on a host from it (it would pin what it does not know, trust what it cannot)."""
    if is_partial(document):
        raise UsageError(f"{label} was imported from pasted outputs: it is partial and "
                         f"foreign, and {what} needs a capture of the host (envsnap capture)")


def facts(document: Snapshot) -> Facts:
    """Every section's facts by name (a validated document always has this mapping)."""
    return document.get("facts", {})


def section_names(document: Snapshot) -> list[str]:
    return list(facts(document))


def has_section(document: Snapshot, name: str) -> bool:
    return name in facts(document)


def section(document: Snapshot, name: str) -> Mapping[str, Any]:
    """One section's facts by name, whichever section it is (a newer agent's too), for code
    that walks every section alike; {} when it was not captured (collector_error says why).
    The named readers below give each known section its type."""
    sections: Mapping[str, Any] = facts(document)
    found: Mapping[str, Any] = sections.get(name, {})
    return found


def system(document: Snapshot) -> System:
    return facts(document).get("system", {})


def nvidia(document: Snapshot) -> Nvidia:
    return facts(document).get("nvidia", {})


def cuda_nccl(document: Snapshot) -> CudaNccl:
    return facts(document).get("cuda_nccl", {})


def python_env(document: Snapshot) -> PythonEnv:
    return facts(document).get("python_env", {})


def env(document: Snapshot) -> Env:
    return facts(document).get("env", {})


def git(document: Snapshot) -> Git:
    return facts(document).get("git", {})


def collector_error(document: Snapshot, name: str) -> str | None:
    """Why a section holds nothing: its collector's error, or that it is absent; else None."""
    if name not in facts(document):
        return "not in this snapshot"
    return collectors(document).get(name, {}).get("error") or None


def hostname(document: Snapshot) -> str | None:
    """The host's own name (system.hostname); None when the system collector failed."""
    return system(document).get("hostname")


def repos(document: Snapshot) -> dict[str, Repo]:
    """The git repositories by path, each read or not (repo_error tells which)."""
    return git(document).get("repos", {})


def repo_error(repo: Repo) -> str | None:
    """Why a repository could not be read (it is then {"error": why}); None when it was."""
    return repo.get("error") or None


def readable_repos(document: Snapshot) -> dict[str, Repo]:
    return {path: repo for path, repo in repos(document).items() if not repo_error(repo)}


def repos_with_head(document: Snapshot) -> dict[str, Repo]:
    """The repositories read with a commit recorded: what a restore, bisect or explain can
    check out (restore.yml skips the others)."""
    return {path: repo for path, repo in repos(document).items()
            if repo.get("head") is not None}


def untracked(repo: Repo | None) -> dict[str, object]:
    """{path: record} of the untracked files, as recorded."""
    return ((repo or {}).get("uncommitted") or {}).get("untracked") or {}


def untracked_records(repo: Repo | None) -> dict[str, Mapping[str, object]]:
    """{path: record} of the untracked files recorded as a mapping (the agent's file facts).
    The schema leaves an untracked file's record free-form, so this is where its shape is
    read; a record of another shape is left out."""
    return {path: facts for path, facts in untracked(repo).items() if is_object(facts)}


def untracked_contents(repo: Repo) -> dict[str, str]:
    """{path: content} of the untracked files recorded whole enough to write back; a file
    recorded without its content (binary, over the cap, a symlink, unreadable) is left out."""
    return {path: content for path, facts in untracked_records(repo).items()
            if isinstance(content := facts.get("content"), str)}


def untracked_digests(repo: Repo) -> dict[str, object]:
    """{path: sha256} of each untracked file (the record itself where it holds no mapping),
    for telling whether the untracked files moved."""
    records = untracked_records(repo)
    return {path: records[path].get("sha256") if path in records else facts
            for path, facts in untracked(repo).items()}


def untracked_sizes(repo: Repo) -> dict[str, object]:
    """{path: bytes} of each untracked file recorded as a mapping (its size as recorded), for
    a report's list of them; a record of another shape is left out."""
    return {path: facts.get("bytes") for path, facts in untracked_records(repo).items()}


def process_env(process: Process) -> dict[str, str | None] | None:
    """A process's environment as recorded; None when it was not (the agent writes
    {"error": why} in its place when /proc/PID/environ could not be read)."""
    found = process.get("env")
    return None if found is None or "error" in found else found


def sitecustomize(document: Snapshot) -> CustomizeFile | None:
    """The recorded sitecustomize; None when the python had none."""
    return python_env(document).get("customize", {}).get("sitecustomize")


def customize_shadowed(document: Snapshot) -> dict[str, ShadowedCustomize]:
    """{path: record} of each sitecustomize.py/usercustomize.py on sys.path that never runs
    (an earlier one is imported); {} where none was, or the snapshot is older than that."""
    return python_env(document).get("customize_shadowed", {})


def user_site(document: Snapshot) -> UserSite:
    """Whether the recorded python's user site (where usercustomize lives) is on."""
    return python_env(document).get("user_site", {})


# The startup options of a python command line that change which customize file runs.
STARTUP_OPTIONS = "SsIP"
STARTUP_ENV = ("PYTHONNOUSERSITE", "PYTHONSAFEPATH")


def startup_letters(args: list[str]) -> str:
    """The one-letter options python reads before its script, -c or -m ("-sE -X dev x.py"
    -> "sEX"); an option's value (-W, -X) is skipped."""
    letters = ""
    rest = iter(args)
    for arg in rest:
        if not arg.startswith("-") or arg in ("-", "--") or arg.startswith("--"):
            return letters
        for at, letter in enumerate(arg[1:]):
            letters += letter
            if letter in "cm":
                return letters
            if letter in "WX":       # the rest of the word, or the next one, is its value
                if at == len(arg) - 2:
                    next(rest, None)
                break
    return letters


def python_startup_flags(process: Process) -> list[str]:
    """The options (-S, -s, -I, -P) and variables (PYTHONNOUSERSITE, PYTHONSAFEPATH) of a
    python process's command line and env that change what runs at its start; [] for a
    process that is not python."""
    cmdline = process.get("cmdline") or []
    if not cmdline or not cmdline[0].rsplit("/", 1)[-1].startswith("python"):
        return []
    letters = startup_letters(cmdline[1:])
    found = [f"-{letter}" for letter in STARTUP_OPTIONS if letter in letters]
    if "I" not in letters and "E" not in letters:    # both make python ignore PYTHON*
        env_found = process_env(process) or {}
        found += [f"{name}={env_found[name]}" for name in STARTUP_ENV if env_found.get(name)]
    return found


def unreadable_repos(document: Snapshot) -> dict[str, str]:
    """{path: why} for each repository the capture could not read."""
    return {path: why for path, repo in repos(document).items()
            if (why := repo_error(repo)) is not None}


def held_checkouts(document: Snapshot) -> dict[str, HeldBy]:
    """{path: holder} of each checkout an envsnap restore, bisect or explain held at capture
    (agent/gitlock.py): what was recorded there is envsnap's state, not the user's."""
    return {path: held for path, repo in repos(document).items()
            if (held := repo.get("held_by")) is not None}


def held_text(path: str, held: HeldBy) -> str:
    """One line for `show` and `diff`: whose state this is, and since when."""
    who = [f"pid {held.get('pid')} on {held.get('controller') or '?'}"]
    who += [repr(held["command"])] if held.get("command") else []
    who += [f"since {held['since']}"] if held.get("since") else []
    return (f"{path} was held by envsnap ({', '.join(who)}): the state recorded there is "
            "envsnap's, not the user's")


def packages(document: Snapshot) -> dict[str, str | None]:
    """Installed distributions by name -> version (python_env.packages)."""
    return python_env(document).get("packages", {})


def customize_digest(document: Snapshot) -> str | None:
    """The recorded sitecustomize's sha256 (None when there was none), what restore and
    explain compare to tell whether sitecustomize moved."""
    site = (python_env(document).get("customize") or {}).get("sitecustomize")
    return site.get("sha256") if site is not None else None


def package_pins(snapshot: Snapshot, live: Snapshot) -> list[str]:
    """NAME==VERSION for each package whose version drifted or that went missing; packages
    added since the snapshot are not among them (restore --pip removes those apart)."""
    recorded = packages(snapshot)
    current = packages(live)
    return [f"{name}=={version}" for name, version in sorted(recorded.items())
            if isinstance(version, str) and current.get(name) != version]


def set_label(document: Snapshot, new_label: str) -> None:
    """A rollback point's own label, an adopted snapshot's new one."""
    document["meta"]["label"] = new_label


def set_envsnap_version(document: Snapshot, version: str) -> None:
    """Pin the version a document says it was made by (an example's bytes must not move)."""
    document["meta"]["envsnap_version"] = version


def set_signature(document: Snapshot, *, algorithm: str, key: str, digest: str) -> None:
    """Stamp whose snapshot it is (provenance.signature of every other field)."""
    document["meta"]["signature"] = {"algorithm": algorithm, "key": key, "digest": digest}


def bench(document: Snapshot) -> Bench | None:
    """`envsnap bench`'s record, or None when the snapshot has none."""
    return document.get("bench")


def set_bench(document: Snapshot, record: Bench) -> None:
    """Attach the runs measured on the state the document holds (not a fact: never drift).

    `record` is bench/run.py's record of the agent's runs (build_record takes the agent's
    report as build() takes its sections); a load checks it with the rest."""
    document["bench"] = record


def add_workers(document: Snapshot, workers: dict[str, Process]) -> None:
    """Add processes to the env section's workers (a --serve server: envsnap started it after
    the capture), keeping the section's digest true."""
    if not workers:
        return
    section = facts(document).setdefault("env", {})
    section["processes"] = {**section.get("processes", {}), **workers}
    document.setdefault("digests", {})["env"] = section_digest(section)


def server_worker(document: Snapshot) -> tuple[str, Process] | None:
    """(pid, worker) of the server a `bench --serve` started and recorded (add_workers: role
    "server"), the server itself, not one of its children; None when there was none."""
    processes = env(document).get("processes", {})
    for pid, worker in sorted(processes.items()):
        if worker.get("role") == "server" and worker.get("matched") == SERVER_STARTED:
            return pid, worker
    return None


def recorded_server_env(document: Snapshot) -> dict[str, str]:
    """Every variable the recorded server ran with ({} without one, or where its env could
    not be read): what a rerun's server may be started with, and what explain puts back."""
    found = server_worker(document)
    recorded = process_env(found[1]) if found is not None else None
    return {name: value for name, value in (recorded or {}).items() if isinstance(value, str)}


# ---- loading ---------------------------------------------------------------------------------

def validate(document: Any, source: str) -> Snapshot:
    """Check the whole shape (schema.py) and migrate an older schema forward.

    Raises SnapshotError naming the file, the path of the bad field and what was expected,
    before any other code reads the document.
    """
    if not shape.is_object(document):
        raise SnapshotError(f"{source}: not an envsnap snapshot (expected a mapping with "
                            f"schema, meta and facts at the top level, got {got(document)})")
    if "schema" not in document:
        raise SnapshotError(f"{source}: not an envsnap snapshot (missing required key "
                            '"schema")')
    number = document["schema"]
    if type(number) is not int or number < 1:
        raise SnapshotError(f"{source}: schema: expected a positive integer, got "
                            f"{number!r}")
    if number > SCHEMA:
        raise SnapshotError(f"{source}: snapshot schema {number} is newer than this envsnap "
                            f"({SCHEMA}): upgrade envsnap")
    for schema in range(number, SCHEMA):   # MIGRATIONS[n] turns schema n into n+1
        document = MIGRATIONS[schema](document)
    try:
        check_document()(document)
    except Invalid as bad:
        where = bad.path()
        raise SnapshotError(f"{source}: {where + ': ' if where else ''}{bad.message}") from None
    # The one place a mapping becomes a Snapshot: the check above is what the cast says.
    return cast("Snapshot", document)



@functools.cache
def check_document() -> Callable[[Any], None]:
    """Compiled once per process, on the first load (a capture that loads nothing skips it)."""
    from envsnap.snapshot.schema import DOCUMENT

    return DOCUMENT.compile()
