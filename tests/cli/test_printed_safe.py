"""What envsnap prints is safe to read and to run: an error line built from an inventory's
values masks their secrets and quotes each word of a command it suggests; `--limit @FILE`
never prints the file's content; the files envsnap writes for people escape control
characters as stdout does."""
from __future__ import annotations

import re
import shlex
import subprocess
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
