"""A fleet's per-host errors, through the real CLI over the test sshd: each line starts with
the host's inventory name, and an unknown host key comes with its SHA256 fingerprint (as
`ssh-keygen -l` prints it) and the command that records it, which works."""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from conftest import Cli
from helpers.sshd import Sshd


def test_an_unknown_host_key_names_the_inventory_host_its_fingerprint_and_the_fix(
        ssh_cli: Cli, sshd: Sshd, tmp_path: Path) -> None:
    known = Path(ssh_cli.env["HOME"]) / ".ssh" / "known_hosts"
    known.unlink()
    address = sshd.addresses[2]
    (ssh_cli.cwd / "inv.ini").write_text(f"[gpu]\nn3 ansible_host={address} "
                                         f"ansible_port={sshd.port}\n")
    result = ssh_cli("capture", "gpu", "--inventory", "inv.ini", "--label", "x")
    assert result.returncode == 3
    (line,) = result.stderr.splitlines()
    (tmp_path / "key.pub").write_text(sshd.host_public_key + "\n")
    fingerprint = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "key.pub")], check=True,
                                 capture_output=True, text=True).stdout.split()[1]
    assert line.startswith(f"envsnap: error: n3: unknown host key ssh-ed25519 {fingerprint} "
                           f"of [{address}]:{sshd.port}; if that is the host's key"), line
    command = line.split("record it with `", 1)[1].split("`", 1)[0]
    assert command == f"ssh-keyscan -t ssh-ed25519 -p {sshd.port} {address} >> " \
                      "~/.ssh/known_hosts"
    subprocess.run(["sh", "-c", command.replace("~", shlex.quote(ssh_cli.env["HOME"]))],
                   check=True, capture_output=True, env=ssh_cli.env)
    again = ssh_cli("capture", "gpu", "--inventory", "inv.ini", "--label", "x")
    assert again.returncode == 0, again.stderr
