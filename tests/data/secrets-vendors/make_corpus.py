"""Build corpus.json: the third secrets corpus, of vendors' token formats in every syntax.

Each planted value is made from its vendor's documented format (prefix, alphabet, length,
and GitHub's and npm's CRC32 checksum), under a neutral name, so that only what the value
is can tell it is a secret: shell exports, env files, YAML, JSON, TOML, INI, .properties,
XML elements and attributes, Make (`=`, `:=`, `?=`), PHP `.=`, Go `var`/`:=`, Java
`System.setProperty`, HCL, a patch file's added line, command lines (`--flag value`), a
bench's output, environments and commit subjects. The look-alikes must survive whole:
documentation's placeholders of the same families (`ghp_xxxx...`, `AKIAIOSFODNN7EXAMPLE`,
`your_token_here`), digests, commit ids, UUIDs, versions, base64 of ordinary text, and
long numbers under count-like names.

Deterministic (a fixed seed) and fake: random content in each documented shape, none is
anyone's credential. `python tests/data/secrets-vendors/make_corpus.py` rewrites
corpus.json, in the layout of ../secrets-shapes/corpus.json.
"""
from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
import zlib
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
LOWER, UPPER, DIGITS = string.ascii_lowercase, string.ascii_uppercase, string.digits
ALNUM = LOWER + UPPER + DIGITS
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
BASE32 = UPPER + "234567"
BASE62 = DIGITS + UPPER + LOWER
rng = random.Random(20261205)


def pick(alphabet: str, count: int) -> str:
    """Random, with every kind of character the alphabet has (as generated tokens do)."""
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(count))
        if all(any(c in kind for c in value) for kind in (LOWER, UPPER, DIGITS)
               if any(c in kind for c in alphabet)):
            return value


def crc_token(prefix: str) -> str:
    """PREFIX + 30 random + base62 CRC32 of them, six characters (GitHub's, npm's)."""
    body = pick(ALNUM, 30)
    number, digits = zlib.crc32(body.encode()), ""
    while number:
        number, digit = divmod(number, 62)
        digits = BASE62[digit] + digits
    return prefix + body + digits.rjust(6, "0")


def b64json(fields: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(fields).encode()).decode()


