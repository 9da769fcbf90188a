"""A node's probes cost the ledger few writes: a probe that ends before the first live flush
writes no output chunk (its whole output is stored once, with the run), and a node job's
writes are each fenced on its lease and few per probe: a probe is two transactions (its start;
its result, parse verdict and measurements), each opened by the fenced heartbeat that also reads
the cancel request."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runners import execution, live
from runners.models import GateRun, NodeJob

pytestmark = pytest.mark.slow


def test_a_quick_three_probe_node_job_writes_no_chunk_and_few_fenced_job_writes(lab, monkeypatch):
    engagement, _ = lab("healthy")
    monkeypatch.setattr(execution, "gate_run_finish_if_complete", lambda **_: None)
    monkeypatch.setattr(live, "FLUSH_SECONDS", 60.0)  # the stand-ins answer well within it
    # (and so the cancel request is read only where a probe starts, not while one runs)
    monkeypatch.setattr(live, "CANCEL_CHECK_SECONDS", 60.0)
    gate = engagement.gates.get(code="G2")
    run = GateRun.objects.create(gate=gate, attempt=1, started_by="engineer",
                                 state=GateRun.State.RUNNING)
    job = NodeJob.objects.create(gate_run=run, node=engagement.nodes.get(role="inference"))
    with CaptureQueriesContext(connection) as queries:
        execution.node_job_execute(node_job_id=job.id)
    job.refresh_from_db()
    assert job.state == "done", job.error
    assert sorted(run.probe_runs.values_list("probe", "state")) == [
        ("fio_seqread", "parsed"), ("link_speed", "parsed"), ("vllm_bench_serve", "parsed")]
    sql = [q["sql"] for q in queries.captured_queries]
    assert not [s for s in sql if "runners_outputchunk" in s]
    # Every write to the job is fenced on its lease (issue 15: each probe start, flush and
    # result save checks the job is still this worker's), and they stay few per probe.
    job_writes = [s for s in sql if s.startswith('UPDATE "runners_nodejob"')]
    fenced = [s for s in job_writes if '"runners_nodejob"."lease" =' in s.split("WHERE", 1)[-1]]
    assert len(job_writes) - len(fenced) == 1  # only the claim, which writes the lease
    # Two fenced job writes a probe (its start, its result with its measurements), plus the
    # claim, the move to running, at most one heartbeat and the end: 10 (it was 16 before the
    # writes were merged, issue 17).
    assert len(job_writes) <= 4 + 2 * 3, len(job_writes)
    # One start insert, one result update (token and parsed state included), one measurements
    # insert a probe; two transactions a probe; the cancel request is read with the lease
    # (only the step that makes the scratch directory reads it on its own).
    def count(prefix: str) -> int:
        return sum(1 for s in sql if s.startswith(prefix))

    assert count('INSERT INTO "runners_proberun"') == 3
    assert count('UPDATE "runners_proberun"') == 3
    assert count('INSERT INTO "runners_measurement"') == 3
    assert count("BEGIN") == 2 * 3
    assert count('SELECT 1 AS "a" FROM "runners_gaterun"') <= 1
    assert not [s for s in sql if s.startswith("SAVEPOINT")]
    # every byte is still kept, with its hash, on the run itself
    fio = run.probe_runs.get(probe="fio_seqread")
    assert fio.stdout_size == len(fio.raw()) > 1000 and len(fio.stdout_sha256) == 64


def test_the_heartbeat_writes_again_after_its_interval(db, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from tests.runners.test_barrier import g3_run, g3_site

    run = g3_run(g3_site(1))
    job = run.node_jobs.get()
    old = timezone.now() - timedelta(minutes=5)
    NodeJob.objects.filter(id=job.id).update(heartbeat_at=old)
    clock = [1000.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    live.heartbeat(job)
    first = NodeJob.objects.get(id=job.id).heartbeat_at
    assert first > old
    NodeJob.objects.filter(id=job.id).update(heartbeat_at=old)
    clock[0] += live.HEARTBEAT_EVERY_S - 1
    live.heartbeat(job)  # too soon: not written
    assert NodeJob.objects.get(id=job.id).heartbeat_at == old
    clock[0] += 2
    live.heartbeat(job)
    assert NodeJob.objects.get(id=job.id).heartbeat_at > old


def test_the_executors_measurements_write_stores_what_the_orm_insert_stores(db):
    """``measurements_write`` (the executor's plain multi-row insert) stores the same rows as
    ``measurements_insert``: the run's gate run, node and arm, its labels merged over the
    parser's, unit and value, in more than one statement when there are many rows."""
    from django.utils import timezone

    from runners import intake
    from runners.models import Measurement, ProbeRun
    from tests.runners.test_barrier import g3_run, g3_site

    run = g3_run(g3_site(1))
    node = run.node_jobs.get().node

    def probe_run(arm: str) -> ProbeRun:
        return ProbeRun.objects.create(
            gate_run=run, node=node, probe="fio_seqread", parser="fio_json", parser_version="1",
            command="fio", labels={"phase": "read", "device": "run's"}, arm=arm,
            started_at=timezone.now())

    sampled = timezone.now()

    def rows() -> list[Measurement]:
        return [Measurement(metric=f"bw_{k}", value=k * 1.5, unit="B/s",
                            labels={"device": f"/dev/nvme{k}n1", "job": "seq"},
                            sampled_at=sampled if k == 1 else None)
                for k in range(intake._WRITE_BATCH + 3)]

    def stored(of: ProbeRun) -> list[tuple]:
        return list(Measurement.objects.filter(probe_run=of).order_by("id").values_list(
            "gate_run_id", "node_id", "metric", "value", "unit", "labels", "arm", "sampled_at",
            "derived"))

    by_orm, written = probe_run("gpu_kv"), probe_run("gpu_kv")
    intake.measurements_insert(by_orm, rows())
    with CaptureQueriesContext(connection) as queries:
        assert intake.measurements_write(written, rows()) == intake._WRITE_BATCH + 3
    assert len(queries.captured_queries) == 2  # 500 rows a statement
    assert stored(written) == stored(by_orm)
    first = stored(written)[0]
    assert first[:7] == (run.id, node.id, "bw_0", 0.0, "B/s",
                         {"device": "run's", "job": "seq", "phase": "read"}, "gpu_kv")
    assert stored(written)[1][7] == sampled
    assert intake.measurements_write(written, []) == 0


def unsaved_probe_run(gate_run, node):
    """A probe run with a value in every kind of column (JSON, text, datetime), not stored."""
    from datetime import UTC, datetime

    from runners.models import ProbeRun

    return ProbeRun(gate_run=gate_run, node=node, probe="fio_seqread", parser="fio_json",
                    parser_version="3", command="fio --name=x", parameters={"bs": "128k"},
                    labels={"phase": "read"}, arm="gpu_kv", remote_token="pr-1-ab",
                    started_at=datetime(2026, 12, 4, 15, 0, 1, 250000, tzinfo=UTC))


def stored_probe_run(run) -> dict:
    """``run``'s stored row without its id, bytes as bytes (to compare two rows)."""
    from runners.models import ProbeRun

    row = ProbeRun.objects.filter(pk=run.pk).values().get()
    row.pop("id")
    return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()}


