"""Build corpus.json: planted secrets and benign look-alikes, laid out by channel.

Deterministic (a fixed seed) and fake: every secret has the documented shape of its kind
(prefix, length, alphabet) and random content, so none is anyone's credential. Run it again
after a change here: `python tests/data/secrets/make_corpus.py` rewrites corpus.json.

corpus.json:
  planted: [{value, kind, channel}]  every value must be masked wherever it is written
  benign:  [{value, kind, channel}]  every value must survive as it is
  channels: what the test puts on the host, by channel:
    tracked    {path: content}   committed clean, then changed: the uncommitted patch
    untracked  {path: content}   never added
    stash      {path: content}   changed, then stashed
    subjects   [str]             commit subjects
    reflog     [str]             reflog messages (update-ref -m)
    remotes    {name: url}
    worker_env {name: value}     a running worker's environment
    worker_argv [str]            its arguments
    shell_env  {name: value}     the capturing shell's (local only: sshd starts a clean one)
    sitecustomize str            the interpreter's sitecustomize.py
    pth        str               a startup .pth file beside it
    bench_cmd  str               a benchmark command line
    bench_output str             what that benchmark prints
    missing_repo str             a --repo that is no repository: an error message
"""
from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ALNUM = string.ascii_letters + string.digits
rng = random.Random(20261130)


def pick(alphabet: str, count: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(count))


def mixed(alphabet: str, count: int) -> str:
    """Random, yet with upper, lower and digits, as generated credentials have."""
    wanted = [kind for kind in (str.isupper, str.islower, str.isdigit)
              if any(kind(char) for char in alphabet)]
    while True:
        value = pick(alphabet, count)
        if all(any(kind(char) for char in value) for kind in wanted):
            return value


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def jwt() -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps({"sub": pick(string.digits, 10), "iat": 1760000000 +
                              rng.randrange(10**6)}).encode())
    return f"{header}.{body}.{b64url(bytes(rng.randrange(256) for _ in range(32)))}"


def password() -> str:
    return pick(string.ascii_letters, 1) + mixed(ALNUM + "-_.~!", rng.randrange(11, 17))


# kind -> a fresh value of that kind's shape
MAKERS: dict[str, Callable[[], str]] = {
    "github_classic": lambda: "ghp_" + mixed(ALNUM, 36),
    "github_oauth": lambda: "gho_" + mixed(ALNUM, 36),
    "github_app": lambda: "ghs_" + mixed(ALNUM, 36),
    "github_fine_grained": lambda: "github_pat_" + mixed(ALNUM, 22) + "_" + mixed(ALNUM, 59),
    "gitlab": lambda: "glpat-" + mixed(ALNUM + "_-", 20),
    "huggingface": lambda: "hf_" + mixed(string.ascii_letters, 34),
    "openai": lambda: "sk-" + mixed(ALNUM, 48),
    "openai_project": lambda: "sk-proj-" + mixed(ALNUM + "_-", 64),
    "anthropic": lambda: "sk-ant-api03-" + mixed(ALNUM + "_-", 93) + "AA",
    "aws_access_key": lambda: "AKIA" + pick(string.ascii_uppercase + string.digits, 16),
    "aws_session_key": lambda: "ASIA" + pick(string.ascii_uppercase + string.digits, 16),
    "google_api": lambda: "AIza" + mixed(ALNUM + "_-", 35),
    "stripe_live": lambda: "sk_live_" + mixed(ALNUM, 24),
    "stripe_restricted": lambda: "rk_live_" + mixed(ALNUM, 24),
    "slack_bot": lambda: f"xoxb-{pick(string.digits, 12)}-{pick(string.digits, 13)}-"
                         f"{mixed(ALNUM, 24)}",
    "slack_user": lambda: f"xoxp-{pick(string.digits, 12)}-{pick(string.digits, 13)}-"
                          f"{mixed(ALNUM, 32)}",
    "jwt": jwt,
}
# Secrets that only their place says are secrets.
CONTEXT_MAKERS: dict[str, Callable[[], str]] = {
    "password": password,
    "aws_secret_key": lambda: mixed(ALNUM + "/+", 40),
    "high_entropy": lambda: mixed(ALNUM, 40),
}


