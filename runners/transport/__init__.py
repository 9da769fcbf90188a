"""The one place that talks to machines. Everything else hands it a command string.

``SSHConnection`` (paramiko, host keys pinned with RejectPolicy, optionally through jump hosts,
connection set-up retried with back-off) is the only transport so far; ``host_key_presented``
reads a node's host key for enrolment without logging in.
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
    "CommandTimeout", "HostKeyRejected", "OutputCapReached", "SSHConnection", "SSHTarget",
    "TransportError", "Unreachable", "backoff_delay", "host_key_presented", "private_key_type",
]
