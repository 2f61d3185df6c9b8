"""util.escaped, the one escape of bytes that are not UTF-8: what it writes, and that it is
stable (the same for bytes and for Python's str of them, unchanged when applied again) and
round-trips; util.run_forked, a probe run in a fork of the agent's process."""
from __future__ import annotations

import os
import re
import signal
import sys
import time

import pytest

from envsnap.agent.util import CollectorError, escaped, escaped_document, run, run_forked

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



# ---- util.run_forked: a probe run by a fork of this process, as util.run runs a python ----

def test_a_forked_probe_gives_its_output_exit_and_arguments_as_a_python_run_would() -> None:
    code, out, err = run_forked("probe", "import sys\nsys.stdout.write(' '.join(sys.argv))\n"
                                "sys.stderr.write('said')\nsys.exit(3)", ["a", "b c"])
    assert (code, out, err) == (3, b"-c a b c", b"said")
    code, out, err = run_forked("probe", "raise ValueError('boom')", [])
    assert (code, out, err) == (1, b"", b"ValueError: boom\n")


@pytest.mark.parametrize("ending, said", [
    ("sys.exit()", (0, b"")), ("sys.exit(None)", (0, b"")), ("sys.exit(0)", (0, b"")),
    ("sys.exit(4)", (4, b"")), ("sys.exit('gave up')", (1, b"gave up\n")),
])
def test_a_forked_probe_exits_as_the_same_source_run_by_python(ending: str,
                                                               said: tuple[int, bytes]) -> None:
    source = "import sys\n" + ending
    assert run_forked("probe", source, [])[::2] == said
    assert run([sys.executable, "-I", "-S", "-c", source])[::2] == said


def test_a_probe_that_crashes_takes_only_its_fork() -> None:
    code, out, _ = run_forked("probe", "import os, signal, sys\nsys.stdout.write('before')\n"
                              "sys.stdout.flush()\nos.kill(os.getpid(), signal.SIGSEGV)", [])
    assert (code, out) == (-signal.SIGSEGV, b"before")   # as subprocess says a signal


def test_a_probe_that_hangs_is_killed_at_its_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(CollectorError, match="^the probe timed out after 1s$"):
        run_forked("the probe", "import time\ntime.sleep(30)", [], timeout=1.0)
    assert time.monotonic() - started < 10


def test_the_fork_holds_none_of_this_process_s_files_open() -> None:
    """A pipe this process holds (a collector's result pipe to the runner) is closed in the
    fork: the runner's reading ends when the collector's does, whatever the probe does."""
    read_end, write_end = os.pipe()
    try:
        _, out, _ = run_forked("probe", "import os, sys\ntry:\n    os.fstat(int(sys.argv[1]))\n"
                               "    print('open')\nexcept OSError:\n    print('closed')",
                               [str(write_end)])
    finally:
        os.close(read_end)
        os.close(write_end)
    assert out == b"closed\n"
