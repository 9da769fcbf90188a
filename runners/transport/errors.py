"""Why a command could not be run on a node, told apart (no paramiko here).

Every error message is safe to store and show: it names the node and what went wrong, never a key
or passphrase.
"""


class TransportError(Exception):
    """Base: the command did not run to completion on the node. ``kind`` is the stored name."""

    kind = "unreachable"


class Unreachable(TransportError):
    kind = "unreachable"


class AuthenticationFailed(TransportError):
    kind = "authentication"


class HostKeyRejected(TransportError):
    """The node presented a host key other than the pinned one (or none is pinned)."""

    kind = "host_key"


class CommandTimeout(TransportError):
    kind = "timeout"
