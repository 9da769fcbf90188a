"""On PostgreSQL a probe's two fenced writes are one statement each (``runners.ledger``:
the lease's heartbeat, the run's insert or update and its measurements as data-modifying CTEs),
and they keep every rule of the fenced transaction they replace: a job no longer this worker's
writes nothing (LeaseLost), a cancelled gate run starts no probe, the row stored is the one the
ORM's ``save()`` stores, the measurements are the ones ``measurements_write`` stores, a run
whose row is gone says so, and values JSON cannot carry (NaN) still go in.

The checks run in a subprocess on a fresh PostgreSQL database (TEST_POSTGRES_URL, set by
scripts/test; without it the test skips and says why), since the suite's own database is SQLite.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.faults.harness import postgres_url, service_env  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent('''
    import math
    from datetime import UTC, datetime

    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)

    from django.db import DatabaseError, connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from runners import intake, ledger
    from runners.lease import LeaseLost
    from runners.models import GateRun, Measurement, NodeJob, ProbeRun
    from runners.parsers.base import MeasurementData
    from tests.runners.test_barrier import g3_run, g3_site
    from tests.runners.test_ledger_writes import stored_probe_run, unsaved_probe_run

    assert connection.vendor == "postgresql"
    run = g3_run(g3_site(2))
    job, other = run.node_jobs.order_by("node__name")
    NodeJob.objects.filter(id=job.id).update(lease="ours")
    job.refresh_from_db()

    def made(node):
        return unsaved_probe_run(run, node)

    stored = stored_probe_run

    # The start: one statement, the row the ORM would store, the heartbeat written with it.
    by_orm, written = made(job.node), made(job.node)
    by_orm.save()
    before = NodeJob.objects.get(id=job.id).heartbeat_at
    with CaptureQueriesContext(connection) as queries:
        assert ledger.probe_run_start(written, job, refuse_if_cancelled=True) is False
    assert [q["sql"][:4] for q in queries.captured_queries] == ["WITH"], queries.captured_queries
    assert written.pk is not None and stored(written) == stored(by_orm)
    after = NodeJob.objects.get(id=job.id).heartbeat_at
    assert after is not None and (before is None or after > before)

    # A job another worker holds (its lease changed): nothing inserted, LeaseLost.
    count = ProbeRun.objects.count()
    stranger = NodeJob.objects.get(id=other.id)
    stranger.lease = "not-ours"
    try:
        ledger.probe_run_start(made(other.node), stranger, refuse_if_cancelled=True)
    except LeaseLost as error:
        assert "no longer this worker's" in str(error)
    else:
        raise AssertionError("a start on a job not ours was written")
    assert ProbeRun.objects.count() == count

    # A cancelled gate run: refused (nothing inserted), or written when it must still run.
    GateRun.objects.filter(id=run.id).update(cancel_requested_at=timezone.now())
    refused = made(job.node)
    assert ledger.probe_run_start(refused, job, refuse_if_cancelled=True) is True
    assert refused.pk is None and ProbeRun.objects.count() == count
    cleanup = made(job.node)
    assert ledger.probe_run_start(cleanup, job, refuse_if_cancelled=False) is True
    assert cleanup.pk is not None and ProbeRun.objects.count() == count + 1
    GateRun.objects.filter(id=run.id).update(cancel_requested_at=None)

    # The result: the fields the ORM's save(update_fields) writes, and the rows
    # measurements_write writes, in one statement.
    fields = ["exit_code", "finished_at", "state", "error", "tool_version", "progress",
              "stdout", "stdout_sha256", "stdout_size", "simulated", "labels"]
    for one in (by_orm, written):
        one.exit_code, one.state, one.error = 0, ProbeRun.State.PARSED, ""
        one.finished_at = datetime(2026, 12, 4, 15, 0, 2, tzinfo=UTC)
        one.tool_version, one.progress, one.stdout = "fio-3.33", 42.5, b"\\x00raw"
        one.stdout_sha256, one.stdout_size, one.simulated = "ab" * 32, 4, True
        one.labels = {"phase": "read", "service_sent": "1.5"}
    by_orm.save(update_fields=fields)
    rows = [MeasurementData("bw", 1.5e9, "B/s", {"job": "seq"}),
            MeasurementData("iops", 12000.0, "1/s", {})]
    intake.measurements_write(by_orm, rows)
    with CaptureQueriesContext(connection) as queries:
        ledger.probe_run_save(written, fields, job, rows)
    assert [q["sql"][:4] for q in queries.captured_queries] == ["WITH"], queries.captured_queries
    assert stored(written) == stored(by_orm)

    def measured(of):
        return sorted(Measurement.objects.filter(probe_run=of).values_list(
            "gate_run_id", "node_id", "metric", "value", "unit", "labels", "arm", "sampled_at",
            "derived"))

    assert measured(written) == measured(by_orm) and len(measured(written)) == 2
    assert measured(written)[0][2:6] == ("bw", 1.5e9, "B/s", {"job": "seq", "phase": "read",
                                                                 "service_sent": "1.5"})

    # No measurements: the row alone.
    written.error = "second save"
    ledger.probe_run_save(written, ["error"], job, [])
    assert stored(written)["error"] == "second save" and len(measured(written)) == 2

    # Not ours any more: neither the row nor the rows change.
    written.error = "from a worker that lost its job"
    try:
        ledger.probe_run_save(written, ["error"], stranger, rows)
    except LeaseLost:
        pass
    else:
        raise AssertionError("a save on a job not ours was written")
    assert stored(written)["error"] == "second save" and len(measured(written)) == 2

    # A NaN figure (JSON has none; a parser's figures are finite, a derived row may not be) and
    # more rows than one statement takes go the fenced transaction's way, still stored.
    ledger.probe_run_save(written, ["error"], job,
                          [Measurement(metric="lat", value=math.nan, unit="s", labels={})])
    assert any(math.isnan(m[3]) for m in measured(written)), measured(written)
    many = [MeasurementData("bw", float(k), "B/s", {"k": str(k)}) for k in range(501)]
    ledger.probe_run_save(written, ["error"], job, many)
    assert len(measured(written)) == 3 + 501

    # A run whose row is gone: DatabaseError, no measurement left behind.
    gone = made(job.node)
    ledger.probe_run_start(gone, job, refuse_if_cancelled=True)
    ProbeRun.objects.filter(pk=gone.pk).delete()
    try:
        ledger.probe_run_save(gone, ["error"], job, rows)
    except DatabaseError as error:
        assert "no row to update" in str(error)
    else:
        raise AssertionError("a save of a deleted run passed")
    assert not Measurement.objects.filter(probe_run_id=gone.pk).exists()
    print("checked")
''')


def test_the_fenced_single_statement_writes_keep_the_fence_on_postgresql(
        tmp_path, postgres_url):  # noqa: F811
    env = service_env(tmp_path, DATABASE_URL=postgres_url,
                      DJANGO_SETTINGS_MODULE="acceptance.settings")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("checked"), done.stdout
