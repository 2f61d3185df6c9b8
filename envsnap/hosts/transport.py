"""How commands reach a host: one small interface, two implementations.

`LocalTransport` runs commands through `sh -c` on this machine; `SSHTransport` runs the same
commands over SSH with fabric. Capture code never knows which one it holds, so `local` and a
remote host go through exactly the same agent path.

Both are context managers: `with open_transport(host) as transport:` closes the connection
(and the bastions it went through) when the block ends, however it ends.

What a host prints is read with a cap (`max_output_bytes`: 256 MiB, or
ENVSNAP_MAX_AGENT_OUTPUT_MB): a real snapshot is 0.1-5 MB, and a host that prints without
end must not take the controller's memory with it. Past the cap the command is stopped, its
output dropped, and the run refused in one line (HostError), so the controller holds at most
the cap (and the chunk that crossed it) of one command's output.
"""
from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, NamedTuple, Protocol, TypedDict, TypeVar

from envsnap.defaults import DEFAULT_CONNECT_TIMEOUT
from envsnap.errors import HostError
from envsnap.hosts.inventory import Host
from envsnap.hosts.jump import Jump, inventory_crypto, inventory_jump, proxy_jump_hops
from envsnap.hosts.pipes import READ_CHUNK, read_to_end, spawn
from envsnap.snapshot.entries import write_entry
from envsnap.text import duration

if TYPE_CHECKING:
    import paramiko
    from fabric import Connection

KEEPALIVE_S = 30
# Waiting on a remote command polls its channel: at once after output, backing off to 50 ms
# in silence (a benchmark's minutes cost 20 wake-ups a second, a short capture no delay).
POLL_FIRST_S, POLL_MAX_S = 0.001, 0.05
# for a local command whose lifeline was cut to end its own work: an agent running a server
# stops it (SIGTERM, agent/benchserve.py's STOP_GRACE, SIGKILL, then what kept the server's
# mark); killed before that ends, the agent would leave the server running. A number, not
# an import: the agent's module would cost every capture's start-up its http imports.
LIFELINE_GRACE_S = 15.0
# paramiko's words for a peer that took the TCP connection and then said nothing
HANDSHAKE_LOST = re.compile(r"banner|No existing session|not open", re.IGNORECASE)
MAX_OUTPUT_MB_VARIABLE = "ENVSNAP_MAX_AGENT_OUTPUT_MB"
DEFAULT_MAX_OUTPUT_MB = 256   # far above any real snapshot (0.1-5 MB), far below a runaway


class TooMuchOutput(Exception):
    """A command printed more than the cap; turned into the host's HostError by its run."""


def max_output_bytes() -> int:
    """The cap on what one command on a host may print: ENVSNAP_MAX_AGENT_OUTPUT_MB (MiB),
    else 256 MiB."""
    # on use: the store's module loads YAML, which a handshake started early need not wait for
    from envsnap.snapshot.store import size_setting

    return size_setting(MAX_OUTPUT_MB_VARIABLE, DEFAULT_MAX_OUTPUT_MB)


def output_refused(host_name: str, limit: int) -> HostError:
    return HostError(f"{host_name}: the host printed more than {limit / (1 << 20):g} MiB, "
                     f"refused unread (a snapshot is a few MB; {MAX_OUTPUT_MB_VARIABLE} raises "
                     "the cap)")


class Result(NamedTuple):
    exit_code: int
    stdout: str
    stderr: str


# Given to Transport.run for a long command: called with each line the command writes to
# stderr, as it comes.
Follow = Callable[[str], None]


class Transport(Protocol):
    def run(self, command: str, timeout: float, follow: Follow | None = None) -> Result:
        """Run through sh on the host; stdin is at end of file at once. A command that is
        followed gets its stderr lines passed to `follow` as they come, and a lifeline for
        stdin: open for as long as this process waits, at end of file once it stops waiting
        (Ctrl-C, a crash, a dropped connection)."""

    def put(self, data: bytes, path: str) -> None:
        """Write `data` to `path` (relative to the login home) atomically."""

    def close(self) -> None: ...

    def __enter__(self) -> Transport: ...

    def __exit__(self, *exc_info: object) -> None: ...


Closing = TypeVar("Closing", bound="ClosedOnExit")