class Corpus:
    def __init__(self) -> None:
        self.planted: list[dict[str, str]] = []
        self.benign: list[dict[str, str]] = []
        self.kinds = list(MAKERS)

    def secret(self, channel: str, kind: str | None = None) -> str:
        """A new secret, recorded; without a kind, the next provider in turn."""
        if kind is None:
            kind = self.kinds[len(self.planted) % len(self.kinds)]
        value = {**MAKERS, **CONTEXT_MAKERS}[kind]()
        self.planted.append({"value": value, "kind": kind, "channel": channel})
        return value

    def keep(self, channel: str, kind: str, value: str) -> str:
        self.benign.append({"value": value, "kind": kind, "channel": channel})
        return value


# ---- benign look-alikes ------------------------------------------------------------------------

PACKAGES = ["pyserial==3.5", "ast-serialize==0.1.0", "tokenizers==0.20.3", "tiktoken==0.8.0",
            "keyring==25.5.0", "keyrings.alt==5.0.2", "token-bucket==0.3.0",
            "serializable==0.4.1", "keystoneauth1==5.8.0", "pykeepass==4.1.0",
            "secretstorage==3.3.3", "passlib==1.7.4", "python-keycloak==4.7.3",
            "authlib==1.3.2", "oauthlib==3.2.2", "tokenize-rt==6.1.0", "jsonserial==0.2.1",
            "sentencepiece==0.2.0", "pyjwt==2.10.1", "cryptography==44.0.0"]
MODEL_IDS = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-72B-Instruct",
             "deepseek-ai/DeepSeek-V3", "mistralai/Mixtral-8x22B-Instruct-v0.1",
             "google/gemma-2-27b-it", "microsoft/Phi-3.5-MoE-instruct"]
PROSE = ["the quick brown fox jumps over the lazy dog", "tensor parallel size eight on H200",
         "NCCL all-reduce bus bandwidth in GB per second", "warm-up iterations are discarded",
         "checkpoint shards are loaded lazily", "disable cuda graphs for this run",
         "the tokenizer pads on the left side", "keyboard shortcuts for the dashboard"]


