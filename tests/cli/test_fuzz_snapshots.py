"""Malformed snapshots through the real CLI: never a traceback, always exit 4 and the bad path.

Over 200 documents are made from the example snapshots with a seeded random (the same cases
every run): a wrong type at every depth, required keys removed, a wrong or newer schema number,
a top level that is not a mapping, broken YAML, an empty file. Each goes to `show`, `diff`
(as either side), `report`, `restore --check` (which must fail before contacting any host)
and `diff --fleet DIR`. One interpreter per command loops over the cases calling the real
entry point, envsnap.cli.main.main(argv): 6 processes instead of 1,200 interpreter starts.
"""
from __future__ import annotations

import copy
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from conftest import Cli
from helpers.paths import ROOT

from envsnap.snapshot.store import dump_yaml

SOURCES = [ROOT / "snapshots" / "examples" / "story-good.yaml",
           ROOT / "snapshots" / "examples" / "story-bad.yaml",
           ROOT / "tests" / "data" / "h200" / "snapshot.yaml"]
SEED = 20261130
TYPE_CASES_PER_DEPTH = 7
# Each source is cut down (lists to 2 items, mappings to 6 keys) before it is broken: every
# level and section stays, and a case loads in ms, so 6 x 200+ runs fit in the time budget.
KEEP_ITEMS, KEEP_KEYS = 2, 6
REQUIRED = frozenset(["values"])  # bench.values: a record without it is invalid
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Runs in each command's interpreter: every case through main(), stdout/stderr captured apart.
DRIVER = r"""
import contextlib, io, json, sys, traceback
from envsnap.cli.main import main
cases, out = json.load(open(sys.argv[1])), sys.argv[2]
results = []
for argv in cases:
    stdout, stderr = io.StringIO(), io.StringIO()
    escaped = None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:
            code, escaped = None, traceback.format_exc()
    results.append({"code": code, "stderr": stderr.getvalue(), "escaped": escaped})
json.dump(results, open(out, "w"))
"""


@dataclass
class Case:
    name: str
    text: str
    expect: str          # a regex stderr must match (after the file name)
    suffix: str = ".yaml"


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = trimmed(yaml.load(path.read_text(), Loader=yaml.CSafeLoader))
    return document


def trimmed(value: Any) -> Any:
    if isinstance(value, dict):
        kept = sorted(value)[:KEEP_KEYS] + [key for key in sorted(value)[KEEP_KEYS:]
                                            if key in REQUIRED]
        return {key: trimmed(value[key]) for key in kept}
    if isinstance(value, list):
        return [trimmed(item) for item in value[:KEEP_ITEMS]]
    return value


def nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if path:
        yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from nodes(child, path + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from nodes(child, path + (index,))


def wrong(value: Any, rng: random.Random) -> Any:
    """A value of another JSON kind than `value`, which no description of it can accept."""
    if isinstance(value, dict):
        return rng.choice([["not", "a", "mapping"], "a string", 7])
    if isinstance(value, list):
        return rng.choice([{"not": "a list"}, "a string"])
    if value is None:
        return rng.choice([[1], {"not": ["null"]}])
    if isinstance(value, bool):
        return rng.choice(["yes", {"not": "a boolean"}])
    if isinstance(value, (int, float)):
        return rng.choice(["fast", [value], {"not": "a number"}])
    return rng.choice([True, ["a", "list"], {"not": "a string"}])


def path_regex(path: tuple[Any, ...]) -> str:
    """`facts.git.repos["/root/sglang"].head`: a name may be dotted or bracketed (a map's key)."""
    parts = []
    for position, part in enumerate(path):
        if isinstance(part, int):
            parts.append(rf"\[{part}\]")
            continue
        bracketed = re.escape(json.dumps(part))
        bracketed = rf"\[{bracketed}\]"
        dot = "" if position == 0 else r"\."
        parts.append(rf"(?:{dot}{re.escape(part)}|{bracketed})" if IDENTIFIER.match(part)
                     else bracketed)
    return "".join(parts)


def set_at(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = document
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def type_cases(document: dict[str, Any], source: str, rng: random.Random) -> list[Case]:
    """Wrong types at every depth, a sample of the nodes at each."""
    by_depth: dict[int, list[tuple[tuple[Any, ...], Any]]] = {}
    for path, value in nodes(document):
        by_depth.setdefault(len(path), []).append((path, value))
    cases = []
    for depth, found in sorted(by_depth.items()):
        for path, value in rng.sample(found, min(TYPE_CASES_PER_DEPTH, len(found))):
            changed = copy.deepcopy(document)
            set_at(changed, path, wrong(value, rng))
            cases.append(Case(f"{source}-type-d{depth}-{len(cases)}", dump_yaml(changed),
                              path_regex(path) + r": (expected|missing)"))
    return cases


def missing_cases(document: dict[str, Any], source: str) -> list[Case]:
    cases = []
    for key in ("schema", "meta", "facts"):
        changed = {k: v for k, v in document.items() if k != key}
        wanted = f'missing required key "{key}"'
        cases.append(Case(f"{source}-no-{key}", dump_yaml(changed),
                          rf"not an envsnap snapshot \({wanted}\)" if key == "schema" else wanted))
    if isinstance(document.get("bench"), dict):
        changed = copy.deepcopy(document)
        del changed["bench"]["values"]
        cases.append(Case(f"{source}-no-bench-values", dump_yaml(changed),
                          r'bench: missing required key "values"'))
    return cases


def schema_cases(document: dict[str, Any], source: str) -> list[Case]:
    cases = []
    for number in (2, 99, 0, -1, "1", 1.5, True, None, [1], {"v": 1}):
        changed = dict(document, schema=number)
        newer = number in (2, 99) and number is not True
        expect = r"snapshot schema \d+ is newer than this envsnap" if newer \
            else "schema: expected a positive integer"
        cases.append(Case(f"{source}-schema-{number!r}", dump_yaml(changed), expect))
    return cases


def whole_file_cases(text: str, rng: random.Random) -> list[Case]:
    lines = text.splitlines(keepends=True)
    cut = rng.randrange(len(lines) // 4, len(lines))
    not_a_snapshot = "not an envsnap snapshot"
    return [
        Case("empty", "", not_a_snapshot),
        Case("comment-only", "# nothing here\n", not_a_snapshot),
        Case("a-list", "- schema: 1\n- facts: {}\n", not_a_snapshot),
        Case("a-string", "just some text\n", not_a_snapshot),
        Case("a-number", "42\n", not_a_snapshot),
        Case("no-schema", "hello: world\n", not_a_snapshot),
        Case("unclosed-flow", "schema: 1\nfacts: [unclosed\n", "corrupt snapshot"),
        Case("unterminated-quote", "".join(lines[:cut]) + 'broken: "unterminated\n',
             "corrupt snapshot"),
        Case("tab-indent", "".join(lines[:cut]) + "\tfacts: 1\n", "corrupt snapshot"),
        Case("stray-bracket", "".join(lines[:cut]) + "]\n", "corrupt snapshot"),
        Case("bad-json", '{"schema": 1, "facts": ', "corrupt snapshot", ".json"),
        Case("json-list", "[1, 2]", not_a_snapshot, ".json"),
    ]


def all_cases() -> list[Case]:
    rng = random.Random(SEED)
    cases: list[Case] = []
    for path in SOURCES:
        document, source = load(path), path.stem
        cases += type_cases(document, source, rng)
        cases += missing_cases(document, source)
        cases += schema_cases(document, source)
    cases += whole_file_cases(dump_yaml(load(SOURCES[0])), rng)
    return cases


def run_all(cli: Cli, commands: dict[str, list[list[str]]], work: Path
            ) -> dict[str, list[dict[str, Any]]]:
    """Each command's cases in an interpreter of its own, all of them at once."""
    running = {}
    for name, argvs in commands.items():
        (work / f"{name}.json").write_text(json.dumps(argvs))
        running[name] = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(work / f"{name}.json"),
             str(work / f"{name}.out.json")],
            cwd=cli.cwd, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for name, process in running.items():
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, f"{name}: {stderr[-2000:]}"
        results[name] = json.loads((work / f"{name}.out.json").read_text())
    return results


def test_every_malformed_snapshot_is_exit_4_naming_the_bad_path(cli: Cli, tmp_path: Path
                                                                 ) -> None:
    cases = all_cases()
    assert len(cases) >= 200
    assert len({case.name for case in cases}) == len(cases)
    good = tmp_path / "good.yaml"
    good.write_text(dump_yaml(load(SOURCES[1])))
    files, fleets = [], []
    for number, case in enumerate(cases):
        path = tmp_path / "bad" / f"case{number:03d}{case.suffix}"
        path.parent.mkdir(exist_ok=True)
        path.write_text(case.text)
        files.append(path)
        fleet = tmp_path / "fleets" / f"fleet{number:03d}"
        fleet.mkdir(parents=True)
        (fleet / "good.yaml").write_text(good.read_text())
        (fleet / f"bad{case.suffix}").write_text(case.text)
        fleets.append((fleet, fleet / f"bad{case.suffix}"))
    commands = {
        "show": [["show", str(f)] for f in files],
        "diff-left": [["diff", str(f), str(good)] for f in files],
        "diff-right": [["diff", str(good), str(f)] for f in files],
        "report": [["report", str(f)] for f in files],
        "restore-check": [["restore", "--check", "--connect-timeout", "1", str(f)]
                          for f in files],
        "fleet": [["diff", "--fleet", str(folder)] for folder, _ in fleets],
    }
    failures = []
    for command, results in run_all(cli, commands, tmp_path).items():
        named = [bad for _, bad in fleets] if command == "fleet" else files
        for case, file, result in zip(cases, named, results, strict=True):
            stderr = result["stderr"]
            pattern = re.escape(str(file)) + r"(:\d+)?: " + case.expect
            if result["escaped"] or "Traceback" in stderr or result["code"] != 4 \
                    or not re.search(pattern, stderr) or stderr.count("\n") != 1:
                failures.append(f"{command} {case.name}: exit {result['code']}: "
                                f"{(result['escaped'] or stderr).strip()[-300:]!r} "
                                f"(wanted /{case.expect}/)")
    assert not failures, f"{len(failures)} failures, first ones:\n" + "\n".join(failures[:15])
