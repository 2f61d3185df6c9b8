"""Masking for reports and bundles (envsnap/snapshot/mask.py): what is masked, what is not."""
from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from conftest import Cli

from envsnap.snapshot.document import section_digest
from envsnap.snapshot.mask import MASKED, Masker, escape_markers, masked_document

UUID = "GPU-d3208dcb-53e8-24e1-bfd7-b35894626910"


@pytest.mark.parametrize("text, shown", [
    (UUID, "GPU-<masked>"),
    (f"MIG-{UUID[4:]}/1/0", "MIG-<masked>/1/0"),
    ("/root/sglang", "~/sglang"),
    ("/home/alice/x and /home/bob", "~/x and ~"),
    ("PATH=/root/.local/bin:/home/alice/bin:/usr/bin", "PATH=~/.local/bin:~/bin:/usr/bin"),
    ("/Users/alice/work", "~/work"),
    ("mac 0c:42:a1:5e:7b:90 guid 98:03:9b:03:00:aa:bb:cc", f"mac {MASKED} guid {MASKED}"),
    ("https://ada:hunter22@example.com/x.git", "https://ada:<secret>@example.com/x.git"),
])
def test_masked(text: str, shown: str) -> None:
    assert Masker().text(text) == shown


@pytest.mark.parametrize("text", [
    "00000000:01:00.0", "12:00:00", "/srv/home/x", "/rootfs/y", "sha 0be30d4", "2025-12-09",
    "fe80::1", "a/root/b",
])
def test_left_alone(text: str) -> None:
    assert Masker().text(text) == text


def test_keys_name_ids_and_secrets() -> None:
    tree = Masker().tree({"uuid": "abc", "board_serial": 1234, "serial": "", "author": "Ada",
                          "HF_TOKEN": "plain", "/root/r": {"uuid": UUID}})
    assert tree == {"uuid": MASKED, "board_serial": MASKED, "serial": "", "author": "Ada",
                    "HF_TOKEN": "<secret>", "~/r": {"uuid": "GPU-<masked>"}}


class Row(NamedTuple):
    name: str
    values: tuple[str, ...]


def test_a_record_is_masked_into_a_record_of_its_own_type() -> None:
    masked = Masker().tree([Row("HF_TOKEN=hf_" + "aQ3zT8kLm2" * 3, (UUID, "plain"))])
    assert masked == [Row("HF_TOKEN=<secret>", ("GPU-<masked>", "plain"))]
    assert type(masked[0]) is Row and type(masked[0].values) is tuple


def test_no_mask_keeps_ids_but_never_secrets() -> None:
    keep = Masker(mask=False)
    assert keep.text(f"{UUID} /root/x") == f"{UUID} /root/x"
    token = "hf_" + "aQ3zT8kLm2" * 3   # random-looking: a run of one letter is a fill-in
    assert keep.tree({"HF_TOKEN": "plain", "out": f"token {token}"}) == {
        "HF_TOKEN": "<secret>", "out": "token <secret>"}


def test_a_masked_document_has_its_digests_recomputed() -> None:
    facts = {"nvidia": {"gpus": {"b": {"uuid": UUID}}}}
    document = {"schema": 1, "meta": {}, "facts": facts,
                "digests": {"nvidia": section_digest(facts["nvidia"])}}
    shown = masked_document(document, Masker())
    assert shown["facts"]["nvidia"]["gpus"]["b"]["uuid"] == "GPU-<masked>"
    assert shown["digests"]["nvidia"] == section_digest(shown["facts"]["nvidia"])
    assert document["facts"]["nvidia"]["gpus"]["b"]["uuid"] == UUID  # the input is untouched


def test_markers_are_escaped_outside_code_only() -> None:
    text = "a <masked> `<masked>`\n```diff\n<masked>\n```\n    <redacted>\nb <redacted>"
    assert escape_markers(text) == ("a \\<masked\\> `<masked>`\n```diff\n<masked>\n```\n"
                                    "    <redacted>\nb \\<redacted\\>")


@pytest.mark.parametrize("key", ["serial", "board_serial", "chassis_serial_number",
                                 "SerialNumber", "module.serial", "uuid"])
def test_keys_that_name_a_serial_are_masked(key: str) -> None:
    assert Masker().tree({key: "1654922004789"}) == {key: MASKED}


@pytest.mark.parametrize("key", ["pyserial", "ast-serialize", "serializer", "deserialize",
                                 "uuid_utils"])
def test_names_that_only_contain_serial_are_left_alone(key: str) -> None:
    assert Masker().tree({key: "3.5"}) == {key: "3.5"}


def test_package_versions_are_never_masked_as_ids() -> None:
    packages = {"pyserial": "3.5", "ast-serialize": "0.1.0", "serial": "0.0.97", "uuid": "1.30"}
    assert Masker().tree({"python_env": {"packages": packages}}) == {
        "python_env": {"packages": packages}}


def test_a_report_shows_the_versions_of_serial_packages(cli: Cli, tmp_path: Path) -> None:
    """Through the real CLI: installed packages named like ids keep their versions in the
    report and its bundled snapshot, while a GPU serial in the same snapshot is masked."""
    site = tmp_path / "site"
    for name, version in (("pyserial", "3.5"), ("ast_serialize", "0.1.0"), ("uuid", "1.30")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}"
                                       f"\nVersion: {version}\n")
    cli.env["PYTHONPATH"] += os.pathsep + str(site)
    captured = cli("capture", "local", "--label", "one")
    assert captured.returncode == 0, captured.stderr
    path = Path(cli.env["ENVSNAP_STORE"]) / "one.yaml"
    document = yaml.safe_load(path.read_text())
    document["facts"]["nvidia"] = {"gpus": {"0000:19:00.0": {"serial": "1654922004789"}}}
    path.write_text(yaml.safe_dump(document))
    report = cli("report", "one", "--bundle", str(tmp_path / "b.tar.gz"))
    assert report.returncode == 0, report.stderr
    with tarfile.open(tmp_path / "b.tar.gz") as bundle:
        member = next(m for m in bundle.getmembers() if m.name.endswith("snapshots/one.yaml"))
        extracted = bundle.extractfile(member)
        assert extracted is not None
        bundled = yaml.safe_load(extracted.read())
    packages = bundled["facts"]["python_env"]["packages"]
    assert (packages["pyserial"], packages["ast-serialize"], packages["uuid"]) == (
        "3.5", "0.1.0", "1.30")
    assert bundled["facts"]["nvidia"]["gpus"]["0000:19:00.0"]["serial"] == MASKED
