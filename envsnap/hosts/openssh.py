"""A host through the system's OpenSSH client, as Ansible's default `ssh` connection reaches it.

start() begins a master connection (`ssh -M`, ControlPersist) whose handshake runs in its
own process while this one goes on (the capture's modules, the agent's digest, the store);
its first session waits for a command on stdin, so the first command (all a capture runs
once the agent is cached) starts the moment the host lets us in, as in one `ssh host cmd`.
Later commands are each one `ssh -S` over the master (a local process that connects to its
socket). No Python SSH (paramiko, cryptography: about 0.2 s of imports) on the way.

It checks what the paramiko transport checks and says it in the same words:
- host keys: `StrictHostKeyChecking=yes` (or `accept-new`, opted in) against the known_hosts
  files envsnap uses ($HOME's, as configured), BatchMode (nothing is asked at a prompt);
- ssh's own account of a failure (`-E`: a log of its own, apart from the command's stderr)
  is mapped to the paramiko transport's lines: unreachable, refused, timed out, never spoke
  SSH, authentication refused, host key CHANGED. An unknown host key, or anything not
  mapped, is told by the paramiko transport itself, opened in its place: it names the key's
  SHA256 fingerprint and the ssh-keyscan line, and should it connect where ssh would not,
  it serves the rest of the session.
- What a command prints is read with the same cap (transport.max_output_bytes); a command
  that is followed keeps stdin as its lifeline, as over paramiko.

The master lives in a private folder (its socket, its log), ends with close() (asked over its
socket, as `ssh -O exit` asks), and, should this process die first, ends itself
CONTROL_PERSIST_S after its last command.
"""
from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from envsnap.defaults import DEFAULT_CONNECT_TIMEOUT
from envsnap.errors import HostError
from envsnap.hosts.inventory import Host
from envsnap.hosts.sshconfig import Destination, config_args, ssh_destination
from envsnap.hosts.transport import (
    KEEPALIVE_S,
    ClosedOnExit,
    Follow,
    Result,
    SSHTransport,
    Transport,
    collect_process,
)

# The key exchange paramiko negotiates, first: OpenSSH 9's default (sntrup761x25519, post-
# quantum) costs each connection ~0.1 s of CPU more on the two ends (0.25 s against 0.15 s
# for one connection here, 3-4x the wall time for 32 at once), and a fleet's connections
# share the controller's cores. The rest of the client's list follows (`^`: prepended).
KEX_FIRST = "^curve25519-sha256,curve25519-sha256@libssh.org"
CONTROL_PERSIST_S = 30    # a master left by a crashed controller ends this long after use
SSH_FAILED = 255          # ssh's exit status for its own failure
MAX_SOCKET_PATH = 90      # a unix socket's path is at most 108 bytes; ssh adds a suffix
STOP_S = 5.0
# The session the handshake opens: it runs the first line it reads (the first command, sent
# as soon as it is known), or nothing once stdin ends. sh whatever the login shell.
WAITING = "exec /bin/sh -c 'read -r command || exit 0; eval \"$command\"'"


class Failure(NamedTuple):
    """ssh's last word on a connection it could not make, as the paramiko transport says it:
    `text` formatted with the host's name and user@address:port."""

    pattern: str      # searched case-blind; compiled only once a connection failed
    text: str


# Most specific first: a banner timeout is also "timed out".
FAILURES = (
    Failure(r"host identification has changed|host key for .* has changed",
            "{name}: host key CHANGED for {known_as} (possible man-in-the-middle); refusing "
            "to connect; fix known_hosts if the change is expected"),
    Failure(r"during banner exchange|kex_exchange_identification|"
            r"Connection (?:closed|reset) by \S+ port",
            "{name}: unreachable: {where} accepted the connection but never spoke SSH"),
    Failure(r"Connection refused",
            "{name}: unreachable: connection refused by {where}"),
    Failure(r"timed out",
            "{name}: unreachable: no answer from {where} (timed out)"),
    Failure(r"Could not resolve hostname [^:]*: (?P<why>.*)",
            "{name}: unreachable: unknown host name ({why})"),
    Failure(r"Permission denied \((?P<why>[^)]*)\)",
            "{name}: authentication refused for {where} (ssh tried: {why})"),
)


