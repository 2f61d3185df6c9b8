"""The secret detector (envsnap/agent/redact.py): what it masks, what it must leave alone.

The corpus test (test_secrets_corpus.py) checks every channel through the CLI; these pin the
shapes one by one, so a regression names the shape it broke."""
from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from envsnap.agent import redact
from envsnap.agent.redact import (
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_code,
    redact_env_value,
    redact_patch,
    redact_text,
    rekey,
)

FAKE = "Zq8" * 14   # 42 characters of no one's secret


@pytest.mark.parametrize("text, secret", [
    ('password = "hunter22x"', "hunter22x"),
    ("password: correct horse battery", "correct horse battery"),
    ('{"api_key": "abc123XYZqq"}', "abc123XYZqq"),
    ("DB_PASSWORD=s3cr3t!x", "s3cr3t!x"),
    ("export HF_HUB_PW=weakpw1", "weakpw1"),
    ("[db]\npassword = letmein99", "letmein99"),
    ("mysql -u root -p hunter2x db", "hunter2x"),
    ("mysql -u root -phunter2x db", "hunter2x"),
    ("./run --db-pass Xyz123 --max-tokens 512", "Xyz123"),
    ("https://ada:pw123abc@git.example.com/x", "pw123abc"),
    ("commit: set password=djVkm for staging", "djVkm"),
    ("Authorization: Bearer abcdefghij1234567890", "abcdefghij1234567890"),
    ("token glpat-AbCdEfGhIjKlMnOpQrSt", "glpat-AbCdEfGhIjKlMnOpQrSt"),
    ("key sk_live_" + FAKE[:24], "sk_live_" + FAKE[:24]),
    ("rk_live_" + FAKE[:24], "rk_live_" + FAKE[:24]),
    ("AIza" + FAKE[:35], "AIza" + FAKE[:35]),
    ("ghp_" + FAKE[:36], "ghp_" + FAKE[:36]),
    ("github_pat_" + FAKE, "github_pat_" + FAKE),
    ("hf_" + "AbCd" * 9, "hf_" + "AbCd" * 9),
    ("sk-proj-" + FAKE, "sk-proj-" + FAKE),
    ("sk-ant-api03-" + FAKE, "sk-ant-api03-" + FAKE),
    ("AKIAIOSFODNN7EXAMPL1", "AKIAIOSFODNN7EXAMPL1"),
    ("xoxb-918273645012-5039182736451-" + FAKE[:24], FAKE[:24]),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz2Kq9", "wJalrXUtnFEMI/K7MDENG"),
    ('x = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz2Kq9"', "wJalrXUtnFEMI/K7MDENG"),
    ("seed: 9fQ2xK7pLm3vR8tB1nW6yZ4hJ0cD5gA2", "9fQ2xK7pLm3vR8tB1nW6yZ4hJ0cD5gA2"),
    ("-----BEGIN RSA PRIVATE KEY-----\n" + ("Ab1+" * 16 + "\n") * 3 +
     "-----END RSA PRIVATE KEY-----", "Ab1+Ab1+"),
])
def test_secrets_are_masked(text: str, secret: str) -> None:
    assert secret not in redact_text(text)


@pytest.mark.parametrize("text", [
    "commit 0be30d4e6b2b0b1c1f3a9f3e2c9d0f1e2a3b4c5d", "digest: sha256:" + "ab12" * 16,
    "uuid: GPU-d3208dcb-53e8-24e1-bfd7-b35894626910", "pyserial==3.5", "ast-serialize: 0.1.0",
    "tokenizers==0.20.3", "keyring: 25.5.0", "TOKENIZERS_PARALLELISM=false", "max_tokens: 512",
    "output_token_throughput: 1234.5", "HF_HUB_DISABLE_IMPLICIT_TOKEN=1", "PRIMARY_KEY=id",
    "path: /home/ada/models/Llama-3.1-8B-Instruct/model-00001-of-00030.safetensors",
    "model: meta-llama/Llama-3.1-8B-Instruct", "psql -h db -p 5432 prod",
    'data = "SGVsbG8gd29ybGQsIHRoaXMgaXMgYmFzZTY0IHRleHQ="', "Basic authentication works",
    "version=c_nvmlNvlinkSupportedBwModes_v1_t", "id: BSD-3-Clause-Open-MPI",
])
def test_look_alikes_are_left_alone(text: str) -> None:
    assert redact_text(text) == text


HEX32 = "3f9a" * 8
KEY_PEM = ("-----BEGIN EC PRIVATE KEY-----\n" + "MHcCAQEEIB" * 12 +
           "\n-----END EC PRIVATE KEY-----\n")