class ClosedOnExit(ABC):
    """The `with` of both transports: leaving the block closes the connection."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self: Closing) -> Closing:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class LocalTransport(ClosedOnExit):
    """This machine, through the same shell commands a remote host would get."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def run(self, command: str, timeout: float, follow: Follow | None = None) -> Result:
        # A lifeline's write end stays here; the kernel closes it should this process die.
        if follow is None:
            return collect_process(self.host.name, spawn(command), timeout, None, None)
        stdin, held = os.pipe()
        proc = subprocess.Popen(["sh", "-c", command], stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        os.close(stdin)  # the command has its copy
        return collect_process(self.host.name, proc, timeout, follow, lambda: os.close(held))

    def put(self, data: bytes, path: str) -> None:
        target = Path.home() / path
        target.parent.mkdir(parents=True, exist_ok=True)
        write_entry(target, data)   # envsnap's cache: never written through

    def close(self) -> None:
        pass


_known_hosts_lock = threading.Lock()


def known_hosts_policy(accept_new: bool, known_hosts: Path) -> paramiko.MissingHostKeyPolicy:
    """Refuse unknown host keys, or (opt-in) record them the first time, like `accept-new`.

    A key that differs from the recorded one is always refused: paramiko raises
    BadHostKeyException before any policy is asked.
    """
    import paramiko

    class RefuseUnknown(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
            raise HostError(unknown_key_text(hostname, key.get_name(), key.asbytes()))

    class AcceptNew(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
            client.get_host_keys().add(hostname, key.get_name(), key)
            with _known_hosts_lock:
                known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                with known_hosts.open("a", encoding="ascii") as handle:
                    handle.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")

    return AcceptNew() if accept_new else RefuseUnknown()


def unknown_key_text(known_as: str, key_type: str, key: bytes) -> str:
    """What to do about a host key known_hosts lacks: its SHA256 fingerprint (as `ssh` and
    `ssh-keygen -l` print it, to compare with the host's own) and the command that records
    it. `known_as` is how known_hosts names the host: `name`, or `[name]:port`."""
    import base64
    import hashlib

    fingerprint = base64.b64encode(hashlib.sha256(key).digest()).decode().rstrip("=")
    address, _, port = known_as.removeprefix("[").partition("]:")
    scan = shlex.join(["ssh-keyscan", "-t", key_type, *(["-p", port] if port else []), address])
    return (f"unknown host key {key_type} SHA256:{fingerprint} of {known_as}; if that is the "
            f"host's key (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub on it), record it with "
            f"`{scan} >> ~/.ssh/known_hosts`, or pass --accept-new-host-keys")


class Lines:
    """Bytes in, each complete line out to `follow` (decoded); all of it kept."""

    def __init__(self, follow: Follow | None, limit: int) -> None:
        self.follow, self.data, self.done, self.limit = follow, bytearray(), 0, limit

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > self.limit:
            raise TooMuchOutput
        end = self.data.rfind(b"\n") + 1
        if self.follow is not None and end > self.done:
            for line in bytes(self.data[self.done:end]).decode("utf-8", "replace").splitlines():
                self.follow(line)
        self.done = max(self.done, end)


class LocalProcess(Protocol):
    """A process of this machine whose output is read here: subprocess.Popen's members that
    collect_process uses, which the agent forked by `capture local` has too (headstart.py)."""

    @property
    def args(self) -> Any: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def stderr(self) -> IO[bytes] | None: ...
    @property
    def returncode(self) -> int | Any: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...
    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]: ...


def pump(proc: LocalProcess, deadline: float, follow: Follow | None,
         limit: int) -> tuple[bytes, bytes]:
    """communicate(), passing stderr lines on as they come; TooMuchOutput once stdout or
    stderr holds more than `limit` bytes."""
    out, err = bytearray(), Lines(follow, limit)

    def take(stream: IO[bytes], chunk: bytes) -> None:
        if stream is proc.stdout:
            out.extend(chunk)
            if len(out) > limit:
                raise TooMuchOutput
        else:
            err.add(chunk)

    read_to_end((proc.stdout, proc.stderr), deadline, take, proc.args)
    proc.wait(max(0.0, deadline - time.monotonic()))
    return bytes(out), bytes(err.data)


def stop_unread(proc: LocalProcess) -> None:
    """End a command that printed past the cap without reading any more of it: killed, and
    its pipes closed, so a child of its shell that still writes meets a broken pipe rather
    than a reader (communicate() would read the runaway whole)."""
    proc.kill()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    proc.wait()


def collect_process(host_name: str, proc: LocalProcess, timeout: float,
                    follow: Follow | None, cut_lifeline: Callable[[], None] | None) -> Result:
    """What a local process (a `sh -c`, or the ssh client of a command) prints, with the
    cap, and its exit status. Past `timeout`, or on Ctrl-C, its lifeline is cut first, so
    a command that watches it ends its own work (settle), then the process is killed."""
    limit = max_output_bytes()
    try:
        out, err = pump(proc, time.monotonic() + timeout, follow, limit)
    except TooMuchOutput:
        stop_unread(proc)
        raise output_refused(host_name, limit) from None
    except BaseException as exc:   # timed out, or Ctrl-C
        if cut_lifeline is not None:
            cut_lifeline()
            cut_lifeline = None
            settle(proc)
        proc.kill()
        proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise HostError(f"{host_name}: command timed out after {duration(timeout)}") \
                from None
        raise
    finally:
        if cut_lifeline is not None:
            cut_lifeline()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return Result(proc.returncode, out.decode("utf-8", "replace"),
                  err.decode("utf-8", "replace"))


def settle(proc: LocalProcess) -> None:
    """A moment for a command whose lifeline was cut to end its own work (an agent kills the
    benchmark it runs in a session of its own, which killing the agent would orphan)."""
    try:
        proc.communicate(timeout=LIFELINE_GRACE_S)  # reading, so it never blocks writing
    except subprocess.TimeoutExpired:
        pass


class ConnectKwargs(TypedDict, total=False):
    """What fabric hands paramiko's SSHClient.connect for one host."""

    banner_timeout: float
    auth_timeout: float
    key_filename: list[str]
    disabled_algorithms: dict[str, list[str]]


def paramiko_kex_disabled(wanted: str, name: str) -> list[str]:
    """The key exchanges of paramiko's to leave out for an OpenSSH `KexAlgorithms` value
    (`a,b`: only those; `-a`: not those; `+a`, `^a`: paramiko's own, which it cannot reorder).
    paramiko has no sntrup761x25519 (OpenSSH 9.0-9.8's post-quantum default), only
    mlkem768x25519 (OpenSSH 9.9's): a list it can do none of is one line, never a silent
    fallback to an exchange the user did not choose."""
    import fnmatch

    import paramiko

    own: tuple[str, ...] = tuple(paramiko.Transport._preferred_kex)
    value = wanted.strip()
    if value[:1] in ("+", "^"):
        return []
    names = [item.strip() for item in value.lstrip("-").split(",") if item.strip()]

    def listed(kex: str) -> bool:
        return any(fnmatch.fnmatchcase(kex, pattern) for pattern in names)

    if value.startswith("-"):
        disabled = [kex for kex in own if listed(kex)]
    else:
        disabled = [kex for kex in own if not listed(kex)]
    if len(disabled) == len(own):
        raise HostError(f"{name}: KexAlgorithms {value} leaves paramiko no key exchange (it "
                        f"can do {', '.join(own)}; not sntrup761x25519); reach the host "
                        "with ansible_connection: ssh, or choose one of those")
    return disabled


def quiet_paramiko_logger() -> None:
    """paramiko logs tracebacks from its own threads; this transport turns every failure into
    one HostError, so they would only say it again, as a traceback. Done when paramiko is
    first used rather than by the command line at start: only this transport loads it, and
    importing logging cost every capture a few ms before its handshake began."""
    import logging

    logger = logging.getLogger("paramiko")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    logger.propagate = False


class SSHTransport(ClosedOnExit):
    """A host over SSH via fabric, with known_hosts checking that fabric leaves out."""

    def __init__(self, host: Host, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 accept_new_host_keys: bool = False) -> None:
        from fabric import Connection  # imported here: 0.3 s that `local` never needs

        quiet_paramiko_logger()
        self.host = host
        connect_kwargs: ConnectKwargs = {"banner_timeout": connect_timeout,
                                         "auth_timeout": connect_timeout}
        if host.key_file:
            connect_kwargs["key_filename"] = [os.path.expanduser(host.key_file)]
        # gateway=False: fabric would build the bastions of a ProxyJump itself, trusting any
        # key they show; Route builds them, checked like this host (in open()).
        self.connection = Connection(host.address, user=host.user, port=host.port,
                                     connect_timeout=connect_timeout,
                                     connect_kwargs=connect_kwargs, gateway=False)
        # The key exchange the inventory's ssh args or the SSH config choose, as ssh would
        # take it (the inventory's first); paramiko's own order otherwise.
        wanted = inventory_crypto(host.vars, host.name).get("KexAlgorithms") \
            or self.connection.ssh_config.get("kexalgorithms")
        if wanted:
            disabled = paramiko_kex_disabled(str(wanted), host.name)
            if disabled:
                self.connection.connect_kwargs["disabled_algorithms"] = {"kex": disabled}
        accept = accept_new_host_keys or bool(host.vars.get("accept_new_host_keys"))
        check_host_keys(self.connection, accept)
        self.route = Route(accept, connect_timeout)
        self.bastions: list[Connection] | None = None   # first hop first, once routed

    @property
    def where(self) -> str:
        return where(self.connection)

    def open(self) -> None:
        if self.connection.is_connected:
            return
        if self.bastions is None:
            given = inventory_jump(self.host.vars, self.host.name)
            try:
                self.bastions = self.route.bastions(self.connection, given)
            except HostError as exc:
                raise HostError(f"{self.host.name}: {exc}") from None
        for bastion in self.bastions:   # each opened alone, so a refusal names the bastion
            self._connect(bastion, f"{self.host.name}: bastion {bastion.original_host}")
        self._connect(self.connection, self.host.name)

    def _connect(self, connection: Connection, name: str) -> None:
        try:
            connection.open()
        except HostError as exc:   # from the host key policy: said of the inventory's host
            raise HostError(f"{name}: {exc}") from None
        except Exception as exc:
            if isinstance(connection.gateway, str) and proxy_ended(exc):
                raise HostError(f"{name}: unreachable: its ProxyCommand ended before SSH began "
                                f"(it checks its bastion's host key itself; run "
                                f"`{shown_command(connection.gateway)}` to see why)") from None
            raise HostError(describe_connect_error(name, where(connection), exc)) from None
        # A benchmark can run silently for many minutes; keepalives stop NAT boxes and
        # firewalls from dropping the idle connection under it.
        connection.transport.set_keepalive(KEEPALIVE_S)

    def run(self, command: str, timeout: float, follow: Follow | None = None) -> Result:
        # A channel of our own rather than fabric's run: on Ctrl-C fabric waits for the
        # remote command to finish (a benchmark: hours); closing the channel ends it here
        # and, with a lifeline, there too.
        import paramiko

        self.open()
        try:
            channel = self.connection.transport.open_session()
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise HostError(f"{self.host.name}: connection lost ({exc})") from None
        try:
            channel.exec_command(command)
            if follow is None:
                channel.shutdown_write()  # a followed command keeps stdin as its lifeline
            limit = max_output_bytes()
            try:
                out, err = drain(channel, time.monotonic() + timeout, follow, limit)
            except TooMuchOutput:   # closing the channel (below) ends the command
                raise output_refused(self.host.name, limit) from None
            if out is None:
                raise HostError(f"{self.host.name}: command timed out after {duration(timeout)}")
            return Result(channel.recv_exit_status(), out.decode("utf-8", "replace"),
                          err.decode("utf-8", "replace"))
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise HostError(f"{self.host.name}: connection lost ({exc})") from None
        finally:
            channel.close()

    def put(self, data: bytes, path: str) -> None:
        import paramiko

        self.open()
        temporary = f"{path}.{os.urandom(16).hex()}.tmp"
        try:
            sftp = self.connection.sftp()
            sftp.putfo(io.BytesIO(data), temporary)
            sftp.posix_rename(temporary, path)
        except paramiko.SSHException as exc:
            raise HostError(f"{self.host.name}: cannot upload {path}: SFTP unavailable "
                            f"({exc})") from None
        except OSError as exc:
            raise HostError(f"{self.host.name}: cannot upload {path}: {exc}") from None

    def close(self) -> None:
        self.connection.close()
        for bastion in reversed(self.bastions or []):   # fabric leaves them open
            bastion.close()


def where(connection: Connection) -> str:
    return f"{connection.user}@{connection.host}:{connection.port}"


def known_hosts_file(connection: Connection) -> Path:
    configured = connection.ssh_config.get("userknownhostsfile", "")
    first = configured.split()[0] if configured else "~/.ssh/known_hosts"
    return Path(os.path.expanduser(first))


def check_host_keys(connection: Connection, accept_new: bool) -> None:
    """known_hosts and our policy in place of fabric's AutoAddPolicy, which trusts any key."""
    known_hosts = known_hosts_file(connection)
    client = connection.client
    # What client.load_system_host_keys() would load (~/.ssh/known_hosts, then the
    # configured file), parsed once per process and shared: paramiko only reads these (a
    # key accepted anew goes to the client's own get_host_keys()).
    client._system_host_keys = system_host_keys(known_hosts)
    client.set_missing_host_key_policy(known_hosts_policy(accept_new, known_hosts))


_parsed_host_keys: dict[tuple[Any, ...], Any] = {}   # the latest files' stamp -> HostKeys


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns, status.st_size


def system_host_keys(known_hosts: Path) -> Any:
    """~/.ssh/known_hosts (if readable) and `known_hosts` (if it exists), as one HostKeys,
    parsed again only when a file changed (a key recorded with --accept-new-host-keys).
    paramiko's parse checks each line against all before it: per connection, that made a
    fleet capture's CPU grow with the square of a known_hosts that lists the fleet."""
    import paramiko

    default = Path(os.path.expanduser("~/.ssh/known_hosts"))
    stamp = (default, file_stamp(default), known_hosts, file_stamp(known_hosts))
    with _known_hosts_lock:
        keys = _parsed_host_keys.get(stamp)
        if keys is None:
            keys = paramiko.HostKeys()
            try:
                keys.load(str(default))
            except OSError:
                pass
            if known_hosts.exists():
                keys.load(str(known_hosts))
            _parsed_host_keys.clear()
            _parsed_host_keys[stamp] = keys
        return keys


MAX_JUMP_DEPTH = 8   # bastions reached through bastions; past this the SSH config loops


class Route(NamedTuple):
    """The bastions on the way to a host, each a Connection whose host key is checked against
    known_hosts exactly like the host's own (unknown: refused or, opted in, recorded;
    changed: refused). A ProxyCommand is left to its own process: `ssh -W` checks the keys
    it meets with the user's own ssh settings."""

    accept_new: bool
    connect_timeout: float

    def bastions(self, target: Connection, given: Jump | None) -> list[Connection]:
        """Sets `target`'s gateway; returns the bastions to open before it, the first first.
        `given` (the inventory's ssh args) wins over ~/.ssh/config, as on ssh's command line."""
        return self._through(target, given, depth=0)

    def _through(self, connection: Connection, given: Jump | None,
                 depth: int) -> list[Connection]:
        jump = given if given is not None else configured_jump(connection)
        if jump.command:   # ~/.ssh/config's comes with %h %p %r expanded; the inventory's not
            connection.gateway = expand_tokens(jump.command, connection) if given \
                else jump.command
            return []
        if not jump.hops or names_itself(connection, jump.hops):
            return []
        if depth >= MAX_JUMP_DEPTH:
            raise HostError(f"more than {MAX_JUMP_DEPTH} nested ProxyJump bastions, "
                            f"{connection.original_host} among them (a loop in the SSH config?)")
        chain: list[Connection] = []
        previous: Connection | None = None
        for hop in jump.hops:
            bastion = self.connection(hop)
            if previous is None:   # the first hop's own config may route it further
                chain += self._through(bastion, None, depth + 1)
            else:                  # a later one is reached through the hop before it
                bastion.gateway = previous
            chain.append(bastion)
            previous = bastion
        connection.gateway = previous
        return chain

    def connection(self, hop: str) -> Connection:
        from fabric import Connection

        timeouts = {"banner_timeout": self.connect_timeout, "auth_timeout": self.connect_timeout}
        bastion = Connection(hop, connect_timeout=self.connect_timeout,
                             connect_kwargs=timeouts, gateway=False)
        check_host_keys(bastion, self.accept_new)
        return bastion


def configured_jump(connection: Connection) -> Jump:
    """The proxy ~/.ssh/config gives this connection's host (ProxyJump first, as fabric)."""
    config = connection.ssh_config
    if "proxyjump" in config:
        return Jump(hops=proxy_jump_hops(str(config["proxyjump"])))
    command = config.get("proxycommand")   # paramiko reads `ProxyCommand none` as None
    return Jump(command=str(command)) if command else Jump()


def proxy_ended(exc: Exception) -> bool:
    """A ProxyCommand that exited before the SSH banner (ssh refusing a bastion's key, say):
    paramiko sees a stream that closed, or one it could no longer read."""
    import paramiko

    return isinstance(exc, paramiko.ProxyCommandFailure) or (
        isinstance(exc, paramiko.SSHException) and bool(HANDSHAKE_LOST.search(str(exc))))


def shown_command(command: str) -> str:
    """A ProxyCommand as paramiko runs it (its words as shlex splits them, no shell), for a
    person to run: each word quoted as a shell word, since the inventory's values (%r: the
    user) can hold `;`, and passwords (`sshpass -p ...`) masked by the secret detector."""
    from envsnap.agent.redact import redact_text

    try:
        words = shlex.split(command)
    except ValueError:   # no words paramiko could run either: the text, as one word
        words = [command]
    return redact_text(shlex.join(words))


def expand_tokens(command: str, connection: Connection) -> str:
    """A ProxyCommand's %h, %p, %r (and the rest of ssh's tokens) for this connection, the
    way paramiko expands them in ~/.ssh/config (fabric's own expansion would say port 22)."""
    import paramiko

    one_line = " ".join(command.splitlines())   # a config line, as ssh_config holds it
    config = paramiko.SSHConfig.from_text(
        f"Host *\n  HostName {connection.host}\n  Port {connection.port}\n"
        f"  User {connection.user}\n  ProxyCommand {one_line}\n")
    return str(config.lookup(connection.original_host)["proxycommand"])


def names_itself(connection: Connection, hops: tuple[str, ...]) -> bool:
    """A hop that is this very host: a `Host *` block's ProxyJump met by the bastion itself,
    which reaches it directly (fabric's rule, here checked against both of its names)."""
    from fabric.connection import derive_shorthand

    names = {connection.original_host, connection.host}
    return any(derive_shorthand(hop)["host"] in names for hop in hops)


def drain(channel: paramiko.Channel, deadline: float, follow: Follow | None,
          limit: int) -> tuple[Any, bytes]:
    """(stdout, stderr) of a command once it exits, or (None, b"") past the deadline;
    stderr lines go to `follow` as they come; TooMuchOutput past `limit` bytes of either.

    The server sends a command's output before its exit status, and paramiko queues
    messages in order: once the status is in, what is buffered is all there is."""
    out, err = bytearray(), Lines(follow, limit)
    pause = POLL_FIRST_S
    while True:
        finished = channel.exit_status_ready()
        got = False
        while channel.recv_ready():
            out += channel.recv(READ_CHUNK)
            if len(out) > limit:
                raise TooMuchOutput
            got = True
        while channel.recv_stderr_ready():
            err.add(channel.recv_stderr(READ_CHUNK))
            got = True
        if finished:
            return bytes(out), bytes(err.data)
        if time.monotonic() > deadline:
            return None, b""
        pause = POLL_FIRST_S if got else min(pause * 2, POLL_MAX_S)
        time.sleep(pause)


def describe_connect_error(name: str, where: str, exc: Exception) -> str:
    """One line a person can act on, from the zoo of socket and paramiko exceptions."""
    import socket

    import paramiko

    if isinstance(exc, paramiko.BadHostKeyException):
        return (f"{name}: host key CHANGED for {exc.hostname} (possible man-in-the-middle); "
                "refusing to connect; fix known_hosts if the change is expected")
    if isinstance(exc, paramiko.AuthenticationException):
        return f"{name}: authentication refused for {where} ({exc})"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"{name}: unreachable: no answer from {where} (timed out)"
    if isinstance(exc, socket.gaierror):
        return f"{name}: unreachable: unknown host name ({exc.strerror})"
    if isinstance(exc, paramiko.SSHException) and HANDSHAKE_LOST.search(str(exc)):
        return f"{name}: unreachable: {where} accepted the connection but never spoke SSH"
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return f"{name}: unreachable: connection refused by {where}"
    if isinstance(exc, OSError):
        return f"{name}: unreachable: {where}: {exc.strerror or exc}"
    return f"{name}: SSH failed for {where}: {exc}"