def failure_text(log: str, name: str, where: str, known_as: str) -> str | None:
    """The paramiko transport's line for what ssh logged, or None where it has none (an
    unknown host key: only paramiko holds the key to name its fingerprint)."""
    for failure in FAILURES:
        found = re.search(failure.pattern, log, re.IGNORECASE)
        if found:
            return failure.text.format(name=name, where=where, known_as=known_as,
                                       why=(found.groupdict().get("why") or "").strip())
    return None


def known_hosts_option(destination: Destination) -> str:
    """UserKnownHostsFile as configured, `~` read as $HOME (ssh would read passwd's), or
    $HOME's ~/.ssh/known_hosts: the files the paramiko transport checks, first the one a key
    accepted anew is written to."""
    files = [os.path.expanduser(path) for path in destination.known_hosts
             if path.lower() != "none"] or [os.path.expanduser("~/.ssh/known_hosts")]
    return "UserKnownHostsFile=" + " ".join(f'"{path}"' if " " in path else path
                                            for path in files)


FOLDER_PREFIX = "envsnap-ssh-"
STALE_FOLDER_S = 4 * CONTROL_PERSIST_S   # a folder untouched this long, socket gone: left


def private_folder() -> str:
    """A folder of this process's own for the master's socket and log, short enough for a
    socket's path. Those that controllers killed before close() left (their masters ended
    themselves, the folder stayed) are removed on the way."""
    folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)
    if len(folder) > MAX_SOCKET_PATH:
        os.rmdir(folder)
        folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir="/tmp")
    remove_left_folders(os.path.dirname(folder))
    return folder


def remove_left_folders(parent: str) -> None:
    now = time.time()
    try:
        names = [name for name in os.listdir(parent) if name.startswith(FOLDER_PREFIX)]
    except OSError:
        return
    for name in names:
        folder = os.path.join(parent, name)
        try:
            status = os.lstat(folder)
            if status.st_uid != os.getuid() or now - status.st_mtime < STALE_FOLDER_S \
                    or os.path.exists(os.path.join(folder, "socket")):
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)


