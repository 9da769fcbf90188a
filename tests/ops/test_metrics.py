"""/metrics: figures read from the ledger at scrape time, parsed with prometheus_client's own
parser; only a bearer token or a staff session may read it."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from acceptance.celery import app as celery_app
from reports.models import Report
from runners.models import GateRun, NodeJob
from runners.soak.models import Soak

TOKEN = "s3cret-metrics-token-0123456789"


@pytest.fixture
def token(settings):
    settings.ACCEPTANCE_METRICS_TOKEN = TOKEN
    return TOKEN


def scrape(client, token=TOKEN) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(m: dict, name: str, **labels) -> float:
    return m[(name, tuple(sorted(labels.items())))]


def report_row(ledger, seconds):
    return Report.objects.create(
        engagement=ledger.engagement, path="/nowhere.pdf", sha256="0" * 64, size_bytes=1,
        signer="test", signed_at=timezone.now(), signing_seconds=seconds)


def test_it_reports_runs_jobs_probes_signing_and_soaks_from_the_ledger(client, token, ledger,
                                                                        settings):
    settings.RUNS_LOST_AFTER_SECONDS = 90
    done = [ledger.run(GateRun.State.DONE) for _ in range(3)]
    ledger.run(GateRun.State.FAILED)
    running = ledger.run(GateRun.State.RUNNING)
    ledger.job(done[0], NodeJob.State.FAILED, error_kind="lost")
    ledger.job(done[1], NodeJob.State.FAILED, error_kind="lost")
    ledger.job(done[2], NodeJob.State.DONE)
    ledger.job(running, NodeJob.State.RUNNING,
               heartbeat_at=timezone.now() - timedelta(seconds=300))
    for seconds in (0.5, 3, 40):
        ledger.probe_run(done[0], "nvme_inventory", seconds)
    ledger.probe_run(done[0], "fio_seq_read", 700)
    ledger.probe_run(running, "fio_seq_read", None)  # still running: no duration yet
    report_row(ledger, 0.2)
    report_row(ledger, 1.5)
    report_row(ledger, None)  # signed before the time was recorded
    soak_run = ledger.run(GateRun.State.RUNNING, code="G4")
    Soak.objects.create(gate_run=soak_run, state=Soak.State.RUNNING, plan={"duration_s": 60},
                        plan_sha256="1" * 64, heartbeat_at=timezone.now() - timedelta(seconds=42))
    Soak.objects.create(gate_run=ledger.run(GateRun.State.DONE, code="G4"),
                        state=Soak.State.DONE, plan={}, plan_sha256="2" * 64,
                        heartbeat_at=timezone.now() - timedelta(days=3))

    m = scrape(client)

    runs = {state: value(m, "acceptance_gate_runs", state=state)
            for state in GateRun.State.values}
    assert runs == {"queued": 0, "running": 2, "evaluating": 0, "done": 4, "failed": 1,
                    "cancelled": 0}
    assert value(m, "acceptance_node_jobs_lost_total") == 2
    assert value(m, "acceptance_node_jobs_stale") == 1
    hist = "acceptance_probe_duration_seconds"
    assert value(m, hist + "_count", probe="nvme_inventory") == 3
    assert value(m, hist + "_sum", probe="nvme_inventory") == pytest.approx(43.5)
    assert value(m, hist + "_bucket", probe="nvme_inventory", le="1.0") == 1
    assert value(m, hist + "_bucket", probe="nvme_inventory", le="5.0") == 2
    assert value(m, hist + "_bucket", probe="nvme_inventory", le="60.0") == 3
    assert value(m, hist + "_count", probe="fio_seq_read") == 1
    assert value(m, hist + "_bucket", probe="fio_seq_read", le="300.0") == 0
    assert value(m, hist + "_bucket", probe="fio_seq_read", le="900.0") == 1
    assert value(m, "acceptance_report_signing_seconds_count") == 2
    assert value(m, "acceptance_report_signing_seconds_sum") == pytest.approx(1.7)
    assert value(m, "acceptance_report_signing_seconds_bucket", le="0.25") == 1
    assert value(m, "acceptance_report_signing_seconds_bucket", le="+Inf") == 2
    age = value(m, "acceptance_soak_heartbeat_age_seconds", engagement="ops-1",
                gate_run=str(soak_run.id))
    assert 42 <= age < 60
    assert len([k for k in m if k[0] == "acceptance_soak_heartbeat_age_seconds"]) == 1
    assert value(m, "acceptance_notification_failures") == 0
    # The embedded default has no broker to read: unknown, not an error.
    assert value(m, "acceptance_celery_queue_depth", queue="celery") == 0
    assert value(m, "acceptance_celery_queue_depth_known") == 0


def test_it_reads_the_queue_depth_from_a_redis_broker(client, token, db, settings, redis_url,
                                                      monkeypatch):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    monkeypatch.setattr(celery_app.conf, "broker_url", redis_url)
    celery_app.conf.task_always_eager = False  # the shared conftest sets it again per test
    with celery_app.connection_for_write(redis_url) as connection:
        for i in range(3):
            celery_app.send_task("runners.node_job_execute", kwargs={"node_job_id": i},
                                 connection=connection)
        celery_app.send_task("runners.node_job_execute", kwargs={"node_job_id": 9},
                             connection=connection, priority=9)
    m = scrape(client)
    assert value(m, "acceptance_celery_queue_depth", queue="celery") == 4
    assert value(m, "acceptance_celery_queue_depth_known") == 1


def test_it_says_unknown_when_redis_does_not_answer(client, token, db, settings, monkeypatch):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    monkeypatch.setattr(celery_app.conf, "broker_url", "redis://127.0.0.1:1/0")
    m = scrape(client)
    assert value(m, "acceptance_celery_queue_depth_known") == 0
    assert not math.isnan(value(m, "acceptance_celery_queue_depth", queue="celery"))


def test_it_handles_who_may_read_the_metrics(client, token, staff, not_staff):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics")["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405
    client.force_login(not_staff)
    assert client.get("/metrics").status_code == 403
    client.force_login(staff)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"acceptance_gate_runs" in response.content


def test_it_accepts_no_token_when_none_is_configured(client, settings, db):
    settings.ACCEPTANCE_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 403
