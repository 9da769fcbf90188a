"""The soak's connections to its nodes: one SSH session per node for the whole drive.

A soak talks to the same nodes every sampling interval for days; opening a session per command
would dominate the tick. :class:`NodePool` keeps one ``runners.transport`` connection per node
and reopens it after a failure. Node clocks answer in epoch seconds (:func:`node_time`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from acceptance.models import Node
from runners.transport import CommandResult, SSHConnection, TransportError

COMMAND_TIMEOUT_S = 60


def node_time(epoch: float | None) -> datetime | None:
    """A node's epoch seconds as an aware datetime (None stays None)."""
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


class NodePool:
    """One SSH connection per node, kept across ticks; reopened after a failure."""

    def __init__(self) -> None:
        self.connections: dict[int, SSHConnection] = {}

    def run(self, node: Node, command: str, timeout: float = COMMAND_TIMEOUT_S) -> CommandResult:
        connection = self.connections.get(node.id)
        if connection is None:
            connection = SSHConnection(node.ssh_target()).__enter__()
            self.connections[node.id] = connection
        try:
            return connection.run(command, timeout=timeout)
        except TransportError:
            self.drop(node)
            raise

    def run_checked(self, node: Node, command: str) -> tuple[int | None, str]:
        """``(exit status, stdout + stderr as text)`` of ``command`` on ``node``."""
        result = self.run(node, command, timeout=COMMAND_TIMEOUT_S)
        return result.exit_code, (result.stdout + result.stderr).decode(errors="replace")

    def drop(self, node: Node) -> None:
        connection = self.connections.pop(node.id, None)
        if connection is not None:
            connection.__exit__(None, None, None)

    def close(self) -> None:
        for connection in self.connections.values():
            connection.__exit__(None, None, None)
        self.connections.clear()