class OpenSSHTransport(ClosedOnExit):
    """A host over the system's `ssh`, one master connection for all its commands."""

    def __init__(self, host: Host, client: str,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 accept_new_host_keys: bool = False) -> None:
        self.host, self.client = host, client
        self.connect_timeout = connect_timeout
        self.accept_new = accept_new_host_keys or bool(host.vars.get("accept_new_host_keys"))
        self.destination = ssh_destination(host.address)
        self.folder: str | None = None
        self.master: subprocess.Popen[bytes] | None = None
        self.ready = False             # the master listens
        self.waiting = False           # its first session waits for a command
        self.instead: Transport | None = None   # paramiko's, where ssh could not connect

    @property
    def where(self) -> str:
        user = self.host.user or self.destination.user or "?"
        port = self.host.port or self.destination.port or 22
        return f"{user}@{self.destination.hostname}:{port}"

    @property
    def known_as(self) -> str:
        """How known_hosts names the host."""
        port = self.host.port or self.destination.port or 22
        name = self.destination.hostname
        return name if port == 22 else f"[{name}]:{port}"

    def options(self) -> list[str]:
        """What every ssh of this host is given: the paramiko transport's checks and
        timeouts, the inventory's port, user and key."""
        words = [*config_args(), "-o", "BatchMode=yes",
                 "-o", f"StrictHostKeyChecking={'accept-new' if self.accept_new else 'yes'}",
                 "-o", known_hosts_option(self.destination),
                 "-o", f"ConnectTimeout={max(1, math.ceil(self.connect_timeout))}",
                 "-o", f"ServerAliveInterval={KEEPALIVE_S}", "-o", f"KexAlgorithms={KEX_FIRST}"]
        if self.host.port:
            words += ["-p", str(self.host.port)]
        if self.host.user:
            words += ["-l", self.host.user]
        if self.host.key_file:
            words += ["-i", os.path.expanduser(self.host.key_file)]
        return words

    def start(self) -> None:
        """Begin the handshake, without waiting for it. The session it opens waits for its
        command on stdin (WAITING), so the first command starts on a connection already
        made, with no process of its own."""
        if self.master is not None or self.instead is not None:
            return
        self.folder = private_folder()
        self.master = subprocess.Popen(
            [self.client, *self.options(), "-M", "-S", self.socket,
             "-o", f"ControlPersist={CONTROL_PERSIST_S}", "-E", self.log, "-T",
             "--", self.host.address, WAITING],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            bufsize=0)   # the command goes out as written, or not at all (ssh gone)
        self.waiting = True

    @property
    def socket(self) -> str:
        return f"{self.folder}/socket"

    @property
    def log(self) -> str:
        return f"{self.folder}/log"

    def open(self) -> None:
        """Wait for the master to listen (its socket appears once the host let us in), or
        for ssh to give up; the waiting session, if unused, is let go."""
        if self.ready or self.instead is not None:
            return
        self.start()
        assert self.master is not None
        deadline = time.monotonic() + 2 * self.connect_timeout + 30   # ssh's ends it first
        if self.waiting:
            self.waiting = False
            try:   # stdin closed: the waiting shell ends, once the host let us in
                self.master.communicate(timeout=deadline - time.monotonic())
            except subprocess.TimeoutExpired:
                pass   # said below
        pause = 0.0005
        while not os.path.exists(self.socket):
            if self.master.poll() is not None:
                self.refused(read_log(self.log))
                return
            if time.monotonic() > deadline:
                self.master.kill()
                self.master.wait()
                raise HostError(f"{self.host.name}: unreachable: no answer from "
                                f"{self.where} (timed out)")
            time.sleep(pause)
            pause = min(2 * pause, 0.01)
        self.ready = True

    def refused(self, log: str) -> None:
        """ssh could not connect: the paramiko transport's line for it, or the paramiko
        transport itself, to tell what only it can or to serve in ssh's place."""
        text = failure_text(log, self.host.name, self.where, self.known_as)
        if text is not None:
            raise HostError(text)
        instead = SSHTransport(self.host, self.connect_timeout, self.accept_new)
        instead.open()   # raises the HostError that says why
        self.instead = instead

    def command(self, command: str) -> list[str]:
        """One command over the master (or, should its socket be gone, a connection of its
        own with the same checks)."""
        return [self.client, *self.options(), "-S", self.socket, "-o", "ControlMaster=no",
                "-T", "-E", f"{self.folder}/log.{os.urandom(4).hex()}", "--",
                self.host.address, command]

    def run(self, command: str, timeout: float, follow: Follow | None = None) -> Result:
        if self.instead is not None:
            return self.instead.run(command, timeout, follow)
        self.start()
        if self.waiting and "\n" not in command:
            return self.run_waiting(command, timeout, follow)
        self.open()
        if self.instead is not None:
            return self.instead.run(command, timeout, follow)
        argv = self.command(command)
        lifeline = follow is not None
        stdin, held = os.pipe() if lifeline else (subprocess.DEVNULL, -1)
        proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        if lifeline:
            os.close(stdin)
        result = collect_process(self.host.name, proc, timeout, follow,
                                 (lambda: os.close(held)) if lifeline else None)
        if result.exit_code == SSH_FAILED:
            said = read_log(log_of(argv))
            if said.strip():   # ssh's own failure, not the command's exit 255
                raise HostError(f"{self.host.name}: connection lost ({last_line(said)})")
        return result

    def run_waiting(self, command: str, timeout: float, follow: Follow | None) -> Result:
        """The first command, given to the session the handshake opened."""
        proc = self.master
        assert proc is not None and proc.stdin is not None
        self.waiting = False
        lifeline = proc.stdin
        try:
            lifeline.write(command.encode() + b"\n")
            lifeline.flush()
        except OSError:   # ssh has ended: its log says why (below)
            pass
        if follow is None:
            lifeline.close()
        result = collect_process(self.host.name, proc, timeout, follow,
                                 lifeline.close if follow else None)
        if lifeline.closed is False:
            lifeline.close()
        if result.exit_code == SSH_FAILED and not os.path.exists(self.socket):
            self.refused(read_log(self.log))   # never connected: raises, or paramiko serves
            return self.run(command, timeout, follow)
        self.ready = os.path.exists(self.socket)
        return result


    def put(self, data: bytes, path: str) -> None:
        """Written by `cat` to a name of its own, then renamed: atomic, as over SFTP
        (relative to $HOME, where the commands find it)."""
        self.open()
        if self.instead is not None:
            self.instead.put(data, path)
            return
        temporary = f"{path}.{os.urandom(16).hex()}.tmp"
        script = (f'cd "$HOME" && cat > {shlex.quote(temporary)} && '
                  f"mv -f {shlex.quote(temporary)} {shlex.quote(path)}")
        argv = self.command(script)
        try:
            done = subprocess.run(argv, input=data, capture_output=True,
                                  timeout=self.connect_timeout + 60 + len(data) / 1e6)
        except subprocess.TimeoutExpired:
            raise HostError(f"{self.host.name}: cannot upload {path}: timed out") from None
        if done.returncode != 0:
            said = last_line(done.stderr.decode("utf-8", "replace")
                             or read_log(log_of(argv)))
            raise HostError(f"{self.host.name}: cannot upload {path}: {said}")

    def close(self) -> None:
        if self.instead is not None:
            self.instead.close()
        if self.master is not None:
            # A handshake still under way ends with its process; a master that listens
            # (it forked to the background first) is asked to exit.
            if self.master.poll() is None:
                self.master.kill()
            for stream in (self.master.stdin, self.master.stdout, self.master.stderr):
                if stream is not None:
                    stream.close()
            self.master.wait()
            if os.path.exists(self.socket):
                stop_master(self.socket)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.master, self.ready, self.folder = None, False, None


