"""The probe executor's own ledger writes, as plain statements (issue 17: the service's CPU per
probe). A probe run's start insert and its result update are the same rows the ORM's
``save()`` writes — every value prepared by its model field (``get_db_prep_save``), so JSON,
bytes and datetimes are stored as the ORM stores them on SQLite and PostgreSQL — without the
ORM's per-call query building. The statements are built once per column set. The callers
fence them (``runners.lease.held``): these functions only write.
"""

from __future__ import annotations

from functools import cache

from django.db import DatabaseError, connection, models

from runners.models import ProbeRun

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


def _prepared(fields: tuple, obj: ProbeRun, add: bool) -> list:
    values = []
    for field in fields:
        value = field.pre_save(obj, add)
        plain = _PLAIN.get(type(field))
        if value is None or (plain is not None and type(value) in plain):
            values.append(value)
        else:
            values.append(field.get_db_prep_save(value, connection))
    return values


@cache
def _insert_sql(vendor: str, returning: bool) -> tuple[str, tuple]:
    quote = connection.ops.quote_name
    fields = tuple(f for f in _META.concrete_fields if not f.primary_key)
    columns = ", ".join(quote(f.column) for f in fields)
    sql = (f"INSERT INTO {quote(_META.db_table)} ({columns}) "  # noqa: S608 # nosec B608: model names only
           f"VALUES ({', '.join(['%s'] * len(fields))})")
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
