"""Tokens that say what they are: a table of vendors' token families, beside the detector.

Each family is written from its vendor's documented format: a fixed prefix, an alphabet and
a length, and a checksum where the format has one (GitHub's and npm's tokens end in the
CRC32 of their random part, in base62). A token of a family with a fixed prefix is masked
for its format alone, wherever it is (an env value, a file, a patch, argv, a bench output,
a paste): no name has to say it is a secret. A family with no fixed prefix (a Discord bot
token, an AWS secret key next to its key id) is masked only where the value is random
enough to be generated.

The detector (redact.py) finds the lines worth reading with its byte scans; a line is
then tried only against the families whose prefix starts one of its words (a dict from a
word's first two characters), not against the whole table.

Placeholders are kept whole (`is_placeholder`): documentation's fill-ins (`EXAMPLE`,
`xxxx`, `your_token_here`, `<token>`, `changeme`), a run of one character, and the
vendors' own published sample keys. A look-alike then never loses what it tells.

Stdlib-only and Python >= 3.8, as the rest of the agent.
"""
from __future__ import annotations

import binascii
import functools
import math
import re
import zlib

TYPE_CHECKING = False   # typing's own, without its import: see runner.py
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Optional, Pattern, Tuple  # noqa: F401

    Check = Optional[Callable[[str], bool]]


class Family:
    """A token family: its name, the prefixes it starts with, its whole shape (a regex from
    the first prefix character on) and, where the format has one, a checksum test."""

    __slots__ = ("name", "prefixes", "shape", "checksum", "_compiled")

    def __init__(self, name: str, prefixes: Tuple[str, ...], shape: str,
                 checksum: Check = None) -> None:
        self.name, self.prefixes, self.shape, self.checksum = name, prefixes, shape, checksum
        self._compiled = None   # type: Optional[Pattern[str]]

    @property
    def pattern(self) -> Pattern[str]:
        """Compiled on first use: a capture meets few families."""
        if self._compiled is None:
            self._compiled = re.compile(self.shape + r"(?![A-Za-z0-9])")
        return self._compiled


BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def base62(number: int, width: int) -> str:
    digits = ""
    while number:
        number, digit = divmod(number, 62)
        digits = BASE62[digit] + digits
    return digits.rjust(width, "0")


def crc32_base62_ok(token: str) -> bool:
    """GitHub's (and npm's) tokens: PREFIX_ + 30 random + 6 characters of base62 CRC32 of
    the random part."""
    body = token.rsplit("_", 1)[-1]
    return len(body) == 36 and base62(zlib.crc32(body[:30].encode("ascii")), 6) == body[30:]


def F(name: str, prefixes: Tuple[str, ...], shape: str, checksum: Check = None) -> Family:
    return Family(name, prefixes, shape, checksum)


A62 = "[A-Za-z0-9]"
URLSAFE = "[A-Za-z0-9_-]"
HEXL = "[a-f0-9]"