def jwt() -> str:
    def part(fields: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")
    return (part({"alg": "HS256", "typ": "JWT"}) + "." +
            part({"sub": pick(ALNUM, 12), "iat": rng.randrange(10**9, 2 * 10**9)}) + "." +
            pick(URLSAFE, 43))


def fmt(*parts: str | tuple[str, int]) -> Callable[[], str]:
    """A format: literal parts and (alphabet, length) parts."""
    return lambda: "".join(part if isinstance(part, str) else pick(*part) for part in parts)


FAMILIES: dict[str, Callable[[], str]] = {
    "github_pat": lambda: crc_token("ghp_"),
    "github_oauth": lambda: crc_token("gho_"),
    "github_user_to_server": lambda: crc_token("ghu_"),
    "github_server_to_server": lambda: crc_token("ghs_"),
    "github_refresh": lambda: crc_token("ghr_"),
    "github_fine_grained": fmt("github_pat_", (ALNUM, 22), "_", (ALNUM, 59)),
    "npm": lambda: crc_token("npm_"),
    "gitlab_pat": fmt("glpat-", (URLSAFE, 20)),
    "gitlab_runner": fmt("glrt-", (URLSAFE, 20)),
    "gitlab_ci_job": fmt("glcbt-", (HEX, 2), "_", (URLSAFE, 20)),
    "gitlab_trigger": fmt("glptt-", (HEX, 40)),
    "gitlab_deploy": fmt("gldt-", (URLSAFE, 20)),
    "gitlab_feed": fmt("glft-", (URLSAFE, 20)),
    "gitlab_oauth_secret": fmt("gloas-", (HEX, 64)),
    "openai_project": fmt("sk-proj-", (URLSAFE, 124)),
    "openai_service_account": fmt("sk-svcacct-", (URLSAFE, 124)),
    "openai_admin": fmt("sk-admin-", (URLSAFE, 124)),
    "openai_legacy": fmt("sk-", (ALNUM, 20), "T3BlbkFJ", (ALNUM, 20)),
    "anthropic": fmt("sk-ant-api03-", (URLSAFE, 93), "AA"),
    "anthropic_admin": fmt("sk-ant-admin01-", (URLSAFE, 93), "AA"),
    "openrouter": fmt("sk-or-v1-", (HEX, 64)),
    "aws_akia": fmt("AKIA", (BASE32, 16)),
    "aws_asia": fmt("ASIA", (BASE32, 16)),
    "aws_abia": fmt("ABIA", (BASE32, 16)),
    "aws_acca": fmt("ACCA", (BASE32, 16)),
    "google_api_key": fmt("AIza", (URLSAFE, 35)),
    "google_oauth_secret": fmt("GOCSPX-", (URLSAFE, 28)),
    "slack_bot": fmt("xoxb-", (DIGITS, 12), "-", (DIGITS, 13), "-", (ALNUM, 24)),
    "slack_user": fmt("xoxp-", (DIGITS, 12), "-", (DIGITS, 13), "-", (DIGITS, 13), "-",
                      (HEX, 32)),
    "slack_app": fmt("xapp-1-", (UPPER + DIGITS, 11), "-", (DIGITS, 13), "-", (HEX, 64)),
    "stripe_live": fmt("sk_live_", (ALNUM, 99)),
    "stripe_restricted": fmt("rk_live_", (ALNUM, 99)),
    "stripe_webhook": fmt("whsec_", (ALNUM, 32)),
    "huggingface": fmt("hf_", (ALNUM, 34)),
    "huggingface_org": fmt("api_org_", (ALNUM, 34)),
    "databricks": fmt("dapi", (HEX, 32)),
    "grafana_cloud": lambda: "glc_" + b64json({"o": pick(DIGITS, 6), "n": "stack-" + pick(
        DIGITS, 6) + "-hm-read", "k": pick(ALNUM, 24), "m": {"r": "us"}}),
    "grafana_service_account": fmt("glsa_", (ALNUM, 32), "_", (HEX, 8)),
    "shopify_access": fmt("shpat_", (HEX, 32)),
    "shopify_custom": fmt("shpca_", (HEX, 32)),
    "shopify_private": fmt("shppa_", (HEX, 32)),
    "shopify_secret": fmt("shpss_", (HEX, 32)),
    "planetscale_token": fmt("pscale_tkn_", (URLSAFE, 43)),
    "planetscale_password": fmt("pscale_pw_", (URLSAFE, 43)),
    "planetscale_oauth": fmt("pscale_oauth_", (URLSAFE, 43)),
    "discord_bot": lambda: (base64.b64encode(str(rng.randrange(10**17, 10**18)).encode())
                            .decode().rstrip("=") + "." + pick(URLSAFE, 6) + "." +
                            pick(URLSAFE, 38)),
    "onepassword_service_account": lambda: "ops_" + b64json(
        {"signInAddress": "my.1password.com", "userAuth": {"method": "SRPg-4096",
         "alg": "PBES2g-HS256", "iterations": 650000, "salt": pick(URLSAFE, 22)},
         "email": pick(LOWER, 13) + "@1passwordserviceaccounts.com",
         "srpX": pick(HEX, 64), "muk": {"alg": "A256GCM", "k": pick(URLSAFE, 43)}}),
    "onepassword_secret_key": fmt("A3-", (UPPER + DIGITS, 6), "-", (UPPER + DIGITS, 6), "-",
                                  (UPPER + DIGITS, 5), "-", (UPPER + DIGITS, 5), "-",
                                  (UPPER + DIGITS, 5), "-", (UPPER + DIGITS, 5)),
    "twilio_api_key": fmt("SK", (HEX, 32)),
    "twilio_account_sid": fmt("AC", (HEX, 32)),
    "sendgrid": fmt("SG.", (URLSAFE, 22), ".", (URLSAFE, 43)),
    "mailgun": fmt("key-", (HEX, 32)),
    "flutterwave": fmt("FLWSECK-", (HEX, 32), "-X"),
    "flutterwave_test": fmt("FLWSECK_TEST-", (HEX, 32), "-X"),
    "doppler_personal": fmt("dp.pt.", (ALNUM, 43)),
    "doppler_service": fmt("dp.st.", (LOWER, 8), ".", (ALNUM, 40)),
    "pulumi": fmt("pul-", (HEX, 40)),
    "linear": fmt("lin_api_", (ALNUM, 40)),
    "notion_internal": fmt("secret_", (ALNUM, 43)),
    "notion_ntn": fmt("ntn_", (DIGITS, 11), (ALNUM, 35)),
    "postman": fmt("PMAK-", (HEX, 24), "-", (HEX, 34)),
    "atlassian": fmt("ATATT3", (URLSAFE + "=", 180), "=", (HEX, 8)),
    "digitalocean_pat": fmt("dop_v1_", (HEX, 64)),
    "digitalocean_oauth": fmt("doo_v1_", (HEX, 64)),
    "heroku": fmt("HRKU-AA", (URLSAFE, 58)),
    "vault_service": fmt("hvs.", (URLSAFE, 90)),
    "vault_batch": fmt("hvb.", (URLSAFE, 138)),
    "vault_recovery": fmt("hvr.", (URLSAFE, 24)),
    "terraform_cloud": fmt((ALNUM, 14), ".atlasv1.", (ALNUM, 67)),
    "sentry_org": lambda: "sntrys_" + b64json({"iat": rng.randrange(10**9, 2 * 10**9),
                                                "url": "https://sentry.io",
                                                "org": pick(LOWER, 8)}).rstrip("=") +
    "_" + pick(B64, 43),
    "sentry_user": fmt("sntryu_", (HEX, 64)),
    "replicate": fmt("r8_", (ALNUM, 37)),
    "groq": fmt("gsk_", (ALNUM, 52)),
    "perplexity": fmt("pplx-", (ALNUM, 48)),
    "xai": fmt("xai-", (ALNUM, 80)),
    "tavily": fmt("tvly-dev-", (ALNUM, 32)),
    "azure_ad_client_secret": fmt((ALNUM, 3), (DIGITS, 1), "Q~", (ALNUM + "_~.-", 34)),
    "age_secret_key": fmt("AGE-SECRET-KEY-1", ("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
    "alibaba": fmt("LTAI", (ALNUM, 20)),
    "tencent": fmt("AKID", (ALNUM, 32)),
    "buildkite": fmt("bkua_", (HEX, 40)),
    "circleci": fmt("CCIPAT_", (ALNUM, 22), "_", (HEX, 40)),
    "contentful": fmt("CFPAT-", (URLSAFE, 43)),
    "dynatrace": fmt("dt0c01.", (UPPER + DIGITS, 24), ".", (UPPER + DIGITS, 64)),
    "easypost": fmt("EZAK", (ALNUM, 54)),
    "newrelic": fmt("NRAK-", (UPPER + DIGITS, 27)),
    "pypi": fmt("pypi-AgEIcHlwaS5vcmc", (URLSAFE, 70)),
    "rubygems": fmt("rubygems_", (HEX, 48)),
    "docker_hub": fmt("dckr_pat_", (URLSAFE, 27)),
    "langsmith": fmt("lsv2_pt_", (HEX, 32), "_", (HEX, 10)),
    "supabase": fmt("sbp_", (HEX, 40)),
    "nvidia_ngc": fmt("nvapi-", (URLSAFE, 64)),
    "pinecone": fmt("pcsk_", (ALNUM, 6), "_", (ALNUM, 63)),
    "square": fmt("sq0csp-", (URLSAFE, 43)),
    "jfrog": fmt("AKCp", (ALNUM, 69)),
    "brevo": fmt("xkeysib-", (HEX, 64), "-", (ALNUM, 16)),
    "jwt": jwt,
    "jwt_base64": lambda: base64.b64encode(jwt().encode()).decode(),
    "jwt_base64_twice": lambda: base64.b64encode(base64.b64encode(jwt().encode())).decode(),
    "private_key_base64_twice": lambda: base64.b64encode(base64.b64encode(
        private_key_pem().encode())).decode(),
}


def private_key_pem() -> str:
    body = base64.b64encode(rng.randbytes(600)).decode()
    lines = "\n".join(body[at:at + 64] for at in range(0, len(body), 64))
    return f"-----BEGIN PRIVATE KEY-----\n{lines}\n-----END PRIVATE KEY-----\n"


def kubernetes_secret(corpus: Corpus) -> str:
    """A Secret (its `data:` base64 and `stringData:` plain values, under neutral names, of
    no vendor's shape) beside a ConfigMap whose `data:` values are no secrets."""
    lines = ["apiVersion: v1", "kind: Secret", "metadata:", "  name: app-refs", "type: Opaque",
             "data:"]
    for number in range(8):
        value = base64.b64encode(pick(ALNUM + "!#%", 14).encode()).decode()
        lines.append(f"  entry{number}: {value}")
        corpus.planted.append(corpus.entry("kubernetes_data", "kubernetes_secret", value))
    lines.append("stringData:")
    for number in range(8):
        value = pick(ALNUM + "!#%", 14)
        lines.append(f'  setting{number}: "{value}"')
        corpus.planted.append(corpus.entry("kubernetes_string_data", "kubernetes_secret", value))
    lines += ["---", "apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: app-settings",
              "data:"]
    for number in range(8):
        value = f"worker-{number}.svc.cluster.local:{rng.randrange(1024, 65535)}"
        lines.append(f"  upstream{number}: {value}")
        corpus.benign.append(corpus.entry("kubernetes_configmap", "configmap_value", value))
    return "\n".join(lines) + "\n"

# Documentation's own fill-ins and samples, of the same families: to keep whole.
PLACEHOLDERS = [
    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "ghp_" + "x" * 36, "ghp_" + "X" * 36, "ghp_" + "0" * 36, "github_pat_" + "x" * 82,
    "glpat-xxxxxxxxxxxxxxxxxxxx", "glrt-XXXXXXXXXXXXXXXXXXXX", "sk-proj-" + "x" * 48,
    "sk-" + "0" * 48, "sk-your-openai-key", "sk-ant-api03-" + "x" * 95,
    "sk-svcacct-YOUR_KEY_HERE", "hf_" + "x" * 34, "hf_your_token_here", "npm_" + "x" * 36,
    "xoxb-your-bot-token", "xoxb-0000000000-0000000000000-xxxxxxxxxxxxxxxxxxxxxxxx",
    "sk_live_" + "x" * 24, "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "whsec_" + "x" * 32,
    "AIzaSyXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", "dapi" + "0" * 32,
    "dapiXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", "glc_" + "x" * 40, "shpat_" + "0" * 32,
    "pscale_tkn_" + "x" * 43, "SG." + "x" * 22 + "." + "x" * 43,
    "key-" + "0" * 32, "FLWSECK-" + "x" * 32 + "-X", "pul-" + "0" * 40, "lin_api_" + "x" * 40,
    "PMAK-" + "0" * 24 + "-" + "0" * 34, "dop_v1_" + "0" * 64, "hvs." + "x" * 90,
    "r8_" + "x" * 37, "gsk_" + "x" * 52, "pplx-" + "x" * 48, "xai-" + "x" * 80,
    "tvly-" + "x" * 32, "your_token_here", "YOUR_API_KEY", "<token>", "<your-api-key>",
    "changeme", "CHANGEME", "REPLACE_ME", "PUT_YOUR_TOKEN_HERE", "your-secret-here",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "0000000000000000000000000000000000000000",
    "AKIAXXXXXXXXXXXXXXXX", "ASIAEXAMPLEEXAMPLE12", "ghp_<your-token>",
    "sk-proj-EXAMPLEKEYDONOTUSE0123456789abcdefghij", "gsk_EXAMPLE" + "0" * 45,
]
BUMPED = ["max_tokens", "num_tokens", "token_count", "MAX_TOKENS", "keys_total",
          "token_limit", "batch_tokens"]


def lookalikes() -> list[tuple[str, str]]:
    """(kind, value) of the look-alikes: at least 300."""
    out = [("placeholder", value) for value in PLACEHOLDERS]
    for _ in range(40):
        raw = rng.randbytes(32)
        out.append(("sha256", hashlib.sha256(raw).hexdigest()))
        out.append(("commit", hashlib.sha1(raw).hexdigest()))
        out.append(("md5", hashlib.md5(raw).hexdigest()))
        out.append(("uuid", str(uuid.UUID(int=rng.getrandbits(128), version=4))))
        out.append(("version", f"{rng.randrange(1, 30)}.{rng.randrange(0, 40)}."
                               f"{rng.randrange(0, 300)}+cu{rng.choice(['118', '121', '124'])}"))
    for sentence in ("the quick brown fox jumps over the lazy dog", "hello from the build farm",
                     '{"model": "llama", "dtype": "bfloat16"}', "nightly wheels for cuda 12.4",
                     "benchmark results follow below", "release notes for the next version",
                     "export PATH=/usr/local/bin:$PATH", "no secrets here, just words",
                     "torch.compile mode max-autotune", "run the tests before merging"):
        once = base64.b64encode(sentence.encode()).decode()
        out.append(("base64_text", once))
        out.append(("base64_text", base64.urlsafe_b64encode(sentence.encode()).decode()))
    return out


# Each syntax: how a file of it (or a channel) writes `name` = `value`.
FILE_SYNTAXES: dict[str, tuple[str, Callable[[str, str], str]]] = {
    "shell_export": ("deploy/env.sh", lambda n, v: f'export {n.upper()}="{v}"'),
    "env_file": ("config/app.env", lambda n, v: f"{n.upper()}={v}"),
    "yaml": ("config/app.yaml", lambda n, v: f"  {n}: {v}"),
    "yaml_list": ("config/list.yaml", lambda n, v: f"  - {v}"),
    "json": ("config/app.json", lambda n, v: f'  "{n}": "{v}",'),
    "toml": ("config/app.toml", lambda n, v: f'{n} = "{v}"'),
    "ini": ("config/app.ini", lambda n, v: f"{n} = {v}"),
    "properties": ("config/app.properties", lambda n, v: f"app.{n}={v}"),
    "xml_element": ("config/app.xml", lambda n, v: f"  <{n}>{v}</{n}>"),
    "xml_attribute": ("config/attrs.xml", lambda n, v: f'  <item name="{n}" value="{v}"/>'),
    "make_eq": ("Makefile", lambda n, v: f"{n.upper()} = {v}"),
    "make_colon": ("build.mk", lambda n, v: f"{n.upper()} := {v}"),
    "make_question": ("defaults.mk", lambda n, v: f"{n.upper()} ?= {v}"),
    "php_append": ("src/config.php", lambda n, v: f"$cfg['{n}'] .= '{v}';"),
    "go_var": ("src/config.go", lambda n, v: f'var {n} string = "{v}"'),
    "go_short": ("src/init.go", lambda n, v: f'\t{n} := "{v}"'),
    "java_property": ("src/Config.java",
                      lambda n, v: f'        System.setProperty("app.{n}", "{v}");'),
    "hcl": ("infra/main.tf", lambda n, v: f'  {n} = "{v}"'),
    "patch_line": ("changes/fix.patch", lambda n, v: f"+{n.upper()}={v}"),
    "csv": ("data/refs.csv", lambda n, v: f"{n},{v},active"),
    "markdown": ("docs/notes.md", lambda n, v: f"Use `{v}` for {n}."),
}
# Syntaxes of the other channels.
OTHER_SYNTAXES = ("argv_flag", "command", "bench_cmd", "bench_output", "worker_env",
                  "shell_env", "subject", "sitecustomize")


def neutral_name(number: int) -> str:
    """A name that says nothing of a secret: only the value can."""
    return rng.choice(["upstream", "ref", "value", "item", "slot", "entry", "handle",
                       "setting", "field", "param"]) + f"_{number}"


class Corpus:
    def __init__(self) -> None:
        self.planted: list[dict[str, str]] = []
        self.benign: list[dict[str, str]] = []
        self.lines: dict[str, list[str]] = {path: [] for path, _ in FILE_SYNTAXES.values()}
        self.channels: dict[str, Any] = {
            "worker_argv": [], "commands": [], "worker_env": {}, "shell_env": {},
            "subjects": [], "reflog": [], "remotes": {}, "bench_lines": [], "bench_outputs": [],
            "site_lines": ["import os"]}

    def place(self, syntax: str, number: int, value: str) -> None:
        name = neutral_name(number)
        if syntax in FILE_SYNTAXES:
            path, write = FILE_SYNTAXES[syntax]
            self.lines[path].append(write(name, value))
        elif syntax == "argv_flag":
            self.channels["worker_argv"] += [f"--{name.replace('_', '-')}", value]
        elif syntax == "command":
            self.channels["commands"].append(["curl", "-sf", "-H", f"X-Ref: {value}",
                                              "https://api.example.com/v1"])
        elif syntax == "bench_cmd":
            self.channels["bench_lines"].append(f"--{name.replace('_', '-')} {value}")
        elif syntax == "bench_output":
            self.channels["bench_outputs"].append(f"step {number}: loaded {value} ok")
        elif syntax in ("worker_env", "shell_env"):
            self.channels[syntax]["TORCH_" + name.upper()] = value   # a captured prefix
        elif syntax == "subject":
            self.channels["subjects"].append(f"ci: rotate {value}")
        elif syntax == "sitecustomize":
            self.channels["site_lines"].append(
                f'os.environ.setdefault("{name.upper()}", "{value}")')

    def entry(self, syntax: str, kind: str, value: str) -> dict[str, str]:
        return {"channel": syntax, "kind": kind, "value": value}


def build() -> dict[str, Any]:
    corpus = Corpus()
    syntaxes = list(FILE_SYNTAXES) + list(OTHER_SYNTAXES)
    number = 0
    for index, (kind, make) in enumerate(FAMILIES.items()):
        for copy in range(7):
            value = make()
            syntax = syntaxes[(index * 7 + copy * 5) % len(syntaxes)]
            corpus.place(syntax, number, value)
            corpus.planted.append(corpus.entry(syntax, kind, value))
            number += 1
    for index, (kind, value) in enumerate(lookalikes()):
        for copy in range(2 if kind == "placeholder" else 1):
            syntax = syntaxes[(index * 3 + copy * 11) % len(syntaxes)]
            if syntax in ("command", "subject"):
                syntax = "yaml"
            corpus.place(syntax, number, value)
            corpus.benign.append(corpus.entry(syntax, kind, value))
            number += 1
    for count_name in BUMPED:   # long numbers under count-like names
        for syntax in ("env_file", "yaml", "json", "toml"):
            value = str(rng.randrange(10**15, 10**33))
            path, write = FILE_SYNTAXES[syntax]
            corpus.lines[path].append(write(count_name, value))
            corpus.benign.append(corpus.entry(syntax, "count", value))
    files = {path: "\n".join(lines) + "\n" for path, lines in corpus.lines.items()}
    files["deploy/secret.yaml"] = kubernetes_secret(corpus)
    files["config/app.json"] = "{\n" + files["config/app.json"] + '  "end": true\n}\n'
    files["config/app.xml"] = "<config>\n" + files["config/app.xml"] + "</config>\n"
    files["config/attrs.xml"] = "<items>\n" + files["config/attrs.xml"] + "</items>\n"
    files["config/app.yaml"] = "settings:\n" + files["config/app.yaml"]
    files["config/list.yaml"] = "refs:\n" + files["config/list.yaml"]
    files["src/Config.java"] = ("class Config {\n    static void load() {\n" +
                                files["src/Config.java"] + "    }\n}\n")
    files["infra/main.tf"] = 'resource "null_resource" "refs" {\n' + files["infra/main.tf"] + "}\n"
    files["changes/fix.patch"] = ("diff --git a/app.env b/app.env\n--- a/app.env\n+++ b/app.env\n"
                                  "@@ -1 +1,40 @@\n" + files["changes/fix.patch"])
    ch = corpus.channels
    in_error = FAMILIES["databricks"]()   # a --repo named after a token: its error message
    corpus.planted.append(corpus.entry("error_message", "databricks", in_error))
    half = sorted(files)
    channels = {
        "tracked": {path: files[path] for path in half[::2]},
        "untracked": {path: files[path] for path in half[1::2]},
        "stash": {},
        "subjects": ch["subjects"], "reflog": [], "remotes": {},
        "worker_argv": ch["worker_argv"], "commands": ch["commands"],
        "crash_argv": ["bench", "local", "--cmd", "true", "--label", "x"],
        "sitecustomize": "\n".join(ch["site_lines"]) + "\n",
        "pth": "import os\n",
        "bench_cmd": "sh bench_output.sh " + " ".join(ch["bench_lines"]),
        "bench_output": "\n".join(ch["bench_outputs"]) + "\nvalue: 42\n",
        "missing_repo": "no-such-repo-" + in_error,
        "worker_env": ch["worker_env"], "shell_env": ch["shell_env"],
    }
    return {"planted": corpus.planted, "benign": corpus.benign, "channels": channels}


if __name__ == "__main__":
    (HERE / "corpus.json").write_text(json.dumps(build(), indent=1) + "\n")
