"""The third secrets corpus (tests/data/secrets-vendors/, made by its make_corpus.py): tokens
of vendors' documented formats (GitHub with its checksum, npm, GitLab's runner and CI
tokens, OpenAI's service account and admin keys, AWS's ABIA/ACCA keys, Databricks,
Grafana, PlanetScale, Discord, 1Password, Shopify... and JWTs in base64, once and twice)
under neutral names, in every syntax people write (shell, env files, YAML, JSON, TOML,
INI, .properties, XML, Make, PHP, Go, Java, HCL, a patch, CSV, Markdown, command lines,
bench output, environments, commit subjects, sitecustomize). None may show in any byte
written; no look-alike (documentation's placeholders and samples of the same families,
digests, commit ids, UUIDs, versions, base64 of text, long counts) may change.
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

CORPUS: dict[str, Any] = json.loads((DATA / "secrets-vendors" / "corpus.json").read_text())
CHANNELS = CORPUS["channels"]
PLANTED = [entry["value"] for entry in CORPUS["planted"]]


def test_the_corpus_is_big_enough() -> None:
    assert len(PLANTED) >= 600 and len(set(PLANTED)) == len(PLANTED)
    assert len({entry["kind"] for entry in CORPUS["planted"]}) >= 60
    assert len({entry["channel"] for entry in CORPUS["planted"]}) >= 15
    assert len(CORPUS["benign"]) >= 300
    assert {"placeholder", "sha256", "commit", "uuid", "version", "base64_text", "count"} <= \
        {entry["kind"] for entry in CORPUS["benign"]}


def masked_by_the_agent() -> str:
    """Every channel as the agent masks it: files by their names, the patch as a patch,
    argv, environments by name and value, code, free text; then the controller's pass."""
    files = {**CHANNELS["tracked"], **CHANNELS["untracked"]}
    shown = [redact.redact_file(text, path) for path, text in files.items()]
    shown.append(redact.redact_patch("".join(
        f"diff --git a/{path} b/{path}\n--- /dev/null\n+++ b/{path}\n" +
        "".join(f"+{line}\n" for line in text.splitlines()) for path, text in files.items())))
    shown += redact.redact_argv(["python", *CHANNELS["worker_argv"]])
    shown += [" ".join(redact.redact_argv(argv)) for argv in CHANNELS["commands"]]
    shown += [redact.redact_env_value(name, value)
              for env in ("worker_env", "shell_env") for name, value in CHANNELS[env].items()]
    shown += map(redact.redact_text, CHANNELS["subjects"])
    shown.append(redact.redact_code(CHANNELS["sitecustomize"]))
    shown += [redact.redact_text(CHANNELS[bench]) for bench in ("bench_cmd", "bench_output")]
    masker = Masker()
    return "\n".join(masker.text(text) for text in shown)


def test_the_masker_masks_every_planted_value_and_keeps_every_look_alike() -> None:
    shown = masked_by_the_agent()
    leaked = [f"{e['channel']}/{e['kind']}" for e in CORPUS["planted"] if e["value"] in shown]
    changed = [f"{e['channel']}/{e['kind']}: {e['value']}" for e in CORPUS["benign"]
               if e["value"] not in shown]
    assert (leaked, changed) == ([], [])


def test_placeholders_under_secret_names_stay_whole() -> None:
    """Documentation's fill-ins are kept under any name, by the agent and by the report's
    second pass: a look-alike never loses what it says."""
    for value in ("your_token_here", "AKIAIOSFODNN7EXAMPLE", "<token>", "changeme",
                  "ghp_" + "x" * 36, "sk-proj-" + "0" * 48):
        assert redact.redact_env_value("HF_TOKEN", value) == value
        assert redact.redact_text(f'api_key: "{value}"') == f'api_key: "{value}"'
        assert Masker().tree({"HF_TOKEN": value}) == {"HF_TOKEN": value}


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_no_vendor_token_is_written_anywhere(
        request: pytest.FixtureRequest, cli: Cli, tmp_path: Path, over_ssh: bool) -> None:
    ran = run_everything(request, cli, tmp_path, CHANNELS, over_ssh)
    store = Path(cli.env["ENVSNAP_STORE"])
    assert planted_found(ran.roots, PLANTED) == []
    assert benign_lost([store / "planted.yaml", store / "benched.yaml"], CORPUS, over_ssh) == []
