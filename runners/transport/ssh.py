"""SSH transport over paramiko with a pinned host key.

The node's host key is given as its OpenSSH public key line and is the only key accepted
(``RejectPolicy``: an unknown or changed key refuses the connection; there is no auto-add).
Commands run under ``timeout --kill-after`` on the node too (built by ``runners.probes``),
because paramiko's timeout is client-side only (PLATFORM.md gotcha 6); here the channel's own
deadline closes the session when the node's timeout did not end it.
"""

from __future__ import annotations

import base64
import io
import select
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import paramiko

from .errors import AuthenticationFailed, CommandTimeout, HostKeyRejected, Unreachable

_KEY_CLASSES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)


@dataclass(frozen=True)
class SSHTarget:
    """Where and as whom to connect. ``host_key`` is the pinned public key line
    (``"ssh-ed25519 AAAA…"``); ``private_key`` the OpenSSH private key text."""

    name: str
    host: str
    port: int
    user: str
    host_key: str
    private_key: str
    passphrase: str | None = None
    connect_timeout: float = 10.0

    def __repr__(self) -> str:  # never show the key
        return f"SSHTarget({self.name!r}, {self.user}@{self.host}:{self.port})"


@dataclass(frozen=True)
class CommandResult:
    """Exit status (None if the node sent none) and the raw bytes of both streams."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    started_at: datetime
    finished_at: datetime


def _load_private_key(text: str, passphrase: str | None) -> paramiko.PKey:
    for cls in _KEY_CLASSES:
        try:
            return cls.from_private_key(io.StringIO(text), password=passphrase)
        except paramiko.PasswordRequiredException:
            raise AuthenticationFailed("the private key needs a passphrase") from None
        except (paramiko.SSHException, ValueError):
            continue
    raise AuthenticationFailed("the stored private key is not an Ed25519, ECDSA or RSA key")


def _pinned_key(line: str) -> tuple[str, paramiko.PKey]:
    try:
        key_type, data = line.split()[:2]
        return key_type, paramiko.PKey.from_type_string(key_type, base64.b64decode(data))
    except (ValueError, paramiko.SSHException) as error:
        raise HostKeyRejected(f"the pinned host key is not a usable public key: {error}") from None


class SSHConnection:
    """One SSH connection to a node, reused for all of a job's commands.

    Use as a context manager. Raises :class:`Unreachable`, :class:`AuthenticationFailed` or
    :class:`HostKeyRejected` on entry; :meth:`run` raises :class:`CommandTimeout`.
    """

    def __init__(self, target: SSHTarget) -> None:
        self.target = target
        self.client = paramiko.SSHClient()

    def __enter__(self) -> SSHConnection:
        t = self.target
        key_type, pinned = _pinned_key(t.host_key)
        known_as = t.host if t.port == 22 else f"[{t.host}]:{t.port}"
        self.client.get_host_keys().add(known_as, key_type, pinned)
        self.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        private_key = _load_private_key(t.private_key, t.passphrase)
        try:
            self.client.connect(
                t.host, port=t.port, username=t.user, pkey=private_key,
                timeout=t.connect_timeout, banner_timeout=t.connect_timeout,
                auth_timeout=t.connect_timeout, allow_agent=False, look_for_keys=False,
            )
        except paramiko.BadHostKeyException as error:
            got = error.key.fingerprint
            raise HostKeyRejected(
                f"{t.name} ({t.host}:{t.port}) presented host key {got}, which is not the "
                f"pinned key {pinned.fingerprint}: refusing to connect"
            ) from None
        except paramiko.AuthenticationException as error:
            raise AuthenticationFailed(
                f"{t.name}: authentication as {t.user} failed ({error})"
            ) from None
        except paramiko.SSHException as error:
            if "not found in known_hosts" in str(error):
                raise HostKeyRejected(
                    f"{t.name} ({t.host}:{t.port}) presented a {key_type}-less or other-type "
                    f"host key than the pinned {key_type}: refusing to connect"
                ) from None
            raise Unreachable(f"{t.name} ({t.host}:{t.port}): SSH failed: {error}") from None
        except (TimeoutError, OSError) as error:
            raise Unreachable(f"{t.name} ({t.host}:{t.port}) unreachable: {error}") from None
        return self

    def __exit__(self, *exc_info) -> None:
        self.client.close()

    def run(self, command: str, *, timeout: float) -> CommandResult:
        """Run ``command`` (already quoted) and collect stdout and stderr separately.

        ``timeout`` (s) bounds the whole command on the client side; a command still running
        then has its channel closed and :class:`CommandTimeout` is raised.
        """
        started = datetime.now(UTC)
        deadline = time.monotonic() + timeout
        transport = self.client.get_transport()
        if transport is None or not transport.is_active():
            raise Unreachable(f"{self.target.name}: the SSH connection was lost")
        try:
            channel = transport.open_session(timeout=self.target.connect_timeout)
            channel.settimeout(timeout)
            channel.exec_command(command)
        except (paramiko.SSHException, OSError) as error:
            raise Unreachable(f"{self.target.name}: cannot start the command: {error}") from None
        stdout, stderr = bytearray(), bytearray()
        try:
            while True:
                while channel.recv_ready():
                    stdout += channel.recv(65536)
                while channel.recv_stderr_ready():
                    stderr += channel.recv_stderr(65536)
                if channel.exit_status_ready() and not (
                    channel.recv_ready() or channel.recv_stderr_ready()
                ):
                    # Drain what arrived together with the exit status.
                    while chunk := channel.recv(65536):
                        stdout += chunk
                    while chunk := channel.recv_stderr(65536):
                        stderr += chunk
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CommandTimeout(
                        f"{self.target.name}: command still running after {timeout:g} s"
                    )
                select.select([channel], [], [], min(remaining, 1.0))
            exit_code = channel.recv_exit_status()
        except (OSError, EOFError) as error:
            raise Unreachable(
                f"{self.target.name}: connection lost during command: {error}"
            ) from None
        finally:
            channel.close()
        return CommandResult(
            None if exit_code == -1 else exit_code, bytes(stdout), bytes(stderr),
            started, datetime.now(UTC),
        )
