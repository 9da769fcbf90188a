"""The probe executor's own ledger writes, as plain statements (issue 17: the service's CPU per
probe). A probe run's start insert and its result update are the same rows the ORM's
``save()`` writes — every value prepared by its model field (``get_db_prep_save``), so JSON,
bytes and datetimes are stored as the ORM stores them on SQLite and PostgreSQL — without the
ORM's per-call query building. The statements are built once per column set.

:func:`probe_run_start` and :func:`probe_run_save` are the two fenced writes of a probe (its
start; its result with its measurements), each written only while the node job is still this
worker's. On PostgreSQL each is ONE statement — the lease's heartbeat, the row's insert or
update and the measurements' insert as data-modifying CTEs, so the fence and the write commit
together without a transaction's BEGIN and COMMIT round trips (issue 17: the service's CPU per
probe). Elsewhere (SQLite) they are the fenced transaction ``runners.lease.held`` around
:func:`probe_run_insert` / :func:`probe_run_update` and ``intake.measurements_write``.
"""

from __future__ import annotations

from functools import cache

from django.db import DatabaseError, connection, models, transaction

from runners import intake
from runners.lease import RENEW_SQL, held, lease_lost, renew_params
from runners.models import NodeJob, ProbeRun

_META = ProbeRun._meta


# Fields whose value, when it already is of this exact type (or None), is what
# ``get_db_prep_save`` returns: their preparation is skipped (issue 17: about forty calls a
# probe run). Anything else — JSON, bytes, datetimes, a value of another type — goes through
# the field.
_PLAIN: dict[type, tuple[type, ...]] = {
    models.CharField: (str,), models.TextField: (str,), models.IntegerField: (int,),
    models.BigIntegerField: (int,), models.FloatField: (float,), models.BooleanField: (bool,),
    models.ForeignKey: (int,),
}


def _reads_plainly(field) -> bool:
    """Whether ``field.pre_save`` only reads the instance's attribute (no ``auto_now``, no
    file to commit)."""
    if type(field).pre_save is models.Field.pre_save:
        return True
    return isinstance(field, models.DateField) and not (field.auto_now or field.auto_now_add)


@cache
def _plan(fields: tuple) -> tuple:
    """Per field, worked out once: (field, attribute, read plainly?, types stored as they are)."""
    return tuple((field, field.attname, _reads_plainly(field), _PLAIN.get(type(field)))
                 for field in fields)


def _prepared(fields: tuple, obj: ProbeRun, add: bool) -> list:
    values = []
    for field, attname, plainly, plain in _plan(fields):
        value = getattr(obj, attname) if plainly else field.pre_save(obj, add)
        if value is None or (plain is not None and type(value) in plain):
            values.append(value)
        else:
            values.append(field.get_db_prep_save(value, connection))
    return values


def _insert_into() -> tuple[str, tuple]:
    """``INSERT INTO table (every column but the id)`` and those columns' fields."""
    quote = connection.ops.quote_name
    fields = tuple(f for f in _META.concrete_fields if not f.primary_key)
    columns = ", ".join(quote(f.column) for f in fields)
    return f"INSERT INTO {quote(_META.db_table)} ({columns})", fields  # noqa: S608 # nosec B608: model names only


@cache
def _insert_sql(vendor: str, returning: bool) -> tuple[str, tuple]:
    quote = connection.ops.quote_name
    insert, fields = _insert_into()
    sql = f"{insert} VALUES ({', '.join(['%s'] * len(fields))})"
    if returning:
        sql += f" RETURNING {quote(_META.pk.column)}"
    return sql, fields


@cache
def _update_sql(vendor: str, names: tuple[str, ...]) -> tuple[str, tuple]:
    quote = connection.ops.quote_name
    fields = tuple(_META.get_field(name) for name in names)
    sets = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    table, pk = quote(_META.db_table), quote(_META.pk.column)
    return f"UPDATE {table} SET {sets} WHERE {pk} = %s", fields  # noqa: S608 # nosec B608: model names


def probe_run_insert(run: ProbeRun) -> None:
    """Insert the unsaved ``run`` (every column, as ``run.save()`` would) and set its id."""
    if run.pk is not None:
        raise ValueError(f"probe run {run.pk} is already stored")
    returning = connection.features.can_return_columns_from_insert
    sql, fields = _insert_sql(connection.vendor, returning)
    values = _prepared(fields, run, True)
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        run.pk = cursor.fetchone()[0] if returning else connection.ops.last_insert_id(
            cursor, _META.db_table, _META.pk.column)
    run._state.adding, run._state.db = False, connection.alias


