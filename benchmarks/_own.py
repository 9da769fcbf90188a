"""What every benchmark owns: a scratch ``ACCEPTANCE_VAR_DIR``, its own database and its own
Redis index, so two benchmarks (or a benchmark and a test suite) never share rows or queues.

``own(name, redis_index=…, postgres=…)`` sets the environment before ``django.setup()``:

* PostgreSQL (``postgres=True``, the server of ``$BENCH_POSTGRES_URL`` or 127.0.0.1:5432):
  a database ``bench_<name>_<pid>`` created here and dropped by ``release()``; its URL goes in
  ``DATABASE_URL``, so a Celery worker started by the benchmark writes to the same one.
* else SQLite in the scratch var dir (removed by ``release()``).
* ``redis_index``: ``CELERY_BROKER_URL`` = ``redis://127.0.0.1:6379/<index>`` (or the host of
  ``$BENCH_REDIS_URL``), flushed before and after. Indexes used: dashboard 11, paging 12,
  fanout 13, probe_overhead 14, site_scale 15 (none for the benchmarks without a worker).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

POSTGRES = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


@dataclass
class Owned:
    name: str
    var_dir: str
    database: str  # "" for SQLite
    broker: str  # "" without Redis

    def release(self) -> None:
        """Drop the database, flush the Redis index, remove the var dir."""
        if self.database:
            from django.db import connections

            connections.close_all()
            _admin(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        if self.broker:
            import redis

            redis.Redis.from_url(self.broker).flushdb()
        shutil.rmtree(self.var_dir, ignore_errors=True)


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as connection:
        connection.execute(sql)


def own(name: str, *, redis_index: int | None = None, postgres: bool = False) -> Owned:
    var_dir = tempfile.mkdtemp(prefix=f"bench-{name}-")
    os.environ["ACCEPTANCE_VAR_DIR"] = var_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acceptance.settings")
    for variable in ("ACCEPTANCE_DEBUG", "DJANGO_DEBUG"):  # measure as served: DEBUG off
        os.environ.pop(variable, None)
    database = ""
    if postgres:
        database = f"bench_{name}_{os.getpid()}"
        _admin(f'DROP DATABASE IF EXISTS "{database}"')
        _admin(f'CREATE DATABASE "{database}"')
        parts = urlsplit(POSTGRES)
        os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{database}"))
    else:
        os.environ.pop("DATABASE_URL", None)
    broker = ""
    if redis_index is not None:
        parts = urlsplit(REDIS)
        broker = urlunsplit(parts._replace(path=f"/{redis_index}"))
        import redis

        redis.Redis.from_url(broker).flushdb()
        os.environ["CELERY_BROKER_URL"] = broker
    else:
        os.environ.pop("CELERY_BROKER_URL", None)
    return Owned(name, var_dir, database, broker)


def figure(name: str, value: float, unit: str, anchor: float | None,
           digits: int = 4) -> str:
    """One JSON line: name, value, unit, anchor, ratio (value / anchor)."""
    import json

    ratio = round(value / anchor, 3) if anchor else None
    return json.dumps({"name": name, "value": round(value, digits), "unit": unit,
                       "anchor": None if anchor is None else round(anchor, digits),
                       "ratio": ratio})


class DatabaseWait:
    """A Django execute wrapper that sums the wall time spent waiting on the database
    (``connection.execute_wrapper(wait)``; ``wait.seconds`` reset by the caller per request):
    on two shared cores the database server's CPU is there, not in the process's."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - start


def p95(values: list[float]) -> float:
    import math

    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def measurements_insert(count: int, gate_run_ids: list[int], node_ids: list[int]) -> None:
    """``count`` measurements spread round-robin over the gate runs (and nodes), with four
    metrics and a device label: ``generate_series`` on PostgreSQL (a million rows in seconds),
    ``bulk_create`` on SQLite."""
    from django.db import connection

    from runners.models import Measurement

    if count <= 0:
        return
    metrics = ("drive_count", "temperature", "media_errors", "critical_warning")
    units = ("1", "K", "1", "1")
    if connection.vendor == "postgresql":
        runs = "ARRAY[" + ",".join(str(i) for i in gate_run_ids) + "]::bigint[]"
        nodes = "ARRAY[" + ",".join(str(i) for i in node_ids) + "]::bigint[]"
        metric_array = "ARRAY[" + ",".join(f"'{m}'" for m in metrics) + "]"
        unit_array = "ARRAY[" + ",".join(f"'{u}'" for u in units) + "]"
        with connection.cursor() as cursor:
            cursor.execute(f"""
                INSERT INTO runners_measurement
                    (gate_run_id, node_id, metric, value, unit, labels, arm, derived)
                SELECT ({runs})[1 + i %% {len(gate_run_ids)}],
                       ({nodes})[1 + i %% {len(node_ids)}],
                       ({metric_array})[1 + i %% 4], i::float8, ({unit_array})[1 + i %% 4],
                       jsonb_build_object('device', '/dev/nvme' || (i %% 24) || 'n1'), '', false
                FROM generate_series(0, %s) AS i""", [count - 1])  # noqa: S608 # ints only
        return
    batch = []
    for i in range(count):
        batch.append(Measurement(gate_run_id=gate_run_ids[i % len(gate_run_ids)],
                                 node_id=node_ids[i % len(node_ids)], metric=metrics[i % 4],
                                 value=float(i), unit=units[i % 4],
                                 labels={"device": f"/dev/nvme{i % 24}n1"}))
        if len(batch) == 5000:
            Measurement.objects.bulk_create(batch)
            batch = []
    Measurement.objects.bulk_create(batch)
