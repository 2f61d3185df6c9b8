"""Templates run sandboxed; inventory and snapshot values are data, never templates.

Through the real `envsnap play --check`: a playbook template that reaches for Python
internals (`lipsum.__globals__.os`, `''.__class__.__mro__`) is refused with one line and runs
nothing on the controller (checked by effect: a marker file never appears); the same text
inside an inventory var or a snapshot value is printed as it is.
"""
from __future__ import annotations

import pytest
import yaml
from conftest import Cli

ESCAPES = [
    "{{ lipsum.__globals__.os.system('touch MARKER') }}",
    "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "x {{ (''.__class__.__mro__ | last).__subclasses__() }}",
    "{{ namespace.__init__.__globals__['__builtins__']['open']('MARKER', 'w') }}",
]


def failure_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("failed: [local]")]


@pytest.mark.parametrize("template", ESCAPES)
def test_an_escaping_template_is_refused_in_one_line(cli: Cli, template: str) -> None:
    (cli.cwd / "pb.yml").write_text(yaml.safe_dump(
        [{"hosts": "local", "tasks": [{"debug": {"msg": template}}]}]))
    result = cli("play", "pb.yml", "--check")
    assert result.returncode == 4, result.stdout + result.stderr
    lines = failure_lines(result.stdout)
    assert len(lines) == 1 and "template refused" in lines[0] and "unsafe" in lines[0], \
        result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert not (cli.cwd / "MARKER").exists()


def minimal_snapshot(note: str) -> dict[str, object]:
    return {"schema": 1, "facts": {},
            "meta": {"label": note, "host": "local", "captured_at": "2026-01-01T00:00:00"}}


def test_inventory_and_snapshot_values_are_kept_literally(cli: Cli) -> None:
    hostile = ESCAPES[0]
    (cli.cwd / "hosts.yml").write_text(yaml.safe_dump(
        {"all": {"hosts": {"local": {"ansible_connection": "local", "note": hostile}}}}))
    (cli.cwd / "evil.yaml").write_text(yaml.safe_dump(minimal_snapshot(hostile)))
    (cli.cwd / "pb.yml").write_text(yaml.safe_dump([{
        "hosts": "local", "vars": {"copied": "{{ note }}"},
        "tasks": [{"debug": {"msg": "note={{ note }}"}},
                  {"debug": {"msg": "{{ copied }}"}},
                  {"debug": {"msg": "label={{ snapshot.meta.label }}"}},
                  {"debug": {"msg": ESCAPES[2]}}]}]))
    result = cli("play", "pb.yml", "--check", "--inventory", "hosts.yml",
                 "-e", "snapshot=evil.yaml")
    assert f"ok: [local]: note={hostile}" in result.stdout, result.stdout + result.stderr
    assert f"ok: [local]: {hostile}" in result.stdout
    assert f"ok: [local]: label={hostile}" in result.stdout
    # The playbook's own escape, in the same run, is refused; nothing ran here.
    assert len(failure_lines(result.stdout)) == 1 and result.returncode == 4
    assert not (cli.cwd / "MARKER").exists()
