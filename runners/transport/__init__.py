"""The one place that talks to machines. Everything else hands it a command string.

``SSHConnection`` (paramiko, host keys pinned with RejectPolicy, optionally through jump hosts,
connection set-up retried with back-off) is the only transport so far; ``SSHPool`` keeps open
connections between a node's jobs, keyed on its address, user, pinned host key and credential;
``host_key_presented`` reads a node's host key for enrolment without logging in.
"""

from .errors import (
    AuthenticationFailed,
    CommandCancelled,
    CommandTimeout,
    HostKeyRejected,
    OutputCapReached,
    TransportError,
    Unreachable,
)
from .pool import SSHPool, pool_key
from .ssh import (
    MAX_JUMP_HOSTS,
    CommandResult,
    SSHConnection,
    SSHTarget,
    backoff_delay,
    host_key_presented,
    private_key_type,
)

__all__ = [
    "MAX_JUMP_HOSTS", "AuthenticationFailed", "CommandCancelled", "CommandResult",
    "CommandTimeout", "HostKeyRejected", "OutputCapReached", "SSHConnection", "SSHPool",
    "SSHTarget", "TransportError", "Unreachable", "backoff_delay", "host_key_presented",
    "pool_key", "private_key_type",
]
