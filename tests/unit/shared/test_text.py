"""The text module (envsnap/text.py): one markdown escaper, one JSON writer, one time format."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from envsnap.text import dump_json, markdown_cell, markdown_code, name_stamp, timestamp


def test_a_markdown_cell_cannot_end_the_cell_open_a_tag_or_emphasise() -> None:
    assert markdown_cell("a|b <img src=x> *x* \\n\nnext") == \
        "a\\|b &lt;img src=x> \\*x\\* \\\\n next"


def test_a_markdown_cell_makes_no_link_image_or_mention_and_keeps_plain_words() -> None:
    assert markdown_cell("![x](y) [a](b)") == "!\\[x\\](y) \\[a\\](b)"
    assert markdown_cell("see https://e.x/p, www.e.x @bob a@b.c") == \
        "see `https://e.x/p,` `www.e.x` `@bob` `a@b.c`"
    assert markdown_cell("stash@{0} user@gpu-box &amp; R&D") == \
        "stash@{0} user@gpu-box &amp;amp; R&D"
    assert markdown_cell("a\rb") == "a b"
    assert markdown_cell("<b>@bob</b> *x*", html=True) == \
        "&lt;<code>b&gt;@bob</code>&lt;/b&gt; *x*"


def test_a_code_span_shows_its_text_as_is_except_what_the_table_reads() -> None:
    assert markdown_code("env.NCCL_*<x>") == "`env.NCCL_*<x>`"
    assert markdown_code("a|b\nc") == "`a\\|b c`"
    assert markdown_code("a\rb") == "`a b`"
    assert markdown_code("x `y` ``z`` w") == "```x `y` ``z`` w```"
    assert markdown_code("x `y`") == "`` x `y` ``"
    assert markdown_code("`edge") == "`` `edge ``"


def test_json_is_indented_sorted_and_takes_what_json_has_no_type_for() -> None:
    text = dump_json({"b": 1, "a": [Path("/x")]})
    assert text == '{\n  "a": [\n    "/x"\n  ],\n  "b": 1\n}\n'
    assert json.loads(text) == {"a": ["/x"], "b": 1}


def test_a_moment_is_written_in_utc_to_the_second() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=timezone.utc)
    assert timestamp(when) == "2026-01-02T03:04:05+00:00"
    assert name_stamp(when) == "20260102-030405"
    now = datetime.fromisoformat(timestamp())
    assert now.tzinfo is not None and abs(datetime.now(timezone.utc) - now) < timedelta(5)


def test_visible_escapes_every_control_and_keeps_the_rest() -> None:
    from envsnap.text import visible, visible_line

    assert visible("a\r\x1b[2Kb\x07\x7f\x9b\u202e\u200b\ufeff\U000e0041\udc80\n\tok é") == \
        "a\\r\\x1b[2Kb\\x07\\x7f\\x9b\\u202e\\u200b\\ufeff\\U000e0041\\udc80\n\tok é"
    assert visible_line("run\nthis\tnow") == "run\\nthis\\tnow"
    assert visible("plain text, no controls") == "plain text, no controls"
