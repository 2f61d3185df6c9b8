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
from typing import Any, Callable

from envsnap import __version__
from envsnap.errors import SnapshotError
from envsnap.snapshot.spec import Invalid, got

SCHEMA = 1

# Step-wise migration, pipx style: MIGRATIONS[n] turns a schema-n document into schema n+1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def section_digest(section: Any) -> str:
    # hashlib on use: it loads OpenSSL (~2 ms), and `envsnap diff` reads the recorded digests
    import hashlib

    canonical = json.dumps(section, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def build(agent_output: dict[str, Any], *, label: str, host: str, address: str,
          captured_at: str, config: dict[str, Any]) -> dict[str, Any]:
    """Turn the agent's JSON document into a snapshot document."""
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
            "config": config,
            "collectors": {name: {"seconds": result.get("seconds"), "error": result.get("error")}
                           for name, result in collectors.items()},
        },
        "facts": facts,
        "volatile": volatile,
        "digests": {name: section_digest(section) for name, section in facts.items()},
    }


def problems(document: dict[str, Any]) -> list[str]:
    """What failed during capture: failed collectors and repos that could not be read.

    Readings a GPU simply does not support are normal and are not listed here.
    """
    found = [f"{name}: {info['error']}" for name, info in sorted(collectors(document).items())
             if isinstance(info, dict) and info.get("error")]
    found += [f"git: {path}: {repo['error']}" for path, repo in sorted(repos(document).items())
              if isinstance(repo, dict) and repo.get("error")]
    return found


# ---- reading a validated document: the one place that knows where things are ---------------

def meta(document: dict[str, Any]) -> dict[str, Any]:
    value = document.get("meta")
    return value if isinstance(value, dict) else {}


def label(document: dict[str, Any], default: str = "?") -> str:
    return str(meta(document).get("label") or default)


def host(document: dict[str, Any], default: str = "?") -> str:
    """The name the host was reached by (`root@gpu-box`), as recorded at capture."""
    return str(meta(document).get("host") or default)


def captured_at(document: dict[str, Any]) -> str | None:
    value = meta(document).get("captured_at")
    return value if isinstance(value, str) else None


def envsnap_version(document: dict[str, Any]) -> str | None:
    value = meta(document).get("envsnap_version")
    return value if isinstance(value, str) else None


def capture_config(document: dict[str, Any]) -> dict[str, Any]:
    """The options the capture ran with (repos, procs, hot_paths, python, timeout)."""
    value = meta(document).get("config")
    return value if isinstance(value, dict) else {}


def collectors(document: dict[str, Any]) -> dict[str, Any]:
    value = meta(document).get("collectors")
    return value if isinstance(value, dict) else {}


def facts(document: dict[str, Any]) -> dict[str, Any]:
    """Every section's facts by name (a validated document always has this mapping)."""
    value = document.get("facts")
    return value if isinstance(value, dict) else {}


def section_names(document: dict[str, Any]) -> list[str]:
    return list(facts(document))


def has_section(document: dict[str, Any], name: str) -> bool:
    return name in facts(document)


def section(document: dict[str, Any], name: str) -> dict[str, Any]:
    """One section's facts; {} when it was not captured (collector_error says why)."""
    value = facts(document).get(name)
    return value if isinstance(value, dict) else {}


def collector_error(document: dict[str, Any], name: str) -> str | None:
    """Why a section holds nothing: its collector's error, or that it is absent; else None."""
    if name not in facts(document):
        return "not in this snapshot"
    info = collectors(document).get(name)
    error = info.get("error") if isinstance(info, dict) else None
    return error if isinstance(error, str) and error else None


def hostname(document: dict[str, Any]) -> str | None:
    """The host's own name (system.hostname); None when the system collector failed."""
    value = section(document, "system").get("hostname")
    return value if isinstance(value, str) else None


def repos(document: dict[str, Any]) -> dict[str, Any]:
    """The git repositories by path; a repo that could not be read is {"error": why}."""
    value = section(document, "git").get("repos")
    return value if isinstance(value, dict) else {}


def packages(document: dict[str, Any]) -> dict[str, Any]:
    """Installed distributions by name -> version (python_env.packages)."""
    value = section(document, "python_env").get("packages")
    return value if isinstance(value, dict) else {}


def customize_digest(document: dict[str, Any]) -> Any:
    """The recorded sitecustomize's sha256 (or what stands for it: None when there was none),
    what restore and explain compare to tell whether sitecustomize moved."""
    customize = section(document, "python_env").get("customize") or {}
    site = customize.get("sitecustomize")
    return site.get("sha256") if isinstance(site, dict) else site


def package_pins(snapshot: dict[str, Any], live: dict[str, Any]) -> list[str]:
    """NAME==VERSION for each package whose version drifted or that went missing; packages
    added since the snapshot are left alone (uninstalling is not restore's call)."""
    recorded = packages(snapshot)
    current = packages(live)
    return [f"{name}=={version}" for name, version in sorted(recorded.items())
            if isinstance(version, str) and current.get(name) != version]


def set_meta(document: dict[str, Any], name: str, value: Any) -> None:
    """Stamp one meta field (a rollback point's own label, a pinned example version)."""
    document.setdefault("meta", {})[name] = value


def set_label(document: dict[str, Any], new_label: str) -> None:
    set_meta(document, "label", new_label)


def bench(document: dict[str, Any]) -> dict[str, Any] | None:
    """`envsnap bench`'s record, or None when the snapshot has none."""
    value = document.get("bench")
    return value if isinstance(value, dict) else None


def set_bench(document: dict[str, Any], record: dict[str, Any]) -> None:
    """Attach the runs measured on the state the document holds (not a fact: never drift)."""
    document["bench"] = record


def add_workers(document: dict[str, Any], workers: dict[str, Any]) -> None:
    """Add processes to the env section's workers (a --serve server: envsnap started it after
    the capture), keeping the section's digest true."""
    if not workers:
        return
    env = facts(document).setdefault("env", {})
    env["processes"] = {**(env.get("processes") or {}), **workers}
    document.setdefault("digests", {})["env"] = section_digest(env)


# ---- loading ---------------------------------------------------------------------------------

def validate(document: Any, source: str) -> dict[str, Any]:
    """Check the whole shape (schema.py) and migrate an older schema forward.

    Raises SnapshotError naming the file, the path of the bad field and what was expected,
    before any other code reads the document.
    """
    if not isinstance(document, dict):
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
    while document["schema"] < SCHEMA:
        document = MIGRATIONS[document["schema"]](document)
    try:
        check_document()(document)
    except Invalid as bad:
        where = bad.path()
        raise SnapshotError(f"{source}: {where + ': ' if where else ''}{bad.message}") from None
    valid: dict[str, Any] = document
    return valid



@functools.cache
def check_document() -> Callable[[Any], None]:
    """Compiled once per process, on the first load (a capture that loads nothing skips it)."""
    from envsnap.snapshot.schema import DOCUMENT

    return DOCUMENT.compile()
