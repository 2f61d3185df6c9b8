"""Build corpus.json: the second secrets corpus, of the shapes people really use.

Webhook URLs of chat and alerting services, mail and SMS API keys, .netrc and .pgpass
passwords, private keys base64-encoded inside YAML and JSON (kubeconfig, Helm values),
credentials on command lines (`curl -u`, `--password`/`--token`/`--api-key` flags, `wandb
login`, `huggingface-cli login --token`, `docker login -p`, `mysql -pX`); and look-alikes
that must stay whole: a number under PASSWORD_MIN_LENGTH, the rest of a command after a
masked `Authorization` header, documentation URLs, certificates (public), ports, flags.

Deterministic (a fixed seed) and fake: every value has the documented shape of its kind
(prefix, length, alphabet) and random content, so none is anyone's credential.
`python tests/data/secrets-shapes/make_corpus.py` rewrites corpus.json.

corpus.json has the layout of ../secrets/corpus.json (planted, benign, channels), where
`channel` names what carried the value (env_file and config_file are files of the patch and
of the untracked files), and two channels more:
    commands    [[str]]   processes whose argv[0] is a client (curl, wandb, docker, mysql,
                          huggingface-cli): their arguments, after `-c CODE MARKER`
    crash_argv  [str]     a command line of envsnap that ends in a crash log
"""
from __future__ import annotations

import base64
import json
import random
import string
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPPER_DIGITS = string.ascii_uppercase + string.digits
rng = random.Random(20261201)


def pick(alphabet: str, count: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(count))


def mixed(alphabet: str, count: int) -> str:
    """Random, yet with upper, lower and digits, as generated credentials have."""
    while True:
        value = pick(alphabet, count)
        if all(any(kind(c) for c in value) for kind in (str.isupper, str.islower, str.isdigit)
               if any(kind(c) for c in alphabet)):
            return value


def fake_uuid() -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def password() -> str:
    return pick(string.ascii_letters, 1) + mixed(ALNUM + "-_.~!", rng.randrange(11, 17))


def private_key_pem() -> str:
    body = base64.b64encode(bytes(rng.randrange(256) for _ in range(600))).decode()
    lines = [body[at:at + 64] for at in range(0, len(body), 64)]
    kind = rng.choice(["RSA ", "EC ", ""])
    return f"-----BEGIN {kind}PRIVATE KEY-----\n" + "\n".join(lines) + \
        f"\n-----END {kind}PRIVATE KEY-----\n"


def certificate_pem() -> str:
    body = base64.b64encode(bytes(rng.randrange(256) for _ in range(700))).decode()
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(
        body[at:at + 64] for at in range(0, len(body), 64)) + "\n-----END CERTIFICATE-----\n"


