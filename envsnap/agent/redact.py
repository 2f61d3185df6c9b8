"""The secret detector: one on the host, run on every string before the agent returns it.

A snapshot is made to be attached to a public bug report, so what looks like a credential is
masked before it leaves the host. The detector combines (docs/guide/secrets.md):

- names: a value under a name whose last word is token, key, pass, pw, pwd, auth, secret,
  or that holds password, passwd, passphrase, secret, credential anywhere (`HF_TOKEN`,
  `DB_PASSWORD`, `HF_HUB_PW`, `--db-pass`); `*_KEY` except names of non-secret keys
  (`PRIMARY_KEY`, `SORT_KEY`...) unless a service's (`PAGERDUTY_ROUTING_KEY`); names split
  into words however written (`apiToken`, `1passwordToken`, and words run together:
  `AUTH_CLIENTSECRET`, `ACCESSTOKEN`); plural counts (`max_tokens`) and `tokenizer` are
  names, and so are `--password-stdin` and a number under a measure
  (`PASSWORD_MIN_LENGTH=12`); a number too long to be a count is a secret under any;
- key/value and assignment shapes around such names in code, YAML, JSON, TOML, INI, HCL,
  .properties, .env, Make (`::=`, `?=`, `+=`...), PHP (`.=`), Go (`var x string =`), Java
  (`setProperty("X_TOKEN", "...")`, `put`), XML elements and attributes, and shell:
  `password = "..."`, `password: ...`, `"token": "..."`, `--db-pass X`; a header's
  credential only (`-H 'Authorization: Basic X' https://...`: the scheme and the rest of the
  command stay);
- credentials on command lines by position: `-p X`/`-pX` after mysql-like clients and
  `docker login`, `-a X` after redis-cli, `curl -u user:X`, `wandb login X`,
  `wandb.login(key=...)`; .netrc (`machine H login U password X`) and .pgpass
  (`host:port:db:user:X`) lines;
- URLs with user:password; incoming webhooks of Slack, Discord, Teams (and its workflows'
  signed URLs), PagerDuty, Zapier, IFTTT, Telegram, Mattermost and Rocket.Chat (`/hooks/ID`);
- the documented token prefixes of GitHub, GitLab, Hugging Face, OpenAI, Anthropic, AWS,
  Google, Stripe, Slack, SendGrid, Mailgun, Twilio, Mailchimp, Brevo, Telegram; JWTs; PEM
  private key blocks, and their base64 (kubeconfig `client-key-data`, a Helm value);
- high-entropy strings in an assignment context (`x = "9fQ2..."`, NAME=value);
- beside these, vendors.py: tokens by their vendor's documented format (a table of token
  families, tried on the lines the scans below find), base64 of JWTs and keys, the values
  of Kubernetes Secrets; and placeholders (`AKIAIOSFODNN7EXAMPLE`, `your_token_here`,
  `ghp_xxxx...`), which mask_secret leaves whole.

It leaves alone what a diff needs: git SHAs and other hex digests, UUIDs, versions, package
names, paths, numbers (token counts), base64 of text and of certificates.

A masked value becomes `<secret:` + 32 hex + `>` here: a digest of the value, so that equal
secrets are equal markers. The controller replaces each with a short hash keyed by the
user's own masking key before anything is written (`rekey`): `<secret:4f2a09c1>`. The key
never travels to the host (a host's other users can read a process's arguments), and the
unkeyed digest never reaches a disk.

Every capture masks everything it sends, patches of megabytes included, so the cost per MB
matters (bench/bench_masking.py measures recall, look-alikes and the cost against an
earlier detector; its figures are in bench/ledger.tsv). Most of a patch holds nothing to
mask, so the text is scanned as bytes for what makes a line worth parsing (hint words,
token prefixes, `://`), each from its rarest byte (rare_first_searches), and only those
lines are parsed, once each for all kinds; a new shape costs a scan only where no scan
already finds it (`LS0t`, the base64 of `---`, rides on the token prefixes' `S` scan). Each
pattern is compiled where it is first used (LazyPattern), not at import: every capture
imports this module, and most use few of its patterns.
"""
from __future__ import annotations

import binascii
import bisect
import functools
import math
import re

from . import vendors
from .util import sha256_bytes

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import (
        Any,
        Callable,
        Dict,
        Iterable,
        Iterator,
        List,
        Optional,
        Tuple,
        Union,
        overload,
    )

    CodeRule = Union[bool, Callable[[bytes], Callable[[int], bool]]]
    # Each regex with: what it matches (a word from its rarest byte on) -> (word, where).
    Searches = Tuple[Tuple["re.Pattern[bytes]", Dict[bytes, Tuple[bytes, int]]], ...]


class LazyPattern:
    """A regex compiled where it is first used, not at import: the controller imports this
    module to rekey markers and runs few of its fifty patterns, and compiling them all cost
    more than the rest of the import. Once compiled, its methods are the compiled pattern's
    own, in this object's dict: a call costs what it costs on the pattern itself."""

    METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")

    def __init__(self, source: "str | bytes", flags: int) -> None:
        self.source, self.source_flags = source, flags

    def __getattr__(self, name: str) -> Any:   # only until compiled, and for the rest
        compiled = re.compile(self.source, self.source_flags)
        for method in self.METHODS:
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)


if TYPE_CHECKING:   # what it gives is typed as the pattern it stands for
    @overload
    def lazy(source: str, flags: int = 0) -> re.Pattern[str]: ...
    @overload
    def lazy(source: bytes, flags: int = 0) -> re.Pattern[bytes]: ...
    def lazy(source: str | bytes, flags: int = 0) -> Any: ...
else:
    def lazy(source, flags=0):
        return LazyPattern(source, flags)


REDACTED = "<secret>"          # a secret masked without a key to hash it with
MARKER_START = "<secret"
TRANSIT_MARKER = lazy(r"<secret:([0-9a-f]{32})>")
# `<redacted>`: what envsnap wrote before markers carried a hash
MARKER = lazy(r"<secret(?::[0-9a-f]{8}|:[0-9a-f]{32})?>|<redacted>")
SHOWN_HASH_CHARS = 8

# ---- names -------------------------------------------------------------------------------

# A secret anywhere in the name: DB_PASSWORD_FILE is still about a password.
STRONG_WORDS = {"password", "passwd", "passphrase", "secret", "credential", "credentials",
                "apikey", "privatekey", "accesskey", "secretkey", "authtoken", "pgpass"}
# A secret when it ends the name: HF_TOKEN, --db-pass, HF_HUB_PW, api_key; not token_count.
LAST_WORDS = {"token", "pass", "pw", "pwd", "key", "auth", "authorization", "secret", "creds",
              "cred", "cookie", "password", "passwd", "passphrase", "sig", "signature"}
# Qualifiers that make `*_KEY` the name of something that is no secret.
SAFE_KEY_QUALIFIERS = {"public", "primary", "sort", "cache", "partition", "foreign", "hash",
                       "dict", "lookup", "group", "range", "row", "hot", "map", "shortcut",
                       "composite", "unique", "index", "idempotency", "routing", "sharding",
                       "shard", "join", "order", "ssh", "gpg", "pub", "registry", "config",
                       "metric", "label", "name", "column", "field", "attr", "state", "dataset",
                       "table", "prefix", "sequence", "seq", "input", "output", "batch",
                       "cluster", "monkey", "turn"}
