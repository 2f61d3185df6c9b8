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

The key exchange, ciphers and the rest are the user's and OpenSSH's own: ~/.ssh/config (or
/etc/ssh/ssh_config) and OpenSSH's defaults (post-quantum on OpenSSH 9), or what the
inventory's ssh args choose among jump.CRYPTO_OPTIONS; nothing is put in their place.

The speed a cheaper exchange would buy comes from not doing it again: as Ansible does, the
master is kept after this process ends (ControlPersist, ENVSNAP_SSH_CONTROL_PERSIST seconds
of idleness, five minutes unless set; 0 ends it with close()), its socket in a folder of this
user's own (control_folder), and the next run for the same host with the same settings (a
capture, a bench, an explain's trials) sends its commands over it, with no handshake. A
socket is only used when the folder is this user's, open to no one else, and the socket is
this user's too.
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from envsnap.defaults import DEFAULT_CONNECT_TIMEOUT
from envsnap.errors import HostError, UsageError
from envsnap.hosts.inventory import Host
from envsnap.hosts.jump import inventory_crypto
from envsnap.hosts.sshconfig import Destination, config_args, configs_stamp, ssh_destination
from envsnap.hosts.transport import (
    KEEPALIVE_S,
    ClosedOnExit,
    Follow,
    Result,
    SSHTransport,
    Transport,
    collect_process,
)

PERSIST_VARIABLE = "ENVSNAP_SSH_CONTROL_PERSIST"
DEFAULT_PERSIST_S = 300   # a kept master ends after this long unused (Ansible keeps 60 s)
CONTROL_PERSIST_S = 30    # with keeping off: a master a crashed controller left ends so soon
MAX_PERSIST_S = 7 * 24 * 3600
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