class Corpus:
    def __init__(self) -> None:
        self.planted: list[dict[str, str]] = []
        self.benign: list[dict[str, str]] = []

    def plant(self, channel: str, kind: str, value: str) -> str:
        self.planted.append({"value": value, "kind": kind, "channel": channel})
        return value

    def keep(self, channel: str, kind: str, value: str) -> str:
        self.benign.append({"value": value, "kind": kind, "channel": channel})
        return value

    # ---- the secrets: each returns the text to write, the secret part planted --------

    def slack(self, channel: str) -> str:
        token = self.plant(channel, "slack_webhook", mixed(ALNUM, 24))
        team, hook = pick(UPPER_DIGITS, 10), pick(UPPER_DIGITS, 10)
        return f"https://hooks.slack.com/services/T{team}/B{hook}/{token}"

    def discord(self, channel: str) -> str:
        token = self.plant(channel, "discord_webhook", mixed(ALNUM + "_-", 68))
        return f"https://discord.com/api/webhooks/{pick(string.digits, 19)}/{token}"

    def teams(self, channel: str) -> str:
        key = self.plant(channel, "teams_webhook", pick(HEX, 32))
        return (f"https://contoso.webhook.office.com/webhookb2/{fake_uuid()}@{fake_uuid()}"
                f"/IncomingWebhook/{key}/{fake_uuid()}")

    def teams_workflow(self, channel: str) -> str:
        sig = self.plant(channel, "teams_workflow_sig", mixed(ALNUM + "_-", 43))
        return (f"https://prod-27.westeurope.logic.azure.com:443/workflows/{pick(HEX, 32)}"
                f"/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual"
                f"%2Frun&sv=1.0&sig={sig}")

    def mattermost(self, channel: str) -> str:
        hook = self.plant(channel, "mattermost_webhook", mixed(string.ascii_lowercase +
                                                               string.digits, 26))
        return f"https://chat.example.com/hooks/{hook}"

    def rocketchat(self, channel: str) -> str:
        token = self.plant(channel, "rocketchat_webhook", mixed(ALNUM, 48))
        return f"https://rocket.example.com/hooks/{mixed(ALNUM, 17)}/{token}"

    def pagerduty_url(self, channel: str) -> str:
        key = self.plant(channel, "pagerduty_integration", pick(HEX, 32))
        return f"https://events.pagerduty.com/integration/{key}/enqueue"

    def telegram(self, channel: str) -> str:
        token = self.plant(channel, "telegram_bot", f"{pick(string.digits, 10)}:AA"
                                                    f"{mixed(ALNUM + '_-', 33)}")
        return f"https://api.telegram.org/bot{token}/sendMessage"

    def sendgrid(self, channel: str) -> str:
        return self.plant(channel, "sendgrid",
                          f"SG.{mixed(ALNUM + '_-', 22)}.{mixed(ALNUM + '_-', 43)}")

    def mailgun(self, channel: str) -> str:
        return self.plant(channel, "mailgun", "key-" + pick(HEX, 32))

    def twilio_sid(self, channel: str) -> str:
        return self.plant(channel, "twilio_account_sid", "AC" + pick(HEX, 32))

    def twilio_key(self, channel: str) -> str:
        return self.plant(channel, "twilio_api_key", "SK" + pick(HEX, 32))

    def mailchimp(self, channel: str) -> str:
        return self.plant(channel, "mailchimp", pick(HEX, 32) + f"-us{rng.randrange(1, 21)}")

    def brevo(self, channel: str) -> str:
        return self.plant(channel, "brevo", f"xkeysib-{pick(HEX, 64)}-{mixed(ALNUM, 16)}")

    def password(self, channel: str, kind: str = "password") -> str:
        return self.plant(channel, kind, password())

    def hex_key(self, channel: str, kind: str) -> str:
        """A key of hex digits: PagerDuty's and Twilio's are 32, W&B's 40."""
        return self.plant(channel, kind, pick(HEX, 40 if kind.startswith("wandb") else 32))

    def uuid_key(self, channel: str, kind: str) -> str:
        return self.plant(channel, kind, fake_uuid())

    def base64_key(self, channel: str) -> str:
        """base64 of a whole PEM private key; a chunk of its middle is what is planted."""
        encoded = base64.b64encode(private_key_pem().encode()).decode()
        self.plant(channel, "base64_private_key", encoded[400:460])
        return encoded


# ---- look-alikes --------------------------------------------------------------------------

DOC_URLS = ["https://api.slack.com/messaging/webhooks",
            "https://discord.com/developers/docs/resources/webhook",
            "https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/"
            "how-to/add-incoming-webhook", "https://github.com/ada/bench/settings/hooks/412345678",
            "https://gitlab.example.com/api/v4/projects/42/hooks",
            "https://docs.mattermost.com/developer/webhooks-incoming.html",
            "https://events.pagerduty.com/v2/enqueue", "https://api.opsgenie.com/v2/alerts",
            "https://docs.sendgrid.com/for-developers/sending-email/api-getting-started",
            "https://www.twilio.com/docs/iam/api-keys"]
MEASURES = [("PASSWORD_MIN_LENGTH", "12"), ("PASSWORD_MAX_LENGTH", "128"),
            ("SECRET_ROTATION_DAYS", "90"), ("API_KEY_MIN_LENGTH", "32"),
            ("CREDENTIAL_CACHE_TTL", "300"), ("PASSWORD_HASH_ROUNDS", "12"),
            ("AUTH_TOKEN_MAX_AGE", "3600"), ("SECRET_KEY_BITS", "256")]
PROSE = ["Basic authentication is disabled on this endpoint",
         "the password reset link expires in 24 hours",
         "login with your password manager, never a shared file",
         "machine learning jobs need no password on this cluster",
         "keep the key-value store warm before the benchmark",
         "monkey-patching the tokenizer is not supported"]
LOOKALIKE_VALUES = ["0000:1b:00.0", "127.0.0.1:8080:80/tcp", "00:01:02:03:04",
                    "localhost:5432:*:*:*", "d41d8cd98f00b204e9800998ecf8427e-us-west-2",
                    "fe80::1ff:fe23:4567:890a", "en-us", "cpu-usage-p99", "AC/DC", "SKU-4471"]


