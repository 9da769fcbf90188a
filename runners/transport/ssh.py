"""SSH transport over paramiko with pinned host keys, directly or through jump hosts.

Every host's key is given as its OpenSSH public key line and is the only key accepted
(``RejectPolicy``: an unknown or changed key refuses the connection; there is no auto-add).
Commands run under ``timeout --kill-after`` on the node too (built by ``runners.probes``),
because paramiko's timeout is client-side only (PLATFORM.md gotcha 6); here the channel's own
deadline closes the session when the node's timeout did not end it.

A target with ``via`` sits behind a jump host (bastion): the jump host is connected first (its
own pinned key, its own credential), it opens a ``direct-tcpip`` channel to the target's address
and port, and the target's SSH session runs inside that channel, pinned as well. A jump host
may itself have a ``via`` (up to ``MAX_JUMP_HOSTS``). Errors say which hop failed.

Setting up a connection that fails as :class:`Unreachable` before authentication (refused, timed
out, reset) is retried ``connect_retries`` times with back-off 1 s, 2 s, 4 s, … — a node that is
rebooting or an sshd that hit ``MaxStartups``. Authentication and host-key failures are never
retried, and nothing is retried once a command has started (:meth:`SSHConnection.run`).

Keepalive: every hop's transport sends SSH keepalives every ``keepalive_s`` seconds
(paramiko ``set_keepalive``), and a running command whose node sent nothing for ``keepalive_s``
has the session asked to answer (a channel opened and closed, bounded by ``keepalive_s``);
``keepalive_count`` unanswered asks in a row close the connection as :class:`Unreachable`. So a
hung session is noticed within ``keepalive_s × (1 + keepalive_count)`` (10 s × 4 = 40 s by
default), not at the probe's timeout. A session that died under a command (its sshd killed, the
link gone) is :class:`Unreachable` too, never a command "without exit status".
"""

from __future__ import annotations

import base64
import io
import logging
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import paramiko

from .errors import (
    AuthenticationFailed,
    CommandCancelled,
    CommandTimeout,
    HostKeyRejected,
    TransportError,
    Unreachable,
)

logger = logging.getLogger(__name__)

_KEY_CLASSES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0
MAX_JUMP_HOSTS = 3


@dataclass(frozen=True)
class SSHTarget:
    """Where and as whom to connect. ``host_key`` is the pinned public key line
    (``"ssh-ed25519 AAAA…"``); ``private_key`` the OpenSSH private key text; ``via`` the jump
    host to reach it through (None: directly)."""

    name: str
    host: str
    port: int
    user: str
    host_key: str
    private_key: str = field(repr=False)
    passphrase: str | None = field(default=None, repr=False)
    connect_timeout: float = 10.0
    connect_retries: int = 3
    via: SSHTarget | None = None
    keepalive_s: float = 10.0
    keepalive_count: int = 3

    def __repr__(self) -> str:  # never show the key
        via = f" via {self.via!r}" if self.via else ""
        return f"SSHTarget({self.name!r}, {self.user}@{self.host}:{self.port}{via})"

    def hops(self) -> list[SSHTarget]:
        """The jump hosts, outermost first, then this target."""
        chain: list[SSHTarget] = []
        hop: SSHTarget | None = self
        while hop is not None:
            if len(chain) > MAX_JUMP_HOSTS:
                raise Unreachable(
                    f"{self.name}: more than {MAX_JUMP_HOSTS} jump hosts in a row: refusing",
                    transient=False,
                )
            chain.append(hop)
            hop = hop.via
        return chain[::-1]