# OpenSSH's PROTOCOL.mux: each message a uint32 length, then a uint32 type and its fields.
MUX_MSG_HELLO, MUX_VERSION, MUX_C_TERMINATE, MUX_S_OK = 0x00000001, 4, 0x10000005, 0x80000001


def stop_master(path: str) -> None:
    """Ask the master listening on `path` to exit (what `ssh -O exit` sends, without a
    process of its own: ~10 ms at the end of every capture), then wait for it to remove its
    socket, which it does last."""
    import socket
    import struct

    def message(*words: int) -> bytes:
        return struct.pack(f">I{len(words)}I", 4 * len(words), *words)

    deadline = time.monotonic() + STOP_S
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control:
            control.settimeout(STOP_S)
            control.connect(path)
            control.sendall(message(MUX_MSG_HELLO, MUX_VERSION) + message(MUX_C_TERMINATE, 1))
            answer = b""
            while struct.pack(">I", MUX_S_OK) not in answer:
                chunk = control.recv(4096)
                if not chunk:
                    break
                answer += chunk
    except OSError:   # gone already, or not listening: nothing to stop
        return
    pause = 0.0005
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(2 * pause, 0.01)


def log_of(argv: list[str]) -> str:
    return argv[argv.index("-E") + 1]


def read_log(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def last_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[-1].strip()