def benign_values(corpus: Corpus, channel: str, count: int) -> list[tuple[str, str]]:
    """(kind, value) pairs of things a diff needs, each recorded as benign."""
    out = []
    for index in range(count):
        kind = ("git_sha", "sha256", "gpu_uuid", "uuid", "base64_text", "version",
                "package", "path", "model_id", "camel_identifier")[index % 10]
        if kind == "git_sha":
            value = hashlib.sha1(pick(ALNUM, 16).encode()).hexdigest()
        elif kind == "sha256":
            value = "sha256:" + hashlib.sha256(pick(ALNUM, 16).encode()).hexdigest()
        elif kind == "gpu_uuid":
            value = "GPU-" + str(uuid.UUID(int=rng.getrandbits(128)))
        elif kind == "uuid":
            value = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        elif kind == "base64_text":
            value = base64.b64encode(f"{rng.choice(PROSE)} #{index}".encode()).decode()
        elif kind == "version":
            value = (f"{rng.randrange(3)}.{rng.randrange(30)}.{rng.randrange(20)}"
                     f"{rng.choice(['', '+cu124', 'rc1', '.post1', 'a2'])}")
        elif kind == "package":
            value = PACKAGES[index // 10 % len(PACKAGES)]
        elif kind == "path":
            model = rng.choice(MODEL_IDS).split("/")[1]
            value = f"/home/ada/models/{model}/model-{index:05d}-of-00030.safetensors"
        elif kind == "model_id":
            value = f"{MODEL_IDS[index // 10 % len(MODEL_IDS)]}-r{index}"
        else:
            value = rng.choice(["LlamaForCausalLM", "Qwen2MoeSparseBlock", "NcclCommunicator",
                                "FlashInferAttnBackend"]) + f"V{index}ForTokenKeyStore"
        out.append((kind, corpus.keep(channel, kind, value)))
    return out


NAMED_BENIGN = [("TOKENIZERS_PARALLELISM", "false"), ("max_tokens", "512"),
                ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"), ("PRIMARY_KEY", "request_id"),
                ("sort_key", "created_at"), ("num_tokens", "4096"),
                ("output_token_throughput", "1234.5"), ("public_key_path", "/etc/ssh/host.pub"),
                ("auth_type", "oauth2"), ("cache_key", "layer-norm-fused")]


def named_benign(corpus: Corpus, channel: str) -> list[tuple[str, str]]:
    for name, value in NAMED_BENIGN:
        corpus.keep(channel, "named", f"{name}={value}")
    return NAMED_BENIGN


# ---- files in each format ------------------------------------------------------------------------

def dotenv_file(c: Corpus, channel: str) -> str:
    lines = ["# local settings"]
    for name in ("DB_PASSWORD", "REDIS_PASS", "HF_HUB_PW", "SMTP_PASSWD", "ADMIN_SECRET"):
        lines.append(f"{name}={c.secret(channel, 'password')}")
    lines.append(f"AWS_SECRET_ACCESS_KEY={c.secret(channel, 'aws_secret_key')}")
    lines.append(f"AWS_ACCESS_KEY_ID={c.secret(channel, 'aws_access_key')}")
    lines.append(f"OPENAI_API_KEY={c.secret(channel, 'openai')}")
    lines.append(f"export HF_TOKEN={c.secret(channel, 'huggingface')}")
    lines.append(f"SESSION_SEED={c.secret(channel, 'high_entropy')}")
    lines += [f"{name}={value}" for name, value in named_benign(c, channel)]
    lines += [f"BENIGN_{i}={value}" for i, (_, value) in enumerate(benign_values(c, channel, 12))]
    return "\n".join(lines) + "\n"


def yaml_file(c: Corpus, channel: str) -> str:
    lines = ["database:", "  host: db.internal", f"  password: {c.secret(channel, 'password')}",
             f"  replica_password: \"{c.secret(channel, 'password')}\"",
             "services:", f"  github_token: {c.secret(channel)}",
             f"  api_key: '{c.secret(channel)}'",
             f"  stripe_secret_key: {c.secret(channel, 'stripe_live')}",
             f"  aws_secret_access_key: {c.secret(channel, 'aws_secret_key')}",
             f"  signing_material: {c.secret(channel, 'high_entropy')}",
             "settings:"]
    lines += [f"  {name}: {value}" for name, value in named_benign(c, channel)]
    lines += [f"  item_{i}: \"{value}\""
              for i, (_, value) in enumerate(benign_values(c, channel, 12))]
    return "\n".join(lines) + "\n"


def json_file(c: Corpus, channel: str) -> str:
    data: dict[str, Any] = {
        "client_secret": c.secret(channel, "password"), "access_token": c.secret(channel),
        "refresh_token": c.secret(channel), "private_key_id": c.secret(channel, "high_entropy"),
        "credentials": {"password": c.secret(channel, "password"), "token": c.secret(channel)},
        "endpoint": f"https://svc:{c.secret(channel, 'password')}@api.example.com/v1",
        "items": [value for _, value in benign_values(c, channel, 12)],
        "settings": {name: value for name, value in named_benign(c, channel)},
    }
    return json.dumps(data, indent=2) + "\n"


def ini_file(c: Corpus, channel: str) -> str:
    lines = ["[database]", "user = ada", f"password = {c.secret(channel, 'password')}",
             "[registry]", f"auth_token = {c.secret(channel)}",
             f"secret_key = {c.secret(channel, 'high_entropy')}", "[benign]"]
    lines += [f"{name} = {value}" for name, value in named_benign(c, channel)]
    lines += [f"entry{i} = {value}" for i, (_, value) in enumerate(benign_values(c, channel, 12))]
    return "\n".join(lines) + "\n"


def shell_file(c: Corpus, channel: str) -> str:
    return "\n".join([
        "#!/bin/sh",
        f"export GITLAB_TOKEN={c.secret(channel, 'gitlab')}",
        f"mysql -u root -p{c.secret(channel, 'password')} prod < dump.sql",
        f"mysql -h db -u ada -p {c.secret(channel, 'password')} prod",
        f"./migrate --db-pass {c.secret(channel, 'password')} --max-tokens 512",
        f"./serve --api-key={c.secret(channel)} --model {MODEL_IDS[0]}",
        f"curl -H \"Authorization: Bearer {c.secret(channel)}\" https://api.example.com",
        f"git clone https://ada:{c.secret(channel, 'password')}@git.example.com/x.git",
        f"redis-cli -a {c.secret(channel, 'password')} ping",
        f"sshpass -p {c.secret(channel, 'password')} ssh ada@gpu1",
        "pip install " + " ".join(PACKAGES[:8]),
        *(f"echo {value}" for _, value in benign_values(c, channel, 12)),
    ]) + "\n"


def python_file(c: Corpus, channel: str) -> str:
    return "\n".join([
        "import os",
        f"password = \"{c.secret(channel, 'password')}\"",
        f"API_KEY = '{c.secret(channel)}'",
        f"client = Client(token=\"{c.secret(channel)}\", timeout=30)",
        f"os.environ[\"HF_TOKEN\"] = \"{c.secret(channel, 'huggingface')}\"",
        f"config = {{\"db_password\": \"{c.secret(channel, 'password')}\"}}",
        f"SIGNING_SECRET = b\"{c.secret(channel, 'high_entropy')}\"",
        f"opaque = \"{c.secret(channel, 'high_entropy')}\"",
        "token = tokenizer.encode(text)",
        "max_tokens: int = 512",
        "def login(password: str) -> None:",
        "    session.password = password",
        *(f"VALUE_{i} = \"{value}\"" for i, (_, value) in enumerate(benign_values(c, channel, 12))),
    ]) + "\n"


def pem_file(c: Corpus, channel: str) -> str:
    body = [mixed(ALNUM + "+/", 64) for _ in range(8)]
    for line in body:
        c.planted.append({"value": line, "kind": "pem_private_key", "channel": channel})
    return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + \
        "\n-----END RSA PRIVATE KEY-----\n"


def notes_file(c: Corpus, channel: str) -> str:
    lines = [f"new token for the bot: {c.secret(channel, 'slack_bot')}",
             f"CI uses {c.secret(channel, 'github_fine_grained')} until Friday",
             f"google maps key {c.secret(channel, 'google_api')}",
             f"session jwt {c.secret(channel, 'jwt')}"]
    lines += [f"- {kind}: {value}" for kind, value in benign_values(c, channel, 12)]
    lines += [f"note: {prose}" for prose in PROSE]
    return "\n".join(lines) + "\n"


FORMATS = {"config/app.env": dotenv_file, "config/settings.yaml": yaml_file,
           "config/service.json": json_file, "config/db.ini": ini_file,
           "scripts/deploy.sh": shell_file, "src/client.py": python_file,
           "notes/todo.txt": notes_file}


def files(c: Corpus, channel: str, with_pem: bool) -> dict[str, str]:
    out = {path: make(c, channel) for path, make in FORMATS.items()}
    if with_pem:
        out["keys/deploy_key"] = pem_file(c, channel)
    return out


# ---- the other channels --------------------------------------------------------------------------

def build() -> dict[str, Any]:
    c = Corpus()
    channels: dict[str, Any] = {
        "tracked": files(c, "patch", with_pem=True),
        "untracked": {"local/" + path: text for path, text in
                      files(c, "untracked", with_pem=True).items()},
        "stash": {"stashed/config.yaml": yaml_file(c, "stash"),
                  "stashed/run.sh": shell_file(c, "stash")},
    }
    channels["subjects"] = [f"rotate the CI credential {c.secret('subject')}" for _ in range(8)] + \
        [f"set password={c.secret('subject', 'password')} for staging" for _ in range(3)] + \
        [f"bump {value}" for _, value in benign_values(c, "subject", 20)]
    channels["reflog"] = [f"clone: from https://ada:{c.secret('reflog', 'password')}@git.example"
                          f".com/x.git", f"pushed with {c.secret('reflog', 'gitlab')}"]
    channels["remotes"] = {
        "fork": f"https://ada:{c.secret('remote', 'password')}@github.com/ada/x.git",
        "mirror": f"https://{c.secret('remote', 'github_classic')}@github.com/ada/x.git",
        "lab": f"https://oauth2:{c.secret('remote', 'gitlab')}@gitlab.example.com/x.git"}
    channels["worker_env"] = {
        "HF_TOKEN": c.secret("worker_env", "huggingface"),
        "HF_HUB_PW": c.secret("worker_env", "password"),
        "HF_API_KEY": c.secret("worker_env", "openai"),
        "NCCL_IB_AUTH_SECRET": c.secret("worker_env", "password"),
        "TORCH_HUB_TOKEN": c.secret("worker_env", "github_classic"),
        "CUDA_MPS_PASSWORD": c.secret("worker_env", "password"),
        "SGLANG_API_KEY": c.secret("worker_env", "anthropic"),
        "VLLM_DB_URL": f"postgresql://ada:{c.secret('worker_env', 'password')}@db:5432/x",
        "HF_HUB_NOTE": f"uses {c.secret('worker_env', 'google_api')}",
        "TRANSFORMERS_OPAQUE": c.secret("worker_env", "high_entropy"),
        "TOKENIZERS_PARALLELISM": c.keep("worker_env", "named", "false"),
        "CUDA_VISIBLE_DEVICES": c.keep("worker_env", "gpu_uuid",
                                       "GPU-" + str(uuid.UUID(int=rng.getrandbits(128)))),
        "NCCL_DEBUG": c.keep("worker_env", "named", "INFO"),
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": c.keep("worker_env", "named", "1"),
        "HF_HOME": c.keep("worker_env", "path", "/home/ada/.cache/huggingface/hub-v2"),
    }
    channels["worker_argv"] = [
        "--db-pass", c.secret("worker_argv", "password"),
        "--api-key=" + c.secret("worker_argv", "openai_project"),
        "--hf-token", c.secret("worker_argv", "huggingface"),
        "--auth-token", c.secret("worker_argv", "stripe_restricted"),
        "--password=" + c.secret("worker_argv", "password"),
        "--model", c.keep("worker_argv", "model_id", MODEL_IDS[1]),
        "--max-tokens", c.keep("worker_argv", "named", "8192"),
        "--revision", c.keep("worker_argv", "git_sha", hashlib.sha1(b"rev").hexdigest()),
        "--shell", f"mysql -u root -p {c.secret('worker_argv', 'password')} prod",
    ]
    channels["shell_env"] = {
        "HF_TOKEN": c.secret("shell_env", "huggingface"),
        "HF_HUB_PW": c.secret("shell_env", "password"),
        "NCCL_SOCKET_AUTH_TOKEN": c.secret("shell_env", "slack_user"),
        "CUDA_CACHE_URL": f"https://u:{c.secret('shell_env', 'password')}@cache.example.com",
        "TORCH_SEED_MATERIAL": c.secret("shell_env", "high_entropy"),
    }
    split = password()   # planted below as its two halves: neither may show
    for part in (split[:7], split[7:]):
        c.planted.append({"value": part, "kind": "password_split", "channel": "sitecustomize"})
    channels["sitecustomize"] = "\n".join([
        "import os",
        f"os.environ[\"HF_TOKEN\"] = \"{c.secret('sitecustomize', 'huggingface')}\"",
        "os.environ[\"DB_PASSWORD\"] = (",
        f"    \"{split[:7]}\"",
        f"    \"{split[7:]}\"",
        ")",
        f"os.environ.setdefault(\"NCCL_IB_PW\", \"{c.secret('sitecustomize', 'password')}\")",
        f"API_SECRET = \"{c.secret('sitecustomize', 'high_entropy')}\"",
        f"os.environ[\"HF_HOME\"] = \"{c.keep('sitecustomize', 'path', '/srv/hf/cache-v3')}\"",
        f"os.environ[\"NCCL_PROTO\"] = \"{c.keep('sitecustomize', 'named', 'LL128')}\"",
    ]) + "\n"
    channels["pth"] = (f"import os; os.environ.setdefault(\"HF_TOKEN\", "
                       f"\"{c.secret('pth', 'huggingface')}\")\n")
    bench_secret = c.secret("bench_cmd", "openai")
    channels["bench_cmd"] = f"OPENAI_API_KEY={bench_secret} sh bench_output.sh"
    channels["bench_output"] = "\n".join(
        [f"export HF_TOKEN={c.secret('bench_output', 'huggingface')}",
         f"DB_PASSWORD={c.secret('bench_output', 'password')}",
         f"aws_secret_access_key = {c.secret('bench_output', 'aws_secret_key')}",
         f"using key {c.secret('bench_output', 'aws_session_key')}",
         f"webhook {c.secret('bench_output', 'slack_bot')}",
         f"session {c.secret('bench_output', 'jwt')}",
         f"stripe {c.secret('bench_output', 'stripe_live')}",
         *(f"info {value}" for _, value in benign_values(c, "bench_output", 10)),
         "output_token_throughput: 1234.5",
         "value: 5"]) + "\n"
    channels["missing_repo"] = "no-such-repo-" + c.secret("error_message", "github_classic")
    return {"planted": c.planted, "benign": c.benign, "channels": channels}


def main() -> None:
    corpus = build()
    values = [entry["value"] for entry in corpus["planted"]]
    assert len(set(values)) == len(values), "two planted secrets are equal"
    (HERE / "corpus.json").write_text(json.dumps(corpus, indent=1, sort_keys=True) + "\n")
    print(f"{len(corpus['planted'])} planted secrets, {len(corpus['benign'])} benign values")


if __name__ == "__main__":
    main()