@dataclass(frozen=True)
class CommandResult:
    """Exit status (None if the node sent none) and the raw bytes of both streams."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    started_at: datetime
    finished_at: datetime


def _where(target: SSHTarget) -> str:
    return f"{target.name} ({target.host}:{target.port})"


@dataclass(frozen=True)
class _Hop:
    """One hop of a connection, its keys loaded and its name for error messages."""

    target: SSHTarget
    label: str
    key_type: str
    pinned: paramiko.PKey = field(repr=False)
    pkey: paramiko.PKey = field(repr=False)


def _load_private_key(text: str, passphrase: str | None, label: str) -> paramiko.PKey:
    for cls in _KEY_CLASSES:
        try:
            return cls.from_private_key(io.StringIO(text), password=passphrase)
        except paramiko.PasswordRequiredException:
            raise AuthenticationFailed(f"{label}: the private key needs a passphrase") from None
        except (paramiko.SSHException, ValueError):
            continue
    raise AuthenticationFailed(
        f"{label}: the stored private key is not an Ed25519, ECDSA or RSA key "
        "(or its passphrase is wrong)"
    )


def private_key_type(text: str, passphrase: str | None = None) -> str:
    """The type (``"ssh-ed25519"``…) of an OpenSSH private key; raises AuthenticationFailed
    (without the key in the message) when it does not load or needs another passphrase."""
    return _load_private_key(text, passphrase, "private key").get_name()


def _pinned_key(line: str, label: str) -> tuple[str, paramiko.PKey]:
    try:
        key_type, data = line.split()[:2]
        return key_type, paramiko.PKey.from_type_string(key_type, base64.b64decode(data))
    except (ValueError, paramiko.SSHException) as error:
        raise HostKeyRejected(
            f"{label}: the pinned host key is not a usable public key: {error}"
        ) from None


def _hops_prepared(target: SSHTarget, *, jumps_for: str | None = None) -> list[_Hop]:
    """Check every hop's pinned key and private key before touching the network.

    ``jumps_for``: every hop of ``target``'s chain, ``target`` too, is a jump host for that.
    """
    chain = target.hops()
    prepared = []
    for index, hop in enumerate(chain):
        if index == len(chain) - 1 and jumps_for is None:
            jumps = " via ".join(_where(h) for h in reversed(chain[:-1]))
            label = _where(hop) + (f" via jump host {jumps}" if jumps else "")
        else:
            label = f"jump host {_where(hop)} for {jumps_for or target.name}"
        key_type, pinned = _pinned_key(hop.host_key, label)
        pkey = _load_private_key(hop.private_key, hop.passphrase, label)
        prepared.append(_Hop(hop, label, key_type, pinned, pkey))
    return prepared


def _forward(client: paramiko.SSHClient, jump_label: str, host: str, port: int,
             timeout: float) -> paramiko.Channel:
    """A ``direct-tcpip`` channel from the jump host to ``host:port``."""
    transport = client.get_transport()
    try:
        if transport is None or not transport.is_active():
            raise paramiko.SSHException("the SSH connection was lost")
        return transport.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0),
                                      timeout=timeout)
    except paramiko.ChannelException as error:
        if error.code == paramiko.common.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED:
            raise Unreachable(
                f"{jump_label} refused to forward to {host}:{port} ({error.text}): "
                "its sshd must allow TCP forwarding (AllowTcpForwarding)",
                transient=False,
            ) from None
        raise Unreachable(f"{jump_label} could not reach {host}:{port}: {error.text}") from None
    except (paramiko.SSHException, OSError, EOFError) as error:
        raise Unreachable(f"{jump_label}: forwarding to {host}:{port} failed: {error}") from None


#: Ciphers preferred over paramiko's default order (AES-CTR with a separate HMAC): AES-GCM, an
#: AEAD cipher OpenSSH has offered since 6.2, costs this process about 15 % less CPU a command
#: (0.3 ms of 2.2; issue 17: the service's CPU per probe). Every cipher paramiko offers stays on
#: offer after them, so a server without GCM negotiates as before.
PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _transport(sock: Any, /, *, gss_kex: bool = False, gss_deleg_creds: bool = True,
               disabled_algorithms: Any = None) -> paramiko.Transport:
    """paramiko's Transport offering :data:`PREFERRED_CIPHERS` first (``SSHClient.connect``'s
    ``transport_factory``: it passes the socket and ``disabled_algorithms``)."""
    del gss_kex, gss_deleg_creds  # in the stubs' protocol only: paramiko 5 has no GSS-API
    transport = paramiko.Transport(sock, disabled_algorithms=disabled_algorithms)
    options = transport.get_security_options()
    offered = tuple(options.ciphers)
    options.ciphers = tuple(c for c in PREFERRED_CIPHERS if c in offered) + tuple(
        c for c in offered if c not in PREFERRED_CIPHERS)
    return transport


def _hop_connect(hop: _Hop, sock: paramiko.Channel | None) -> paramiko.SSHClient:
    t = hop.target
    client = paramiko.SSHClient()
    known_as = t.host if t.port == 22 else f"[{t.host}]:{t.port}"
    client.get_host_keys().add(known_as, hop.key_type, hop.pinned)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(
            t.host, port=t.port, username=t.user, pkey=hop.pkey, sock=sock,
            timeout=t.connect_timeout, banner_timeout=t.connect_timeout,
            auth_timeout=t.connect_timeout, channel_timeout=t.connect_timeout,
            allow_agent=False, look_for_keys=False, transport_factory=_transport,
        )
    except paramiko.BadHostKeyException as error:
        client.close()
        raise HostKeyRejected(
            f"{hop.label} presented host key {error.key.fingerprint}, which is not the "
            f"pinned key {hop.pinned.fingerprint}: refusing to connect"
        ) from None
    except paramiko.AuthenticationException as error:
        client.close()
        raise AuthenticationFailed(
            f"{hop.label}: authentication as {t.user} failed ({error})"
        ) from None
    except paramiko.SSHException as error:
        client.close()
        if "not found in known_hosts" in str(error):
            raise HostKeyRejected(
                f"{hop.label} presented a host key of another type than the pinned "
                f"{hop.key_type}: refusing to connect"
            ) from None
        # "Incompatible ssh peer" (no common algorithm) will not change on a second try.
        raise Unreachable(f"{hop.label}: SSH failed: {error}",
                          transient=not str(error).startswith("Incompatible")) from None
    except (OSError, EOFError) as error:  # TimeoutError, refused, reset
        client.close()
        raise Unreachable(f"{hop.label} unreachable: {_reason(error)}") from None
    transport = client.get_transport()
    if transport is not None and t.keepalive_s > 0:
        transport.set_keepalive(max(1, round(t.keepalive_s)))
    if transport is not None:
        # paramiko's thread wakes on its socket's timeout (0.1 s) to look for its own shutdown
        # and keepalives: about 40 µs of CPU a wake-up, 25 ms a second for 64 open sessions
        # (issue 17). Set up, the session's thread wakes every IDLE_POLL_S; data wakes it at
        # once, and a closed transport's thread ends within that.
        transport.sock.settimeout(IDLE_POLL_S)
    return client


def _reason(error: BaseException) -> str:
    """A socket error in a few words ("Connection refused", "timed out")."""
    if isinstance(error, paramiko.ssh_exception.NoValidConnectionsError):
        return "; ".join(sorted({_reason(e) for e in error.errors.values()}))
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def _chain_connect(hops: list[_Hop]) -> list[paramiko.SSHClient]:
    """Connect hop by hop; on failure close what was opened and raise the hop's error."""
    clients: list[paramiko.SSHClient] = []
    try:
        for index, hop in enumerate(hops):
            sock = None
            if index:
                sock = _forward(clients[-1], hops[index - 1].label, hop.target.host,
                                hop.target.port, hop.target.connect_timeout)
            clients.append(_hop_connect(hop, sock))
    except BaseException:
        for client in reversed(clients):
            client.close()
        raise
    return clients


