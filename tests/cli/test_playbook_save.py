"""A playbook's `capture` and `bench` tasks save as `envsnap capture` and `envsnap bench` do
(hosts.capture.save_snapshot, the one capture-and-save path): signed with the user's key, the
host's secrets masked under the user's masking key, written by the store, and a label that
another capture saved meanwhile refused rather than overwritten."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Cli

from envsnap.errors import ExitCode
from envsnap.playbook.tasks import bench, facts
from envsnap.snapshot.store import dump_yaml

SECRET = "hf_" + "Q7vLk2" * 6   # a Hugging Face token's shape: the host masks it
PLAY = """- hosts: local
  tasks:
    - capture: {label: played}
    - bench:
        cmd: "echo 'tok/s: 42'"
        metric: 'tok/s: ([0-9.]+)'
        repeat: 1
        sample_interval: 0
        label: played-bench
"""


def stored(cli: Cli, label: str) -> tuple[str, Any]:
    text = (Path(cli.env["ENVSNAP_STORE"]) / f"{label}.yaml").read_text()
    return text, yaml.safe_load(text)


def test_a_playbooks_snapshots_are_saved_as_the_commands_save_theirs(cli: Cli) -> None:
    cli.env["HF_TOKEN"] = SECRET
    assert cli("capture", "local", "--label", "cmd").returncode == 0
    assert cli("bench", "local", "--cmd", "echo 'tok/s: 42'", "--metric", r"tok/s: ([0-9.]+)",
               "--repeat", "1", "--sample-interval", "0", "--label", "cmd-bench").returncode == 0
    (cli.cwd / "pb.yml").write_text(PLAY)
    played = cli("play", "pb.yml")
    assert played.returncode == 0, played.stdout + played.stderr

    masked = {}
    for label in ("cmd", "cmd-bench", "played", "played-bench"):
        text, document = stored(cli, label)
        assert SECRET not in text
        masked[label] = document["facts"]["env"]["shell"]["HF_TOKEN"]
        assert text == dump_yaml(document)   # written by the store's own writer
        shown = cli("show", label)
        assert "mine (signed with your key)" in shown.stdout, shown.stdout
    assert len(set(masked.values())) == 1, masked   # one secret, one mask, whoever saved it
    assert stored(cli, "played-bench")[1]["bench"]["values"] == [42.0]


@pytest.mark.parametrize(("module", "task"), [
    (facts, "capture: {label: raced}"),
    (bench, "bench: {cmd: \"echo 'tok/s: 42'\", metric: 'tok/s: ([0-9.]+)', repeat: 1, "
            "sample_interval: 0, label: raced}"),
], ids=["capture", "bench"])
def test_a_label_saved_meanwhile_is_refused_not_overwritten(
        cli: Cli, monkeypatch: pytest.MonkeyPatch, module: Any, task: str) -> None:
    """Another capture saves the label while the task's own runs: the task fails, as a
    second `envsnap capture` under one label does, and the other's snapshot stays."""
    store = Path(cli.env["ENVSNAP_STORE"])
    real = module.take_snapshot

    def racing(*args: Any) -> Any:
        document = real(*args)
        store.mkdir(parents=True, exist_ok=True)
        (store / "raced.yaml").write_text("the other capture's snapshot\n")
        return document

    monkeypatch.setattr(module, "take_snapshot", racing)
    (cli.cwd / "pb.yml").write_text(f"- hosts: local\n  tasks:\n    - {task}\n")
    result = cli("play", "pb.yml")
    assert result.returncode == ExitCode.HOST, result.stdout + result.stderr
    assert "by another capture meanwhile" in result.stdout
    assert (store / "raced.yaml").read_text() == "the other capture's snapshot\n"
