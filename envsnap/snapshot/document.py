"""The snapshot document: schema, meta, facts apart from volatile readings, section digests.

A snapshot is a plain mapping, kept plain on purpose (it is YAML on disk and attached to bug
reports); this module is the one place that knows its shape:

    schema:   int, see SCHEMA and MIGRATIONS
    meta:     label, host, captured_at, envsnap and agent versions, per-collector timings/errors
    facts:    {section: configuration}        diffed by default
    volatile: {section: readings}             clocks, temperatures, uptime: diffed on request
    digests:  {section: sha256 of facts}      lets a diff skip every unchanged section
    bench:    optional, `envsnap bench`'s record (bench.py): the runs measured on the
              state this document holds; not a fact, so never drift
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from envsnap import __version__
from envsnap.errors import SnapshotError

SCHEMA = 1

# Step-wise migration, pipx style: MIGRATIONS[n] turns a schema-n document into schema n+1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def section_digest(section: Any) -> str:
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
    found = [f"{name}: {info['error']}" for name, info in
             sorted(document["meta"].get("collectors", {}).items()) if info.get("error")]
    repos = document["facts"].get("git", {}).get("repos", {})
    found += [f"git: {path}: {repo['error']}" for path, repo in sorted(repos.items())
              if isinstance(repo, dict) and repo.get("error")]
    return found


def validate(document: Any, source: str) -> dict[str, Any]:
    """Check the shape and migrate an older schema forward; raise SnapshotError if invalid."""
    if not isinstance(document, dict) or "schema" not in document or "facts" not in document:
        raise SnapshotError(f"{source}: not an envsnap snapshot")
    schema = document["schema"]
    if not isinstance(schema, int) or schema < 1:
        raise SnapshotError(f"{source}: invalid schema {schema!r}")
    if schema > SCHEMA:
        raise SnapshotError(f"{source}: snapshot schema {schema} is newer than this envsnap "
                            f"({SCHEMA}): upgrade envsnap")
    while document["schema"] < SCHEMA:
        document = MIGRATIONS[document["schema"]](document)
    for key in ("meta", "facts"):
        if not isinstance(document.get(key), dict):
            raise SnapshotError(f"{source}: snapshot has no valid {key!r} mapping")
    validate_bench(document.get("bench"), source)
    return document


def validate_bench(bench: Any, source: str) -> None:
    if bench is None:
        return
    if not isinstance(bench, dict) or not isinstance(bench.get("values"), list) \
            or not all(isinstance(v, (int, float)) for v in bench["values"]):
        raise SnapshotError(f"{source}: the snapshot's bench section has no valid 'values' list")