def persist_seconds() -> int:
    """How long a master is kept for later runs: ENVSNAP_SSH_CONTROL_PERSIST (seconds, 0 for
    not at all), else DEFAULT_PERSIST_S; anything else is one line."""
    raw = os.environ.get(PERSIST_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_PERSIST_S
    if not raw.isdigit() or int(raw) > MAX_PERSIST_S:
        raise UsageError(f"{PERSIST_VARIABLE}={raw!r}: expected whole seconds from 0 (masters "
                         f"not kept) to {MAX_PERSIST_S} (default {DEFAULT_PERSIST_S})")
    return int(raw)


SOCKET_NAME_LENGTH = 20   # hex digits of the settings' digest (ssh adds 17 while it binds)


def control_folder() -> str | None:
    """Where kept masters' sockets live: $XDG_RUNTIME_DIR/envsnap, else the cache's
    envsnap/cm ($XDG_CACHE_HOME, or ~/.cache); where that path is too long for a socket,
    /tmp/envsnap-cm-UID-DIGEST, the digest of the path it stands for. Made 0700; None when
    the folder is not this user's own, or others may write to it (then nothing is kept)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and private_folder_ok(runtime, made=False):
        wanted = os.path.join(runtime, "envsnap")
    else:
        cache = os.environ.get("XDG_CACHE_HOME", "")
        cache = cache if os.path.isabs(cache) else os.path.expanduser("~/.cache")
        wanted = os.path.join(cache, "envsnap", "cm")
    if len(wanted) + 1 + SOCKET_NAME_LENGTH > MAX_SOCKET_PATH:
        digest = hashlib.sha256(wanted.encode()).hexdigest()[:12]
        wanted = f"/tmp/envsnap-cm-{os.getuid()}-{digest}"
    try:
        os.makedirs(os.path.dirname(wanted), mode=0o700, exist_ok=True)
        os.mkdir(wanted, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    return wanted if private_folder_ok(wanted, made=True) else None


def private_folder_ok(path: str, made: bool) -> bool:
    """A real folder (no link), this user's, that no one else may write to (`made`: our own,
    open to no one else at all)."""
    try:
        status = os.lstat(path)
    except OSError:
        return False
    closed = 0o077 if made else 0o022
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() \
        and not status.st_mode & closed


def own_socket(path: str) -> bool:
    """A socket of this user's at `path` (not a link, nor anything else)."""
    try:
        status = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISSOCK(status.st_mode) and status.st_uid == os.getuid()


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
        self.socket = ""               # the master's, once start() chose it
        self.kept = False              # the master outlives this process (persist_seconds)
        self.master: subprocess.Popen[bytes] | None = None
        self.ready = False             # the master listens
        self.waiting = False           # its first session waits for a command
        self.instead: Transport | None = None   # paramiko's, where ssh could not connect
        self.retried = False           # a kept master refused a session: one handshake anew

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
        timeouts, the inventory's port, user, key and algorithms. The key exchange and the
        rest of the cryptography are otherwise the user's SSH config's and OpenSSH's."""
        return [*self.settings(), "-o", f"ConnectTimeout={max(1, math.ceil(self.connect_timeout))}",
                "-o", f"ServerAliveInterval={KEEPALIVE_S}"]

    def settings(self) -> list[str]:
        """The options that decide which connection is made and how it is checked: a kept
        master is reused only by a transport whose settings are the same."""
        words = [*config_args(), "-o", "BatchMode=yes",
                 "-o", f"StrictHostKeyChecking={'accept-new' if self.accept_new else 'yes'}",
                 "-o", known_hosts_option(self.destination)]
        for key, value in inventory_crypto(self.host.vars, self.host.name).items():
            words += ["-o", f"{key}={value}"]
        if self.host.port:
            words += ["-p", str(self.host.port)]
        if self.host.user:
            words += ["-l", self.host.user]
        if self.host.key_file:
            words += ["-i", os.path.expanduser(self.host.key_file)]
        return words

    def kept_socket(self, folder: str) -> str:
        """The socket of the kept master for this host and these settings: named by a digest
        of them, of the address and of the SSH config files' state (an edited config, a
        changed KexAlgorithms, makes a new master), so it never serves other settings."""
        what = "\0".join([self.client, self.host.address, *self.settings(),
                          repr(configs_stamp()), os.path.expanduser("~")])
        return os.path.join(folder, hashlib.sha256(what.encode()).hexdigest()
                            [:SOCKET_NAME_LENGTH])

    def start(self) -> None:
        """Begin the handshake, without waiting for it, unless a kept master of this host
        listens (then there is none to make). The session a handshake opens waits for its
        command on stdin (WAITING), so the first command starts on a connection already
        made, with no process of its own."""
        if self.master is not None or self.instead is not None or self.ready:
            return
        persist = persist_seconds()
        self.folder = private_folder()
        folder = control_folder() if persist else None
        self.kept = folder is not None
        self.socket = self.kept_socket(folder) if folder else f"{self.folder}/socket"
        if self.kept:
            if master_listens(self.socket):
                self.ready = True
                return
            remove_dead_socket(self.socket)
            if os.path.lexists(self.socket):   # not ours: never spoken to, nor replaced
                self.kept, self.socket = False, f"{self.folder}/socket"
        self.master = subprocess.Popen(
            [self.client, *self.options(), "-M", "-S", self.socket,
             "-o", f"ControlPersist={persist if self.kept else CONTROL_PERSIST_S}",
             "-E", self.log, "-T", "--", self.host.address, WAITING],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            bufsize=0)   # the command goes out as written, or not at all (ssh gone)
        self.waiting = True

    @property
    def log(self) -> str:
        return f"{self.folder}/log"

    def open(self) -> None:
        """Wait for the master to listen (its socket appears once the host let us in), or
        for ssh to give up; the waiting session, if unused, is let go."""
        if self.ready or self.instead is not None:
            return
        self.start()
        if self.ready:   # a kept master
            return
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
            if said.strip() and self.master is None and not self.retried \
                    and NO_SESSION.search(said):
                # A kept master whose connection is gone refused the session: the command
                # never began. A handshake of this run's own, then the command once more.
                self.retried = True
                stop_master(self.socket)
                self.ready = False
                shutil.rmtree(self.folder or "", ignore_errors=True)
                return self.run(command, timeout, follow)
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
            # (it forked to the background first) is asked to exit, unless it is kept.
            if self.master.poll() is None:
                self.master.kill()
            for stream in (self.master.stdin, self.master.stdout, self.master.stderr):
                if stream is not None:
                    stream.close()
            self.master.wait()
            if not self.kept and os.path.exists(self.socket):
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


# ssh's words when a master takes the request but cannot open a session: its connection
# is gone (or going) while its process lingers.
NO_SESSION = re.compile(r"session request failed|Session open refused|"
                        r"master session id|mux_client_request_session", re.IGNORECASE)


def master_listens(path: str) -> bool:
    """A master of this user's answers on `path` (its hello, as `ssh -O check` asks, with no
    process of its own); a socket of anyone else's is never spoken to."""
    import socket
    import struct

    if not own_socket(path):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control:
            control.settimeout(STOP_S)
            control.connect(path)
            control.sendall(struct.pack(">III", 8, MUX_MSG_HELLO, MUX_VERSION))
            answer = b""
            while len(answer) < 8:
                chunk = control.recv(8 - len(answer))
                if not chunk:
                    return False
                answer += chunk
    except OSError:
        return False
    return bool(struct.unpack(">II", answer)[1] == MUX_MSG_HELLO)


def remove_dead_socket(path: str) -> None:
    """A socket a master that was killed left behind (only this user's own: the folder is)."""
    if own_socket(path):
        try:
            os.unlink(path)
        except OSError:
            pass


def log_of(argv: list[str]) -> str:
    return argv[argv.index("-E") + 1]


def read_log(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def last_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[-1].strip()
