"""Evidence intake: the one road from raw bytes to the ledger.

Every raw output enters the ledger here, whichever way it reached the service: a probe run over
SSH (``runners.execution``), an imported evidence bundle (``runners.evidence``) or a range the
G4 soak collected from its node agent (``runners.soak.collection``). The intake keeps the raw
bytes first — each stream a content-addressed file (``runners.outputs``) capped at the stated
``ACCEPTANCE_OUTPUT_CAP_BYTES``, its sha256, the simulated mark of a stand-in tool — and only
then parses them with the run's registered parser into
:class:`~runners.models.Measurement` rows. A parse failure fails the run with kind ``parse``;
the raw output stays, so history can be re-parsed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from django.conf import settings
from django.db import connection

from runners import outputs
from runners.models import Measurement, ProbeRun
from runners.parsers import parse_output
from runners.parsers.base import MeasurementData, ParseError
from runners.probes import SIMULATED_MARKER

OUTPUT_FIELDS = ["stdout", "stderr", "stdout_file", "stderr_file", "stdout_sha256",
                 "stderr_sha256", "stdout_size", "stderr_size", "output_cap", "simulated"]


def raw_output_record(run: ProbeRun, stored: dict[str, outputs.StoredOutput], *,
                      cap: int, simulated: bool) -> None:
    """Put the index of the stored files on ``run`` (the caller saves ``OUTPUT_FIELDS``)."""
    run.stdout, run.stderr = b"", b""
    run.stdout_file, run.stderr_file = stored["stdout"].name, stored["stderr"].name
    run.stdout_sha256, run.stderr_sha256 = stored["stdout"].sha256, stored["stderr"].sha256
    run.stdout_size, run.stderr_size = stored["stdout"].size, stored["stderr"].size
    run.output_cap, run.simulated = cap, simulated


def raw_output_keep(run: ProbeRun, *, stdout: bytes, stderr: bytes,
                    simulated: bool | None = None) -> None:
    """Store raw output that is already in memory (imported bundles, soak ranges) as files,
    each stream capped at the stated cap, and put their index on ``run`` (the caller saves
    it); ``simulated``: by default, the stand-ins' marker on stderr."""
    cap = outputs.output_cap_bytes()
    stored = {"stdout": outputs.output_store(stdout, cap=cap),
              "stderr": outputs.output_store(stderr, cap=cap)}
    raw_output_record(run, stored, cap=cap, simulated=(
        SIMULATED_MARKER.encode() in stderr[:cap]) if simulated is None else simulated)


def exit_error(exit_code: int | None, stderr: bytes) -> tuple[str, str]:
    """``(error_kind, error)`` for a tool that exited with a status its probe does not accept."""
    tail = stderr.decode(errors="replace").strip().splitlines()[-3:]
    detail = " | ".join(tail)
    if exit_code == 127:
        return "command_not_found", f"command not found on the node (exit 127): {detail}"
    if exit_code in (124, 137):
        return "timeout", f"stopped by the node-side timeout (exit {exit_code}): {detail}"
    return "exit_status", f"exited with status {exit_code}: {detail}"


def parse_failed(run: ProbeRun, error: ParseError) -> None:
    """The raw output stays; the run fails with kind ``parse`` and the parser's own words."""
    run.state, run.error_kind, run.error = ProbeRun.State.FAILED, "parse", str(error)
    run.save(update_fields=["state", "error_kind", "error"])


def measurements_store(run: ProbeRun, rows: Iterable[Measurement]) -> list[Measurement]:
    """Store unsaved measurement rows read from ``run``: each gets the run's gate run, node and
    arm and the run's labels, then the run is marked parsed."""
    stored = measurements_insert(run, rows)
    run.state = ProbeRun.State.PARSED
    run.save(update_fields=["state"])
    return stored


def measurements_insert(run: ProbeRun, rows: Iterable[Measurement]) -> list[Measurement]:
    """Insert unsaved measurement rows of ``run`` (its gate run, node, arm and labels added), in
    one statement; the caller saves the run's state."""
    rows = list(rows)
    for row in rows:
        row.gate_run_id, row.probe_run, row.node_id = run.gate_run_id, run, run.node_id
        row.labels = {**row.labels, **run.labels}
        row.arm = row.arm or run.arm
    return Measurement.objects.bulk_create(rows) if rows else []


# The columns a probe's measurement rows fill, in the order of the written statement.
_WRITE_COLUMNS = ("gate_run_id", "probe_run_id", "node_id", "metric", "value", "unit", "labels",
                  "arm", "sampled_at", "derived")
_WRITE_BATCH = 500  # rows per statement (SQLite's bound on parameters: 32 766)


