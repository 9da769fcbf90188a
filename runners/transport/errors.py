"""Why a command could not be run on a node, told apart (no paramiko here).

Every error message is safe to store and show: it names the node (and, behind a jump host, which
hop failed) and what went wrong, never a key or passphrase.
"""


class TransportError(Exception):
    """Base: the command did not run to completion on the node. ``kind`` is the stored name."""

    kind = "unreachable"


class Unreachable(TransportError):
    """No SSH session could be set up (refused, timed out, reset before authentication), or it
    was lost.

    ``transient`` says whether trying again may help: a refused or timed-out connection may be a
    node rebooting; a jump host that forbids forwarding will refuse again.
    """

    kind = "unreachable"

    def __init__(self, message: str, *, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


class AuthenticationFailed(TransportError):
    kind = "authentication"


class HostKeyRejected(TransportError):
    """The node presented a host key other than the pinned one (or none is pinned)."""

    kind = "host_key"


class CommandTimeout(TransportError):
    kind = "timeout"


class CommandCancelled(TransportError):
    """The command was stopped because its run was cancelled (the connection stays usable)."""

    kind = "cancelled"


class OutputCapReached(TransportError):
    """The caller's ``on_output`` refused more output (its stated cap was reached); the command
    was stopped and its channel closed (the connection stays usable, e.g. to kill the remote
    process)."""

    kind = "output_cap"
