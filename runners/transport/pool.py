"""Open SSH connections kept between node jobs, per exactly whom they reach and as whom.

Setting up a session (key exchange, host-key check, public-key authentication) is most of a
node job's fixed CPU (issue 17). :class:`SSHPool` keeps a connection a job ended cleanly and
hands it to the next job for the same node:

* **keyed on everything that decides who we talk to and as whom** (:func:`pool_key`), every hop
  of the jump-host chain: the node's name, address, port and user, the SHA-256 of the pinned
  host key, the SHA-256 of the credential (private key and passphrase: never the secret itself
  in the key), and the connection's own settings. A node whose pinned key or credential changed
  gets a new connection, never the old one.
* **one job at a time**: a connection is taken out while a job holds it; two jobs on the same
  node at once get two connections.
* **given back only after a clean job**: a job that raised (a transport error, a timeout, a
  cancel, a lost database, anything) closes its connection, and so does a command that ever
  failed on it (``SSHConnection.faulted``).
* **checked before reuse**: every hop's transport active and the node answering a channel
  opened and closed (one round trip, bounded by ``check_timeout_s``); a dead one is closed and
  the next (or a fresh connection) is taken.
* **bounded**: idle longer than ``idle_s`` or older than ``max_age_s`` is closed (a reaper
  thread runs while anything is idle), at most ``size`` idle connections per process (the
  oldest closed first). ``idle_s <= 0`` or ``size <= 0`` turns the pool off: every job opens
  and closes its own connection.

Thread-safe. A forked child forgets its parent's connections (it never writes to their
sockets).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .ssh import SSHConnection, SSHTarget

logger = logging.getLogger(__name__)

# Per process: the digests in a pool key are of no use outside it.
_SALT = os.urandom(16)

PoolKey = tuple[tuple[object, ...], ...]


def _digest(*parts: str | None) -> str:
    hashed = hashlib.sha256(_SALT)
    for part in parts:
        hashed.update(b"\x00" if part is None else b"\x01" + part.encode())
    return hashed.hexdigest()


def pool_key(target: SSHTarget) -> PoolKey:
    """What decides whom a connection to ``target`` reaches and as whom, every hop outermost
    first; secrets only as salted SHA-256 digests."""
    return tuple(
        (hop.name, hop.host, hop.port, hop.user,
         _digest(" ".join(hop.host_key.split()[:2])),
         _digest(hop.private_key, hop.passphrase),
         hop.connect_timeout, hop.connect_retries, hop.keepalive_s, hop.keepalive_count)
        for hop in target.hops())


@dataclass
class _Idle:
    connection: SSHConnection
    since: float  # time.monotonic() when it was given back


_POOLS: weakref.WeakSet[SSHPool] = weakref.WeakSet()


def _forget_in_child() -> None:
    for pool in list(_POOLS):
        pool._forget()


os.register_at_fork(after_in_child=_forget_in_child)


class SSHPool:
    """Open connections kept per :func:`pool_key`; see the module's doc. ``opened`` and
    ``reused`` count what :meth:`connection` did (for tests and benchmarks)."""

    def __init__(self, *, idle_s: float, max_age_s: float, size: int,
                 check_timeout_s: float = 5.0,
                 connect: Callable[[SSHTarget], SSHConnection] = SSHConnection) -> None:
        self.idle_s, self.max_age_s, self.size = idle_s, max_age_s, size
        self.check_timeout_s = check_timeout_s
        self._connect = connect
        self._idle: dict[PoolKey, list[_Idle]] = {}
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        self._wake = threading.Event()
        self.opened = 0
        self.reused = 0
        _POOLS.add(self)

    @property
    def enabled(self) -> bool:
        return self.idle_s > 0 and self.size > 0

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(entries) for entries in self._idle.values())

    @contextmanager
    def connection(self, target: SSHTarget) -> Iterator[SSHConnection]:
        """An open connection to ``target`` held by the caller alone: a kept one that still
        answers, else a new one (its set-up errors raised as ``SSHConnection`` raises them).
        Given back when the block ends without an exception and no command failed on it;
        closed otherwise."""
        key = pool_key(target)
        connection = self._take(key) if self.enabled else None
        if connection is None:
            connection = self._connect(target)
            connection.__enter__()
            with self._lock:
                self.opened += 1
        try:
            yield connection
        except BaseException:
            connection.close()
            raise
        self._give_back(key, connection)

    def _expired(self, entry: _Idle, now: float) -> bool:
        return (now - entry.since > self.idle_s
                or now - entry.connection.opened_at > self.max_age_s)

    def _take(self, key: PoolKey) -> SSHConnection | None:
        while True:
            now = time.monotonic()
            with self._lock:
                entries = self._idle.get(key)
                entry = entries.pop() if entries else None  # the most recently given back
                if entries == []:
                    del self._idle[key]
            if entry is None:
                return None
            if not self._expired(entry, now) and entry.connection.usable(self.check_timeout_s):
                with self._lock:
                    self.reused += 1
                return entry.connection
            logger.info("%s: a kept SSH connection is %s; closing it", entry.connection.target,
                        "too old" if self._expired(entry, now) else "no longer answering")
            entry.connection.close()

    def _give_back(self, key: PoolKey, connection: SSHConnection) -> None:
        if not self.enabled or connection.faulted or \
                time.monotonic() - connection.opened_at > self.max_age_s:
            connection.close()
            return
        evicted: list[_Idle] = []
        with self._lock:
            self._idle.setdefault(key, []).append(_Idle(connection, time.monotonic()))
            everything = sorted((e for entries in self._idle.values() for e in entries),
                                key=lambda e: e.since)
            evicted = everything[:max(0, len(everything) - self.size)]
            for entry in evicted:
                for entries in self._idle.values():
                    if entry in entries:
                        entries.remove(entry)
            self._idle = {k: v for k, v in self._idle.items() if v}
            if self._reaper is None or not self._reaper.is_alive():
                self._reaper = threading.Thread(target=self._reap_while_idle, daemon=True,
                                                name="ssh-pool-reaper")
                self._reaper.start()
        for entry in evicted:
            entry.connection.close()

    def reap(self) -> int:
        """Close the idle connections past ``idle_s`` or ``max_age_s``; how many."""
        now = time.monotonic()
        with self._lock:
            expired = [e for entries in self._idle.values() for e in entries
                       if self._expired(e, now)]
            for key in list(self._idle):
                self._idle[key] = [e for e in self._idle[key] if e not in expired]
                if not self._idle[key]:
                    del self._idle[key]
        for entry in expired:
            entry.connection.close()
        return len(expired)

    def _reap_while_idle(self) -> None:
        every = max(0.5, min(self.idle_s, self.max_age_s) / 4)
        while True:
            self._wake.wait(every)
            self._wake.clear()
            self.reap()
            with self._lock:
                if not self._idle:
                    self._reaper = None
                    return

    def close_all(self) -> None:
        """Close every idle connection (those held by jobs are closed or given back by them)."""
        with self._lock:
            entries = [e for kept in self._idle.values() for e in kept]
            self._idle = {}
        for entry in entries:
            entry.connection.close()
        self._wake.set()

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._idle = {}
        self._reaper = None