IDLE_POLL_S = 1.0  # seconds between the wake-ups of an idle session's transport thread


def backoff_delay(retry: int) -> float:
    """Seconds to wait before retry number ``retry`` (1, 2, 3, …): 1 s, 2 s, 4 s, … ≤ 30 s."""
    return min(BACKOFF_FIRST_S * 2.0 ** (retry - 1), BACKOFF_MAX_S)


class SSHConnection:
    """One SSH connection to a node (through its jump hosts), reused for all of a job's commands.

    Use as a context manager. Raises :class:`Unreachable`, :class:`AuthenticationFailed` or
    :class:`HostKeyRejected` on entry; :meth:`run` raises :class:`CommandTimeout` or
    :class:`CommandCancelled`. ``sleep`` waits between connection attempts (tests pass a
    recorder).
    """

    def __init__(self, target: SSHTarget, *,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.target = target
        self.attempts = 0
        self._sleep = sleep
        self._clients: list[paramiko.SSHClient] = []
        # Set when a command ended in a TransportError (lost, timed out, cancelled, capped): a
        # pool (``runners.transport.pool``) never hands such a connection out again.
        self.faulted = False
        self.opened_at = 0.0  # time.monotonic() when the session was set up

    @property
    def client(self) -> paramiko.SSHClient | None:
        """The SSH client of the target itself (the last hop)."""
        return self._clients[-1] if self._clients else None

    def __enter__(self) -> SSHConnection:
        hops = _hops_prepared(self.target)
        retries = max(0, self.target.connect_retries)
        while True:
            self.attempts += 1
            try:
                self._clients = _chain_connect(hops)
                self.opened_at = time.monotonic()
                return self
            except Unreachable as error:
                if not error.transient:
                    raise
                if self.attempts > retries:
                    if self.attempts == 1:
                        raise
                    raise Unreachable(
                        f"{error} (gave up after {self.attempts} attempts)"
                    ) from None
                delay = backoff_delay(self.attempts)
                logger.warning("%s (attempt %d of %d); trying again in %g s",
                               error, self.attempts, retries + 1, delay)
                self._sleep(delay)

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every hop's session (the target's first); the connection is then unusable."""
        for client in reversed(self._clients):
            client.close()
        self._clients = []

    def usable(self, timeout: float) -> bool:
        """Whether the connection can still run a command: every hop's transport active and
        the node's session answering a channel opened and closed within ``timeout`` (one
        round trip), and no command on it ever failed."""
        if self.faulted or not self._clients:
            return False
        transports = [client.get_transport() for client in self._clients]
        if any(t is None or not t.is_active() for t in transports):
            return False
        last = transports[-1]
        return last is not None and _alive(last, timeout)

    def _keepalive_check(self, transport: paramiko.Transport, heard: dict[str, float]) -> None:
        """Ask a silent session to answer; close it as Unreachable after ``keepalive_count``
        unanswered asks in a row."""
        every = self.target.keepalive_s
        if every <= 0 or time.monotonic() - heard["at"] < every:
            return
        if _alive(transport, every):
            heard["at"], heard["misses"] = time.monotonic(), 0
            return
        heard["misses"] += 1
        heard["at"] = time.monotonic() - every  # ask again at once
        if heard["misses"] >= max(1, self.target.keepalive_count):
            transport.close()
            raise Unreachable(
                f"{self.target.name}: the SSH session stopped answering ({heard['misses']} "
                f"keepalive checks of {every:g} s unanswered)")

    @staticmethod
    def _session_died(transport: paramiko.Transport) -> bool:
        """A channel that closed without an exit status: was it the whole session? (The
        transport notices a dropped connection a moment after closing its channels.)"""
        until = time.monotonic() + 2.0
        while transport.is_active() and time.monotonic() < until:
            time.sleep(0.05)
        return not transport.is_active()

    def run(self, command: str, *, timeout: float,
            on_output: Callable[[str, bytes], None] | None = None,
            on_tick: Callable[[], bool] | None = None,
            keep_output: bool = True) -> CommandResult:
        """Run ``command`` (already quoted) and collect stdout and stderr separately.

        ``timeout`` (s) bounds the whole command on the client side; a command still running
        then has its channel closed and :class:`CommandTimeout` is raised. ``on_output(stream,
        data)`` sees every piece of ``"stdout"`` / ``"stderr"`` as it arrives; ``on_tick()`` is
        called at least once a second and, when it returns True, the channel is closed and
        :class:`CommandCancelled` raised (the connection stays usable, e.g. to kill the remote
        process). Never retried.

        ``keep_output=False``: the bytes go only to ``on_output`` (the result's streams are
        empty), so a large output costs no memory here; ``on_output`` may raise
        :class:`OutputCapReached` to stop the command (the channel is closed).
        """
        try:
            return self._run(command, timeout=timeout, on_output=on_output, on_tick=on_tick,
                             keep_output=keep_output)
        except TransportError:
            self.faulted = True
            raise

    def _run(self, command: str, *, timeout: float,
             on_output: Callable[[str, bytes], None] | None,
             on_tick: Callable[[], bool] | None, keep_output: bool) -> CommandResult:
        started = datetime.now(UTC)
        deadline = time.monotonic() + timeout
        transport = self.client.get_transport() if self.client else None
        if transport is None or not transport.is_active():
            raise Unreachable(f"{self.target.name}: the SSH connection was lost")
        try:
            channel = transport.open_session(timeout=self.target.connect_timeout)
            channel.settimeout(timeout)
            channel.exec_command(command)  # nosec B601 # callers quote every argument (shlex)
        except (paramiko.SSHException, OSError) as error:
            raise Unreachable(f"{self.target.name}: cannot start the command: {error}") from None
        streams = {"stdout": bytearray(), "stderr": bytearray()}
        heard = {"at": time.monotonic(), "misses": 0}

        def take(stream: str, data: bytes) -> None:
            if keep_output:
                streams[stream] += data
            if data:
                heard["at"], heard["misses"] = time.monotonic(), 0
            if on_output is not None and data:
                on_output(stream, data)

        try:
            while True:
                while channel.recv_ready():
                    take("stdout", channel.recv(65536))
                while channel.recv_stderr_ready():
                    take("stderr", channel.recv_stderr(65536))
                if channel.exit_status_ready() and not (
                    channel.recv_ready() or channel.recv_stderr_ready()
                ):
                    # Drain what arrived together with the exit status.
                    while chunk := channel.recv(65536):
                        take("stdout", chunk)
                    while chunk := channel.recv_stderr(65536):
                        take("stderr", chunk)
                    break
                if on_tick is not None and on_tick():
                    raise CommandCancelled(
                        f"{self.target.name}: cancelled while the command was running"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CommandTimeout(
                        f"{self.target.name}: command still running after {timeout:g} s"
                    )
                self._keepalive_check(transport, heard)
                if channel.eof_received:
                    # Both streams are closed, so the channel's pipe reads as ready for good
                    # (a select would return at once, a loop spinning on the CPU): wait for the
                    # exit status itself.
                    channel.status_event.wait(min(remaining, 1.0))
                else:
                    select.select([channel], [], [], min(remaining, 1.0))
            exit_code = channel.recv_exit_status()
            if exit_code == -1 and self._session_died(transport):
                raise Unreachable(f"{self.target.name}: the SSH session was lost during the "
                                  f"command (no exit status came back)")
        except (OSError, EOFError) as error:
            raise Unreachable(
                f"{self.target.name}: connection lost during command: {error}"
            ) from None
        finally:
            channel.close()
        return CommandResult(
            None if exit_code == -1 else exit_code, bytes(streams["stdout"]),
            bytes(streams["stderr"]), started, datetime.now(UTC),
        )


def _alive(transport: paramiko.Transport, timeout: float) -> bool:
    """Whether the session answers: a channel opened (and closed at once) within ``timeout``."""
    try:
        transport.open_session(timeout=timeout).close()
        return True
    except (paramiko.SSHException, OSError, EOFError):
        return False


def host_key_presented(host: str, port: int, *, via: SSHTarget | None = None,
                       timeout: float = 10.0) -> str:
    """The public host key line (``"ssh-ed25519 AAAA…"``) ``host:port`` presents, without
    authenticating to it (Ed25519 preferred when it has several). ``via``: reach it through
    that (pinned, authenticated) jump host. Raises the TransportError of the failing hop."""
    where = f"{host}:{port}" + (f" via jump host {_where(via)}" if via else "")
    clients: list[paramiko.SSHClient] = []
    sock: socket.socket | paramiko.Channel | None = None
    transport = None
    try:
        if via is not None:
            hops = _hops_prepared(via, jumps_for=f"{host}:{port}")
            clients = _chain_connect(hops)
            sock = _forward(clients[-1], hops[-1].label, host, port, timeout)
        else:
            try:
                sock = socket.create_connection((host, port), timeout=timeout)
            except OSError as error:
                raise Unreachable(f"{where} unreachable: {_reason(error)}") from None
        transport = paramiko.Transport(sock)
        options = transport.get_security_options()
        options.key_types = sorted(options.key_types, key=lambda name: name != "ssh-ed25519")
        transport.banner_timeout = timeout
        try:
            transport.start_client(timeout=timeout)
        except (paramiko.SSHException, OSError, EOFError) as error:
            raise Unreachable(f"{where}: no SSH host key: {error}") from None
        try:
            key = transport.get_remote_server_key()
        except paramiko.SSHException:
            # paramiko's start_client returns when its timeout passes, key exchange unfinished
            raise Unreachable(f"{where}: no SSH host key within {timeout:g} s: the port "
                              f"accepted the connection but no SSH server completed the key "
                              f"exchange") from None
        return f"{key.get_name()} {key.get_base64()}"
    finally:
        if transport is not None:
            transport.close()
        if sock is not None:
            sock.close()
        for client in reversed(clients):
            client.close()
