"""What envsnap prints is safe to read and to run: an error line built from an inventory's
values masks their secrets and quotes each word of a command it suggests; `--limit @FILE`
never prints the file's content; the files envsnap writes for people escape control
characters as stdout does."""
from __future__ import annotations

import re
import shlex
import subprocess
import tarfile
from pathlib import Path

import yaml
from conftest import Cli

from envsnap.errors import ExitCode

PASSWORD = "S3cr3tP4ssw0rd"


def test_a_proxycommand_error_masks_its_password_and_quotes_its_words(cli: Cli) -> None:
    # The bastion's ssh, here a stand-in that fails at once, as one refusing a key does.
    tools = cli.cwd / "bin"
    tools.mkdir()
    (tools / "sshpass").write_text("#!/bin/sh\nexit 255\n")
    (tools / "sshpass").chmod(0o755)
    cli.env["PATH"] = f"{tools}:{cli.env['PATH']}"
    inventory = {"all": {"hosts": {"gpu1": {
        "ansible_host": "10.0.0.1", "ansible_user": "root;touch M;",
        "ansible_ssh_common_args":
            f"-o 'ProxyCommand=sshpass -p {PASSWORD} ssh -W %h:%p %r@bastion'"}}}}
    (cli.cwd / "hosts.yml").write_text(yaml.safe_dump(inventory))
    result = cli("capture", "gpu1", "--inventory", "hosts.yml", "--label", "run1")
    assert result.returncode == ExitCode.HOST, result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert PASSWORD not in result.stderr
    suggested = re.search(r"run `([^`]*)` to see why", result.stderr)
    assert suggested is not None, result.stderr
    # the words paramiko ran (shlex's split, no shell), each a word for the shell too
    assert shlex.split(suggested.group(1)) == ["sshpass", "-p", "<secret>", "ssh", "-W",
                                               "10.0.0.1:22", "root;touch", "M;@bastion"]
    subprocess.run(["sh", "-c", suggested.group(1)], cwd=cli.cwd, env=cli.env, check=False)
    assert not (cli.cwd / "M").exists()   # the user's `;` ran nothing


HF_TOKEN = "hf_kXq2RmZt8VwPa4LcYn7JdBs5GeHu3Nf"
ENVIRON = (f"HOME=/root\nHF_TOKEN={HF_TOKEN}\n\n"
           "WANDB_API_KEY=3b9f0c2d8e7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c\n")


def test_a_limit_file_that_selects_no_host_is_said_by_counts_and_line(cli: Cli) -> None:
    (cli.cwd / "environ").write_text(ENVIRON)   # given by mistake, as @/proc/self/environ
    result = cli("capture", "local", "--limit", "@environ", "--label", "run1")
    assert result.returncode == ExitCode.USAGE
    assert result.stderr == ("envsnap: error: --limit '@environ' leaves no host to act on (no "
                             "host matches 3 of the 3 patterns of @environ, the first at line "
                             "1)\n")


def test_a_limit_file_pattern_that_matches_nothing_is_a_warning_without_its_text(
        cli: Cli) -> None:
    (cli.cwd / "environ").write_text(ENVIRON)
    result = cli("capture", "local", "--limit", "local,@environ", "--label", "run1")
    assert result.returncode == 0, result.stderr
    assert "warning: --limit: no host matches 3 of the 3 patterns of @environ, the first at " \
           "line 1, ignoring it\n" in result.stderr
    assert HF_TOKEN not in result.stderr + result.stdout
    assert "WANDB" not in result.stderr + result.stdout and "HOME=" not in result.stderr


def test_a_limit_file_pattern_refused_is_named_by_its_line(cli: Cli) -> None:
    (cli.cwd / "hosts.retry").write_text(f"local\n\n~{HF_TOKEN}(\n")
    result = cli("capture", "local", "--limit", "@hosts.retry", "--label", "run1")
    assert result.returncode == ExitCode.USAGE
    assert result.stderr.startswith("envsnap: error: --limit: the pattern at line 3 of "
                                    "@hosts.retry refused: not a regular expression (")
    assert HF_TOKEN not in result.stderr


DATA = Path(__file__).resolve().parent.parent / "data"
# ESC (clear screen), a bidi override and isolate, BEL, an 8-bit CSI (colour)
CONTROLS = "\x1b[2J\u202eevil\x07\x9b31m\u2066x"


def test_the_files_written_for_people_escape_control_characters_as_stdout(cli: Cli) -> None:
    lines = (DATA / "h200" / "collect_env.txt").read_text(encoding="utf-8").splitlines()
    pasted = "\n".join(f"{line} {CONTROLS}" if line.startswith("OS:") else line
                       for line in lines) + "\n"
    (cli.cwd / "collect_env.txt").write_text(pasted, encoding="utf-8")
    assert cli("import", "collect_env.txt", "--label", "theirs").returncode == 0
    stdout = cli("report", "theirs", "--format", "md").stdout
    assert "\\x1b[2J\\u202eevil\\x07\\x9b31m\\u2066x" in stdout.replace("\\[", "[")
    written = []
    for form in ("md", "html", "json"):
        assert cli("report", "theirs", "-o", f"issue.{form}").returncode == 0
        written.append((cli.cwd / f"issue.{form}").read_text(encoding="utf-8"))
    assert cli("report", "theirs", "--bundle", "issue.tar.gz").returncode == 0
    with tarfile.open(cli.cwd / "issue.tar.gz") as bundle:
        written += [bundle.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]
                    for member in bundle.getmembers() if member.isfile()]
    assert written[0] == stdout   # the file is what stdout showed
    for text in written:
        assert not set(CONTROLS) - set("[2Jevil31mx") & set(text), text[:200]
    assert "evil" in written[1]   # the html names it too, escaped