# Each family from its vendor's format. Lengths are the documented ones, with room where a
# vendor says a length may grow.
FAMILIES = (
    # GitHub: classic tokens by kind (personal, OAuth, user-to-server, server-to-server,
    # refresh), and fine-grained personal tokens.
    F("github_classic", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_" + A62 + "{36}",
      crc32_base62_ok),
    F("github_fine_grained", ("github_pat_",), r"github_pat_[A-Za-z0-9_]{70,}"),
    F("npm", ("npm_",), r"npm_" + A62 + "{36}", crc32_base62_ok),
    # GitLab: personal, runner, CI job, pipeline trigger, deploy, feed, SCIM, incoming
    # mail, OAuth application secret, agent, feature flag client tokens; runner
    # registration tokens.
    F("gitlab_personal", ("glpat-",), r"glpat-[A-Za-z0-9_.-]{20,}"),
    F("gitlab_runner", ("glrt-",), r"glrt-[A-Za-z0-9_.-]{20,}"),
    F("gitlab_ci_job", ("glcbt-",), r"glcbt-[A-Za-z0-9_.-]{20,}"),
    F("gitlab_trigger", ("glptt-",), r"glptt-[A-Za-z0-9_.-]{20,}"),
    F("gitlab_deploy", ("gldt-",), r"gldt-[A-Za-z0-9_.-]{20,}"),
    F("gitlab_feed", ("glft-",), r"glft-[A-Za-z0-9_.-]{20,}"),
    F("gitlab_scim", ("glsoat-",), r"glsoat-[A-Za-z0-9_.-]{20,}"),
    F("gitlab_incoming_mail", ("glimt-",), r"glimt-[A-Za-z0-9_.-]{25,}"),
    F("gitlab_oauth_secret", ("gloas-",), r"gloas-[A-Za-z0-9_.-]{64,}"),
    F("gitlab_agent", ("glagent-",), r"glagent-[A-Za-z0-9_.-]{50,}"),
    F("gitlab_feature_flags", ("glffct-",), r"glffct-[A-Za-z0-9_.-]{20,}"),
    F("gitlab_runner_registration", ("GR1348941",), r"GR1348941[A-Za-z0-9_-]{20,}"),
    # OpenAI: project, service account, admin and user keys; the older keys hold
    # `T3BlbkFJ` (base64 of "OpenAI") in the middle.
    F("openai_project", ("sk-proj-",), r"sk-proj-[A-Za-z0-9_-]{40,}"),
    F("openai_service_account", ("sk-svcacct-",), r"sk-svcacct-[A-Za-z0-9_-]{40,}"),
    F("openai_admin", ("sk-admin-",), r"sk-admin-[A-Za-z0-9_-]{40,}"),
    F("openai_user", ("sk-None-",), r"sk-None-[A-Za-z0-9_-]{40,}"),
    F("openai_legacy", ("sk-",), r"sk-(?:" + A62 + "{20}T3BlbkFJ" + A62 + "{20}|" + A62 +
      "{32,})"),
    F("anthropic", ("sk-ant-",), r"sk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{80,}"),
    F("openrouter", ("sk-or-",), r"sk-or-v[0-9]+-" + HEXL + "{64}"),
    # AWS access key ids of access keys (IAM, STS), of Bedrock API keys and of a
    # certificate authority's; and the 40-character secret beside one (AWS_SECRET).
    F("aws_access_key_id", ("AKIA", "ASIA", "ABIA", "ACCA"),
      r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"),
    F("aws_bedrock_api_key", ("ABSK",), r"ABSK[A-Za-z0-9+/]{100,}={0,2}"),
    # Google: API keys, OAuth client secrets, OAuth access tokens.
    F("google_api_key", ("AIza",), r"AIza[A-Za-z0-9_-]{35}"),
    F("google_oauth_secret", ("GOCSPX-",), r"GOCSPX-[A-Za-z0-9_-]{28}"),
    F("google_oauth_access", ("ya29.",), r"ya29\.[A-Za-z0-9_-]{30,}"),
    # Slack: bot, user, app-level, configuration and legacy tokens.
    F("slack_token", ("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxr-", "xoxs-"),
      r"xox[abposr]-[0-9]{1,16}-[A-Za-z0-9-]{10,}"),
    F("slack_app", ("xapp-",), r"xapp-[0-9]-[A-Z0-9]+-[0-9]+-[A-Za-z0-9]{20,}"),
    F("slack_config", ("xoxe.", "xoxe-"), r"xoxe(?:\.xox[bp])?-[0-9]-[A-Za-z0-9]{40,}"),
    # Stripe: secret and restricted keys (live and test), webhook signing secrets.
    F("stripe_key", ("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
      r"[sr]k_(?:live|test)_" + A62 + "{20,}"),
    F("stripe_webhook_secret", ("whsec_",), r"whsec_" + A62 + "{32,}"),
    # Hugging Face: user and organisation tokens.
    F("huggingface", ("hf_",), r"hf_" + A62 + "{34,}"),
    F("huggingface_org", ("api_org_",), r"api_org_" + A62 + "{34,}"),
    F("databricks", ("dapi",), r"dapi[a-f0-9]{32}(?:-[0-9])?"),
    # Grafana: Cloud API tokens (base64 of JSON) and service account tokens.
    F("grafana_cloud", ("glc_",), r"glc_[A-Za-z0-9+/]{32,}={0,2}"),
    F("grafana_service_account", ("glsa_",), r"glsa_" + A62 + "{32}_[a-fA-F0-9]{8}"),
    F("shopify", ("shpat_", "shpca_", "shppa_", "shpss_"), r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    F("planetscale", ("pscale_tkn_", "pscale_pw_", "pscale_oauth_"),
      r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}"),
    # 1Password: service account tokens (ops_ + base64 of JSON) and account secret keys.
    F("onepassword_service_account", ("ops_",), r"ops_eyJ[A-Za-z0-9+/=_-]{100,}"),
    F("onepassword_secret_key", ("A3-",),
      r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{6}|[A-Z0-9]{11})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"),
    F("twilio_api_key", ("SK",), r"SK[0-9a-fA-F]{32}"),
    F("twilio_account_sid", ("AC",), r"AC[0-9a-f]{32}"),
    F("sendgrid", ("SG.",), r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    F("mailgun", ("key-",), r"key-[0-9a-f]{32}"),
    F("flutterwave", ("FLWSECK-", "FLWSECK_TEST-"),
      r"FLWSECK(?:_TEST)?-[0-9a-f]{32}-X"),
    F("flutterwave_encryption", ("FLWSECK_TEST",), r"FLWSECK_TEST[0-9a-f]{12}"),
    F("doppler", ("dp.",),
      r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,44}"),
    F("pulumi", ("pul-",), r"pul-" + HEXL + "{40}"),
    F("linear", ("lin_api_", "lin_oauth_"), r"lin_(?:api|oauth)_" + A62 + "{40,}"),
    F("notion", ("secret_", "ntn_"), r"(?:secret_" + A62 + "{43}|ntn_[0-9]{11}" + A62 + "{35})"),
    F("postman", ("PMAK-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    F("atlassian", ("ATATT", "ATCTT"), r"AT[AC]TT3[A-Za-z0-9_=-]{150,}"),
    F("digitalocean", ("dop_v1_", "doo_v1_", "dor_v1_"), r"do[opr]_v1_" + HEXL + "{64}"),
    F("heroku", ("HRKU-",), r"HRKU-[A-Za-z0-9_-]{20,}"),
    F("vault", ("hvs.", "hvb.", "hvr."), r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    F("terraform_cloud", ("atlasv1",), r"" + A62 + r"{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),
    F("sentry_org", ("sntrys_",), r"sntrys_eyJ[A-Za-z0-9+/=_-]{40,}"),
    F("sentry_user", ("sntryu_",), r"sntryu_" + HEXL + "{64}"),
    F("replicate", ("r8_",), r"r8_" + A62 + "{37}"),
    F("groq", ("gsk_",), r"gsk_" + A62 + "{52}"),
    F("perplexity", ("pplx-",), r"pplx-" + A62 + "{48}"),
    F("xai", ("xai-",), r"xai-" + A62 + "{80}"),
    F("tavily", ("tvly-",), r"tvly-(?:dev-|prod-)?" + A62 + "{32}"),
    F("azure_ad_client_secret", ("Q~",), r"[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"),
    F("mapbox_secret", ("sk.eyJ",), r"sk\.eyJ[A-Za-z0-9_-]{40,}\.[A-Za-z0-9_-]{20,}"),
    F("age_secret_key", ("AGE-SECRET-KEY-1",),
      r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),   # bech32
    F("alibaba_access_key", ("LTAI",), r"LTAI" + A62 + "{12,20}"),
    F("tencent_secret_id", ("AKID",), r"AKID" + A62 + "{32}"),
    F("adafruit_io", ("aio_",), r"aio_" + A62 + "{28}"),
    F("buildkite", ("bkua_",), r"bkua_" + HEXL + "{40}"),
    F("circleci", ("CCIPAT_",), r"CCIPAT_" + A62 + "{22}_" + HEXL + "{40}"),
    F("contentful", ("CFPAT-",), r"CFPAT-[A-Za-z0-9_-]{43}"),
    F("dynatrace", ("dt0c01.",), r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    F("easypost", ("EZAK", "EZTK"), r"EZ[AT]K" + A62 + "{54}"),
    F("flyio", ("fo1_", "fm1a_", "fm1r_", "fm2_"), r"f(?:o1|m1[ar]|m2)_[A-Za-z0-9_+/=-]{40,}"),
    F("frameio", ("fio-u-",), r"fio-u-[A-Za-z0-9_=-]{64}"),
    F("newrelic", ("NRAK-", "NRII-", "NRJS-", "NRRA-"), r"NR(?:AK|II|JS|RA)-[A-Za-z0-9]{27,}"),
    F("pypi", ("pypi-AgEIcHlwaS5vcmc",), r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
    F("rubygems", ("rubygems_",), r"rubygems_" + HEXL + "{48}"),
    F("shippo", ("shippo_live_", "shippo_test_"), r"shippo_(?:live|test)_" + HEXL + "{40}"),
    F("square", ("sq0atp-", "sq0csp-", "EAAA"),
      r"(?:sq0atp-[A-Za-z0-9_-]{22}|sq0csp-[A-Za-z0-9_-]{43}|EAAA[A-Za-z0-9_-]{60})"),
    F("typeform", ("tfp_",), r"tfp_[A-Za-z0-9_.=-]{59,}"),
    F("readme", ("rdme_",), r"rdme_[a-z0-9]{70}"),
    F("prefect", ("pnu_",), r"pnu_" + A62 + "{36}"),
    F("clojars", ("CLOJARS_",), r"CLOJARS_[a-z0-9]{60}"),
    F("docker_hub", ("dckr_pat_", "dckr_oat_"), r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}"),
    F("langsmith", ("lsv2_pt_", "lsv2_sk_"), r"lsv2_(?:pt|sk)_" + HEXL + "{32}_" + HEXL + "{10}"),
    F("supabase", ("sbp_", "sb_secret_"), r"(?:sbp_" + HEXL + "{40}|sb_secret_[A-Za-z0-9_-]{31,})"),
    F("netlify", ("nfp_",), r"nfp_" + A62 + "{36}"),
    F("render", ("rnd_",), r"rnd_" + A62 + "{32}"),
    F("nvidia_ngc", ("nvapi-",), r"nvapi-[A-Za-z0-9_-]{64}"),
    F("pinecone", ("pcsk_",), r"pcsk_" + A62 + "{4,8}_" + A62 + "{50,}"),
    F("brevo", ("xkeysib-", "xsmtpsib-"), r"x(?:keysib|smtpsib)-" + HEXL + "{64}-" + A62 + "{16}"),
    # (its run of `A` is base64 of zero bytes: not inside a longer base64 blob)
    F("twitter_bearer", ("AAAAAAAAAAAAAAAAAAAA",), r"(?<![+/])A{20,24}[B-Za-z0-9%]"
      r"[A-Za-z0-9%]{29,}(?![+/=])"),
    F("meta_access_token", ("EAAC", "EAAG", "EAAI", "EAAB"), r"EAA[BCGI]" + A62 + "{80,}"),
    F("dropbox", ("sl.",), r"sl\.[A-Za-z0-9_-]{130,}"),
    F("jfrog", ("AKCp",), r"AKCp" + A62 + "{69}"),
    F("harness", ("pat.",), r"pat\.[A-Za-z0-9_-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}"),
    F("infracost", ("ico-",), r"ico-" + A62 + "{32}"),
    F("octopus_deploy", ("API-",), r"API-[A-Z0-9]{26,}"),
    F("cloudflare_origin_ca", ("v1.0-",), r"v1\.0-" + HEXL + "{24}-" + HEXL + "{146}"),
    F("firecrawl", ("fc-",), r"fc-" + HEXL + "{32}"),
    F("scalingo", ("tk-us-",), r"tk-us-[A-Za-z0-9_-]{48}"),
)

# Families whose fixed part is inside the token: looked for where the line holds it.
INFIX = {"terraform_cloud": ".atlasv1.", "azure_ad_client_secret": "Q~"}
# The dict a line's words are looked up in: a word's first two characters -> families.
BY_START = {}   # type: Dict[str, List[Family]]
for _family in FAMILIES:
    if _family.name in INFIX:
        continue
    for _prefix in _family.prefixes:
        _listed = BY_START.setdefault(_prefix[:2], [])
        if _family not in _listed:
            _listed.append(_family)
INFIX_FAMILIES = tuple((infix, family) for family in FAMILIES
                       for name, infix in INFIX.items() if family.name == name)
AWS_KEY_ID = next(family for family in FAMILIES if family.name == "aws_access_key_id")

# A word of the line: where a token may start (after no letter or digit).
WORD_START = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]")
# An AWS secret access key: 40 characters of base64, next to its key id.
AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
# A Discord bot token: base64 of the bot's id, a timestamp, an HMAC; no fixed prefix.
DISCORD_BOT = re.compile(r"(?<![A-Za-z0-9_-])[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}"
                         r"\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])")


def token_spans(line: str) -> List[Tuple[int, int]]:
    """(start, end) of each vendor token in the line, placeholders left out."""
    spans = []   # type: List[Tuple[int, int]]
    for start in WORD_START.finditer(line):
        at = start.start()
        for family in BY_START.get(line[at:at + 2], ()):
            match = family.pattern.match(line, at)
            if match is not None and accepted(family, match.group()):
                spans.append(match.span())
                break
    for infix, family in INFIX_FAMILIES:
        if infix in line:
            spans.extend(match.span() for match in family.pattern.finditer(line)
                         if accepted(family, match.group()))
    if "." in line:
        spans.extend(match.span() for match in DISCORD_BOT.finditer(line)
                     if discord_id(match.group()) and generated(match.group()) and
                     not is_placeholder(match.group()))
    if any(line[start:end][:4] in AWS_KEY_ID.prefixes for start, end in spans):
        spans.extend(match.span() for match in AWS_SECRET.finditer(line)
                     if generated(match.group()) and not is_placeholder(match.group()))
    return spans


def discord_id(token: str) -> bool:
    """A Discord bot token opens with base64 of its bot's id: a snowflake, 17 to 20 digits."""
    snowflake = decoded(token.split(".", 1)[0])
    return 17 <= len(snowflake) <= 20 and snowflake.isdigit()


def accepted(family: Family, token: str) -> bool:
    """A token of a fixed-prefix family is one unless it is a placeholder; where the family
    has a checksum, a token that fails it must look generated too."""
    if is_placeholder(token):
        return False
    if family.checksum is not None and not family.checksum(token):
        return generated(token)
    return True


def mask_tokens(line: str, mask: Callable[[str], str]) -> str:
    """The line with each vendor token replaced by mask(token)."""
    spans = token_spans(line)
    if not spans:
        return line
    out = []   # type: List[str]
    done = 0
    for start, end in sorted(spans):
        if start < done:
            continue   # inside a token already masked
        out.append(line[done:start])
        out.append(mask(line[start:end]))
        done = end
    out.append(line[done:])
    return "".join(out)


def shannon_bits(value: str) -> float:
    counts = [value.count(char) for char in set(value)]
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts)


def generated(value: str) -> bool:
    """Random enough to be a generated credential: letters and digits mixed, high entropy."""
    kinds = sum(1 for kind in ("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                               "0123456789") if any(char in kind for char in value))
    return kinds >= 2 and shannon_bits(value) >= min(4.0, 0.75 * math.log2(len(value)))


# ---- placeholders ------------------------------------------------------------------------

# Words that say a value is a fill-in, not a value (lower case; `xxxx` as written).
PLACEHOLDER_WORDS = ("example", "placeholder", "changeme", "change_me", "change-me",
                     "replace_me", "replaceme", "replace-me", "your_", "your-", "yourtoken",
                     "yourkey", "yourapikey", "yoursecret", "yourpassword", "_here", "-here",
                     "redacted", "dummy", "notreal", "not_real", "not-a-real", "insert_",
                     "<", "{{", "${")
# The vendors' own published samples (AWS's documentation keys hold EXAMPLE already).
PUBLISHED_SAMPLES = frozenset((
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc",   # Stripe's documented test key
))
LONGEST_PLACEHOLDER = 256   # a key's PEM block or base64 is no fill-in, whatever it holds
REPEATED = re.compile(r"(.)\1{7,}")
LEADING_RUN = re.compile(r"A{8,}")   # base64 of zero bytes: a real token may start so


@functools.lru_cache(maxsize=1024)
def is_placeholder(value: str) -> bool:
    """Documentation's fill-in or sample, kept as it is: `AKIAIOSFODNN7EXAMPLE`,
    `ghp_xxxxxxxx...`, `your_token_here`, `<token>`, `changeme`, `sk-000000...`."""
    if len(value) > LONGEST_PLACEHOLDER or "\n" in value or "://" in value or "@" in value:
        return False   # a URL's example host says nothing of the password in it
    if value in PUBLISHED_SAMPLES:
        return True
    lowered = value.lower()
    if "xxxx" in value or "XXXX" in value or any(word in lowered for word in PLACEHOLDER_WORDS):
        return True
    body = LEADING_RUN.sub("", value, count=1) if value.startswith("A") else value
    body = body.split("_")[-1] if len(body.split("_")[-1]) >= 8 else body
    if REPEATED.search(body) or (len(body) >= 8 and len(set(body)) <= 2):
        return True
    return False


# ---- encodings ----------------------------------------------------------------------------

# base64 of a JWT (`eyJ` -> `ZXlK`), base64 of that (`WlhsS`), base64 of base64 of a PEM
# private key (`LS0tLS1CRUdJTi` -> `TFMwdExTMUNSVWRKVGl`): each at the start of a value.
ENCODED_START = re.compile(r"(?<![A-Za-z0-9+/_-])(?:ZXlK|WlhsS|TFMwdExTMUNSVWRKVGl)"
                           r"[A-Za-z0-9+/_-]{30,}={0,2}")
JWT_TEXT = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
PRIVATE_KEY_TEXT = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY")


def decoded(value: str) -> str:
    import base64  # on use: most lines hold no encoded value

    padded = value + "=" * (-len(value) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"))
    except (binascii.Error, ValueError):
        return ""
    return raw.decode("ascii", "replace")


def holds_encoded_secret(value: str) -> bool:
    """base64 (once or twice) of a JWT or of a private key's PEM text."""
    for _ in range(2):
        value = decoded(value).strip()
        if JWT_TEXT.match(value) or PRIVATE_KEY_TEXT.match(value):
            return True
    return False


def mask_encoded(line: str, mask: Callable[[str], str]) -> str:
    """Each base64 of a JWT or of a private key in the line replaced by mask(value)."""
    return ENCODED_START.sub(lambda match: mask(match.group()) if
                             holds_encoded_secret(match.group()) else match.group(), line)


# ---- Kubernetes Secrets ---------------------------------------------------------------------

SECRET_KIND = re.compile(r"""^[ \t+-]*["']?kind["']?[ \t]*:[ \t]*["']?Secret["']?[ \t,]*$""",
                         re.MULTILINE)
SECRET_MAP = re.compile(r"^(?P<indent>[ \t+-]*)(?:data|stringData)[ \t]*:[ \t]*$")
SECRET_ENTRY = re.compile(r"^(?P<indent>[ \t+-]*)(?P<name>[\w.-]+)[ \t]*:[ \t]*"
                          r"(?P<value>\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[^\s#|>\"'][^\n]*?)"
                          r"[ \t]*(?:[ \t]#.*)?$")


SECRET_KIND_FORMS = (b"kind: Secret", b'kind: "Secret"', b"kind: 'Secret'")
DOCUMENT_REACH = 1 << 16   # how far from its `kind:` a Secret's data is looked for


def secret_documents(data: bytes) -> List[Tuple[int, int]]:
    """(start, end) of each YAML document around a line `kind: Secret` (a patch's `+` line
    too), each to the `---` that bounds it or DOCUMENT_REACH bytes: never the whole text."""
    spans = []   # type: List[Tuple[int, int]]
    for form in SECRET_KIND_FORMS:
        at = data.find(form)
        while at >= 0:
            line_start = data.rfind(b"\n", 0, at) + 1
            if not data[line_start:at].strip(b" \t+-"):
                above = data.rfind(b"\n---", max(0, at - DOCUMENT_REACH), at)
                below = data.find(b"\n---", at, at + DOCUMENT_REACH)
                spans.append((max(0, at - DOCUMENT_REACH) if above < 0 else above + 1,
                              min(len(data), at + DOCUMENT_REACH) if below < 0 else below))
            at = data.find(form, at + len(form))
    return sorted(spans)


def mask_kubernetes_secrets(text: str, mask: Callable[[str], str]) -> str:
    """In a YAML document of `kind: Secret`, each value under `data:` and `stringData:`
    (what they hold is the secret, whatever its name and shape)."""
    if not SECRET_KIND.search(text):
        return text
    lines = text.split("\n")
    under = None   # type: Optional[int]
    for number, line in enumerate(lines):
        opened = SECRET_MAP.match(line)
        if opened is not None:
            under = indent_of(opened.group("indent"))
            continue
        if under is None or not line.strip(" \t+-"):
            continue
        entry = SECRET_ENTRY.match(line)
        if entry is None or indent_of(entry.group("indent")) <= under:
            under = None   # the map ended: `metadata:`, `type: Opaque`...
            continue
        value = entry.group("value").strip("'\"")
        if value and "<secret" not in value and not is_placeholder(value):
            at = entry.start("value")
            lines[number] = line[:at] + line[at:].replace(value, mask(value), 1)
    return "\n".join(lines)


def indent_of(prefix: str) -> int:
    """A YAML line's indent, a patch's `+`/`-` and a list's `- ` left out."""
    return len(prefix.lstrip("+-"))