KEY_B64 = base64.b64encode(KEY_PEM.encode()).decode()
CERT_B64 = base64.b64encode(("-----BEGIN CERTIFICATE-----\n" + "MIIB" * 40 +
                             "\n-----END CERTIFICATE-----\n").encode()).decode()


@pytest.mark.parametrize("text, secret", [
    ("https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/" + FAKE[:24], FAKE[:24]),
    ("hook: https://discord.com/api/webhooks/123456789012345678/" + FAKE + "_-x", FAKE),
    ("https://x.webhook.office.com/webhookb2/a@b/IncomingWebhook/" + HEX32 + "/c", HEX32),
    ("https://prod.logic.azure.com/workflows/1/triggers/x?api-version=1&sv=1.0&sig=" + FAKE,
     FAKE),
    ("url: https://chat.example.com/hooks/3ozqmcncfwd3kmbfejnfztwhoa", "3ozqmcncfwd3kmbfe"),
    ("https://rocket.example.com/hooks/" + FAKE[:17] + "/" + FAKE, FAKE),
    ("https://events.pagerduty.com/integration/" + HEX32 + "/enqueue", HEX32),
    ("routing_key: " + HEX32, HEX32), ("PAGERDUTY_ROUTING_KEY=" + HEX32, HEX32),
    ("curl -H 'Authorization: GenieKey 4f8aeacb-989a-49c7-8274-ccd8e03e0f10' https://x",
     "4f8aeacb-989a"),
    ("mail SG." + FAKE[:22] + "." + FAKE + "q", FAKE[:22]),
    ("api:key-" + HEX32, HEX32), ("sid AC" + HEX32, HEX32), ("SK" + HEX32, HEX32),
    ("mc " + HEX32 + "-us14", HEX32), ("xkeysib-" + HEX32 * 2 + "-" + FAKE[:16], HEX32),
    ("https://api.telegram.org/bot1234567890:AA" + FAKE[:33] + "/sendMessage", FAKE[:33]),
    ("machine api.example.com login ada password Hunter22x", "Hunter22x"),
    ("machine h\n  login ada\n  password Hunter22x\n", "Hunter22x"),
    ("db.internal:5432:bench:ada:Hunter22x", "Hunter22x"),
    ("db:5432:x:ada:Hunter22x\r\nmachine h\r\n  password Hunter22y\r\n", "Hunter22"),
    ("client-key-data: " + KEY_B64, KEY_B64[100:140]),
    ("tls.key: |\n" + "".join("    " + KEY_B64[at:at + 76] + "\n"
                               for at in range(0, len(KEY_B64), 76)), KEY_B64[152:228]),
    ('{"tls.key": "' + KEY_B64 + '"}', KEY_B64[180:220]),
    ("curl -sf -u ada:Hunter22x https://x", "Hunter22x"),
    ("curl --user=ci:Hunter22x example.com/x", "Hunter22x"),
    ("wandb login " + "ab12" * 10, "ab12" * 10), ("wandb login --relogin " + HEX32, HEX32),
    ('wandb.login(key="' + HEX32 + '")', HEX32),
    ("huggingface-cli login --token Hunter22x", "Hunter22x"),
    ("docker login -u ada -p Hunter22x registry.example.com", "Hunter22x"),
    ("mysql -h db -pHunter22x results", "Hunter22x"), ("./x --passwd=Hunter22x", "Hunter22x"),
    ("./x --api-key Hunter22x", "Hunter22x"), ("./x --token=Hunter22x", "Hunter22x"),
])
def test_secrets_of_the_shapes_people_use_are_masked(text: str, secret: str) -> None:
    assert secret not in redact_text(text)


@pytest.mark.parametrize("text", [
    "PASSWORD_MIN_LENGTH=12", "password_max_length: 128", "--password-min-length 16",
    "SECRET_ROTATION_DAYS=90", "https://api.slack.com/messaging/webhooks",
    "https://github.com/ada/bench/settings/hooks/412345678", ".git/hooks/pre-commit",
    "https://events.pagerduty.com/v2/enqueue", "routing_key: alerts.gpu.h200",
    "keep the key-value store warm", "d41d8cd98f00b204e9800998ecf8427e-us-west-2",
    "login with your password manager, never a shared file", "localhost:5432:*:*:*",
    "00:01:02:03:04", "client-certificate-data: " + CERT_B64,
    "curl -sf -u ada https://grafana.example.com", 'curl -u "$CI_USER:$CI_TOKEN" https://x',
    "wandb login --host https://wandb.example.com",
    "docker login -u ada --password-stdin registry.example.com", "docker run -p 8080:80 x",
    "mysql -p -h db.internal -u ada results",
])
def test_look_alikes_of_those_shapes_are_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_a_masked_header_keeps_the_rest_of_the_command() -> None:
    shown = redact_text("curl -H 'Authorization: Basic YWRhOkh1bnRlcjIyeA==' "
                        "http://127.0.0.1:9/v1 -o /dev/null && python3 bench.py --batch 8")
    assert shown == (f"curl -H 'Authorization: Basic {REDACTED}' http://127.0.0.1:9/v1 "
                     "-o /dev/null && python3 bench.py --batch 8")
    assert redact_text('-H "X-Api-Key: Hunter22x" https://x') == \
        f'-H "X-Api-Key: {REDACTED}" https://x'


