"""The soak's connections to its nodes: one SSH session per node for the whole drive.

A soak talks to the same nodes every sampling interval for days; opening a session per command
would dominate the tick. :class:`NodePool` keeps one ``runners.transport`` connection per node
and reopens it after a failure. Node clocks answer in epoch seconds (:func:`node_time`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from acceptance.models import Node
from runners.transport import CommandResult, SSHConnection, SSHTarget, TransportError

COMMAND_TIMEOUT_S = 60
COLLECT_THREADS = 32  # node reads in flight at once (I/O-bound: 128 nodes in four rounds)


def node_time(epoch: float | None) -> datetime | None:
    """A node's epoch seconds as an aware datetime (None stays None)."""
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


class NodePool:
    """One SSH connection per node, kept across ticks; reopened after a failure."""

    def __init__(self) -> None:
        self.connections: dict[int, SSHConnection] = {}
        self.targets: dict[int, SSHTarget] = {}
        self.pending: dict[int, Future] = {}  # agent id → its collection read in flight
        self._executor: ThreadPoolExecutor | None = None

    def target(self, node: Node) -> SSHTarget:
        """``node``'s SSH target, resolved once (reads the database: call it from the driver's
        thread before a read runs in a collection thread)."""
        if node.id not in self.targets:
            self.targets[node.id] = node.ssh_target()
        return self.targets[node.id]

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run ``fn(*args)`` in one of the pool's collection threads (at most
        ``COLLECT_THREADS``)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=COLLECT_THREADS,
                                                thread_name_prefix="soak-collect")
        return self._executor.submit(fn, *args)

    def run(self, node: Node, command: str, timeout: float = COMMAND_TIMEOUT_S) -> CommandResult:
        connection = self.connections.get(node.id)
        if connection is None:
            connection = SSHConnection(self.target(node)).__enter__()
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
        if self._executor is not None:  # reads still in flight end by their own timeouts
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self.pending.clear()
        for connection in self.connections.values():
            connection.__exit__(None, None, None)
        self.connections.clear()
