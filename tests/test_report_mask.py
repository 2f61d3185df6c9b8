"""Masking for reports and bundles (envsnap/mask.py): what is masked, what is left alone."""
from __future__ import annotations

import pytest

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
    ("https://ada:hunter22@example.com/x.git", "https://ada:<redacted>@example.com/x.git"),
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
                    "HF_TOKEN": "<redacted>", "~/r": {"uuid": "GPU-<masked>"}}


def test_no_mask_keeps_ids_but_never_secrets() -> None:
    keep = Masker(mask=False)
    assert keep.text(f"{UUID} /root/x") == f"{UUID} /root/x"
    token = "hf_" + "a" * 30
    assert keep.tree({"HF_TOKEN": "plain", "out": f"token {token}"}) == {
        "HF_TOKEN": "<redacted>", "out": "token <redacted>"}


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
