"""The snapshot's one description (envsnap/snapshot/schema.py) and its JSON Schema export.

Every snapshot the project has validates; the committed docs/snapshot.schema.json is exactly
what the code exports, and other tools reading it with a JSON Schema library (jsonschema,
test-only here) accept the same snapshots and reject the same faults.
"""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import Cli
from helpers.paths import ROOT

from envsnap.errors import SnapshotError
from envsnap.snapshot import document as snapshot
from envsnap.snapshot.schema import exported, exported_text
from envsnap.snapshot.store import dump_yaml

EXPORTED = ROOT / "docs" / "snapshot.schema.json"
SNAPSHOTS = sorted([*(ROOT / "snapshots" / "examples").glob("*.yaml"),
                    *(ROOT / "tests" / "data").glob("h200*/**/*.yaml")])
H200 = ROOT / "tests" / "data" / "h200" / "snapshot.yaml"
REGENERATE = ('python3 -c "from envsnap.snapshot.schema import exported_text; '
              "open('docs/snapshot.schema.json', 'w').write(exported_text())\"")


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    return document


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(EXPORTED.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_committed_json_schema_is_what_the_code_exports() -> None:
    assert EXPORTED.read_text() == exported_text(), f"regenerate it: {REGENERATE}"
    assert exported()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_project_has_snapshots_to_check() -> None:
    names = {path.name for path in SNAPSHOTS}
    assert {"story-good.yaml", "story-bad.yaml", "snapshot.yaml", "before.yaml"} <= names


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_snapshot_validates_in_both(path: Path,
                                          validator: jsonschema.Draft202012Validator) -> None:
    document = load(path)
    assert snapshot.validate(copy.deepcopy(document), str(path)) == document
    assert [error.message for error in validator.iter_errors(document)] == []


def test_both_reject_the_same_wrong_types(validator: jsonschema.Draft202012Validator) -> None:
    document = load(H200)
    leaves = [path for path in paths(document) if path[0] in ("facts", "meta", "volatile")]
    rng = random.Random(7)
    for path in rng.sample(leaves, 40):
        changed = copy.deepcopy(document)
        target = changed
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = {"not": ["what", "was", "expected"]} \
            if not isinstance(target[path[-1]], dict) else ["a", "list"]
        with pytest.raises(SnapshotError) as caught:
            snapshot.validate(changed, "x.yaml")
        assert list(validator.iter_errors(changed)), f"jsonschema accepted a bad {path}"
        assert str(caught.value).startswith("x.yaml: "), caught.value


def paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, path + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, path + (index,))
    return found


def test_a_bad_field_is_named_by_file_path_and_expectation(cli: Cli, tmp_path: Path) -> None:
    document = load(ROOT / "snapshots" / "examples" / "story-good.yaml")
    document["facts"]["git"]["repos"]["/root/sglang"]["head"] = ["bba2fc4", "a list"]
    bad = tmp_path / "x.yaml"
    bad.write_text(dump_yaml(document))
    for command in (["show"], ["report"], ["diff", str(H200)]):
        result = cli(*command, str(bad))
        assert result.returncode == 4, result.stderr
        assert result.stderr == (f'envsnap: error: {bad}: facts.git.repos["/root/sglang"].head: '
                                 "expected a string or null, got a list\n")


@pytest.mark.parametrize("change, message", [
    (lambda d: d["facts"]["system"]["numa"].update({0: {"cpulist": "0-3"}}),
     "facts.system.numa: expected string keys, got an integer key 0"),
    (lambda d: d["meta"].update(label=7), "meta.label: expected a string, got an integer"),
    (lambda d: d["facts"]["python_env"]["packages"].update(torch=2.1),
     'facts.python_env.packages["torch"]: expected a string or null, got a number'),
    (lambda d: d["facts"]["env"]["processes"]["768"]["limits"]["nofile"].update(soft="fast"),
     'facts.env.processes["768"].limits["nofile"].soft: expected an integer or null or '
     '"unlimited", got a string'),
    (lambda d: d.update(digests=[]), "digests: expected a mapping of section to values, "
     "got a list"),
    (lambda d: d.update(bench={"runs": []}), 'bench: missing required key "values"'),
    (lambda d: d.update(facts=None), "facts: expected a mapping, got null"),
])
def test_messages(change: Any, message: str) -> None:
    document = load(H200)
    change(document)
    with pytest.raises(SnapshotError) as caught:
        snapshot.validate(document, "x.yaml")
    assert str(caught.value) == f"x.yaml: {message}"


def test_not_captured_sections_and_unknown_fields_stay_valid(
        validator: jsonschema.Draft202012Validator) -> None:
    document = load(H200)
    # A collector that failed: its section is empty and meta says why.
    document["facts"]["nvidia"], document["volatile"]["nvidia"] = {}, {}
    document["meta"]["collectors"]["nvidia"]["error"] = "NVMLError: driver not loaded"
    # A repo that could not be read, a GPU reading that failed, a reading not supported.
    document["facts"]["git"]["repos"]["/gone"] = {"error": "not a git repository"}
    # A newer agent's additions: a new field, a new section.
    document["facts"]["system"]["rdma_devices"] = {"mlx5_0": {"port": 1}}
    document["facts"]["rdma"] = {"devices": ["mlx5_0"]}
    assert snapshot.validate(copy.deepcopy(document), "x.yaml") == document
    assert list(validator.iter_errors(document)) == []
    assert snapshot.collector_error(document, "nvidia") == "NVMLError: driver not loaded"
    assert snapshot.section(document, "nvidia") == {}


def test_gpu_readings_may_be_null_or_failed(validator: jsonschema.Draft202012Validator) -> None:
    document = load(H200)
    gpu = next(iter(document["facts"]["nvidia"]["gpus"].values()))
    gpu["power_limit_w"], gpu["vbios"] = None, {"error": "NVML_ERROR_UNKNOWN"}
    assert snapshot.validate(copy.deepcopy(document), "x.yaml") == document
    assert list(validator.iter_errors(document)) == []


def test_accessors_read_the_document() -> None:
    document = load(ROOT / "snapshots" / "examples" / "story-good.yaml")
    assert snapshot.hostname(document) == "gpu-box"
    assert snapshot.host(document) == "root@gpu-box" and snapshot.label(document) == "story-good"
    assert list(snapshot.repos(document)) == ["/root/sglang"]
    assert snapshot.packages(document)["torch"].startswith("2.")
    assert snapshot.bench(document) is not None
    assert snapshot.collector_error(document, "git") is None
    assert snapshot.collector_error(document, "rdma") == "not in this snapshot"
    assert snapshot.bench({"schema": 1}) is None and snapshot.hostname({}) is None
