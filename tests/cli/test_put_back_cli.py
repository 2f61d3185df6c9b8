"""explain and bisect with a benchmark that leaves files in the checkout, as real ones do.

The benchmark (written below) imports a module of the checkout with bytecode writing on, as
every user has it, so python writes `__pycache__/` there, and it writes results.json into
the checkout after each run. The user ran it once before (so both are already there, as
their own untracked or ignored files, with content of their own) and keeps notes of their
own. The trials write those paths again: the answer must still be printed, the benchmark's
files set aside, and the user's files back with their own content; a put-back that truly
cannot finish prints the answer, the commands that finish it and its own exit code. The
run's journal keeps every trial, masked as a snapshot is, and an interrupted record after
Ctrl-C, once the checkout is back as found.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import stat
import string
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from conftest import Cli
from helpers.folded import words
from helpers.gitrepos import Repo, git_env, init

from envsnap.bisect.workfiles import COPY_LIMIT
from envsnap.errors import ExitCode

METRIC = r"steps/s ([0-9.]+)"
# The module's speed, read by the benchmark through an import: bytecode is written for it.
# Of unequal sizes: python trusts bytecode whose source has the same size and mtime second.
FAST, SLOW = "STEPS = 94.0\n", "STEPS = 47.0  # slow\n"
BENCH_SOURCE = '''"""A benchmark that leaves files in the checkout it runs in."""
import json
import os
import random
import sys

sys.path.insert(0, os.getcwd())
import model  # noqa: E402  (the checkout's: python writes __pycache__/ beside it)

value = model.STEPS * random.uniform(0.99, 1.01)
with open("results.json", "w") as out:
    json.dump({"steps_per_s": value, "pid": os.getpid()}, out)
print(f"steps/s {value:.2f}")
'''


class Checkout:
    """A checkout, GOOD captured at a fast commit and BAD after a slow pull, and the user's
    own files: notes, and what their last run of the benchmark left (bytecode, results)."""

    def __init__(self, root: Path, cli: Cli, ignore: str | None) -> None:
        (root / "home").mkdir(parents=True)
        self.root = root
        self.repo: Repo = init(root / "repo", git_env(root / "home"))
        files = {"model.py": FAST, "README.md": "app\n"}
        if ignore is not None:
            files[".gitignore"] = ignore
        self.good = self.repo.commit("Initial", files)
        self.bench_path = root / "bench.py"
        self.bench_path.write_text(BENCH_SOURCE)
        # bytecode on, whatever the environment running the tests asked for
        self.cmd = f"env -u PYTHONDONTWRITEBYTECODE {sys.executable} {self.bench_path}"
        self.capture(cli, "good")
        self.pulled = [self.repo.commit("Refactor", {"util.py": "U = 1\n"}),
                       self.repo.commit("Slow the model", {"model.py": SLOW}),
                       self.repo.commit("Docs", {"README.md": "app\nsee docs\n"})]
        self.capture(cli, "bad")
        self.run_by_hand()
        self.repo.write("notes.txt", "my own notes\n")
        self.repo.write("results.json", '{"mine": "the run I keep"}\n')

    def capture(self, cli: Cli, label: str) -> None:
        result = cli("capture", "local", "--label", label, "--repo", str(self.repo.path))
        assert result.returncode == 0, result.stdout + result.stderr

    def run_by_hand(self) -> None:
        subprocess.run(self.cmd, shell=True, cwd=self.repo.path, check=True,
                       capture_output=True, env={k: v for k, v in os.environ.items()
                                                 if k != "PYTHONDONTWRITEBYTECODE"})
        assert list((self.repo.path / "__pycache__").glob("model.*.pyc"))

    def fingerprint(self) -> tuple[dict[str, str], str, str, str, str, str]:
        """Every file of the worktree (tracked, untracked, ignored) with its content, the
        index, refs, HEAD, the stash list, the status with ignored files."""
        files = {}
        for path in sorted(self.repo.path.rglob("*")):
            if ".git" in path.relative_to(self.repo.path).parts or not path.is_file():
                continue
            files[str(path.relative_to(self.repo.path))] = \
                hashlib.sha256(path.read_bytes()).hexdigest()
        return (files, self.repo.git("symbolic-ref", "HEAD"), self.repo.git("show-ref"),
                self.repo.git("ls-files", "--stage"),
                self.repo.git("stash", "list", "--format=%H %gs"),
                self.repo.git("status", "--porcelain", "--ignored"))


def explain(cli: Cli, checkout: Checkout, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("explain", "good", "bad", "--cmd", checkout.cmd, "--metric", METRIC,
               "--cwd", str(checkout.repo.path), "--repeat", "3", "--yes", *extra,
               timeout=300)


def bisect(cli: Cli, checkout: Checkout, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli("bisect", "good", "bad", "--cmd", checkout.cmd, "--metric", METRIC,
               "--cwd", str(checkout.repo.path), "--repeat", "3", *extra, timeout=300)


def journal_path(out: str) -> Path:
    """The run's journal, as its output names it."""
    found = re.search(r"journal: (\S+\.jsonl) \(each trial written as it is measured\)", out)
    assert found, out
    path = Path(found.group(1))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return path


