"""Which transport reaches a host, by Ansible's convention (`ansible_connection`):

- `local` (or the host `local`): this machine, through `sh` (transport.LocalTransport);
- `ssh` (and the default, where an `ssh` client is on PATH): the system's OpenSSH client
  (openssh.OpenSSHTransport), as Ansible's default connection; no Python SSH is imported;
- `paramiko` (Ansible's other, also `paramiko_ssh`): paramiko through fabric
  (transport.SSHTransport). It is also the default where OpenSSH cannot do what is asked:
  no `ssh` on PATH, a password to give (BatchMode types none), or a bastion on the way
  (ProxyJump or ProxyCommand, from the inventory or ~/.ssh/config): the paramiko transport
  opens each hop itself and checks each hop's key like the host's, refusing loops.

An OpenSSH connection can begin before its transport is asked for (`connecting_early`): the
command starts the handshakes of its first hosts as soon as it knows them, so they run
while it loads the rest of what a capture needs.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Literal

from envsnap.defaults import DEFAULT_CONNECT_TIMEOUT
from envsnap.errors import EnvsnapError, HostError
from envsnap.hosts.inventory import Host
from envsnap.hosts.jump import inventory_jump
from envsnap.hosts.openssh import OpenSSHTransport
from envsnap.hosts.sshconfig import ssh_client, ssh_destination
from envsnap.hosts.transport import LocalTransport, SSHTransport, Transport

Connection = Literal["local", "ssh", "paramiko"]
OPENSSH_NAMES = ("ssh", "smart")              # Ansible's `smart` is ssh where ssh exists
PARAMIKO_NAMES = ("paramiko", "paramiko_ssh")
PASSWORD_VARS = ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password")


def connection_of(host: Host) -> Connection:
    """The transport a host gets (see the module's docstring)."""
    if host.is_local:
        return "local"
    asked = str(host.vars.get("ansible_connection") or "").lower()
    if asked in PARAMIKO_NAMES:
        return "paramiko"
    if ssh_client() is None:
        if asked == "ssh":
            raise HostError(f"{host.name}: ansible_connection is ssh, but no ssh client is "
                            "on PATH (install openssh-client, or set ansible_connection: "
                            "paramiko)")
        return "paramiko"
    if any(host.vars.get(name) for name in PASSWORD_VARS):
        return "paramiko"
    jump = inventory_jump(host.vars, host.name)
    if (jump is not None and not jump.direct) or ssh_destination(host.address).proxied:
        return "paramiko"
    return "ssh"


EarlyKey = tuple[Host, float, bool]
_early: dict[EarlyKey, OpenSSHTransport] = {}
_early_lock = threading.Lock()


@contextmanager
def connecting_early(hosts: Sequence[Host], connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                     accept_new_host_keys: bool = False) -> Iterator[None]:
    """Start the OpenSSH handshakes of `hosts` now; open_transport, asked for one of them
    with the same settings inside the block, takes it as it stands. Those not taken (a
    label refused before any capture) are closed when the block ends."""
    started: list[EarlyKey] = []
    for host in hosts:
        try:
            if connection_of(host) != "ssh":
                continue
        except EnvsnapError:   # said by open_transport, in that host's outcome
            continue
        client = ssh_client()
        assert client is not None
        transport = OpenSSHTransport(host, client, connect_timeout, accept_new_host_keys)
        transport.start()
        key = (host, connect_timeout, accept_new_host_keys)
        with _early_lock:
            _early[key] = transport
        started.append(key)
    try:
        yield
    finally:
        with _early_lock:
            left = [_early.pop(key) for key in started if key in _early]
        for transport in left:
            transport.close()


def open_transport(host: Host, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                   accept_new_host_keys: bool = False) -> Transport:
    with _early_lock:
        early = _early.pop((host, connect_timeout, accept_new_host_keys), None)
    if early is not None:
        return early
    connection = connection_of(host)
    if connection == "local":
        return LocalTransport(host)
    if connection == "ssh":
        client = ssh_client()
        assert client is not None   # connection_of saw it
        return OpenSSHTransport(host, client, connect_timeout, accept_new_host_keys)
    return SSHTransport(host, connect_timeout, accept_new_host_keys)