def lookalikes(c: Corpus, channel: str, count: int) -> list[str]:
    """Values a diff needs, recorded as benign: each channel gets its share in turn."""
    pool = DOC_URLS + PROSE + LOOKALIKE_VALUES
    start = len(c.benign)
    return [c.keep(channel, "lookalike", pool[(start + index) % len(pool)])
            for index in range(count)]


def measures(c: Corpus, channel: str, form: str, count: int = len(MEASURES)) -> list[str]:
    """PASSWORD_MIN_LENGTH and friends in `form` (env, yaml, flag), the number kept."""
    lines = []
    for name, number in MEASURES[:count]:
        if form == "yaml":
            line = f"{name.lower()}: {number}"
        elif form == "flag":
            line = f"--{name.lower().replace('_', '-')} {number}"
        else:
            line = f"{name}={number}"
        lines.append(c.keep(channel, "measure", line))
    return lines


# ---- files --------------------------------------------------------------------------------

def mail_env(c: Corpus, channel: str) -> str:
    lines = ["# mail and SMS for the alert digest",
             f"SENDGRID_API_KEY={c.sendgrid(channel)}",
             f"MAILGUN_API_KEY={c.mailgun(channel)}",
             f"MAILGUN_SIGNING_KEY={c.hex_key(channel, 'mailgun_signing_key')}",
             f"TWILIO_ACCOUNT_SID={c.twilio_sid(channel)}",
             f"TWILIO_API_KEY={c.twilio_key(channel)}",
             f"TWILIO_AUTH_TOKEN={c.hex_key(channel, 'twilio_auth_token')}",
             f"MAILCHIMP_API_KEY={c.mailchimp(channel)}",
             f"POSTMARK_SERVER_TOKEN={c.uuid_key(channel, 'postmark_server_token')}",
             f"BREVO_API_KEY={c.brevo(channel)}",
             f"SLACK_WEBHOOK_URL={c.slack(channel)}",
             f"PAGERDUTY_ROUTING_KEY={c.hex_key(channel, 'pagerduty_routing_key')}",
             f"OPSGENIE_API_KEY={c.uuid_key(channel, 'opsgenie_api_key')}"]
    lines += measures(c, channel, "env")
    lines += [f"NOTE_{i}={value}" for i, value in enumerate(lookalikes(c, channel, 4))]
    return "\n".join(lines) + "\n"


def alertmanager(c: Corpus, channel: str) -> str:
    lines = ["global:", f"  slack_api_url: '{c.slack(channel)}'", "receivers:",
             "  - name: gpu-oncall", "    pagerduty_configs:",
             f"      - routing_key: {c.hex_key(channel, 'pagerduty_routing_key')}",
             f"      - service_key: {c.hex_key(channel, 'pagerduty_service_key')}",
             "    opsgenie_configs:", f"      - api_key: {c.uuid_key(channel, 'opsgenie_api_key')}",
             "    discord_configs:", f"      - webhook_url: {c.discord(channel)}",
             "    msteams_configs:", f"      - webhook_url: \"{c.teams(channel)}\"",
             f"      - webhook_url: {c.teams_workflow(channel)}",
             "    webhook_configs:", f"      - url: {c.mattermost(channel)}",
             f"      - url: {c.rocketchat(channel)}", f"      - url: {c.pagerduty_url(channel)}",
             f"      - url: {c.telegram(channel)}",
             "route:", f"  routing_key: {c.keep(channel, 'routing_key', 'alerts.gpu.h200')}"]
    lines += [f"  # see {value}" for value in lookalikes(c, channel, 4)]
    lines += [f"  {line}" for line in measures(c, channel, "yaml")]
    return "\n".join(lines) + "\n"


def kubeconfig(c: Corpus, channel: str) -> str:
    cert = c.keep(channel, "certificate_base64",
                  base64.b64encode(certificate_pem().encode()).decode())
    ca = c.keep(channel, "certificate_base64",
                base64.b64encode(certificate_pem().encode()).decode())
    return "\n".join([
        "apiVersion: v1", "kind: Config", "clusters:", "- cluster:",
        f"    certificate-authority-data: {ca}", "    server: https://10.0.0.1:6443",
        "  name: gpu", "users:", "- name: ada", "  user:",
        f"    client-certificate-data: {cert}", f"    client-key-data: {c.base64_key(channel)}",
        ""])