def measurements_write(run: ProbeRun, rows: Iterable[Measurement | MeasurementData]) -> int:
    """Insert unsaved measurement rows of ``run`` as :func:`measurements_insert` does (its gate
    run, node, arm and labels added) but without the ORM's per-row work and without reading
    their ids back: one plain multi-row ``INSERT`` per 500 rows. For the probe executor's hot
    path (issue 17: the service's CPU per probe), inside the caller's fenced transaction.
    Returns how many rows were written. A parser's ``MeasurementData`` is written as a row with
    no arm of its own, no sampling time and not derived."""
    rows = list(rows)
    if not rows:
        return 0
    if connection.vendor == "postgresql" and measurements_json_ready(rows):
        return _measurements_write_json(run, rows)
    meta = Measurement._meta
    labels, sampled_at = meta.get_field("labels"), meta.get_field("sampled_at")
    table = connection.ops.quote_name(meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in _WRITE_COLUMNS)
    row_sql = "(" + ", ".join(["%s"] * len(_WRITE_COLUMNS)) + ")"
    params: list = []
    for row in rows:
        params += [run.gate_run_id, run.id, run.node_id, row.metric, float(row.value), row.unit,
                   labels.get_db_prep_save({**row.labels, **run.labels}, connection),
                   getattr(row, "arm", "") or run.arm,
                   sampled_at.get_db_prep_save(getattr(row, "sampled_at", None), connection),
                   bool(getattr(row, "derived", False))]
    width = len(_WRITE_COLUMNS)
    with connection.cursor() as cursor:
        for start in range(0, len(rows), _WRITE_BATCH):
            batch = params[start * width:(start + _WRITE_BATCH) * width]
            values = ", ".join([row_sql] * (len(batch) // width))
            cursor.execute(f"INSERT INTO {table} ({columns}) VALUES {values}",  # noqa: S608 # nosec B608
                           batch)  # names from the model, values as parameters
    return len(rows)


# PostgreSQL: a probe's rows as one JSON document, unpacked by the server. The statement stays
# short and the same, so psycopg reuses its parsed form; a multi-row VALUES list of 10
# placeholders a row is longer than psycopg caches (4 KiB) past about 90 rows and was parsed
# again for every probe (about 3 ms of CPU for 60 rows, against 0.4 ms this way).
_JSON_INSERT = (
    "INSERT INTO {table} ({columns}) SELECT %s, %s, %s, r.metric, r.value, r.unit, r.labels, "
    "r.arm, r.sampled_at, r.derived FROM jsonb_to_recordset(%s::jsonb) AS r(metric text, "
    "value double precision, unit text, labels jsonb, arm text, sampled_at timestamptz, "
    "derived boolean)"
)


def measurements_json_ready(rows: list) -> bool:
    """Whether ``rows`` can go to PostgreSQL as one JSON document (JSON has no NaN)."""
    return all(math.isfinite(row.value) for row in rows)


def measurements_json_insert() -> str:
    """The statement that inserts a probe's rows from one JSON document; its parameters are
    :func:`measurements_json_params`."""
    meta = Measurement._meta
    return _JSON_INSERT.format(table=connection.ops.quote_name(meta.db_table),
                               columns=", ".join(connection.ops.quote_name(c)
                                                 for c in _WRITE_COLUMNS))


def measurements_json_params(run: ProbeRun, rows: list[Measurement | MeasurementData]) -> list:
    """The gate run, probe run, node and the rows' JSON document, for
    :func:`measurements_json_insert` (the rows' finite values checked by the caller)."""
    sampled_at = Measurement._meta.get_field("sampled_at")
    document = []
    for row in rows:
        at = sampled_at.get_db_prep_save(getattr(row, "sampled_at", None), connection)
        document.append({
            "metric": row.metric, "value": float(row.value), "unit": row.unit,
            "labels": {**row.labels, **run.labels},
            "arm": getattr(row, "arm", "") or run.arm,
            "sampled_at": None if at is None else at.isoformat(),
            "derived": bool(getattr(row, "derived", False))})
    return [run.gate_run_id, run.id, run.node_id, json.dumps(document, allow_nan=False)]


def _measurements_write_json(run: ProbeRun, rows: list[Measurement | MeasurementData]) -> int:
    """``measurements_write`` on PostgreSQL, for finite values (JSON has no NaN)."""
    sql = measurements_json_insert()
    with connection.cursor() as cursor:
        for start in range(0, len(rows), _WRITE_BATCH):
            cursor.execute(sql, measurements_json_params(run, rows[start:start + _WRITE_BATCH]))
    return len(rows)


def raw_output_measure(run: ProbeRun, raw: bytes | None = None) -> list[Measurement]:
    """Parse ``raw`` (the run's stored stdout by default: its file and sha256 are kept before
    this) in memory with the run's registered parser: the unsaved measurement rows, and
    ``run.state`` set to PARSED; or no rows and the run failed with kind ``parse`` (the
    parser's own words, or a stored output larger than ``ACCEPTANCE_PARSE_MAX_BYTES``: parsers
    read it whole). Nothing is written: the caller saves the run and inserts the rows."""
    return [Measurement(metric=m.metric, value=m.value, unit=m.unit, labels=dict(m.labels))
            for m in raw_output_read(run, raw)]


def raw_output_read(run: ProbeRun, raw: bytes | None = None) -> list[MeasurementData]:
    """:func:`raw_output_measure`'s figures as the parser gave them, without a model instance
    each (the executor's hot path hands them to :func:`measurements_write`)."""
    if raw is None:
        limit = int(settings.PARSE_MAX_BYTES)
        if run.stdout_size > limit:
            run.state, run.error_kind = ProbeRun.State.FAILED, "parse"
            run.error = (f"stdout of {run.stdout_size} bytes is larger than the parsers read "
                         f"({limit} bytes, ACCEPTANCE_PARSE_MAX_BYTES); the raw output is kept")
            return []
        raw = outputs.output_bytes(run, "stdout")
    try:
        parsed = parse_output(run.parser, raw)
    except ParseError as error:
        run.state, run.error_kind, run.error = ProbeRun.State.FAILED, "parse", str(error)
        return []
    run.state = ProbeRun.State.PARSED
    return parsed


def raw_output_parse(run: ProbeRun, raw: bytes | None = None) -> list[Measurement]:
    """Parse ``raw`` (the run's stored stdout by default) with the run's registered parser and
    store the measurements; a parse failure fails the run (:func:`parse_failed`), and so does
    a stored output larger than ``ACCEPTANCE_PARSE_MAX_BYTES`` (parsers read it whole)."""
    rows = raw_output_measure(run, raw)
    if run.state != ProbeRun.State.PARSED:
        run.save(update_fields=["state", "error_kind", "error"])
        return []
    stored = measurements_insert(run, rows)
    run.save(update_fields=["state"])
    return stored
