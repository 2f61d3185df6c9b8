"""The vendor token table (envsnap/agent/vendors.py) and its place in the detector."""
from __future__ import annotations

import base64
import random
import string
import zlib

import pytest

from envsnap.agent import redact, vendors

rng = random.Random(41)


def checksummed(prefix: str, good: bool = True) -> str:
    body = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(30))
    check = vendors.base62(zlib.crc32(body.encode()) ^ (0 if good else 1), 6)
    return prefix + body + check


def test_the_table_is_wide_and_every_prefix_is_looked_up() -> None:
    assert len(vendors.FAMILIES) >= 60
    assert len({family.name for family in vendors.FAMILIES}) == len(vendors.FAMILIES)
    for family in vendors.FAMILIES:
        assert family.prefixes and family.pattern.pattern
        if family.name not in vendors.INFIX:
            assert all(family in vendors.BY_START[prefix[:2]] for prefix in family.prefixes)


def test_github_checksum() -> None:
    assert vendors.crc32_base62_ok(checksummed("ghp_"))
    assert not vendors.crc32_base62_ok(checksummed("ghp_", good=False))


def test_the_checksum_decides_for_a_plain_body() -> None:
    """npm's tokens carry GitHub's checksum: a plain body with it is a token, without it a
    made-up string."""
    body = "abcdabcdabcdabcdabcdabcdabcdab"
    token = "npm_" + body + vendors.base62(zlib.crc32(body.encode()), 6)
    assert token not in redact.redact_text(f"  - {token}")
    made_up = "npm_" + body + "abcdab"
    assert redact.redact_text(f"  - {made_up}") == f"  - {made_up}"


@pytest.mark.parametrize("line", [
    "<apiKey>{}</apiKey>", "System.setProperty(\"x\", \"{}\");", "  - {}", "ref,{},active",
    "$cfg['a'] .= '{}';", "step 3: loaded {} ok"])
def test_vendor_tokens_are_masked_in_any_syntax(line: str) -> None:
    for token in (checksummed("npm_"), "glrt-" + "aB3_dE6-gH9jK2mN5pQ8", "dapi" + "0a9b8c7d" * 4,
                  "ABIA" + "QWERTYUIOPASDFG2", "sk-svcacct-" + "Ab3dE6gH9j" * 5):
        assert token not in redact.redact_text(line.format(token))


@pytest.mark.parametrize("value", [
    "AKIAIOSFODNN7EXAMPLE", "ghp_" + "x" * 36, "sk-proj-" + "0" * 48, "your_token_here",
    "<token>", "changeme", "REPLACE_ME", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"])
def test_placeholders_are_kept(value: str) -> None:
    assert vendors.is_placeholder(value)
    assert redact.redact_text(f"token: {value}") == f"token: {value}"


def test_no_url_is_a_placeholder_for_its_example_host() -> None:
    assert not vendors.is_placeholder("https://u:a9Kq2mX7@cache.example.com")


def test_base64_of_a_jwt_once_and_twice_is_masked() -> None:
    jwt = ("eyJhbGciOiJIUzI1NiJ9." +
           base64.urlsafe_b64encode(b'{"sub":"k3Qz9"}').decode().rstrip("=") + ".c2lnbmF0dXJlX3g")
    once = base64.b64encode(jwt.encode()).decode()
    twice = base64.b64encode(once.encode()).decode()
    for value in (once, twice):
        assert value not in redact.redact_text(f"TOKEN_BLOB {value}")
    text = base64.b64encode(b"the quick brown fox jumps over the lazy dog").decode()
    assert redact.redact_text(f"note: {text}") == f"note: {text}"


def test_kubernetes_secret_values_are_masked_and_a_config_map_kept() -> None:
    text = ("kind: Secret\ndata:\n  a: cGFzc3dvcmQ=\nstringData:\n  b: \"p#ss w0rd\"\n"
            "metadata:\n  name: db\n---\nkind: ConfigMap\ndata:\n  c: plain-value\n")
    shown = redact.redact_text(text)
    assert "cGFzc3dvcmQ=" not in shown and "p#ss w0rd" not in shown
    assert "name: db" in shown and "c: plain-value" in shown
