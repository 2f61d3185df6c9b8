"""The fourth secrets corpus (tests/data/secrets-names/, made by its make_corpus.py): random
values of no vendor's shape, most too short to look generated, under secret names written
every way (camel case, a digit first, words run together: `1passwordToken`,
`AUTH_CLIENTSECRET`, `APIKEY`) in every syntax people write (Make's `::=`, `:::=`, `?=`,
`+=`, PHP `.=`, Go `var x string =`, Java `System.setProperty` and `map.put`, Kotlin, C#,
XML elements and attributes, HCL, .properties, INI, TOML, YAML, JSON, env files, command
lines, environments, sitecustomize), and long numbers under a token's name. None may show
in any byte written; no look-alike (counts under count-like names, `tokenizer`, keyboard
layouts, UUIDs and commit ids under names that are no secret's, placeholders) may change.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from helpers.paths import DATA
from helpers.secretscorpus import benign_lost, planted_found, run_everything

from envsnap.agent import redact
from envsnap.snapshot.mask import Masker

CORPUS: dict[str, Any] = json.loads((DATA / "secrets-names" / "corpus.json").read_text())
CHANNELS = CORPUS["channels"]
PLANTED = [entry["value"] for entry in CORPUS["planted"]]


def test_the_corpus_covers_every_syntax() -> None:
    assert len(PLANTED) >= 180 and len(set(PLANTED)) == len(PLANTED)
    assert len({entry["channel"] for entry in CORPUS["planted"]}) >= 30
    assert {"count", "long_count", "long_measure", "uuid", "commit", "keyboard", "tokenizer",
            "placeholder"} <= {entry["kind"] for entry in CORPUS["benign"]}


def masked_by_the_agent() -> str:
    """Every channel as the agent masks it, then the controller's pass."""
    files = {**CHANNELS["tracked"], **CHANNELS["untracked"]}
    shown = [redact.redact_file(text, path) for path, text in files.items()]
    shown.append(redact.redact_patch("".join(
        f"diff --git a/{path} b/{path}\n--- /dev/null\n+++ b/{path}\n" +
        "".join(f"+{line}\n" for line in text.splitlines()) for path, text in files.items())))
    shown += redact.redact_argv(["python", *CHANNELS["worker_argv"]])
    shown += [redact.redact_env_value(name, value)
              for env in ("worker_env", "shell_env") for name, value in CHANNELS[env].items()]
    shown.append(redact.redact_code(CHANNELS["sitecustomize"]))
    shown.append(redact.redact_text(CHANNELS["bench_cmd"]))
    masker = Masker()
    return "\n".join(masker.text(text) for text in shown)


def test_every_named_secret_is_masked_and_every_look_alike_kept() -> None:
    shown = masked_by_the_agent()
    leaked = [f"{e['channel']}/{e['kind']}" for e in CORPUS["planted"] if e["value"] in shown]
    changed = [f"{e['channel']}/{e['kind']}: {e['value']}" for e in CORPUS["benign"]
               if e["value"] not in shown]
    assert (leaked, changed) == ([], [])


@pytest.mark.parametrize(("line", "kept"), [
    ('System.setProperty("AUTH_TOKEN", "a8Kd93jfL2mQp0xZr7T");',
     'System.setProperty("AUTH_TOKEN", "'),
    ("<apiKey>a8Kd93jfL2mQp0xZr7T</apiKey>", "<apiKey>"),
    ('<add key="ApiKey" value="a8Kd93jfL2mQp0xZr7T"/>', '<add key="ApiKey" value="'),
    ("API_TOKEN ::= a8Kd93jfL2mQp0xZr7T", "API_TOKEN ::= "),
    ("API_TOKEN :::= a8Kd93jfL2mQp0xZr7T", "API_TOKEN :::= "),
    ("API_TOKEN ?= a8Kd93jfL2mQp0xZr7T", "API_TOKEN ?= "),
    ("API_TOKEN += a8Kd93jfL2mQp0xZr7T", "API_TOKEN += "),
    ('var apiToken string = "a8Kd93jfL2mQp0xZr7T"', 'var apiToken string = "'),
    ("1passwordToken: a8Kd93jfL2mQp0xZr7T", "1passwordToken: "),
    ("AUTH_CLIENTSECRET=a8Kd93jfL2mQp0xZr7T", "AUTH_CLIENTSECRET="),
    ("ACCESSTOKEN=a8Kd93jfL2mQp0xZr7T", "ACCESSTOKEN="),
    ("discordToken = 12345678901234567890123456789012", "discordToken = "),
])
def test_a_named_secret_is_masked_in_its_syntax(line: str, kept: str) -> None:
    shown = redact.redact_text(line)
    assert "a8Kd93jfL2mQp0xZr7T" not in shown and "1234567890123456" not in shown
    assert shown.startswith(kept)


@pytest.mark.parametrize("name", ["max_tokens", "num_tokens", "token_count", "tokenizer",
                                  "TOKENIZERS_PARALLELISM", "keyboard", "monkey", "key_count",
                                  "MAXTOKEN", "secrets_manager", "HOTKEY", "BYPASS", "OLDPWD",
                                  "tiktoken"])
def test_count_like_and_other_names_are_no_secrets(name: str) -> None:
    assert not redact.is_secret_name(name)
    line = f"{name} ::= 12345678901234567890123"
    assert redact.redact_text(line) == line


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_no_named_secret_is_written_anywhere(
        request: pytest.FixtureRequest, cli: Cli, tmp_path: Path, over_ssh: bool) -> None:
    ran = run_everything(request, cli, tmp_path, CHANNELS, over_ssh)
    store = Path(cli.env["ENVSNAP_STORE"])
    assert planted_found(ran.roots, PLANTED) == []
    assert benign_lost([store / "planted.yaml", store / "benched.yaml"], CORPUS, over_ssh) == []
