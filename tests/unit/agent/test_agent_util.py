"""util.escaped, the one escape of bytes that are not UTF-8: what it writes, and that it is
stable (the same for bytes and for Python's str of them, unchanged when applied again) and
round-trips."""
from __future__ import annotations

import os
import re

import pytest

from envsnap.agent.util import escaped, escaped_document

SAMPLES = [b"IN\xffFO", b"ml\xe9x5", b"\x80\xfe/\xc3", "ÿ ok".encode(), b"plain", b""]


def unescaped(text: str) -> bytes:
    """The inverse the docstring promises: each \\xNN (80 to ff) back to its byte."""
    return re.sub(rb"\\x([89a-f][0-9a-f])", lambda m: bytes([int(m.group(1), 16)]),
                  text.encode("utf-8"))


@pytest.mark.parametrize("raw", SAMPLES)
def test_bytes_and_their_str_escape_alike_and_round_trip(raw: bytes) -> None:
    text = escaped(raw)
    text.encode("utf-8")   # always writable as UTF-8 (YAML, JSON, a terminal)
    assert escaped(os.fsdecode(raw)) == text   # os.environ's str of the bytes
    assert escaped(text) == text               # stable: escaping again changes nothing
    assert unescaped(text) == raw


def test_what_it_writes() -> None:
    assert escaped(b"IN\xffFO") == "IN\\xffFO"
    assert escaped("ÿ") == "ÿ"   # valid UTF-8 stays as it is
    assert escaped("\ud800") == "\\xed\\xa0\\x80"   # a surrogate no byte made


def test_every_string_of_the_agents_output_is_escaped_keys_too() -> None:
    document = {"shell": {"NCCL_S\udcffHELL": ["IN\udcffFO", 1]}, "cwd": "/tmp/\udcfd"}
    assert escaped_document(document) == {"shell": {"NCCL_S\\xffHELL": ["IN\\xffFO", 1]},
                                          "cwd": "/tmp/\\xfd"}