def probe_run_update(run: ProbeRun, names: list[str]) -> None:
    """Write the fields ``names`` of the stored ``run`` (as ``run.save(update_fields=names)``);
    DatabaseError when its row is gone."""
    sql, fields = _update_sql(connection.vendor, tuple(names))
    values = _prepared(fields, run, False)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, run.pk])
        if cursor.rowcount != 1:
            raise DatabaseError(f"probe run {run.pk}: no row to update")


def _fenced_here() -> bool:
    """Whether the probe's fenced writes go as single statements (PostgreSQL's writable CTEs)."""
    return connection.vendor == "postgresql"


@cache
def _start_sql(vendor: str) -> tuple[str, tuple]:
    """The fenced start: the heartbeat (which reads the cancel request), then the run's insert
    unless it must not start (``NOT (cancelled AND refuse)``); answers (cancelled, new id)."""
    quote = connection.ops.quote_name
    insert, fields = _insert_into()
    sql = (f'WITH "lease" AS ({RENEW_SQL} AS "cancelled"), '  # noqa: S608 # nosec B608: model names only
           f'"added" AS ({insert} '
           f'SELECT {", ".join(["%s"] * len(fields))} FROM "lease" '
           f'WHERE NOT ("lease"."cancelled" AND %s) RETURNING {quote(_META.pk.column)}) '
           f'SELECT "lease"."cancelled", (SELECT {quote(_META.pk.column)} FROM "added") '
           f'FROM "lease"')
    return sql, fields


def probe_run_start(run: ProbeRun, job: NodeJob, *, refuse_if_cancelled: bool) -> bool:
    """Insert the unsaved ``run`` (as :func:`probe_run_insert`) while ``job`` is this worker's
    (LeaseLost otherwise), its heartbeat written with it. Returns whether the job's gate run
    was asked to cancel; with ``refuse_if_cancelled`` a cancelled run inserts nothing."""
    if run.pk is not None:
        raise ValueError(f"probe run {run.pk} is already stored")
    if not _fenced_here():
        with held(job) as cancelled:
            if cancelled and refuse_if_cancelled:
                transaction.set_rollback(True)  # nothing of this start stays
                return True
            probe_run_insert(run)
            return cancelled
    sql, fields = _start_sql(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*renew_params(job), *_prepared(fields, run, True),
                             refuse_if_cancelled])
        row = cursor.fetchone()
    if row is None:
        raise lease_lost(job)
    cancelled, pk = bool(row[0]), row[1]
    if pk is not None:
        run.pk = pk
        run._state.adding, run._state.db = False, connection.alias
    return cancelled


@cache
def _save_sql(vendor: str, names: tuple[str, ...], with_rows: bool) -> tuple[str, tuple]:
    update, fields = _update_sql(vendor, names)
    sql = (f'WITH "lease" AS ({RENEW_SQL} AS "cancelled"), '  # noqa: S608 # nosec B608: model names
           f'"saved" AS ({update} AND EXISTS (SELECT 1 FROM "lease") '
           f'RETURNING {connection.ops.quote_name(_META.pk.column)})')
    if with_rows:
        sql += (f', "added" AS ({intake.measurements_json_insert()} '  # noqa: S608 # nosec B608
                f'WHERE EXISTS (SELECT 1 FROM "saved"))')
    sql += ' SELECT (SELECT count(*) FROM "lease"), (SELECT count(*) FROM "saved")'
    return sql, fields


def probe_run_save(run: ProbeRun, names: list[str], job: NodeJob, rows: list) -> None:
    """Write the fields ``names`` of the stored ``run`` and insert its measurement ``rows`` (as
    ``intake.measurements_write``) while ``job`` is this worker's (LeaseLost otherwise, nothing
    written); DatabaseError when the run's row is gone."""
    if not _fenced_here() or len(rows) > intake._WRITE_BATCH or not \
            intake.measurements_json_ready(rows):
        with held(job):
            probe_run_update(run, names)
            intake.measurements_write(run, rows)
        return
    sql, fields = _save_sql(connection.vendor, tuple(names), bool(rows))
    params = [*renew_params(job), *_prepared(fields, run, False), run.pk]
    if rows:
        params += intake.measurements_json_params(run, rows)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        leased, saved = cursor.fetchone()
    if not leased:
        raise lease_lost(job)
    if saved != 1:
        raise DatabaseError(f"probe run {run.pk}: no row to update")
