"""envsnap/fold.py: lines broken at spaces to a width, continuations deeper, key phrases and
a number with its unit never split, an unbreakable token alone on its line."""
from __future__ import annotations

import random

from envsnap.fold import GLUE, fold, fold_all, folded, keep, plain, shown_width


def test_a_line_that_fits_is_left_as_it_is() -> None:
    assert fold("  step 1   abc  x", 40) == ["  step 1   abc  x"]
    assert fold("a" * 80, 80) == ["a" * 80]


def test_a_long_line_breaks_at_spaces_with_its_continuations_deeper() -> None:
    line = "    evidence: " + " ".join(f"word{i}" for i in range(30))
    lines = fold(line, 40)
    assert all(len(part) <= 40 for part in lines) and len(lines) > 1
    assert lines[0].startswith("    evidence: word0")
    assert all(part.startswith(" " * 8) and part[8] != " " for part in lines[1:])
    assert " ".join(part.strip() for part in lines) == line.strip()


def test_a_continuation_stands_where_the_caller_says() -> None:
    lines = fold("name      " + "value " * 20, 40, under=10)
    assert all(part.startswith(" " * 10) and part[10] != " " for part in lines[1:])
    assert fold("flush paragraph " * 6, 40, under=0)[1][0] != " "


def test_an_unbreakable_token_stands_alone_longer_than_the_width() -> None:
    path = "/home/someone/" + "very-long-folder-name/" * 5 + "kernel.py"
    lines = fold(f"  touches {path} and more", 40)
    assert lines == ["  touches", f"      {path}", "      and more"]


def test_a_key_phrase_is_one_token_and_reads_as_spaces() -> None:
    text = f"{'x' * 36} {keep('no drift')}: every fact is the same"
    lines = fold(text, 40)
    assert lines[0] == "x" * 36 and lines[1].startswith("    no drift:")
    assert GLUE not in "".join(lines)
    assert plain(keep("can't tell")) == "can't tell"
    # unglued, the same words would split after "no": what keep() is for
    assert fold(plain(text), 40)[0].endswith(" no")


def test_a_number_keeps_its_unit() -> None:
    for width in range(20, 60):
        for line in fold("the benchmark ran 12 runs of 1.5 MB in (3 s, 94.2 -> 60.2 tok/s)", width):
            last = line.split()[-1]
            assert not last[-1].isdigit() or line.endswith("tok/s)"), (width, line)


def test_a_flag_keeps_its_value() -> None:
    lines = fold(f"{'x' * 30} run envsnap restore --repo /r/sglang --at 12:00 to undo it", 40)
    assert any("--repo /r/sglang" in line for line in lines), lines
    assert not any(line.endswith(("--repo", "--at")) for line in lines), lines
    # a long value: the pair stands alone, longer than the width, whole
    path = "/" + "p" * 60
    assert f"    --repo {path}" in fold(f"restore --repo {path} --at 12:00", 40)


def test_colour_codes_take_no_room() -> None:
    red = "\x1b[31m 90\x1b[0m"
    assert shown_width(red) == 3
    assert fold(f"  {red} env " + "x" * 30, 40) == [f"  {red} env " + "x" * 30]


def test_a_whole_text_is_folded_line_by_line() -> None:
    text = "short\n" + "long words " * 10 + "\n\nend\n"
    out = folded(text, 30)
    assert out.endswith("end\n") and "\n\n" in out
    assert all(len(line) <= 30 for line in out.splitlines())
    assert fold_all(["a\nb"], 30) == ["a", "b"]


def test_random_widths_and_paths_never_split_a_key_phrase() -> None:
    """Seeded: widths 40..200, paths of every length before the phrase; no line ends at the
    phrase's first word, and every line fits but for an unbreakable path."""
    chance = random.Random(37)
    phrases = ("no drift", "no effect", "can't tell", "NOT restored", "--host gpu-node-7")
    for _ in range(2000):
        width = chance.randint(40, 200)
        path = "/" + "/".join("d" * chance.randint(1, 12) for _ in range(chance.randint(1, 12)))
        phrase = chance.choice(phrases)
        text = (f"code moved: {chance.randint(1, 500)} commits pulled into {path} "
                f"(touches {path}); {keep(phrase)}: every compared fact is the same.")
        lines = fold(text, width, under=0)
        first = phrase.split()[0]
        assert not any(line.endswith(f" {first}") for line in lines), (width, lines)
        assert phrase in "\n".join(lines)
        assert all(len(line) <= width or " " not in line.strip() for line in lines), lines
