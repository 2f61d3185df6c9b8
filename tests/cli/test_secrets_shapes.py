"""The second secrets corpus (tests/data/secrets-shapes/, made by its make_corpus.py) through
the CLI: the shapes people really use. Webhook URLs of chat and alerting services, mail and
SMS API keys, .netrc and .pgpass passwords, base64 private keys in YAML and JSON, and
credentials on command lines (`curl -u`, `--password`/`--token`/`--api-key`, `wandb login`,
`huggingface-cli login --token`, `docker login -p`, `mysql -pX`), in every channel of
helpers/secretscorpus.py and in clients' own argv (curl, wandb, docker...) and a crash log.
None may show in any byte written; every look-alike (PASSWORD_MIN_LENGTH=12, the command
after a masked `Authorization` header, documentation URLs, certificates, ports, switch
flags) must survive whole.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import Cli
from helpers.paths import DATA
from helpers.secretscorpus import benign_lost, planted_found, run_everything

from envsnap.errors import EXIT_INTERNAL

CORPUS = json.loads((DATA / "secrets-shapes" / "corpus.json").read_text())
CHANNELS = CORPUS["channels"]
PLANTED = [entry["value"] for entry in CORPUS["planted"]]


def test_the_corpus_is_big_enough() -> None:
    kinds = {entry["kind"] for entry in CORPUS["planted"]}
    assert len(PLANTED) >= 120 and len(set(PLANTED)) == len(PLANTED)
    assert len(CORPUS["benign"]) >= 100
    assert len({entry["channel"] for entry in CORPUS["planted"]}) >= 12
    assert {"slack_webhook", "discord_webhook", "teams_webhook", "mattermost_webhook",
            "rocketchat_webhook", "pagerduty_routing_key", "opsgenie_api_key", "sendgrid",
            "mailgun", "twilio_account_sid", "twilio_api_key", "mailchimp",
            "postmark_server_token", "netrc_password", "pgpass_password",
            "base64_private_key", "wandb_key", "basic_auth_header", "password"} <= kinds


def crash(cli: Cli, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """The real main() in a subprocess, made to fail inside (a bug): a crash log is written
    with its command line."""
    probe = ("import sys\n"
             "from envsnap.hosts import inventory\n"
             "def broken(*args, **kwargs):\n"
             "    raise ZeroDivisionError('boom')\n"
             "inventory.resolve_hosts = broken\n"
             "from envsnap.cli.main import main\n"
             f"sys.exit(main({argv!r}))\n")
    return subprocess.run([sys.executable, "-c", probe], cwd=cli.cwd, env=cli.env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("over_ssh", [False, True], ids=["local", "ssh"])
def test_no_planted_secret_of_these_shapes_is_written_anywhere(
        request: pytest.FixtureRequest, cli: Cli, tmp_path: Path, over_ssh: bool) -> None:
    ran = run_everything(request, cli, tmp_path, CHANNELS, over_ssh)
    crashed = crash(cli, CHANNELS["crash_argv"])
    assert crashed.returncode == EXIT_INTERNAL, crashed.stderr
    home = Path(cli.env["HOME"])
    assert list(home.rglob("crash-*.log")), crashed.stderr
    store = Path(cli.env["ENVSNAP_STORE"])
    benched = yaml.safe_load((store / "benched.yaml").read_text())
    assert benched["bench"]["command"].endswith(" sh bench_output.sh --max-tokens 512")
    assert planted_found(ran.roots, PLANTED) == []
    assert benign_lost([store / "planted.yaml", store / "benched.yaml"], CORPUS, over_ssh) == []
