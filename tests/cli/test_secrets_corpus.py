"""The secret corpus (tests/data/secrets/corpus.json, made by make_corpus.py) through the CLI.

A host carries every planted secret in every channel the agent reads, then every command
and output runs (helpers/secretscorpus.py says which), and every byte they wrote (the
store, the reports, each member of the bundles, the home with its agent cache, the remote
login's home) is searched for every planted value: none may show. The benign look-alikes
(SHAs, digests, UUIDs, versions, package names, paths) must survive in the snapshots, all.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.paths import DATA
from helpers.secretscorpus import benign_lost, ok, planted_found, run_everything

CORPUS = json.loads((DATA / "secrets" / "corpus.json").read_text())
CHANNELS = CORPUS["channels"]
PLANTED = [entry["value"] for entry in CORPUS["planted"]]


def test_the_corpus_is_big_enough() -> None:
    kinds = {entry["kind"] for entry in CORPUS["planted"]}
    assert len(PLANTED) >= 150 and len(set(PLANTED)) == len(PLANTED)
    assert len(CORPUS["benign"]) >= 300
    assert len({entry["channel"] for entry in CORPUS["planted"]}) >= 14
    assert {"github_classic", "gitlab", "huggingface", "openai", "anthropic", "aws_access_key",
            "aws_secret_key", "google_api", "stripe_live", "slack_bot", "jwt",
            "pem_private_key", "password", "high_entropy"} <= kinds


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_no_planted_secret_is_written_anywhere(request: pytest.FixtureRequest, cli: Cli,
                                               tmp_path: Path, over_ssh: bool) -> None:
    ran = run_everything(request, cli, tmp_path, CHANNELS, over_ssh)
    store = Path(cli.env["ENVSNAP_STORE"])
    assert (store / "broken.yaml").exists()
    snapshot = yaml.safe_load((store / "planted.yaml").read_text())
    repo_facts = snapshot["facts"]["git"]["repos"][str(ran.repo)]
    assert repo_facts["uncommitted"]["patch"]["redacted"] and repo_facts["stashes"]
    assert any(info["cmdline"][3] == ran.marker
               for info in snapshot["facts"]["env"]["processes"].values())
    assert "<secret:" in snapshot["facts"]["python_env"]["customize"]["sitecustomize"]["content"]
    assert planted_found(ran.roots, PLANTED) == []
    assert benign_lost([store / "planted.yaml", store / "benched.yaml"], CORPUS, over_ssh) == []
    # the marker keeps a diff useful: the same secret, the same short keyed hash
    again = cli("capture", ran.host, "--label", "again", "--python", ran.python)
    shell = yaml.safe_load((store / "again.yaml").read_text())["facts"]["env"]["shell"]
    first = snapshot["facts"]["env"]["shell"]
    assert again.returncode == 0 and shell["HF_TOKEN"] == first["HF_TOKEN"]


def test_a_changed_secret_shows_as_changed_without_being_shown(cli: Cli) -> None:
    """Equal secrets, equal markers (a short hash keyed by this user's key); a new value, a
    new marker: `diff` says HF_TOKEN changed, and neither value is written or shown."""
    old, new = "hf_" + "Ab1" * 12, "hf_" + "Cd2" * 12
    for label, token in (("before", old), ("same", old), ("after", new)):
        cli.env["HF_TOKEN"] = token
        ok(cli("capture", "local", "--label", label))
    store = Path(cli.env["ENVSNAP_STORE"])
    markers = {label: yaml.safe_load((store / f"{label}.yaml").read_text())
               ["facts"]["env"]["shell"]["HF_TOKEN"] for label in ("before", "same", "after")}
    assert markers["before"] == markers["same"] != markers["after"]
    assert all(re.fullmatch(r"<secret:[0-9a-f]{8}>", marker) for marker in markers.values())
    changed = cli("diff", "before", "after")
    assert changed.returncode == 1 and "HF_TOKEN" in changed.stdout
    assert old not in changed.stdout + changed.stderr and new not in changed.stdout
    text = "".join(path.read_text() for path in store.glob("*.yaml"))
    assert old not in text and new not in text