def helm_values(c: Corpus, channel: str) -> str:
    key = c.base64_key(channel)
    cert = c.keep(channel, "certificate_base64",
                  base64.b64encode(certificate_pem().encode()).decode())
    wrapped = "\n".join("    " + key[at:at + 76] for at in range(0, len(key), 76))
    return "\n".join([
        "ingress:", "  tls:", "    enabled: true", "tls:", f"  crt: {cert}", "  key: |",
        wrapped, "secret:", "  data:", f"    tls.key: {c.base64_key(channel)}",
        f"    routing_key: {c.keep(channel, 'routing_key', 'bench.results')}", ""])


def service_json(c: Corpus, channel: str) -> str:
    data = {"kind": "Secret", "data": {"tls.key": c.base64_key(channel),
                                       "tls.crt": c.keep(channel, "certificate_base64",
                                                         base64.b64encode(certificate_pem()
                                                                          .encode()).decode())},
            "notify": {"routing_key": c.hex_key(channel, "pagerduty_routing_key"),
                       "sendgrid": c.sendgrid(channel), "discord": c.discord(channel)},
            "limits": {"passwordMinLength": 12, "passwordMaxLength": 64}}
    c.keep(channel, "measure", '"passwordMinLength": 12')
    return json.dumps(data, indent=2) + "\n"


def netrc(c: Corpus, channel: str) -> str:
    return "\n".join([
        f"machine api.wandb.ai login user password {c.hex_key(channel, 'wandb_key')}",
        f"machine git.example.com login ada password {c.password(channel, 'netrc_password')}",
        "machine registry.example.com", "  login ada",
        f"  password {c.password(channel, 'netrc_password')}",
        f"default login anonymous password {c.password(channel, 'netrc_password')}", ""])


def pgpass(c: Corpus, channel: str) -> str:
    return "\n".join([
        f"db.internal:5432:bench:ada:{c.password(channel, 'pgpass_password')}",
        f"*:*:*:replicator:{c.password(channel, 'pgpass_password')}",
        f"10.0.0.7:6432:results:grafana:{c.password(channel, 'pgpass_password')}",
        c.keep(channel, "pgpass_wildcard", "localhost:5432:*:*:*"), ""])


def notify_script(c: Corpus, channel: str) -> str:
    header = base64.b64encode(f"ada:{c.password(channel)}".encode()).decode()
    c.plant(channel, "basic_auth_header", header)
    after = c.keep(channel, "after_header", "http://127.0.0.1:9/v1/models -o /dev/null")
    return "\n".join([
        "#!/bin/sh",
        f"curl -sf -X POST -H 'Content-type: application/json' --data @msg.json {c.slack(channel)}",
        f"curl -sf -u ada:{c.password(channel)} https://grafana.example.com/api/health",
        f"curl -sf --user deploy:{c.password(channel)} https://ci.example.com/job/x/build",
        f"curl -sf -u 'api:{c.mailgun(channel)}' https://api.mailgun.net/v3/x/messages",
        f"curl -sf -H 'Authorization: Basic {header}' {after}",
        f"curl -sf -H 'Authorization: GenieKey {c.uuid_key(channel, 'opsgenie_api_key')}' "
        f"https://api.opsgenie.com/v2/alerts",
        f"curl -sf -H \"X-Postmark-Server-Token: {c.uuid_key(channel, 'postmark_server_token')}\""
        f" https://api.postmarkapp.com/email",
        f"wandb login {c.hex_key(channel, 'wandb_key')}",
        f"wandb login --relogin {c.hex_key(channel, 'wandb_key')}",
        f"huggingface-cli login --token {c.password(channel, 'hf_token_unprefixed')}",
        f"docker login -u ada -p {c.password(channel)} registry.example.com",
        f"mysql -h db -u ada -p{c.password(channel)} results",
        f"./upload --password {c.password(channel)} --passwd={c.password(channel)}",
        f"./upload --token {c.password(channel)} --api-key={c.password(channel)}",
        f"./upload --api-key {c.password(channel)} --token={c.password(channel)}",
        c.keep(channel, "command", "curl -sf -u ada https://grafana.example.com/login"),
        c.keep(channel, "command", 'curl -sf -u "$DEPLOY_USER:$DEPLOY_TOKEN" https://x.example.com'),
        c.keep(channel, "command", "wandb login --host https://wandb.example.com"),
        c.keep(channel, "command", "docker login -u ada --password-stdin registry.example.com"),
        c.keep(channel, "command", "docker run --rm -p 8080:80 nginx:1.27"),
        c.keep(channel, "command", "mysql -p -h db.internal -u ada results"),
        *measures(c, channel, "flag"),
        *(f"echo '{value}'" for value in lookalikes(c, channel, 4)), ""])