def journal(out: str) -> list[dict[str, Any]]:
    """The run's journal, named in its output: one JSON object a line."""
    return [json.loads(line) for line in journal_path(out).read_text().splitlines()]


def answered_first(out: str) -> None:
    """The answer comes before the host is put back (explain's search puts its states back
    before the bisect of the commit range, whose answer completes explain's); what the
    benchmark wrote is moved aside (said, with where), never deleted."""
    assert out.index("first bad commit:") < out.rindex("HEAD back to"), out
    assert "moved aside to ~/.cache/envsnap/benchmark-files/" in out, out
    assert out.rindex("moved aside to") > out.index("first bad commit:")
    assert "the benchmark wrote (" in out or \
        "of yours the benchmark changed written back as they were" in out, out


# no .gitignore: the bytecode and the results are the user's untracked files (stashed);
# a .gitignore naming them: the user's ignored files (left in place, rewritten by the trials);
# --keep-untracked: untracked, left in place and rewritten too
IGNORES = pytest.mark.parametrize("ignore, extra", [
    (None, ()), ("__pycache__/\nresults.json\n", ()), (None, ("--keep-untracked",))],
    ids=["untracked", "ignored", "kept"])


Command = Callable[..., "subprocess.CompletedProcess[str]"]   # explain or bisect, above


def answered_and_put_back(cli: Cli, tmp_path: Path, ignore: str | None, command: Command,
                          *extra: str) -> tuple[Checkout, str]:
    """The story run through `command`: a regression (exit 1), the slow commit named before
    anything was put back, then the checkout as found, the user's results file with its own
    content. The checkout, and the output as one line."""
    checkout = Checkout(tmp_path / "story", cli, ignore)
    before = checkout.fingerprint()
    result = command(cli, checkout, *extra)
    assert result.returncode == 1, result.stdout + result.stderr
    out = words(result.stdout)
    assert f"first bad commit: {checkout.pulled[1]} Slow the model" in out, out
    answered_first(out)
    assert checkout.fingerprint() == before
    assert (checkout.repo.path / "results.json").read_text() == '{"mine": "the run I keep"}\n'
    return checkout, out


@IGNORES
def test_explain_answers_and_puts_back_what_the_benchmark_wrote(
        cli: Cli, tmp_path: Path, ignore: str | None, extra: tuple[str, ...]) -> None:
    checkout, out = answered_and_put_back(cli, tmp_path, ignore, explain, *extra)
    assert "cause: " in out and "3 commits" in out, out
    records = journal(out)
    trials = [record for record in records if record["event"] == "trial"]
    assert len(trials) >= 2 and all(len(trial["values"]) == 3 for trial in trials)
    assert trials[0]["differences"] == [] and trials[1]["differences"] == [1]
    steps = [record for record in records if record["event"] == "step"]
    assert [step["kind"] for step in steps][:2] == ["good", "bad"]   # the range bisected
    answer = next(record for record in records if record["event"] == "answer")
    assert answer["causes"] == [[1]] and answer["first_bad"] == checkout.pulled[1]
    assert records[-1]["event"] == "put back" and records[-1]["done"] is True


@IGNORES
def test_bisect_answers_and_puts_back_what_the_benchmark_wrote(
        cli: Cli, tmp_path: Path, ignore: str | None, extra: tuple[str, ...]) -> None:
    checkout, out = answered_and_put_back(cli, tmp_path, ignore, bisect, *extra)
    records = journal(out)
    assert [record["event"] for record in records[:3]] == ["start", "step", "step"]
    assert records[-2]["event"] == "answer" and records[-2]["first_bad"] == checkout.pulled[1]
    assert records[-1] == {"event": "put back", "done": True, "at": records[-1]["at"]}


