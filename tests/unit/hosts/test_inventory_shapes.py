"""What an inventory hands on once its shape is checked where it is read: mappings of names
(yamlread.as_mapping), vars read as the types envsnap uses, ansible-inventory's marks read
back as the JSON is decoded."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envsnap import yamlread
from envsnap.errors import UsageError
from envsnap.hosts.inventory import Inventory, load_inventory
from envsnap.hosts.inventory_ansible import ansible_json, is_ansible_json, json_graph


@pytest.mark.parametrize("value", [None, "all", 5, ["a", "b"], True])
def test_what_is_no_mapping_is_said_to_be_none(value: object) -> None:
    assert yamlread.as_mapping(value) is None


def test_a_mapping_of_names_is_handed_on_as_it_is() -> None:
    document = {"all": {"hosts": {}}}
    assert yamlread.as_mapping(document) is document


def test_keys_yaml_reads_as_numbers_or_booleans_are_names_as_text() -> None:
    assert yamlread.as_mapping(yaml.safe_load("22: a\nyes: b\nname: c\n")) == {
        "22": "a", "True": "b", "name": "c"}


def test_inventory_vars_are_named_by_text_and_names_by_text_too() -> None:
    inventory = Inventory(yaml.safe_load(
        "all:\n  hosts:\n    box:\n      ansible_host: 10.0.0.2\n      ansible_user: 1000\n"
        "      2: two\n"))
    host = inventory.host("box")
    assert host.user == "1000" and host.vars["2"] == "two"


def test_unsafe_marks_are_read_back_wherever_they_are_and_vaults_stay() -> None:
    printed = ('{"all": {"vars": {"plain": {"__ansible_unsafe": "{{ x }}"}, '
               '"listed": [{"__ansible_unsafe": "a"}, "b"], '
               '"twice": {"__ansible_unsafe": {"__ansible_unsafe": "c"}}, '
               '"secret": {"__ansible_vault": "$ANSIBLE_VAULT;1.1"}}, "hosts": ["h"]}}')
    document = yamlread.as_mapping(ansible_json(printed))
    assert document is not None and is_ansible_json(document)
    assert json_graph(document, "x.json").group_vars["all"] == {
        "plain": "{{ x }}", "listed": ["a", "b"], "twice": "c",
        "secret": {"__ansible_vault": "$ANSIBLE_VAULT;1.1"}}


def test_a_json_group_that_is_neither_a_mapping_nor_a_list_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "inventory.json"
    path.write_text('{"_meta": {"hostvars": {}}, "gpu": "node1"}')
    with pytest.raises(UsageError) as refused:
        load_inventory(str(path))
    assert str(refused.value) == (f"{path}: group 'gpu' must be a mapping (hosts, children, "
                                  "vars) or a list of hosts, not str")
