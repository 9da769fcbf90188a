"""Fencing: a node job belongs to the worker that claimed it, and only while it still does.

A worker claims a queued job by writing a fresh ``NodeJob.lease`` token in the same conditional
update that moves it out of ``queued`` (:func:`job_claim`). Every later step of that worker —
each probe start, each output flush and heartbeat, each result save, the job's final status —
is a conditional update on ``(id, lease, active state)``. When recovery declared the job lost
meanwhile (a worker paused with SIGSTOP longer than ``RUNS_LOST_AFTER_SECONDS``, then resumed),
that update matches nothing and :class:`LeaseLost` is raised: the worker stops at once, runs no
further probe on the node and writes nothing over the ``lost`` record.

:func:`held` is the guarded block for a save: its first statement is the conditional heartbeat
on the lease, which locks the job row until the block commits (SQLite serialises writers
anyway), so recovery cannot declare the job lost between the check and the save.

:func:`db_retry` is the worker's road back after the database dropped its connection (a
PostgreSQL restart, ``pg_terminate_backend``): reconnect and write again, within a bound.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db import connection as db_connection
from django.utils import timezone

from runners.models import NodeJob

logger = logging.getLogger(__name__)
T = TypeVar("T")


class LeaseLost(Exception):
    """The job is no longer this worker's (declared lost, cancelled and settled, or claimed by
    another delivery): stop touching the node and the ledger."""


def job_claim(node_job_id: int) -> str | None:
    """Claim a queued job for this worker: its new lease token, or None when it was not queued
    (a duplicate delivery, or a job settled before any worker took it)."""
    token = secrets.token_hex(8)
    now = timezone.now()
    claimed = NodeJob.objects.filter(id=node_job_id, state=NodeJob.State.QUEUED).update(
        state=NodeJob.State.CONNECTING, started_at=now, heartbeat_at=now, lease=token)
    return token if claimed else None


def _ours(job: NodeJob):
    return NodeJob.objects.filter(id=job.id, lease=job.lease, state__in=NodeJob.ACTIVE)


# The fenced heartbeat of every step, written once as SQL (it runs several times a probe; the
# ORM spent about as much CPU building it as the database spent running it). It also answers
# whether the job's gate run was asked to cancel, so a probe's start needs no second query.
RENEW_SQL = (
    'UPDATE "runners_nodejob" SET "heartbeat_at" = %s WHERE ("runners_nodejob"."id" = %s AND '
    '"runners_nodejob"."lease" = %s AND "runners_nodejob"."state" IN (%s, %s)) RETURNING ('
    'SELECT "runners_gaterun"."cancel_requested_at" IS NOT NULL FROM "runners_gaterun" '
    'WHERE "runners_gaterun"."id" = "runners_nodejob"."gate_run_id")'
)


def renew_params(job: NodeJob) -> list:
    """:data:`RENEW_SQL`'s parameters for ``job`` (its heartbeat now)."""
    now = db_connection.ops.adapt_datetimefield_value(timezone.now())
    return [now, job.id, job.lease, *map(str, NodeJob.ACTIVE)]


def lease_lost(job: NodeJob) -> LeaseLost:
    return LeaseLost(f"node job {job.id} is no longer this worker's (declared lost or "
                     f"settled meanwhile): stopping without touching the node")


def _renew(job: NodeJob) -> bool:
    """The fenced heartbeat; whether the gate run was asked to cancel. LeaseLost when the job
    is no longer ours."""
    with db_connection.cursor() as cursor:
        cursor.execute(RENEW_SQL, renew_params(job))
        row = cursor.fetchone()
    if row is None:
        raise lease_lost(job)
    return bool(row[0])