def notify_py(c: Corpus, channel: str) -> str:
    return "\n".join([
        "import wandb", "from sendgrid import SendGridAPIClient", "",
        f"SLACK_HOOK = \"{c.slack(channel)}\"",
        f"client = SendGridAPIClient(\"{c.sendgrid(channel)}\")",
        f"wandb.login(key=\"{c.hex_key(channel, 'wandb_key')}\")",
        f"TEAMS = \"{c.teams(channel)}\"",
        f"sms = Client(\"{c.twilio_sid(channel)}\", \"{c.twilio_key(channel)}\")",
        f"PASSWORD_MIN_LENGTH = {c.keep(channel, 'measure_number', '12')}",
        *(f"DOC_{i} = \"{value}\"" for i, value in enumerate(lookalikes(c, channel, 4))), ""])


FILES = {"config/mail.env": ("env_file", mail_env),
         "deploy/alertmanager.yml": ("config_file", alertmanager),
         "deploy/kubeconfig.yaml": ("config_file", kubeconfig),
         "deploy/helm/values.yaml": ("config_file", helm_values),
         "deploy/secret.json": ("config_file", service_json),
         "home/.netrc": ("config_file", netrc), "home/.pgpass": ("config_file", pgpass),
         "scripts/notify.sh": ("patch", notify_script), "src/notify.py": ("patch", notify_py)}


def files(c: Corpus, carrier: str) -> dict[str, str]:
    """Every file, its secrets planted under its channel ("untracked" for the patch's)."""
    out = {}
    for path, (channel, make) in FILES.items():
        named = channel if carrier == "tracked" or channel != "patch" else "untracked"
        out[path] = make(c, named)
    return out


# ---- the other channels ---------------------------------------------------------------------