def test_the_executors_probe_run_writes_store_what_save_stores(db):
    """``runners.ledger``'s plain insert and update store every column as the ORM's
    ``save()`` does (JSON, bytes, datetimes, nulls), and an update of a row that is gone says
    so."""
    from datetime import UTC, datetime

    from django.db import DatabaseError

    from runners import ledger
    from runners.models import ProbeRun
    from tests.runners.test_barrier import g3_run, g3_site

    run = g3_run(g3_site(1))
    node = run.node_jobs.get().node

    by_orm, written = unsaved_probe_run(run, node), unsaved_probe_run(run, node)
    by_orm.save()
    ledger.probe_run_insert(written)
    assert written.pk is not None and written.pk != by_orm.pk
    stored = stored_probe_run
    assert stored(written) == stored(by_orm)
    fields = ["exit_code", "finished_at", "state", "error", "tool_version", "progress",
              "stdout", "stdout_sha256", "stdout_size", "simulated", "labels"]
    for one in (by_orm, written):
        one.exit_code, one.state, one.error = 3, ProbeRun.State.FAILED, "exited with status 3"
        one.finished_at = datetime(2026, 12, 4, 15, 0, 2, tzinfo=UTC)
        one.tool_version, one.progress, one.stdout = "fio-3.33", 42.5, b"\x00raw"
        one.stdout_sha256, one.stdout_size, one.simulated = "ab" * 32, 4, True
        one.labels = {"phase": "read", "service_sent": "1.5"}
    by_orm.save(update_fields=fields)
    ledger.probe_run_update(written, fields)
    assert stored(written) == stored(by_orm)
    assert stored(written)["stdout"] == b"\x00raw" and stored(written)["exit_code"] == 3
    ProbeRun.objects.filter(pk=written.pk).delete()
    with pytest.raises(DatabaseError, match="no row to update"):
        ledger.probe_run_update(written, ["state"])
    with pytest.raises(ValueError, match="already stored"):
        ledger.probe_run_insert(by_orm)


def test_a_live_flush_waits_for_output_and_writes_only_what_is_new(db, monkeypatch):
    """The flush clock starts with the first output: a command whose channel took longer than
    FLUSH_SECONDS to open but answered at once writes no live flush (issue 17); a tick with
    nothing new writes no size update; output arriving FLUSH_SECONDS after the first does."""
    from django.utils import timezone

    from runners.models import ProbeRun
    from tests.runners.test_barrier import g3_run, g3_site

    run = g3_run(g3_site(1))
    job = run.node_jobs.get()
    probe_run = ProbeRun.objects.create(gate_run=run, node=job.node, probe="fio_seqread",
                                        parser="fio_json", parser_version="1", command="fio",
                                        started_at=timezone.now())
    clock = [100.0]
    monkeypatch.setattr(live.time, "monotonic", lambda: clock[0])
    live.heartbeat(job)  # the job's heartbeat is fresh: the ticks below owe none
    recorder = live.OutputRecorder(probe_run, job)

    def size_writes(step) -> int:
        with CaptureQueriesContext(connection) as queries:
            step()
        return sum(1 for q in queries.captured_queries
                   if q["sql"].startswith('UPDATE "runners_proberun"'))

    clock[0] += live.FLUSH_SECONDS + 0.3  # a slow channel open, nothing heard yet
    assert size_writes(recorder.on_tick) == 0
    assert size_writes(lambda: recorder.on_output("stdout", b"first\n")) == 0
    clock[0] += live.FLUSH_SECONDS + 0.1
    assert size_writes(lambda: recorder.on_output("stdout", b"second\n")) == 1
    assert ProbeRun.objects.get(id=probe_run.id).stdout_size == len(b"first\nsecond\n")
    clock[0] += live.FLUSH_SECONDS + 0.1
    assert size_writes(recorder.on_tick) == 0  # nothing new since
    recorder.discard()