def test_a_pgpass_file_in_a_long_patch() -> None:
    """Beyond 1 MiB, .pgpass lines are looked for where a diff header names a pgpass file."""
    filler = "+x = 1\n" * 200_000
    patch = ("diff --git a/src/x.py b/src/x.py\n" + filler +
             "diff --git a/home/.pgpass b/home/.pgpass\n+db:5432:x:ada:Hunter22x\n")
    assert "Hunter22x" not in redact_patch(patch)


def test_clients_argv() -> None:
    assert redact_argv(["curl", "-u", "ada:Hunter22x", "https://x"]) == \
        ["curl", "-u", f"ada:{REDACTED}", "https://x"]
    assert redact_argv(["/usr/bin/wandb", "login", HEX32]) == ["/usr/bin/wandb", "login", REDACTED]
    assert redact_argv(["docker", "login", "-p", "Hunter22x", "r.example.com"])[3] == REDACTED
    assert redact_argv(["docker", "run", "-p", "8080:80", "x"])[3] == "8080:80"
    assert redact_argv(["app", "--password-min-length", "12"])[2] == "12"
    assert redact_argv(["docker", "login", "--password-stdin", "r.example.com"])[3] == \
        "r.example.com"
    assert redact_argv(["python", "-m", "wandb", "login", HEX32])[4] == REDACTED
    assert redact_argv(["bash", "-c", "curl -u ada:Hunter22x https://x"])[2] == \
        f"curl -u ada:{REDACTED} https://x"
    assert redact_text("password: basic words here") == f"password: {REDACTED}"


def test_code_keeps_variables_and_masks_literals() -> None:
    patch = ("diff --git a/src/x.py b/src/x.py\n+token = tokenizer.encode(text)\n"
             "+def login(password: str) -> None:\n+password = \"Hunter22x\"\n"
             "diff --git a/.env b/.env\n+PASSWORD=hunter22y\n")
    shown = redact_patch(patch)
    assert "token = tokenizer.encode(text)" in shown and "password: str" in shown
    assert "Hunter22x" not in shown and "hunter22y" not in shown


def test_a_password_split_over_lines_in_code() -> None:
    shown = redact_code('os.environ["DB_PASSWORD"] = (\n    "part1x"\n    "part2y"\n)\nx = "k"\n')
    assert "part1x" not in shown and "part2y" not in shown and 'x = "k"' in shown


def test_names_and_argv() -> None:
    assert is_secret_name("HF_HUB_PW") and is_secret_name("--db-pass")
    assert not is_secret_name("TOKENIZERS_PARALLELISM") and not is_secret_name("max_tokens")
    assert not is_secret_name("PRIMARY_KEY") and is_secret_name("WANDB_API_KEY")
    assert redact_env_value("HF_HUB_PW", "weak") == REDACTED
    assert redact_env_value("CUDA_VISIBLE_DEVICES", "GPU-d3208dcb-53e8-24e1-bfd7-b35894626910"
                            ) == "GPU-d3208dcb-53e8-24e1-bfd7-b35894626910"
    assert redact_argv(["mysql", "-u", "root", "-p", "hunter2x"])[-1] == REDACTED
    assert redact_argv(["app", "--db-pass", "X"]) == ["app", "--db-pass", REDACTED]
    assert redact_argv(["psql", "-p", "5432"]) == ["psql", "-p", "5432"]


def test_markers_are_digests_rekeyed_under_the_users_key(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(redact.Markers, "digests", True)
    sent = redact_text("HF_TOKEN=weakvalue1 and HF_TOKEN=weakvalue1")
    digest = hashlib.sha256(b"envsnap secret\0weakvalue1").hexdigest()[:32]
    assert sent == f"HF_TOKEN=<secret:{digest}> and HF_TOKEN=<secret:{digest}>"
    key = b"k" * 32
    short = hmac.new(key, bytes.fromhex(digest), hashlib.sha256).hexdigest()[:8]
    assert rekey(sent, key) == f"HF_TOKEN=<secret:{short}> and HF_TOKEN=<secret:{short}>"
    assert rekey(sent, None) == "HF_TOKEN=<secret> and HF_TOKEN=<secret>"