def build() -> dict[str, Any]:
    c = Corpus()
    channels: dict[str, Any] = {
        "tracked": files(c, "tracked"),
        "untracked": {"local/" + path: text for path, text in files(c, "untracked").items()},
        "stash": {"stashed/mail.env": mail_env(c, "stash")},
    }
    channels["subjects"] = [
        f"alerts: post to {c.slack('subject')}", f"alerts: discord {c.discord('subject')}",
        f"mail through {c.sendgrid('subject')} for now", f"sms from {c.twilio_sid('subject')}",
        f"ci: wandb login {c.hex_key('subject', 'wandb_key')}",
        f"ci: curl -u ci:{c.password('subject')} for the upload",
        *(f"docs: {value}" for value in lookalikes(c, "subject", 6)),
        *(f"policy: {line}" for line in measures(c, "subject", "env", 3))]
    channels["reflog"] = [f"notify: {c.teams('reflog')}"]
    channels["remotes"] = {}
    channels["worker_env"] = {
        "SLACK_WEBHOOK_URL": c.slack("worker_env"), "DISCORD_WEBHOOK": c.discord("worker_env"),
        "TEAMS_WEBHOOK_URL": c.teams("worker_env"),
        "PAGERDUTY_ROUTING_KEY": c.hex_key("worker_env", "pagerduty_routing_key"),
        "SENDGRID_API_KEY": c.sendgrid("worker_env"), "TWILIO_SID": c.twilio_sid("worker_env"),
        "MAILGUN_KEY": c.mailgun("worker_env"), "MC_KEY": c.mailchimp("worker_env"),
        "KUBE_CLIENT_KEY_DATA": c.base64_key("worker_env"),
        "ALERT_HOOK": c.mattermost("worker_env"),
        "PASSWORD_MIN_LENGTH": c.keep("worker_env", "measure_number", "12"),
        "SECRET_ROTATION_DAYS": c.keep("worker_env", "measure_number", "90"),
        "PAGERDUTY_DOCS": c.keep("worker_env", "lookalike", DOC_URLS[6]),
    }
    channels["worker_argv"] = [
        "--slack-webhook", c.slack("worker_argv"), "--sendgrid-key", c.sendgrid("worker_argv"),
        "--password", c.password("worker_argv"), "--passwd=" + c.password("worker_argv"),
        "--token", c.password("worker_argv"), "--api-key=" + c.password("worker_argv"),
        "--password-min-length", c.keep("worker_argv", "measure_number", "16"),
        "--password-stdin", "--hub", c.keep("worker_argv", "lookalike", "registry.example.com"),
        "--notify", f"curl -u ops:{c.password('worker_argv')} {DOC_URLS[7]}"]
    channels["commands"] = [
        ["curl", "-u", f"ada:{c.password('command_argv')}", "https://api.example.com/v1"],
        ["curl", f"--user=ci:{c.password('command_argv')}", "https://ci.example.com"],
        ["wandb", "login", c.hex_key("command_argv", "wandb_key")],
        ["docker", "login", "-u", "ada", "-p", c.password("command_argv"), "registry.example.com"],
        ["mysql", "-h", "db", "-u", "ada", "-p" + c.password("command_argv"), "results"],
        ["huggingface-cli", "login", "--token", c.password("command_argv", "hf_token_unprefixed")],
        ["docker", "run", "-p", c.keep("command_argv", "port", "8080:80"), "nginx:1.27"]]
    channels["shell_env"] = {
        "SLACK_WEBHOOK_URL": c.slack("shell_env"), "SENDGRID_API_KEY": c.sendgrid("shell_env"),
        "NETRC_LINE": f"machine h login u password {c.password('shell_env', 'netrc_password')}",
        "PASSWORD_MAX_LENGTH": c.keep("shell_env", "measure_number", "128")}
    channels["sitecustomize"] = "\n".join([
        "import os",
        f"os.environ.setdefault(\"SLACK_WEBHOOK_URL\", \"{c.slack('sitecustomize')}\")",
        f"os.environ[\"SENDGRID_API_KEY\"] = \"{c.sendgrid('sitecustomize')}\"",
        f"ALERTS = \"{c.discord('sitecustomize')}\"",
        f"os.environ[\"KUBE_KEY\"] = \"{c.base64_key('sitecustomize')}\"",
        "os.environ[\"PASSWORD_MIN_LENGTH\"] = "
        f"\"{c.keep('sitecustomize', 'measure_number', '14')}\"",
        ""])
    channels["pth"] = (f"import os; os.environ.setdefault(\"TEAMS_HOOK\", "
                       f"\"{c.teams('pth')}\")\n")
    header = base64.b64encode(f"bench:{c.password('bench_cmd')}".encode()).decode()
    c.plant("bench_cmd", "basic_auth_header", header)
    rest = c.keep("bench_cmd", "after_header", "http://127.0.0.1:9/health >/dev/null 2>&1; "
                                              "sh bench_output.sh --max-tokens 512")
    channels["bench_cmd"] = (
        f"if false; then wandb login {c.hex_key('bench_cmd', 'wandb_key')}; "
        f"docker login -u ada -p {c.password('bench_cmd')} registry.example.com; fi; "
        f"curl -sf -u ada:{c.password('bench_cmd')} -H 'Authorization: Basic {header}' {rest}")
    key = c.base64_key("bench_output")
    channels["bench_output"] = "\n".join(
        [f"posting to {c.slack('bench_output')}", f"discord: {c.discord('bench_output')}",
         f"mail key {c.sendgrid('bench_output')}", f"sms {c.twilio_key('bench_output')}",
         f"machine api.example.com login ada password "
         f"{c.password('bench_output', 'netrc_password')}",
         f"db.internal:5432:bench:ada:{c.password('bench_output', 'pgpass_password')}",
         f"client-key-data: {key}",
         *(f"note: {value}" for value in lookalikes(c, "bench_output", 6)),
         *measures(c, "bench_output", "env", 4), "value: 5"]) + "\n"
    channels["missing_repo"] = "no-such-repo-" + c.sendgrid("error_message")
    channels["crash_argv"] = ["bench", "local", "--cmd",
                              f"curl -u ada:{c.password('crash_log')} https://x.example.com",
                              "--metric", "v: (\\d+)", "--label",
                              f"run --token {c.password('crash_log')}"]
    return {"planted": c.planted, "benign": c.benign, "channels": channels}


def main() -> None:
    corpus = build()
    values = [entry["value"] for entry in corpus["planted"]]
    assert len(set(values)) == len(values), "two planted secrets are equal"
    (HERE / "corpus.json").write_text(json.dumps(corpus, indent=1, sort_keys=True) + "\n")
    print(f"{len(values)} planted secrets in "
          f"{len({entry['channel'] for entry in corpus['planted']})} channels, "
          f"{len(corpus['benign'])} look-alikes")


if __name__ == "__main__":
    main()