# The same fence moving the job to another active state (its move to ``running``), as SQL.
_MOVE_SQL = (
    'UPDATE "runners_nodejob" SET "heartbeat_at" = %s, "state" = %s WHERE ('
    '"runners_nodejob"."id" = %s AND "runners_nodejob"."lease" = %s AND '
    '"runners_nodejob"."state" IN (%s, %s))'
)
# A job's end, written only while it is still ours.
_SETTLE_SQL = (
    'UPDATE "runners_nodejob" SET "state" = %s, "error_kind" = %s, "error" = %s, '
    '"finished_at" = %s WHERE ("runners_nodejob"."id" = %s AND "runners_nodejob"."lease" = %s '
    'AND "runners_nodejob"."state" IN (%s, %s))'
)


def job_settle(job: NodeJob) -> bool:
    """Write the job's end (state, error kind, error, finished at) if it is still ours."""
    finished = db_connection.ops.adapt_datetimefield_value(job.finished_at)
    error = job.error.replace("\x00", "\ufffd")  # a node's words; PostgreSQL holds no NUL
    with db_connection.cursor() as cursor:
        cursor.execute(_SETTLE_SQL, [str(job.state), job.error_kind, error, finished,
                                     job.id, job.lease, *map(str, NodeJob.ACTIVE)])
        return cursor.rowcount == 1


def lease_renew(job: NodeJob, **fields) -> None:
    """Heartbeat (and set ``fields``) on a job that is still ours; LeaseLost when it is not."""
    if not fields:
        _renew(job)
        return
    if fields.keys() == {"state"} and fields["state"] in NodeJob.ACTIVE:
        now = db_connection.ops.adapt_datetimefield_value(timezone.now())
        with db_connection.cursor() as cursor:
            cursor.execute(_MOVE_SQL, [now, str(fields["state"]), job.id, job.lease,
                                       *map(str, NodeJob.ACTIVE)])
            if cursor.rowcount == 1:
                return
        raise LeaseLost(f"node job {job.id} is no longer this worker's (declared lost or "
                        f"settled meanwhile): stopping without touching the node")
    if not _ours(job).update(heartbeat_at=timezone.now(), **fields):
        raise LeaseLost(f"node job {job.id} is no longer this worker's (declared lost or "
                        f"settled meanwhile): stopping without touching the node")


@contextmanager
def held(job: NodeJob) -> Iterator[bool]:
    """A transaction in which the job is ours and stays ours: LeaseLost (nothing written) when
    it is not. Saves of a probe run's result happen inside it. Yields whether the job's gate
    run was asked to cancel (read in the same statement as the lease)."""
    with transaction.atomic():
        yield _renew(job)  # the row stays locked by this update until the block commits


# The faults of the connection itself (lost, refused, the server restarting, SQLite locked):
# worth reconnecting and writing again. Any other database error (data the database refuses,
# a constraint) would fail the same way again: it is raised at once.
CONNECTION_ERRORS = (OperationalError, InterfaceError)


def connection_lost(error: BaseException) -> bool:
    """Whether ``error`` is the database connection failing, not the database refusing data."""
    return isinstance(error, CONNECTION_ERRORS)


def database_fault(error: BaseException) -> str:
    """What a database error was, in words: the connection lost, or a write refused."""
    return ("the database connection was lost" if connection_lost(error) else
            "the database refused a write")


def db_retry(write: Callable[[], T], *, what: str) -> T:
    """Run ``write`` (a top-level ledger write, not inside a transaction), reconnecting and
    trying again while the database connection is lost, for up to ``RUNS_DB_RETRY_SECONDS``
    (then the last error is raised: the sweep settles the job once the database is back).
    An error that is not the connection's (:data:`CONNECTION_ERRORS`) is raised at once."""
    deadline = time.monotonic() + settings.RUNS_DB_RETRY_SECONDS
    while True:
        try:
            return write()
        except CONNECTION_ERRORS as error:
            if time.monotonic() >= deadline:
                raise
            logger.warning("%s: database connection lost (%s); reconnecting", what,
                           first_line(error))
            db_connection.close()
            time.sleep(1.0)


def first_line(error: BaseException) -> str:
    """An error's first line (database drivers write several)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