NAME_WORD = lazy(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_words(name: str) -> List[str]:
    """HF_HUB_PW -> [hf, hub, pw]; dbPassword -> [db, password]; --db-pass -> [db, pass]."""
    return [word.lower() for word in NAME_WORD.findall(name)]


# `--password-stdin`, `--password-prompt`: where the secret comes from, not the secret.
SWITCH_WORDS = {"stdin", "prompt"}
# Services whose keys and tokens are credentials whatever qualifies them: PagerDuty's
# `routing_key` is its integration key, where a message queue's routing key is a topic.
SERVICE_WORDS = {"pagerduty", "opsgenie", "sendgrid", "mailgun", "mailchimp", "mandrill",
                 "postmark", "sparkpost", "brevo", "sendinblue", "twilio", "vonage", "nexmo",
                 "plivo", "messagebird", "slack", "discord", "mattermost", "telegram"}
# A number under a name ending in one of these measures the secret, it is not the secret:
# PASSWORD_MIN_LENGTH=12, SECRET_ROTATION_DAYS=90, --password-max 64.
MEASURE_WORDS = {"length", "len", "min", "max", "minimum", "maximum", "size", "count", "ttl",
                 "timeout", "days", "hours", "minutes", "seconds", "secs", "retries",
                 "attempts", "rounds", "iterations", "iters", "bits", "bytes", "limit", "age",
                 "expiry", "lifetime", "interval", "digits", "chars", "history", "port"}


# Words run together (AUTH_CLIENTSECRET, ACCESSTOKEN, DBPASSWORD): a word that holds one of
# STRONG_WORDS is about a secret, unless it is that word's plural (`secrets_manager` names a
# service, not a secret); one that ends in `token` or `key` is a credential only after a
# word that says whose or what for (CREDENTIAL_QUALIFIERS, TOKEN_QUALIFIERS: `accesstoken`,
# `bottoken`, `clientkey`): `tiktoken` is a package, `maxtoken` a count, `monkey`, `hotkey`
# and `turnkey` no keys.
RUN_TOGETHER_STRONG = ("password", "passwd", "passphrase", "secret", "credential",
                       "privatekey", "accesskey", "pgpass")
# The same, one search for all: most names hold none, and a loop over words and these costs
# a tenth of masking a text dense with names.
RUN_TOGETHER_SEARCH = lazy("|".join(RUN_TOGETHER_STRONG))
TOKEN_QUALIFIERS = {"auth", "refresh", "id", "bearer", "bot", "user", "csrf", "xsrf", "oauth",
                    "personal", "runner", "registry", "npm", "pypi", "hub", "webhook", "cloud",
                    "discord", "telegram", "github", "gitlab", "bitbucket", "vault", "sentry"}


def run_together_secret(words: List[str]) -> bool:
    """Whether a word of the name holds a secret word run into another (see above)."""
    if RUN_TOGETHER_SEARCH.search(" ".join(words)) and \
            any(strong in word and word != strong + "s" for word in words
                for strong in RUN_TOGETHER_STRONG):
        return True
    last = words[-1]
    if last.endswith("token"):
        return last[:-5] in TOKEN_QUALIFIERS or last[:-5] in CREDENTIAL_QUALIFIERS
    return last.endswith("key") and last[:-3] in CREDENTIAL_QUALIFIERS


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Remembered: the same names come back line after line of a file, and in each
    process's environment."""
    words = name_words(name)
    if not words or words[-1] in SWITCH_WORDS:
        return False
    if any(word in STRONG_WORDS for word in words):
        return True
    last = words[-1]
    if last not in LAST_WORDS:
        return run_together_secret(words)
    if last == "key":
        return len(words) > 1 and (words[-2] not in SAFE_KEY_QUALIFIERS or
                                   any(word in SERVICE_WORDS for word in words))
    if last in ("sig", "signature"):
        return len(words) > 1 and words[-2] in ("api", "aws", "request", "hmac", "url")
    return True


# `*_KEY` names a credential after these; after others (`_class_key`, `xml_key`), a key
# of a table is as likely: its value must look generated to be masked.
CREDENTIAL_QUALIFIERS = {"api", "access", "secret", "private", "signing", "encryption",
                         "master", "client", "license", "session", "account", "service",
                         "storage", "deploy", "admin", "app", "aws", "gcp", "azure", "openai",
                         "anthropic", "stripe", "wandb", "hf", "github", "gitlab", "slack",
                         "sendgrid", "twilio", "mailgun", "db", "jwt", "hmac", "cookie"}


def weak_name(name: str) -> bool:
    words = name_words(name)
    return words[-1:] == ["key"] and (len(words) == 1 or words[-2] not in CREDENTIAL_QUALIFIERS)


def counts_may_follow(name: str) -> bool:
    """Names where a number is a count or a switch, never the secret (HF_HUB_..._TOKEN=1)."""
    return name_words(name)[-1:] in (["token"], ["key"], ["auth"], ["pass"])


# ---- values a secret name may hold without being a secret --------------------------------

NOT_A_VALUE = lazy(
    r"""(?ix)
    (?:true|false|none|null|nil|yes|no|on|off|undefined|empty|required|optional|\*{3,}|x{3,}|\.\.\.)$
    | [(\[{]                       # a call's or a literal's start: the value comes later
    | [$%]                         # $VAR, ${VAR}, %(name)s, %s
    | \{\{ | \{[\w.]*\}$           # templates
    | <                            # <secret...>, <your token here>
    | (?:/|~/|\./|\.\./|file:)     # a path: the file that holds it is no secret
    | [\w.]+[(\[]                  # a call, an index: get_password(), keys[0]
    | (?:os\.environ|environ|env|process\.env|getenv|self|cls|args|config|cfg|opts|options|
         settings|kwargs|params)\b[.\[]
    | -*$
    """)
IDENTIFIER_VALUE = lazy(r"[A-Za-z_][\w.]*$")
NUMBER = lazy(r"[+-]?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?$", re.IGNORECASE)
# Digits in the longest count a token's name may hold (HF_TOKEN=1, a budget of tokens): a
# longer number is a secret of digits (Discord's client secret has thirty-two).
LONGEST_COUNT = 16


def is_secret_value(name: str, value: str) -> bool:
    bare = value.strip().strip("'\"").strip()
    if not bare or NOT_A_VALUE.match(bare) or MARKER.search(bare):
        return False
    if NUMBER.match(bare):
        if MEASURE_WORDS & set(name_words(name)[-1:]):
            return False
        # a number too long to count anything is the secret (a Discord client secret)
        return not counts_may_follow(name) or len(bare) >= LONGEST_COUNT
    # `token = token`, `SERVER_AUTH: "serverAuth"`: the name again, not a value
    return not set(name_words(bare)) <= set(name_words(name))


# ---- values that are secrets by their shape -------------------------------------------------

TOKEN_PREFIXES = lazy(
    r"(?<![A-Za-z0-9_])(?:"
    r"gh[pousr]_[A-Za-z0-9]{30,}"                   # GitHub classic tokens
    r"|github_pat_[A-Za-z0-9_]{40,}"                # GitHub fine-grained
    r"|glpat-[A-Za-z0-9_-]{20,}"                    # GitLab personal access token
    r"|hf_[A-Za-z0-9]{30,}"                         # Hugging Face
    r"|sk-ant-[A-Za-z0-9_-]{20,}"                   # Anthropic
    r"|sk-proj-[A-Za-z0-9_-]{20,}"                  # OpenAI project key
    r"|sk-[A-Za-z0-9]{32,}"                         # OpenAI
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"                   # AWS access key id
    r"|AIza[A-Za-z0-9_-]{35}"                       # Google API key
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"    # Stripe secret and restricted keys
    r"|xox[bpars]-[A-Za-z0-9-]{10,}"                # Slack
    r"|xapp-[0-9]-[A-Za-z0-9-]{10,}"                # Slack app-level token
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWT
    r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"     # SendGrid
    r"|key-[0-9a-f]{32}"                            # Mailgun
    r"|(?:AC|SK)[0-9a-f]{32}"                       # Twilio account and API key SIDs
    r"|xkeysib-[0-9a-f]{64}-[A-Za-z0-9]{16}"        # Brevo (Sendinblue)
    r")(?![A-Za-z0-9])")
# Tokens whose fixed part is not at their start: tried at every character, a leading run of
# digits would cost each line of hex (a git SHA) its length, so only on a line holding
# their fixed part (`-us`, `:AA`).
TOKEN_INFIX_SHAPES = lazy(
    r"(?<![A-Za-z0-9_])(?:"
    r"[0-9a-f]{32}-us[0-9]{1,2}"                    # Mailchimp (its data centre ends it)
    r"|[0-9]{8,10}:AA[A-Za-z0-9_-]{33}"             # Telegram bot token
    r")(?![A-Za-z0-9])")
# In bytes: the text is masked as UTF-8 bytes (redact_text), and decoding 5 MB to run this
# one pattern would cost twice what the pattern does.
PEM_BLOCK = lazy(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
                       rb"[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)")
# `Authorization: Bearer <token>`: the scheme word is no secret, the word after it is.
# (Opsgenie's is GenieKey, PagerDuty's `Token token=...`, Okta's SSWS, Discord's Bot.)
AUTH_SCHEMES = ("Bearer", "bearer", "BEARER", "Basic", "GenieKey")
AUTH_SCHEME = lazy(r"(?<![\w-])(?:%s)[ \t]+(?P<value>[A-Za-z0-9._~+/-]{8,}=*)"
                         % "|".join(AUTH_SCHEMES))
HEADER_SCHEMES = {"bearer", "basic", "token", "digest", "geniekey", "ssws", "bot",
                  "apikey", "key", "oauth", "splunk", "negotiate", "hmac"}
PEM_BODY = lazy(r"[A-Za-z0-9+/=]{40,}")
URL_CREDENTIALS = lazy(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s'\"]+)@")
# Incoming webhooks of chat and alerting services: the URL is the credential, so what
# follows the service's fixed part is masked and the host kept (a report still says
# "a Slack hook"). Mattermost and Rocket.Chat run on any host: a `/hooks/` id of 17+
# letters and digits (theirs are 26 and 17) that is no word (mask_webhook).
WEBHOOK = lazy(
    r"(?P<service>hooks\.slack\.com/(?:services|workflows|triggers)/"
    r"|discord(?:app)?\.com/api(?:/v[0-9]+)?/webhooks/"
    r"|\.webhook\.office\.com/webhookb2/|outlook\.office(?:365)?\.com/webhook/"
    r"|events\.pagerduty\.com/(?:integration|x-ere)/"
    r"|hooks\.zapier\.com/hooks/catch/|maker\.ifttt\.com/trigger/[\w-]+/with/key/"
    r"|api\.telegram\.org/bot"
    r"|[?&](?:sig|signature|X-Amz-Signature|X-Goog-Signature)="   # signed URLs (Teams
    r"|(?P<generic>/hooks/)(?=[A-Za-z0-9]{17}))"                   # workflows, Azure, S3)
    r"(?P<secret>[A-Za-z0-9_@:.%~+=/-]{8,})")
WEBHOOK_WORDS = ("hook", "pagerduty", "ifttt", "telegram", "sig")

# ---- shapes around names --------------------------------------------------------------------

# Lines worth parsing are found by searching the lowered bytes for these words (literal_hits;
# a regex alternation of them is twice as slow as one search per word on a 5 MB patch, since
# their letters are common). A word counts where it ends a word or goes on as listed:
# `keyword`, `author`, `tokens` are no hint, `passwd` is.
# (`sshpass` holds `pass`; `Authorization: Bearer` holds `auth`.)
HINTS = {b"token": (), b"pass": (b"word", b"wd", b"phrase"), b"pw": (b"d",), b"key": (),
         b"auth": (b"orization",), b"cred": (b"s", b"ential", b"entials"),
         b"sig": (b"nature",), b"secret": None, b"mysql": None, b"mariadb": (),
         b"redis-cli": (), b"wandb": None, b"docker": None,
         # Databricks tokens and Azure AD client secrets (vendors.py), on these words'
         # scans (`pi` on pass's `p`, `q~` on mysql's `q`): a scan of their own costs more
         b"dapi": None, b"q~": None}
# A bare `key` names no secret (`*_KEY`, `apiKey` do): most `key` in code is a dict's.
AFTER_A_WORD = {b"key"}
# Where a token of TOKEN_PREFIXES may be, each prefix found from a rare byte of it: the `_`
# or `-` that ends it, an upper-case letter. A regex that starts with one literal byte is
# scanned for that byte at memchr speed, and few bytes are `_`, `-`, `A` or `J`: these four
# cost less than a third of a bytes.find pass per prefix (and a regex that starts with a set
# of bytes, `[_A-]`, is tested byte by byte: twice the four). A line found here holds no
# token unless TOKEN_PREFIXES says so.
TOKEN_PREFIX_HINT_SOURCES = (
    # `_` and `-` also where a token's body follows them (vendors.py: `npm_`, `pplx-`... then
    # sixteen letters and digits), and where a body may open with `_`, `-` or `.`; every
    # token has twenty characters after its `_`, most `_` of code do not: tested first
    rb"_(?=[A-Za-z0-9_+/-]{20})(?:(?<=gh[pousr]_)|(?<=github_pat_)|(?<=hf_)|(?<=k_live_)"
    rb"|(?<=k_test_)|(?=[A-Za-z0-9+/]{16})|(?<=tkn_)|(?<=_pw_)|(?<=auth_)|(?<=pat_)|(?<=oat_)"
    rb"|(?<=tfp_)|(?<=secret_)|(?<=o1_)|(?<=m2_)|(?<=m1a_)|(?<=m1r_))",
    # (each alternative behind a test of one byte: there is a `-` every 80 bytes of code)
    rb"-(?:(?<=[tkypbarsXUTieu3]-)(?:(?<=glpat-)|(?<=sk-)|(?<=xox[bparse]-)|(?<=xapp-)"
    rb"|(?<=key-)|(?<=xkeysib-)|(?<=t-)(?:(?<=glrt-)|(?<=glcbt-)|(?<=glptt-)|(?<=gldt-)"
    rb"|(?<=glft-)|(?<=glsoat-)|(?<=glimt-)|(?<=glagent-)|(?<=glffct-))|(?<=gloas-)"
    rb"|(?<=GOCSPX-)|(?<=HRKU-)|(?<=CFPAT-)|(?<=nvapi-)|(?<=fio-u-)|(?<=tk-us-)|(?<=sq0atp-)"
    rb"|(?<=sq0csp-)|(?<=A3-))|(?=[uU-])(?:us[0-9]|[uU][ \t]|-user[ \t=])"
    rb"|(?=[A-Za-z0-9]{16}))",
    rb"A(?:KIA|SIA|BIA|CCA|BSK|Iza|C[0-9a-f]|A(?<=[0-9]:AA)|TATT|TCTT|KID|KCp|3-|PI-|GE-S"
    rb"|(?<=LTA)I|(?<=EA)A|A{19})",
    rb"J(?<=eyJ)",
    rb"S(?:G\.|K[0-9a-f]|0t(?<=LS0t)|(?<=WlhsS)|(?<=TFMwdExTMUNS)V|ECK(?<=FLWSECK))",
    # `.`: a body after it, or the dot of Vault, Google OAuth, Dynatrace, Dropbox, Doppler,
    # Terraform, Harness tokens, or a Discord bot token's two dots (all have six letters,
    # digits, `_` or `-` after it: most dots of code fail there)
    rb"\.(?=[A-Za-z0-9_-]{6})(?:(?=[A-Za-z0-9]{16})|(?<=[svp91e]\.)(?:(?<=hv[sbr]\.)"
    rb"|(?<=ya29\.)|(?<=dt0c01\.)|(?<=sl\.)|(?<=dp\.)|(?<=atlasv1\.)|(?<=xoxe\.)|(?<=pat\.))"
    rb"|[A-Za-z0-9_-]{6}\.(?=[A-Za-z0-9_-]{27}))",
    rb"Z(?:XlK|(?<=EZ)[AT]K)",  # base64 of a JWT; EasyPost
)
TOKEN_PREFIX_HINTS = tuple(lazy(source) for source in TOKEN_PREFIX_HINT_SOURCES)
# The same in one regex, for a short text: one scan costs less to start than four.
TOKEN_PREFIX_HINTS_SHORT = lazy(b"|".join(TOKEN_PREFIX_HINT_SOURCES))
QUOTED = r""""(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'"""
# `name sep value`: a name may start with a digit (`1passwordToken`); the separators of
# code, YAML and Make (`::=`, `:::=`, `?=`, `+=`) and PHP's `.=`.
ASSIGNMENT = lazy(
    r"(?<![<\w.$-])(?P<name>[A-Za-z0-9_][\w.-]*)(?P<close>[\"'\]]*)[ \t]*"
    r"(?P<sep>:{1,3}=|[?+.]=|=>|==|=|:(?![:/]))[ \t]*"
    r"(?P<value>(?:[bBrRuUfF]{1,2}(?=[\"']))?(?:" + QUOTED + r")"
    r"|(?:(?<=:)|(?<=: )|(?<=:\t))[^\s#'\"({\[][^#\n]*?(?=[ \t]+#|[ \t]*$|[,}\]]\s*$)"
    r"|[^\s'\",;&|)}\]]+)", re.MULTILINE)
# A string's type between the name and its value: Go's `var x string = "..."`, Kotlin's
# `val x: String = "..."`, Rust's `&str`. Apart from ASSIGNMENT, and only on a line that
# names such a type: tried after every name of every line, it made ASSIGNMENT a third slower.
TYPED_ASSIGNMENT = lazy(
    r"(?<![<\w.$-])(?P<name>[A-Za-z0-9_][\w.-]*)(?P<close>)(?:[ \t]*:[ \t]*|[ \t]+)"
    r"(?:[sS]tring|&?str|\[\]byte)[ \t]*(?P<sep>=)[ \t]*(?P<value>" + QUOTED + r")")
# A call's first two arguments, a name and its value: Java's `System.setProperty("X_TOKEN",
# "...")`, `map.put("x_secret", "...")`, Go's `os.Setenv(...)`. From the `(` (a literal
# start is found at memchr speed; a lookbehind start is tried at every character).
CALL_PAIR = lazy(r"\((?<=\w\()[ \t]*[\"'](?P<name>[A-Za-z0-9_][\w.-]*)[\"'](?P<close>)[ \t]*"
                 r"(?P<sep>,)[ \t]*(?P<value>" + QUOTED + r")")
# XML: an element's text (`<apiKey>...</apiKey>`), and the value beside a name in
# attributes (`<add key="ApiKey" value="..."/>`, `<property name="password" value="..."/>`).
XML_ELEMENT = lazy(r"<(?P<name>[A-Za-z_][\w.:-]*)(?P<close>)(?:[ \t][^<>\n]*)?(?P<sep>>)[ \t]*"
                   r"(?P<value>[^<\s][^<\n]*?)[ \t]*</(?P=name)>")
XML_ATTRIBUTES = lazy(r"[ \t](?:key|name)[ \t]*=[ \t]*[\"'](?P<name>[^\"'\s<>=]+)[\"']"
                      r"(?P<close>)[ \t]+value[ \t]*(?P<sep>=)[ \t]*(?P<value>" + QUOTED + r")")
FLAG = lazy(r"(?<![\w-])(?P<name>--?[A-Za-z][\w-]*)(?P<close>)(?P<sep>=|[ \t]+)"
                  r"(?P<value>" + QUOTED + r"|[^\s'\"]+)")
# Clients whose short flag takes a password (psql's -p is its port: PGPASSWORD or a URL
# carries its password, and both are masked by name); a registry client's only after
# `login` (`docker run -p 8080:80` publishes a port).
CLIENT_PASSWORD_FLAGS = {"mysql": "-p", "mysqldump": "-p", "mysqladmin": "-p", "mariadb": "-p",
                         "mysqlimport": "-p", "sshpass": "-p", "redis-cli": "-a"}
LOGIN_PASSWORD_FLAGS = {"docker": "-p"}
# curl's flags that take `user:password` (the part after the first colon is the secret).
USER_PASSWORD_FLAGS = ("-u", "--user", "-U", "--proxy-user")
# Programs whose arguments carry a secret by position (secret_args); a line is searched for
# them where it holds one of their names (redact_line: mysqldump holds mysql). A curl line
# is one with a URL or a `-u ` (redact_trigger_line); the others' names are HINTS.
POSITIONAL_PROGRAMS = ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mariadb", "sshpass",
                       "redis-cli", "docker", "curl", "wandb")
COMMAND = lazy(r"(?<![\w.-])(?P<program>%s)(?![\w-])(?P<args>[^\n|;&]*)"
               % "|".join(POSITIONAL_PROGRAMS))
# One shell word: a run of unquoted characters and quoted strings (one character at a time
# outside quotes: a repeated run inside the repetition would backtrack).
SHELL_WORD = lazy(r"""(?:[^\s'"]|"(?:\\.|[^"\\\n])*"|'[^'\n]*')+""")
WANDB_LOGIN_CALL = lazy(r"wandb\.login\([^)\n]*?\bkey[ \t]*=[ \t]*(?P<value>" + QUOTED + r")")
# .netrc: `machine HOST login USER password SECRET`, on one line or with `password SECRET`
# on a line of its own; .pgpass: `host:port:database:user:password`, a line of its own.
NETRC = lazy(r"(?P<context>(?<![\w-])(?:machine[ \t]+\S+|default)[ \t]+"
                   r"(?:login[ \t]+\S+[ \t]+)?|(?<![\w-])login[ \t]+\S+[ \t]+|^[ \t+-]*)"
                   r"password[ \t]+(?P<value>\S+)(?P<alone>[ \t\r]*$)?")
PGPASS = lazy(r"^[+ -]?[ \t]*[\w.*\[\]-]+:(?:[0-9]{2,5}|\*):[^:\s]+:[^:\s]+:"
                    r"(?P<value>\S+)[ \t\r]*$")
# Where a .pgpass line may be: `:5432:` (a port or `*` between colons), from its colon:
# anywhere in a text below PGPASS_ANYWHERE bytes (a file, a bench tail, a value), and in a
# longer one (a patch) where a diff header names a pgpass file: a scan of
# every colon of a 5 MB patch would cost more than all the other shapes added with it.
PGPASS_HINT = lazy(rb":(?:[0-9]{2,5}|\*):")
PGPASS_ANYWHERE = 1 << 20
# A private key, base64 of its PEM text (kubeconfig client-key-data, a Helm value, a
# Kubernetes Secret's tls.key): base64 of `PRIVATE KEY-----` at each of the three
# alignments, the characters that do not depend on the bytes around it. A certificate's or a
# public key's base64 holds none of them.
BASE64_PRIVATE_KEY = (b"UFJJVkFURSBLRVktLS0tL", b"BSSVZBVEUgS0VZLS0tLS", b"QUklWQVRFIEtFWS0tLS0t")
# All three hold this (base64 of `---`, at any alignment): TOKEN_PREFIX_HINTS finds it.
BASE64_ARMOR = b"LS0t"
MIN_KEY_BASE64 = 120   # the shortest, an Ed25519 key, is 119 bytes of PEM: 160 of base64
BASE64_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
BASE64_LINE = lazy(rb"[+ -]?[ \t]*(?P<run>[A-Za-z0-9+/]{4,}={0,2})[ \t\r]*")
# PagerDuty's integration key under a queue's name for a key: 32 letters and digits.
ROUTING_KEY_VALUE = lazy(r"[A-Za-z0-9]*[0-9][A-Za-z0-9]*$")

# ---- high entropy in an assignment context -------------------------------------------------

# `(?:...|)`, not `(?:...)?`: the same match, but a group repeat is slow in the engine.
ASSIGNED_VALUE = rb">?[ \t]*(?:[bBrRuU]{0,2}[\"']|)(?P<value>[A-Za-z0-9+/_=.-]{20,})"
ASSIGNED_RANDOM_BYTES = lazy(rb"[=:]" + ASSIGNED_VALUE)
# Where ASSIGNED_RANDOM_BYTES may start, one regex per separator: each is scanned for its
# first byte at memchr speed, where `[=:]` is tested byte by byte (twice the time on a
# patch). A lookahead, so that every start is found, even one inside another's value.
ASSIGNMENT_STARTS = (lazy(rb"=(?=" + ASSIGNED_VALUE + rb")"),
                     lazy(rb":(?=" + ASSIGNED_VALUE + rb")"))
HEX = lazy(r"(?:(?:sha\d*|md5|blake2\w*)[:-])?[0-9a-fA-F]+$")
UUID_ANYWHERE = lazy(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
VERSION_LIKE = lazy(r"v?[0-9]+(?:[.+_-][0-9A-Za-z]+)*$")
PATH_LIKE = lazy(r"(?:[/~.]|[A-Za-z]:\\)|[\w.-]+(?:/[\w.-]+)+/?$")


def char_class(char: str) -> int:
    return 0 if char.islower() else 1 if char.isupper() else 2 if char.isdigit() else 3


# For ASCII, char_class by regex: a loop over characters in Python costs more than all
# the other tests of looks_random together, on the thousand candidates of a 5 MB patch.
ASCII_KINDS = (lazy("[a-z]"), lazy("[A-Z]"), lazy("[0-9]"))
ASCII_CLASS_RUNS = lazy("[a-z]+|[A-Z]+|[0-9]+|[^a-zA-Z0-9]+")


def char_kinds(value: str) -> int:
    """How many of lower case, upper case and digits `value` holds."""
    if value.isascii():
        return sum(1 for kind in ASCII_KINDS if kind.search(value))
    return len({0, 1, 2} & {char_class(char) for char in value})


def class_switches(value: str) -> int:
    """How often the character class changes from one character to the next."""
    if value.isascii():
        return len(ASCII_CLASS_RUNS.findall(value)) - 1
    classes = [char_class(char) for char in value]
    return sum(a != b for a, b in zip(classes, classes[1:]))


def shannon_bits(value: str) -> float:
    counts = {char: value.count(char) for char in set(value)}
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def is_base64_of_text(value: str) -> bool:
    """base64 of words or JSON is no secret, however random it looks."""
    import base64  # on use: most captures never decode a value

    padded = value + "=" * (-len(value) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            raw = decode(padded)
        except (binascii.Error, ValueError):
            continue
        if raw and sum(32 <= byte < 127 or byte in (9, 10, 13) for byte in raw) >= 0.95 * len(raw):
            return True
    return False


def looks_random(value: str) -> bool:
    """A generated credential: long, all of lower, upper and digits, dense with changes
    between them, high in entropy; not a digest, UUID, version, path or base64 of text."""
    if len(value) < 20 or len(value) > 512:
        return False
    # The cheapest test first: most long values in code are names in one case (a.b.c_d).
    kinds = char_kinds(value)
    if kinds < 2 or (kinds == 2 and len(value) < 24):
        return False
    if HEX.match(value) or UUID_ANYWHERE.search(value) or VERSION_LIKE.match(value) or \
            (PATH_LIKE.match(value) and not has_random_segment(value)):
        return False
    if class_switches(value) < 0.35 * len(value) or reads_as_words(value):
        return False
    if shannon_bits(value) < min(4.0, 0.8 * math.log2(len(value))):
        return False
    return not is_base64_of_text(value)


def reads_as_words(value: str) -> bool:
    """Identifiers and names (c_nvmlGpuFabricInfo_v2_t, BSD-3-Clause-Open-MPI) are made of
    words; a generated string breaks into runs of one or two characters."""
    words = NAME_WORD.findall(value)
    if words and sum(map(len, words)) / len(words) >= 2.8:
        return True
    parts = [part for part in re.split(r"[._/-]+", value) if part]
    return len(parts) > 1 and all(part.islower() or part.isupper() or part.istitle() or
                                  part.isdigit() for part in parts)


def has_random_segment(value: str) -> bool:
    """wJalrXUtnFEMI/K7MDENG/bPxRfiCY (an AWS secret key) has slashes, yet is no path: a
    segment of it is no word. A path starts at a root or is made of names."""
    if value.startswith(("/", "~", ".")):
        return False
    return any(len(part) > 3 and not reads_as_words(part) and
               len({char_class(char) for char in part} & {0, 1, 2}) >= 2
               for part in value.split("/"))


# ---- markers ---------------------------------------------------------------------------------

class Markers:
    """How a masked value is written. The agent writes a digest of it (`emit_digests`), for
    the controller to rekey; anywhere else (a crash log, a lock file) a plain REDACTED, so
    no unkeyed digest of a secret ever reaches a disk."""

    digests = False


def emit_digests() -> None:
    Markers.digests = True


def mask_secret(value: str) -> str:
    """The marker of one secret: equal secrets, equal markers (before and after rekey)."""
    if vendors.is_placeholder(value):
        return value   # documentation's fill-in: a look-alike keeps what it says
    if not Markers.digests:
        return REDACTED
    digest = sha256_bytes(b"envsnap secret\0" + value.encode("utf-8", "surrogateescape"))
    return "<secret:%s>" % digest[:32]


def rekey(text: str, key: Optional[bytes]) -> str:
    """Each marker made on the host -> a short hash under the user's masking key, or the
    plain REDACTED without a key. What the controller writes holds only these."""
    if MARKER_START not in text:
        return text
    import hashlib  # on use: the agent never rekeys, the controller only where masked
    import hmac

    def keyed(match: "re.Match[str]") -> str:
        if key is None:
            return REDACTED
        mac = hmac.new(key, bytes.fromhex(match.group(1)), hashlib.sha256).hexdigest()
        return "<secret:%s>" % mac[:SHOWN_HASH_CHARS]
    return TRANSIT_MARKER.sub(keyed, text)


def is_marker(value: str) -> bool:
    return bool(MARKER.fullmatch(value))


def holds_marker(value: str) -> bool:
    """A value with a masked secret in it: restoring it would write the marker instead."""
    return bool(MARKER.search(value))


# ---- the detector ------------------------------------------------------------------------------

CODE_SUFFIXES = (".py", ".pyi", ".pyx", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".go", ".rs",
                 ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".cu", ".cuh", ".java", ".kt",
                 ".scala", ".rb", ".php", ".cs", ".swift", ".lua", ".jl")
DIFF_HEADER_BYTES = lazy(rb"diff --git (?:\"?a/)?(?P<path>[^\n]*?)\"? (?:\"?b/)")


def is_code_path(path: str) -> bool:
    """In code `token = tok` passes a variable; in a .env, YAML or shell file a bare value is
    the value itself. Only literals are masked in code."""
    return path.lower().endswith(CODE_SUFFIXES)


def redact_file(text: str, path: str) -> str:
    return redact_text(text, code=is_code_path(path))


@functools.lru_cache(maxsize=4)
def redact_patch(text: str) -> str:
    """A patch, each file's part read as what that file is (code or configuration).
    Remembered: the staged patch is often the whole uncommitted one, masked once."""
    return redact_text(text, code_in_patch)


def code_in_patch(data: bytes) -> Callable[[int], bool]:
    """offset -> whether the file part of the patch holding it is code."""
    starts, flags = [], []
    for at in literal_hits(data, (b"diff --git ",)):
        if at == 0 or data[at - 1:at] == b"\n":
            header = DIFF_HEADER_BYTES.match(data, at)
            starts.append(at)
            flags.append(header is not None and
                         is_code_path(header.group("path").decode("utf-8", "replace")))

    def code_at(offset: int) -> bool:
        index = bisect.bisect_right(starts, offset) - 1
        return index >= 0 and flags[index]
    return code_at


# Any str round-trips through these bytes, lone surrogates (undecodable names) included.
ERRORS = "surrogatepass"


def redact_text(text: str, code: CodeRule = False) -> str:
    """Every secret inside free text masked: a patch, a file, a subject, a command line.
    `code`: whether the text is source code, or how to tell for each offset (a patch).

    Lines worth parsing are found in the UTF-8 bytes: a byte string searches twice as fast
    as a str holding one non-ASCII character, and lowers without changing its length."""
    if not text:
        return text
    original = data = text.encode("utf-8", ERRORS)
    if b"Secret" in data:   # a Kubernetes Secret's values, in its document only
        data = mask_secret_documents(data)
    if b"-----BEGIN" in data:
        data = PEM_BLOCK.sub(mask_pem, data)
    lines, armour = trigger_lines(data)
    if armour:
        keyless = mask_base64_keys(data, armour)
        if keyless != data:   # rare: the lines are found again in what is left
            data = keyless
            lines = trigger_lines(data)[0]
    if lines:
        data = rebuilt(data, lines, code(data) if callable(code) else (lambda _: code))
    data = mask_random_values(data)
    # Most texts hold no secret: the text itself then, not a decoding of 5 MB.
    return text if data == original else data.decode("utf-8", ERRORS)


def mask_secret_documents(data: bytes) -> bytes:
    out: List[bytes] = []
    done = 0
    for start, end in vendors.secret_documents(data):
        start = max(start, done)
        out.append(data[done:start])
        out.append(vendors.mask_kubernetes_secrets(data[start:end].decode("utf-8", ERRORS),
                                                   mask_secret).encode("utf-8", ERRORS))
        done = max(done, end)
    out.append(data[done:])
    return b"".join(out) if done else data


# What a line holds that makes it worth parsing, found once for the whole text.
TOKEN_PREFIX, URL, HINT = 1, 2, 4


def trigger_lines(data: bytes) -> Tuple[Dict[int, Tuple[int, int]], List[int]]:
    """Line start -> (line end, TOKEN_PREFIX | URL | HINT bits) for each line that holds a
    token prefix, a `://` or a hint word; each line is then parsed once for all kinds, not
    once per kind, and the text is copied once. And where the text holds base64 of PEM
    armour (BASE64_ARMOR, found by the same scan as the token prefixes)."""
    prefix_hits = [hint.start() for hint in TOKEN_PREFIX_HINTS_SHORT.finditer(data)] \
        if len(data) < SHORT_TEXT else \
        sorted(hint.start() for pattern in TOKEN_PREFIX_HINTS for hint in pattern.finditer(data))
    armour = [hit for hit in prefix_hits if data.startswith(BASE64_ARMOR[1:], hit)]
    lines: Dict[int, Tuple[int, int]] = {}
    lowered = data.lower()
    hint_hits = literal_hits(lowered, HINTS)
    pgpass_hits = [hint.start() for hint in PGPASS_HINT.finditer(data)] \
        if len(data) < PGPASS_ANYWHERE or any(in_pgpass_header(lowered, hit)
                                              for hit in hint_hits) else []
    for kind, hits in ((TOKEN_PREFIX, prefix_hits), (URL, literal_hits(data, (b"://",))),
                       (HINT, hint_hits), (HINT, pgpass_hits)):
        end = -1
        for hit in hits:
            if hit < end:
                continue   # the line of an earlier hit of this kind
            start = data.rfind(b"\n", 0, hit) + 1
            end = data.find(b"\n", hit)
            end = len(data) if end < 0 else end
            lines[start] = (end, lines.get(start, (end, 0))[1] | kind)
    return lines, armour


def in_pgpass_header(lowered: bytes, hit: int) -> bool:
    """Whether the hint word at `hit` is the `pass` of a diff header naming a pgpass file."""
    return lowered[hit - 2:hit] == b"pg" and \
        lowered.startswith(b"diff --git ", lowered.rfind(b"\n", 0, hit) + 1)


def rebuilt(data: bytes, lines: Dict[int, Tuple[int, int]], code_at: Callable[[int], bool]
            ) -> bytes:
    """`data` with each trigger line masked, every other line copied as it is."""
    out: List[bytes] = []
    done = 0
    for start in sorted(lines):
        end, kinds = lines[start]
        out.append(data[done:start])
        out.append(redact_trigger_line(data[start:end].decode("utf-8", ERRORS), kinds,
                                       functools.partial(code_at, start)).encode("utf-8", ERRORS))
        done = end
    out.append(data[done:])
    return b"".join(out)


def redact_trigger_line(line: str, kinds: int, is_code: Callable[[], bool]) -> str:
    """Token prefixes, then URL credentials, then names: in that order, since a marker put
    in by the first two (`<secret...`) makes the line one worth parsing for names."""
    masked = line
    if kinds & TOKEN_PREFIX:
        masked = TOKEN_PREFIXES.sub(mask_whole, masked)
        if "-us" in masked or ":AA" in masked:
            masked = TOKEN_INFIX_SHAPES.sub(mask_whole, masked)
    if kinds & TOKEN_PREFIX or "dapi" in masked or "Q~" in masked:
        masked = vendors.mask_tokens(masked, mask_secret)
    if kinds & TOKEN_PREFIX:
        if "ZXlK" in masked or "WlhsS" in masked or "TFMwdExTMU" in masked:
            masked = vendors.mask_encoded(masked, mask_secret)
    if kinds & URL:
        masked = redact_url(masked)
    if kinds & (URL | TOKEN_PREFIX) and not kinds & HINT and "curl" in masked:
        masked = mask_commands(masked)   # `curl -u user:password`: its -u is a hint
    if kinds & HINT or masked != line:
        masked = redact_line(masked, is_code())
    return masked


def literal_hits(data: bytes, words: "Iterable[bytes] | Dict[bytes, Optional[Tuple[bytes, ...]]]"
                 ) -> List[int]:
    """Where each word occurs, sorted. For a mapping word -> endings (the data is lowered):
    only where no letter follows, or one of its endings does; None: anywhere."""
    endings = words if isinstance(words, dict) else dict.fromkeys(words)
    hits = [at for word, at in occurrences(data, tuple(endings))
            if is_hit(data, word, at, endings[word])]
    hits.sort()
    return hits


def is_hit(data: bytes, word: bytes, at: int, allowed: Optional[Tuple[bytes, ...]]) -> bool:
    """Whether `word` at `at` counts: see HINTS and AFTER_A_WORD."""
    after = at + len(word)
    if word in AFTER_A_WORD and not (b"a" <= data[at - 1:at] <= b"z" or
                                     data[at - 1:at] in (b"_", b"-", b".")):
        return False
    return allowed is None or not b"a" <= data[after:after + 1] <= b"z" or \
        any(data.startswith(ending, after) and not
            b"a" <= data[after + len(ending):after + len(ending) + 1] <= b"z"
            for ending in allowed)


# Below this many bytes, a text is searched with bytes.find: it costs less to start than a
# regex scan, and most texts masked are short (a name, a value, a package version).
SHORT_TEXT = 4096


def occurrences(data: bytes, words: Tuple[bytes, ...]) -> List[Tuple[bytes, int]]:
    """(word, where it starts) for each occurrence of each word (none overlaps itself)."""
    found: List[Tuple[bytes, int]] = []
    if len(data) >= SHORT_TEXT:
        for search, by_tail in rare_first_searches(words):
            for match in search.finditer(data):
                word, anchor = by_tail[match.group()]
                found.append((word, match.start() - anchor))
        return found
    for word in words:
        at = data.find(word)   # most short texts hold none: one call, no loop
        while at >= 0:
            found.append((word, at))
            at = data.find(word, at + len(word))
    return found


# Bytes from commonest to rarest in source code (counted on a patch of envsnap's sources).
BYTES_BY_FREQUENCY = b" etrsnoaildcpfuhm-.:_gbyvwkx/jzq"


@functools.lru_cache(maxsize=None)
def rare_first_searches(words: Tuple[bytes, ...]) -> Searches:
    """Regexes that find the words from their rarest byte. The regex engine looks for the
    first byte of a literal in a tight loop and stops only where it is: `ken(?<=token)` stops
    at each `k`, where bytes.find(b"token") stops at each `t`, `o`, `k`, `e` or `n`. Words
    with the same rarest byte share a regex (`cred|cret(?<=secret)`, one scan for both),
    unless one could hide another's match: a tail that holds that byte again, or equals
    another tail. One that starts another comes after it (`wandb|w(?<=pw)`): it hides that
    one only where both end a word at the same byte (`pwandb`), and neither word is then a
    hint's alone. (No named groups: the engine would then try the regex at every byte.)
    A word of AFTER_A_WORD is looked behind for the byte before it too (`key(?<=[a-z_.-]key)`):
    the 3 in 4 `key`s of code that follow no word then cost no step in Python."""
    groups: Dict[Tuple[bytes, ...], Dict[bytes, Tuple[bytes, int]]] = {}
    for word in words:
        anchor = max(range(len(word)), key=lambda at: BYTES_BY_FREQUENCY.find(word[at:at + 1]))
        tail = word[anchor:]
        shared = groups.get((tail[:1],), {})
        alone = tail[:1] in tail[1:] or tail in shared
        groups.setdefault((tail[:1], word) if alone else (tail[:1],), {})[tail] = (word, anchor)
    def behind(word: bytes, anchor: int) -> bytes:
        if word in AFTER_A_WORD:
            return b"(?<=[a-z_.\\-]" + re.escape(word) + b")"
        return b"(?<=" + re.escape(word) + b")" if anchor else b""
    return tuple((re.compile(b"|".join(re.escape(tail) + behind(word, anchor)
                                       for tail, (word, anchor) in
                                       sorted(by_tail.items(), key=lambda item: -len(item[0])))),
                  by_tail) for by_tail in groups.values())


def mask_base64_keys(data: bytes, armour: List[int]) -> bytes:
    """Each base64 block holding a private key's PEM text, masked whole; `armour`: where
    BASE64_ARMOR is, a key's hint is around one of them."""
    spans = sorted(span for span in (base64_block(data, at) for at in armour
                                     if any(hint in data[max(0, at - 24):at + 24]
                                            for hint in BASE64_PRIVATE_KEY))
                   if span[1] - span[0] >= MIN_KEY_BASE64)   # not the hint quoted alone
    if not spans:
        return data
    out: List[bytes] = []
    done = 0
    for start, end in spans:
        if start < done:
            continue   # the same block, found from another of its hints
        out.append(data[done:start])
        out.append(mask_secret(data[start:end].decode("ascii")).encode("ascii"))
        done = end
    out.append(data[done:])
    return b"".join(out)


def base64_block(data: bytes, at: int) -> Tuple[int, int]:
    """(start, end) of the base64 around `at`, with the lines above and below it that hold
    nothing else (a YAML block scalar, a patch's `+` lines, base64 wrapped at 64 or 76)."""
    start = end = at
    while start and data[start - 1] in BASE64_BYTES:
        start -= 1
    while end < len(data) and data[end] in BASE64_BYTES:
        end += 1
    line_start = data.rfind(b"\n", 0, start) + 1
    if start == line_start and data[start:start + 1] == b"+":
        start += 1   # a patch's added line: its `+` is no base64
    if not data[line_start:start].strip(b"+- \t"):   # the run opens its line: look above
        while line_start:
            above = BASE64_LINE.fullmatch(data, data.rfind(b"\n", 0, line_start - 1) + 1,
                                          line_start - 1)
            if above is None or len(above.group("run")) < 40:   # wrapped lines are full
                break
            start, line_start = above.start("run"), above.start()
    line_end = line_end_at(data, end)
    if not data[end:line_end].strip():   # the run closes its line: look below
        while line_end < len(data):
            below = BASE64_LINE.fullmatch(data, line_end + 1, line_end_at(data, line_end + 1))
            if below is None:
                break
            end, line_end = below.end("run"), below.end()
    return start, end


def line_end_at(data: bytes, at: int) -> int:
    end = data.find(b"\n", at)
    return len(data) if end < 0 else end


def mask_pem(match: "re.Match[bytes]") -> bytes:
    """A key block has a body; the bare BEGIN/END lines (a parser's constants) are kept."""
    block = match.group(0).decode("utf-8", ERRORS)
    return mask_secret(block).encode("utf-8", ERRORS) if PEM_BODY.search(block) \
        else match.group(0)


def mask_whole(match: "re.Match[str]") -> str:
    return mask_secret(match.group(0))


def assigned_values(data: bytes) -> "Iterator[re.Match[bytes]]":
    """ASSIGNED_RANDOM_BYTES.finditer(data): for a long text the same matches, found
    faster from the starts of ASSIGNMENT_STARTS in order, each after the last match."""
    if len(data) < SHORT_TEXT:
        return ASSIGNED_RANDOM_BYTES.finditer(data)
    starts = sorted(start.start() for pattern in ASSIGNMENT_STARTS
                    for start in pattern.finditer(data))
    matches = []
    searched = 0
    for start in starts:
        if start < searched:
            continue   # inside the value of the last match
        match = ASSIGNED_RANDOM_BYTES.match(data, start)
        if match is not None:
            matches.append(match)
            searched = match.end()
    return iter(matches)


def mask_random_values(data: bytes) -> bytes:
    out: List[bytes] = []
    done = 0
    for match in assigned_values(data):
        if match.start() and data[match.start() - 1:match.start()] in (b"=", b"!", b"<", b">"):
            continue   # a comparison, not an assignment
        value = match.group("value").rstrip(b".")
        if not looks_random(value.rstrip(b"=").decode("ascii")):
            continue
        out.append(data[done:match.start("value")])
        out.append(mask_secret(value.decode("ascii")).encode("ascii"))
        done = match.start("value") + len(value)
    if not out:
        return data
    out.append(data[done:])
    return b"".join(out)


def mask_auth_scheme(match: "re.Match[str]") -> str:
    value = match.group("value")
    if value.isalpha() and value.islower() or NOT_A_VALUE.match(value):
        return match.group(0)   # "Basic authentication": prose, not a header
    return replace_value(match, value)


def redact_line(line: str, code: bool = False) -> str:
    """Each pattern only where its literal part is in the line: these patterns start with a
    lookbehind, so the regex engine tries them at every character of the line."""
    if "mysql" in line or "mariadb" in line or "sshpass" in line or "redis-cli" in line or \
            "wandb" in line or "docker" in line or "curl" in line:   # a chain of `in`, 4x
        line = mask_commands(line)                                    # as fast as any()
    if "-" in line:
        line = sub_named(FLAG, line, code)
    if "=" in line or ":" in line:
        line = sub_named(ASSIGNMENT, line, code)
    if "tring " in line or "str =" in line or "]byte" in line:
        line = sub_named(TYPED_ASSIGNMENT, line, code)
    if "(" in line and "," in line:
        line = sub_named(CALL_PAIR, line, code)
    if "</" in line:
        line = sub_named(XML_ELEMENT, line, code)
    if "value" in line:
        line = sub_named(XML_ATTRIBUTES, line, code)
    if "earer" in line or "Basic" in line or "BEARER" in line or "GenieKey" in line:
        line = AUTH_SCHEME.sub(mask_auth_scheme, line)
    if "password" in line:
        line = NETRC.sub(mask_netrc, line)
    if line.count(":") >= 4:
        line = PGPASS.sub(mask_password_value, line)
    return line


def sub_named(pattern: "re.Pattern[str]", line: str, code: bool) -> str:
    """Each `name sep value` masked where the name is a secret's. A match that is no
    secret's gives back its value to the search: in `commit: set password=x`, `commit:`
    would otherwise swallow the rest of the line."""
    out: List[str] = []
    done = searched = 0
    while True:
        match = pattern.search(line, searched)
        if match is None:
            break
        shown = mask_named(match, code)
        if shown == match.group(0):
            searched = max(match.end("sep"), match.start() + 1)
            continue
        out.append(line[done:match.start()])
        out.append(shown)
        done = searched = match.end()
    out.append(line[done:])
    return "".join(out)


def mask_named(match: "re.Match[str]", code: bool) -> str:
    name = match.group("name")
    routing = not is_secret_name(name)
    if routing and name[-3:].lower() != "key":   # most names: no routing_key either
        return match.group(0)
    at, value = credential_in(match)
    if routing and not is_routing_key(name, value) or not is_secret_value(name, value):
        return match.group(0)
    if match.group("sep").isspace() and value.startswith("-"):
        return match.group(0)   # `--password-stdin -u ada`: the next flag, not a value
    if "]" in match.group("close") and not set("'\"") & set(match.group("close")):
        return match.group(0)   # table[cache_key] = ...: a variable used as an index
    if weak_name(name) and not routing and (len(value.strip("'\"")) < 8 or
                                            reads_as_words(value)):
        return match.group(0)   # a lookup key ("cls", "LogXML"), not a credential
    if code and (match.group("sep") == "==" or not is_quoted(value) and (
            match.group("sep") != "=" or IDENTIFIER_VALUE.match(value))):
        return match.group(0)   # code: a comparison, a variable, an annotation
    return replace_value(match, value, at)


def credential_in(match: "re.Match[str]") -> Tuple[int, str]:
    """(where, what) of the secret in a match's value: the value, less what follows the
    quote that opened before the name (`-H 'X-Api-Key: abc' https://...`: the header ends
    at its quote, and the command goes on), less a header's scheme word (`Authorization:
    Basic abc`: only `abc`)."""
    at, value = match.start("value"), match.group("value")
    opened = match.string[match.start() - 1:match.start()]
    if opened in ("'", '"') and not is_quoted(value) and opened in value:
        value = value[:value.index(opened)]
    scheme, space, credential = value.partition(" ")
    if space and scheme.lower() in HEADER_SCHEMES and credential.strip() and \
            "auth" in match.group("name").lower():
        credential = credential.lstrip()
        at += len(value) - len(credential)
        value = credential.split()[0] if credential.split() else credential
    return at, value


def is_routing_key(name: str, value: str) -> bool:
    """PagerDuty's `routing_key` holds its integration key; a queue's holds a topic."""
    bare = value.strip("'\"")
    return name_words(name)[-2:] == ["routing", "key"] and len(bare) == 32 and \
        bool(ROUTING_KEY_VALUE.match(bare))


def is_quoted(value: str) -> bool:
    value = value.lstrip("bBrRuUfF")   # b"...", r'...': Python's string prefixes
    return len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]


def replace_value(match: "re.Match[str]", value: str, at: Optional[int] = None) -> str:
    """The value (at `at` in the line, else the match's value) masked in place, its quotes
    kept: `"x"` -> `"<secret:...>"`."""
    quoted = is_quoted(value)
    prefix = value[:len(value) - len(value.lstrip("bBrRuUfF"))] if quoted else ""
    literal = value[len(prefix):]
    secret = literal[1:-1] if quoted else value.rstrip()
    shown = (prefix + literal[0] + mask_secret(secret) + literal[-1]) if quoted else \
        mask_secret(secret) + value[len(secret):]
    start = (match.start("value") if at is None else at) - match.start(0)
    whole = match.group(0)
    return whole[:start] + shown + whole[start + len(value):]


def mask_password_value(match: "re.Match[str]") -> str:
    value = match.group("value")
    if not is_secret_value("password", value) or value in ("*", "-") or value.isdigit():
        return match.group(0)
    return replace_value(match, value)


def mask_netrc(match: "re.Match[str]") -> str:
    """`password X` after `machine`/`login`, or alone on its line (netrc's own layout)."""
    if not match.group("context").strip(" \t+-") and match.group("alone") is None:
        return match.group(0)
    return mask_password_value(match)


# ---- command lines ----------------------------------------------------------------------------

def secret_args(program: str, args: List[str]) -> Dict[int, int]:
    """Argument index -> where in it a secret starts, for the programs that take one by
    position: `mysql -pX` / `-p X`, `redis-cli -a X`, `docker login -p X`, `curl -u
    user:X`, `wandb login X`."""
    program = program.rsplit("/", 1)[-1]
    flag = CLIENT_PASSWORD_FLAGS.get(program) or \
        (LOGIN_PASSWORD_FLAGS.get(program) if "login" in args else None)
    found: Dict[int, int] = {}
    after_login = False
    for index, arg in enumerate(args):
        following = index + 1 < len(args) and not args[index + 1].startswith("-")
        if flag is not None and arg == flag and following:
            found[index + 1] = 0
        elif flag == "-p" and arg.startswith("-p") and len(arg) > 2:
            found[index] = 2
        elif program == "curl" and arg in USER_PASSWORD_FLAGS and following:
            if ":" in args[index + 1]:
                found[index + 1] = args[index + 1].index(":") + 1
        elif program == "curl" and ":" in arg and \
                arg.startswith(("--user=", "--proxy-user=", "-u", "-U")):
            found[index] = arg.index(":") + 1   # --user=ada:X, -uada:X
        elif program == "wandb" and arg == "login":
            after_login = True
        elif after_login and not arg.startswith("-") and args[index - 1] != "--host":
            found[index] = 0   # the key, wherever its flags put it
            after_login = False
    return found


def mask_commands(line: str) -> str:
    """Each command of secret_args on the line, its words masked where it says; and
    `wandb.login(key="...")` in code."""
    if "wandb.login(" in line:
        line = WANDB_LOGIN_CALL.sub(lambda match: replace_value(match, match.group("value")),
                                    line)
    out: List[str] = []
    done = 0
    for command in COMMAND.finditer(line):
        words = list(SHELL_WORD.finditer(command.group("args")))
        secrets = secret_args(command.group("program"), [word.group() for word in words])
        for index, at in sorted(secrets.items()):
            word = words[index]
            start = command.start("args") + word.start() + at
            value = word.group()[at:]
            if not is_secret_value("password", value) or is_marker(value.strip("'\"")):
                continue
            out.append(line[done:start])
            out.append(value[0] + mask_secret(value[1:-1]) + value[-1] if is_quoted(value)
                       else mask_secret(value))
            done = start + len(value)
    if not out:
        return line
    out.append(line[done:])
    return "".join(out)


def redact_url(url: str) -> str:
    """https://user:pass@host/x -> https://user:<secret:..>@host/x (a bare token user too);
    an incoming webhook's secret part masked (hooks.slack.com/services/<secret:..>)."""
    def mask(match: "re.Match[str]") -> str:
        user, _, password = match.group("userinfo").partition(":")
        if password and not is_marker(password):
            return "%s%s:%s@" % (match.group("scheme"), user, mask_secret(password))
        hidden = len(user) >= 20 and not is_marker(user) and not password
        return "%s%s@" % (match.group("scheme"), mask_secret(user) if hidden
                          else match.group("userinfo"))
    if any(word in url for word in WEBHOOK_WORDS):
        url = WEBHOOK.sub(mask_webhook, url)
    return URL_CREDENTIALS.sub(mask, url)


def mask_webhook(match: "re.Match[str]") -> str:
    secret = match.group("secret")
    if match.group("generic"):
        first = secret.split("/")[0]   # ids are generated: letters and digits mixed
        if first.isalpha() or first.isdigit() or not first.isalnum():
            return match.group(0)   # a path that names hooks, no hook's id
    if MARKER_START in secret:
        return match.group(0)
    return match.group("service") + mask_secret(secret)


def redact_env_value(name: str, value: str) -> str:
    """An environment variable's value: by its name, else by its shape."""
    if is_secret_name(name) and is_secret_value(name, value):
        return mask_secret(value)
    if looks_random(value):   # NAME=value is an assignment
        return mask_secret(value)
    return redact_text(value)


def redact_env(environ: "dict[str, str]") -> "dict[str, str]":
    return {redact_text(name): redact_env_value(name, value) for name, value in environ.items()}


def redact_argv(argv: List[str]) -> List[str]:
    """A process's arguments: the value after --token/--db-pass, the secrets of
    secret_args (mysql -p, curl -u, wandb login...), and secrets anywhere else."""
    program = next((index for index, arg in enumerate(argv[:3])   # sudo, python -m, env
                    if arg.rsplit("/", 1)[-1] in POSITIONAL_PROGRAMS), None)
    positional = {} if program is None else \
        {program + 1 + index: at for index, at in
         secret_args(argv[program], argv[program + 1:]).items()}
    out: List[str] = []
    secret_flag = None
    for number, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if number in positional and is_secret_value("password", arg[positional[number]:]):
            out.append(arg[:positional[number]] + mask_secret(arg[positional[number]:]))
        elif secret_flag and not arg.startswith("-") and is_secret_value(secret_flag, arg):
            out.append(mask_secret(arg))
        elif eq and flag.startswith("-") and is_secret_name(flag) and \
                is_secret_value(flag, value):
            out.append("%s=%s" % (flag, mask_secret(value)))
        else:
            out.append(redact_text(arg))
        secret_flag = arg if not eq and arg.startswith("-") and is_secret_name(arg) else None
    return out


# ---- source code (sitecustomize, .pth) --------------------------------------------------------

ENV_NAME = lazy(r"[A-Z_][A-Z0-9_]*$")
QUOTED_LITERAL = lazy(r"""(?P<q>['"])(?P<body>(?:\\.|(?!(?P=q)).)*)(?P=q)""")
IDENTIFIER = lazy(r"[A-Za-z_][\w-]*")


def names_a_secret(line: str) -> bool:
    return any(is_secret_name(word) for word in IDENTIFIER.findall(line))


def redact_code(text: str) -> str:
    """Source text: on lines naming a secret, and on the lines that continue them (a
    password split over `(`...`)` or a trailing backslash), string literals are masked.

    `os.environ["HF_TOKEN"] = "weak"` keeps the name and hides the value, which no value
    pattern would catch; literals shaped like variable names (HF_TOKEN) are kept.
    """
    def mask(match: "re.Match[str]") -> str:
        body = match.group("body")
        if ENV_NAME.match(body) or not body or is_marker(body):
            return match.group(0)
        return "%s%s%s" % (match.group("q"), mask_secret(body), match.group("q"))
    lines = text.split("\n")
    depth, continued = 0, False
    for number, line in enumerate(lines):
        if not (depth or continued or names_a_secret(line)):
            continue
        lines[number] = QUOTED_LITERAL.sub(mask, line)
        outside = QUOTED_LITERAL.sub("", line)
        depth = max(0, depth + sum(outside.count(c) for c in "([{")
                    - sum(outside.count(c) for c in ")]}"))
        continued = line.rstrip().endswith("\\")
    return redact_text("\n".join(lines))


# ---- whole documents ------------------------------------------------------------------------

# File contents and patches were masked where they were read, each as what it is (a patch by
# its files, a source as code): the last pass leaves them as they are.
MASKED_AT_SOURCE = ("text", "base64", "content", "code_lines")


def redact_document(value: Any, key: str = "") -> Any:
    """Every string in what the agent returns, mapping keys too: the last pass before it
    leaves the host, so no channel (an error message, a bench tail, a name) is missed."""
    if isinstance(value, str):
        return value if key in MASKED_AT_SOURCE else redact_text(value)
    if isinstance(value, dict):
        return {(redact_text(k) if isinstance(k, str) else k):
                (v if k in MASKED_AT_SOURCE else redact_document(v, str(k)))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_document(item, key) for item in value]
    return value
