"""Redaction at capture time: secrets never leave the host, so they never reach a disk.

A snapshot is made to be attached to a public bug report; what looks like a credential is
replaced by a plain marker. No hash of it is kept either: a short hash of a weak password
would let anyone confirm a guess.
"""
from __future__ import annotations

import re
from typing import List

REDACTED = "<redacted>"

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PASSWD|CREDENTIAL|AUTH|(^|_)KEY($|_)|API_?KEY|"
                         r"PRIVATE", re.IGNORECASE)
SECRET_VALUE = re.compile(
    r"hf_[A-Za-z0-9]{20,}"                          # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{20,}"                  # GitHub
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|(AKIA|ASIA)[A-Z0-9]{16}"                     # AWS access key id
    r"|sk-[A-Za-z0-9_-]{20,}"                       # OpenAI-style
    r"|xox[abpr]-[A-Za-z0-9-]{10,}"                 # Slack
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWT
)
URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
SECRET_FLAG = re.compile(r"^--?[\w-]*(token|secret|password|passwd|api[-_]?key|auth)[\w-]*$",
                         re.IGNORECASE)


def mask_secret(_value: str) -> str:
    return REDACTED


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact_text(text: str) -> str:
    """Mask credential-looking tokens and URL passwords inside free text."""
    text = SECRET_VALUE.sub(lambda m: mask_secret(m.group(0)), text)
    return redact_url(text)


def redact_url(url: str) -> str:
    """https://user:pass@host/x -> https://user:<redacted>@host/x (a bare token user too)."""
    def mask(match: "re.Match[str]") -> str:
        user, _, password = match.group("userinfo").partition(":")
        if password:
            return "%s%s:%s@" % (match.group("scheme"), user, REDACTED)
        return "%s%s@" % (match.group("scheme"), REDACTED if len(user) >= 20 else user)
    return URL_CREDENTIALS.sub(mask, url)


def redact_env_value(name: str, value: str) -> str:
    if is_secret_name(name) or SECRET_VALUE.search(value):
        return mask_secret(value)
    return redact_url(value)


def redact_argv(argv: List[str]) -> List[str]:
    """Mask the value after --token/--api-key style flags, and secrets anywhere else."""
    out: List[str] = []
    hide_next = False
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if hide_next:
            out.append(mask_secret(arg))
        elif eq and SECRET_FLAG.match(flag):
            out.append("%s=%s" % (flag, mask_secret(value)))
        else:
            out.append(redact_text(arg))
        hide_next = not eq and bool(SECRET_FLAG.match(arg))
    return out


ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*$")
QUOTED_LITERAL = re.compile(r"""(?P<q>['"])(?P<body>(?:\\.|(?!(?P=q)).)*)(?P=q)""")


def redact_code(text: str) -> str:
    """Source text (sitecustomize, .pth): on lines naming a secret, mask the string literals.

    `os.environ["HF_TOKEN"] = "weak"` keeps the name and hides the value, which no value
    pattern would catch; literals shaped like variable names (HF_TOKEN) are kept.
    """
    def mask(match: "re.Match[str]") -> str:
        if ENV_NAME.match(match.group("body")):
            return match.group(0)
        return "%s%s%s" % (match.group("q"), REDACTED, match.group("q"))
    lines = [QUOTED_LITERAL.sub(mask, line) if is_secret_name(line) else line
             for line in text.split("\n")]
    return redact_text("\n".join(lines))
