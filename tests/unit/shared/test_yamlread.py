"""The one YAML reader (envsnap/yamlread.py): its guards, met through each reader that uses it."""
from __future__ import annotations

from pathlib import Path

import pytest

from envsnap import yamlread
from envsnap.errors import PlaybookError, SnapshotError, UsageError, YamlError
from envsnap.hosts.inventory import load_yaml
from envsnap.playbook.load import mapping_of, parse
from envsnap.snapshot.store import parse_document

LAUGHS = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9))
MERGES = "m0: &m0 {" + ", ".join(f"k{i}: {i}" for i in range(10)) + "}\n" + "".join(
    f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 10) + "]}\n" for i in range(1, 9))


def test_anchors_people_write_are_read_as_yaml_has_them() -> None:
    text = ("defaults: &defaults {python: /opt/venv/bin/python, repos: [/root/a]}\n"
            "node1: {<<: *defaults, ansible_port: 2222}\nnode2: *defaults\n")
    loaded = yamlread.load(text, yamlread.Loader)
    assert loaded["node1"] == {"python": "/opt/venv/bin/python", "repos": ["/root/a"],
                               "ansible_port": 2222}
    assert loaded["node2"] == loaded["defaults"]


@pytest.mark.parametrize("text", [LAUGHS, MERGES])
def test_aliases_that_multiply_a_file_are_refused_before_it_is_built(text: str) -> None:
    with pytest.raises(YamlError, match="expand to more than 1,000,000 values"):
        yamlread.load(text, yamlread.Loader)


def test_an_alias_that_refers_to_itself_is_refused_with_its_line() -> None:
    with pytest.raises(YamlError) as refused:
        yamlread.load("a: 1\nb: &b [1, *b]\n", yamlread.Loader)
    assert (refused.value.line, refused.value.reason) == (2, "a YAML alias refers to itself")


def test_each_reader_words_the_same_refusal_its_own_way(tmp_path: Path) -> None:
    with pytest.raises(PlaybookError, match=r"^pb.yml:1: YAML error: YAML aliases .* expand"):
        parse("- hosts: local\n  vars:\n" + "".join(f"    {line}" for line in
                                                     LAUGHS.splitlines(True)), "pb.yml")
    with pytest.raises(UsageError, match=r"^hosts.yml: not valid YAML \(YAML aliases"):
        load_yaml(MERGES, "hosts.yml")
    with pytest.raises(UsageError, match=r"^-e @v.yml: not valid YAML \(YAML aliases"):
        mapping_of(LAUGHS, "@v.yml")
    with pytest.raises(SnapshotError, match=r"^s.yaml:1: corrupt snapshot \(YAML aliases "
                                            r"\(\*name\) are not allowed in a snapshot\)"):
        parse_document("a: &a [1]\nb: *a\n", "s.yaml")


def test_libyaml_and_recursion_say_nested_too_deeply_alike() -> None:
    with pytest.raises(YamlError) as refused:   # past libyaml's 1,000 levels
        yamlread.load("a: " + "[" * 3000 + "]" * 3000 + "\n", yamlread.Loader)
    assert (refused.value.line, refused.value.reason) == (None, "nested too deeply")
    deep = "[" * 600 + "]" * 600   # within libyaml's levels, past the recursion of the build
    with pytest.raises(PlaybookError, match=r"^pb.yml:1: YAML error: nested too deeply$"):
        parse(f"- hosts: local\n  vars: {{x: {deep}}}\n", "pb.yml")


def test_a_file_over_the_size_cap_is_refused_unparsed() -> None:
    with pytest.raises(YamlError, match="larger than 0.5 MiB"):
        yamlread.load("a: " + "x" * (1 << 19) + "\n", yamlread.Loader, max_chars=1 << 19)


def test_a_number_python_will_not_convert_is_a_yaml_error_not_a_crash() -> None:
    with pytest.raises(UsageError, match=r"^-e x: not valid YAML \(Exceeds the limit"):
        mapping_of("a: " + "9" * 5000 + "\n", "x")
