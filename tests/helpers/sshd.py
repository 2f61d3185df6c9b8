"""A real OpenSSH sshd on loopback for the tests: generated keys, a free port, aliases.

Several "hosts" share the one daemon through 127.0.0.x addresses; each gets its own
known_hosts entry, as separate machines would.

Hermetic: a login gets the account's home from passwd (the real ~ of whoever runs the
tests), so the daemon moves it. `SetEnv` gives every session a HOME and XDG dirs of this
suite's own, and sftp starts there too (`internal-sftp -d`): the agent cache, the restore
lock and patch uploads of the tests never touch the real ~/.cache/envsnap, and two suites
(or a suite and a real restore) can share the machine.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/bin/sshd", "/usr/local/sbin/sshd")
XDG_DIRS = {"XDG_CACHE_HOME": ".cache", "XDG_STATE_HOME": ".local/state",
            "XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share"}


def home_env(home: Path) -> dict[str, str]:
    """HOME and the XDG base dirs, all inside `home`: what a process needs so that nothing
    it does lands in the real home of the user running the tests."""
    return {"HOME": str(home), **{name: str(home / sub) for name, sub in XDG_DIRS.items()}}


UNINHERITED = ("SSH_AUTH_SOCK", "COLUMNS", "LINES")


def isolated_env(home: Path) -> dict[str, str]:
    """This process's environment with `home` in place of the user's home and no agent.

    Without COLUMNS and LINES too: envsnap in a test is never at a terminal, and the width of
    the one running pytest (pytest-xdist's workers set COLUMNS=80) must not change its output.
    """
    env = {key: value for key, value in os.environ.items() if key not in UNINHERITED}
    env.update(home_env(home))
    return env


def find_sshd() -> str:
    """The sshd the tests start: ENVSNAP_TEST_SSHD (tests/run.sh unpacks one there when the
    system has none), else the system's."""
    for candidate in (os.environ.get("ENVSNAP_TEST_SSHD", ""), *SSHD_CANDIDATES):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("no sshd found: the README's test command (bash tests/run.sh) brings one")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


@dataclass
class Sshd:
    port: int
    addresses: list[str]
    host_public_key: str        # "ssh-ed25519 AAAA..."
    client_key: Path
    processes: list[subprocess.Popen[bytes]]
    log: Path
    host_home: Path             # HOME of every login (and sftp's start folder)

    def known_hosts_line(self, address: str) -> str:
        key_type, key = self.host_public_key.split()[:2]
        return f"[{address}]:{self.port} {key_type} {key}"

    def write_home(self, home: Path, known: bool = True) -> dict[str, str]:
        """A client HOME with ~/.ssh/config and (optionally) known_hosts; returns its env."""
        ssh = home / ".ssh"
        ssh.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copy(self.client_key, ssh / "id_ed25519")
        os.chmod(ssh / "id_ed25519", 0o600)
        # Absolute paths: OpenSSH's own client reads ~ from passwd, not from $HOME.
        (ssh / "config").write_text(f"Host *\n  User root\n  Port {self.port}\n"
                                    f"  IdentityFile {ssh / 'id_ed25519'}\n"
                                    f"  UserKnownHostsFile {ssh / 'known_hosts'}\n")
        if known:
            lines = [self.known_hosts_line(address) for address in self.addresses]
            (ssh / "known_hosts").write_text("\n".join(lines) + "\n")
        return isolated_env(home)

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
            process.wait(timeout=10)


MAX_LISTEN = 16   # sshd's MAX_LISTEN_SOCKS: more aliases get more daemons on the same port


def start_sshd(workdir: Path, aliases: int = 4, log_level: str = "ERROR",
               also_authorized: Path | None = None) -> Sshd:
    """`also_authorized`: the client key of another daemon, let in here too."""
    workdir.mkdir(parents=True, exist_ok=True)
    host_public = keygen(workdir / "host_key")
    client_public = keygen(workdir / "client_key")
    authorized = [client_public]
    if also_authorized is not None:
        authorized.append(also_authorized.with_suffix(".pub").read_text().strip())
    (workdir / "authorized_keys").write_text("\n".join(authorized) + "\n")
    os.chmod(workdir / "authorized_keys", 0o600)
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation folder
    port = free_port()
    addresses = [f"127.0.0.{n}" for n in range(1, aliases + 1)]
    log = workdir / "sshd.log"
    host_home = workdir / "host-home"
    host_home.mkdir()
    processes = []
    for first in range(0, aliases, MAX_LISTEN):
        group = addresses[first:first + MAX_LISTEN]
        config = workdir / f"sshd_config.{first}"
        config.write_text(sshd_config(workdir, port, group, first, host_home, log_level))
        processes.append(subprocess.Popen([find_sshd(), "-D", "-e", "-f", str(config)],
                                          stdout=log.open("ab"), stderr=subprocess.STDOUT))
        wait_for_port(group[-1], port, processes[-1], log)
    return Sshd(port, addresses, host_public, workdir / "client_key", processes, log,
                host_home)


def sshd_config(workdir: Path, port: int, addresses: list[str], number: int,
                host_home: Path, log_level: str = "ERROR") -> str:
    # SetEnv (OpenSSH >= 7.8) overrides what sshd sets from passwd, HOME included.
    session_env = " ".join(f"{name}={value}" for name, value in home_env(host_home).items())
    lines = [f"Port {port}", *(f"ListenAddress {a}" for a in addresses),
             f"HostKey {workdir / 'host_key'}",
             f"AuthorizedKeysFile {workdir / 'authorized_keys'}",
             f"PidFile {workdir / f'sshd.{number}.pid'}", "PasswordAuthentication no",
             "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
             "PermitRootLogin prohibit-password", "MaxStartups 100:30:200", "MaxSessions 100",
             f"LogLevel {log_level}", f"SetEnv {session_env}",
             f"Subsystem sftp internal-sftp -d {host_home}"]
    return "\n".join(lines) + "\n"


def start_bastion(workdir: Path, target: Sshd) -> Sshd:
    """A second daemon, with a host key of its own, as the ProxyJump bastion in front of
    `target`: it lets in `target`'s client key and forwards to it (direct-tcpip, as a real
    jump host does); two addresses, for a chain of two hops. DEBUG1 logs each forward, so
    a test can tell that a jump went through it."""
    return start_sshd(workdir, aliases=2, log_level="DEBUG1", also_authorized=target.client_key)


def forwards_through(bastion: Sshd) -> int:
    """How many direct-tcpip forwards the bastion has opened so far."""
    return bastion.log.read_text(errors="replace").count("server_request_direct_tcpip")


def wait_for_port(address: str, port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text()}")
        try:
            socket.create_connection((address, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on {address}:{port}")