def blocked(checkout: Checkout) -> None:
    """A benchmark that also puts a file where envsnap keeps what benchmarks write, on the
    host: nothing it writes into the checkout can be moved aside any more."""
    checkout.cmd = ("mkdir -p ~/.cache/envsnap && touch ~/.cache/envsnap/benchmark-files && "
                    + checkout.cmd)


def finish_by_hand(cli: Cli, stderr: str) -> None:
    """The commands the error line gives after `to finish:`, run as the user would."""
    line = next(line for line in stderr.splitlines() if line.startswith("envsnap: error:"))
    commands = line.split("; to finish: ", 1)[1]
    done = subprocess.run(["bash", "-c", commands], env=cli.env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("command", ["explain", "bisect"])
def test_a_put_back_that_cannot_finish_gives_the_answer_and_the_commands(
        cli: Cli, tmp_path: Path, command: str) -> None:
    checkout = Checkout(tmp_path / "story", cli, None)
    before = checkout.fingerprint()
    stash = checkout.repo.git("stash", "list")
    blocked(checkout)
    plot = tmp_path / "steps.svg"   # bisect's: explain draws none
    result = explain(cli, checkout) if command == "explain" else \
        bisect(cli, checkout, "--plot", str(plot))
    assert result.returncode == ExitCode.PUT_BACK, result.stdout + result.stderr
    out = words(result.stdout)
    if command == "explain":   # the search's answer; the commit range left to bisect by hand
        assert "cause: " in out and "which of the 3 commits: envsnap bisect good bad" in out
    else:
        assert f"first bad commit: {checkout.pulled[1]} Slow the model" in out, out
        # the answer's plot, drawn whatever the put-back left
        assert f"plot: {plot}" in out, out
        assert 'data-chart="bisect"' in plot.read_text()
        assert f"first bad: {checkout.pulled[1][:7]} Slow the model" in plot.read_text()
    error = result.stderr.split("envsnap: error: ")[1]
    assert f"{command} could not put everything back: " in error
    assert "could not move aside what the benchmark wrote: " in error
    assert "your work is safe in stash@{0}" in error
    assert f"; to finish: (cd {checkout.repo.path} && tar -cf ~/envsnap-benchmark-files-" in error
    assert f"&& git -C {checkout.repo.path} stash pop --index stash@{{0}}" in error
    # where the answer and every trial are kept, then the commands, last
    assert re.search(r"; the answer and every trial are in \S+/journals/\S+\.jsonl; to finish: ",
                     error), error
    assert journal(out)[-1]["event"] == "put back" and journal(out)[-1]["done"] is False
    # the user's work is safe: their stash is there, with their notes in it
    assert checkout.repo.git("stash", "list").count("stash@{") == stash.count("stash@{") + 1
    assert "notes.txt" in checkout.repo.git("show", "--name-only", "--format=", "stash@{0}^3")
    finish_by_hand(cli, result.stderr)
    assert checkout.fingerprint() == before


def test_a_file_of_yours_too_big_to_copy_that_the_benchmark_changes_is_named(
        cli: Cli, tmp_path: Path) -> None:
    """An ignored file of the user's bigger than envsnap copies, which the benchmark appends
    to: never read, found newer than the start, and named (exit 6), after the answer."""
    checkout = Checkout(tmp_path / "story", cli, "big.bin\n__pycache__/\nresults.json\n")
    big = checkout.repo.path / "big.bin"
    big.write_bytes(b"\0" * (COPY_LIMIT + 1))
    before = checkout.fingerprint()
    checkout.cmd = "echo more >> big.bin && " + checkout.cmd
    result = bisect(cli, checkout)
    assert result.returncode == ExitCode.PUT_BACK, result.stdout + result.stderr
    out = words(result.stdout)
    assert f"first bad commit: {checkout.pulled[1]} Slow the model" in out, out
    assert "your work is back" in out
    error = result.stderr.split("envsnap: error: ")[1]
    assert f"{big}: the benchmark changed your file, of which no copy was kept" in error
    assert "to finish:" not in error   # nothing else is left to do
    after = checkout.fingerprint()
    assert after[1:] == before[1:]
    changed = {path for path, digest in after[0].items() if before[0].get(path) != digest}
    assert changed == {"big.bin"}


def leaked(secret: str, data: bytes) -> list[str]:
    """The pieces of the secret (any six characters in a row) found in the data."""
    return [secret[at:at + 6] for at in range(len(secret) - 5)
            if secret[at:at + 6].encode() in data]


def test_the_journal_holds_no_secret_of_the_env_it_searched(cli: Cli, tmp_path: Path) -> None:
    """GOOD and BAD recorded a token in the clear (snapshots of an older envsnap, or written
    by hand: foreign, trusted), a different one each. explain searches it as a difference and
    sets it for its trials; the journal names the variable and masks both values, as a
    snapshot would, and keeps a harmless variable's values as they are."""
    checkout = Checkout(tmp_path / "story", cli, None)
    rng = random.Random(38)
    tokens = ["".join(rng.choice(string.ascii_letters + string.digits) for _ in range(32))
              for _ in range(2)]
    store = Path(cli.env["ENVSNAP_STORE"])
    for label, token, proto in (("good", tokens[0], "Simple"), ("bad", tokens[1], "LL")):
        path = store / f"{label}.yaml"
        document = yaml.safe_load(path.read_text())
        document["facts"]["env"]["shell"].update(HF_TOKEN=token, NCCL_PROTO=proto)
        path.write_text(yaml.safe_dump(document))
    result = explain(cli, checkout, "--trust-foreign")
    assert result.returncode == 1, result.stdout + result.stderr
    out = words(result.stdout)
    assert f"first bad commit: {checkout.pulled[1]} Slow the model" in out, out
    path = journal_path(out)
    for token in tokens:
        assert leaked(token, path.read_bytes()) == [], path.read_text()
    plan = next(record for record in journal(out) if record["event"] == "plan")
    assert "HF_TOKEN=<secret> in the benchmark env (was <secret>)" in plan["differences"]
    assert "NCCL_PROTO=LL in the benchmark env (was Simple)" in plan["differences"]
    trials = [record for record in journal(out) if record["event"] == "trial"]
    assert len(trials) >= 3, trials   # both variables were searched, set for their trials


def first_measured(path: Path, deadline: float) -> dict[str, Any]:
    """The journal's first trial (explain) or step (bisect) record, once it is written."""
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        for line in lines:
            if line.endswith("}") and json.loads(line)["event"] in ("trial", "step"):
                return dict(json.loads(line))
        time.sleep(0.02)
    raise AssertionError(f"no trial in {path} in time")


@pytest.mark.parametrize("command", ["explain", "bisect"])
def test_ctrl_c_after_a_trial_journals_it_and_puts_the_checkout_back(
        cli: Cli, tmp_path: Path, command: str) -> None:
    """SIGINT once the journal holds a trial, while the next one runs (each run takes a
    while): exit 130, the checkout as found, and the journal's last record says it was
    interrupted, with every trial measured and the runs of the one cut short."""
    checkout = Checkout(tmp_path / "story", cli, None)
    before = checkout.fingerprint()
    command_line = [sys.executable, "-m", "envsnap", command, "good", "bad",
                    "--cmd", f"sleep 0.4 && {checkout.cmd}", "--metric", METRIC,
                    "--cwd", str(checkout.repo.path), "--repeat", "3"]
    if command == "explain":
        command_line.append("--yes")
    journals = Path(cli.env["ENVSNAP_STORE"]) / "journals"
    running = subprocess.Popen(command_line, cwd=cli.cwd, env=cli.env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not list(journals.glob(f"{command}-good-bad-*.jsonl")):
            assert running.poll() is None and time.monotonic() < deadline, running.poll()
            time.sleep(0.02)
        path = next(journals.glob(f"{command}-good-bad-*.jsonl"))
        first = first_measured(path, deadline)
        running.send_signal(signal.SIGINT)
        out, err = running.communicate(timeout=120)
    finally:
        if running.poll() is None:
            running.kill()
            running.communicate()
    assert running.returncode == ExitCode.INTERRUPTED, out + err
    assert f" is as {command} found it (" in err, err
    assert checkout.fingerprint() == before
    records = [json.loads(line) for line in path.read_text().splitlines()]
    last = records[-1]
    assert last["event"] == "interrupted" and last["put_back"] is True, last
    measured = [{key: value for key, value in record.items() if key not in ("event", "at")}
                for record in records if record["event"] in ("trial", "step")]
    assert last["measured"] == measured and measured[0] == {
        key: value for key, value in first.items() if key not in ("event", "at")}
    assert all(run["run"].startswith("run ") and run["where"] for run in last["cut_short"])
    assert not any(record["event"] in ("answer", "put back") for record in records)
