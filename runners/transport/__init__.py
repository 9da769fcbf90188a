"""The one place that talks to machines. Everything else hands it a command string.

``SSHConnection`` (paramiko, host key pinned with RejectPolicy) is the only transport so far.
"""

from .errors import (
    AuthenticationFailed,
    CommandTimeout,
    HostKeyRejected,
    TransportError,
    Unreachable,
)
from .ssh import CommandResult, SSHConnection, SSHTarget

__all__ = [
    "AuthenticationFailed", "CommandResult", "CommandTimeout", "HostKeyRejected",
    "SSHConnection", "SSHTarget", "TransportError", "Unreachable",
]
