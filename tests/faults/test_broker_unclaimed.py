"""The sweep's bounds for a job nobody claims, against a real (private) Redis: sent again
while re-sends remain; after the last, failed with the reason — unless messages still wait in
the broker's queue (busy workers), where it waits on."""

from datetime import timedelta

import pytest
from django.utils import timezone

from acceptance.celery import app as celery_app
from acceptance.models import Credential, Node
from gates.services import engagement_create
from runners.control import unclaimed_jobs_resend
from runners.doorbell import queue_waiting, ring
from runners.models import GateRun, NodeJob
from tests.faults.harness import private_redis  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def broker(private_redis, settings):  # noqa: F811
    saved = celery_app.conf.broker_url, celery_app.conf.task_always_eager
    celery_app.conf.broker_url, celery_app.conf.task_always_eager = private_redis.url, False
    # As the settings give a Redis broker: a port that does not answer never hangs a send.
    options = celery_app.conf.broker_transport_options
    celery_app.conf.broker_transport_options = {"socket_connect_timeout": 4,
                                                "socket_timeout": 10}
    celery_app._pool = celery_app.amqp._producer_pool = None
    settings.RUNS_UNCLAIMED_AFTER_SECONDS, settings.RUNS_RESEND_MAX = 60.0, 3
    yield private_redis
    celery_app.conf.broker_url, celery_app.conf.task_always_eager = saved
    celery_app.conf.broker_transport_options = options
    celery_app._pool = celery_app.amqp._producer_pool = None


def stale_job(sends: int) -> NodeJob:
    engagement = engagement_create(name=f"site-{sends}", customer="Org",
                                   start_date=timezone.localdate())
    node = Node.objects.create(
        engagement=engagement, name="n1", role="array", address="127.0.0.1", port=22,
        ssh_user="root", host_key="ssh-ed25519 " + "A" * 68,
        credential=Credential.objects.create(name=f"c{sends}", private_key_encrypted=b"x"))
    run = GateRun.objects.create(gate=engagement.gates.get(code="G1"), attempt=1,
                                 started_by="t", state=GateRun.State.RUNNING)
    return NodeJob.objects.create(gate_run=run, node=node, sends=sends,
                                  dispatched_at=timezone.now() - timedelta(minutes=5))


def test_a_job_with_re_sends_left_is_sent_again(transactional_db, broker):
    job = stale_job(sends=1)
    lines = unclaimed_jobs_resend()
    job.refresh_from_db()
    assert (job.state, job.sends) == ("queued", 2)
    assert lines == [f"{job.gate_run} on n1: re-sent (never claimed within 60 s; send 2)"]
    assert broker.queue_length() == 1 and queue_waiting() == 1


def test_after_the_last_send_it_waits_while_the_queue_holds_messages_then_fails(
        transactional_db, broker):
    job = stale_job(sends=4)  # the first send and 3 re-sends
    ring("runners.raw_outputs_prune")  # busy workers: a message still waits in the queue
    assert unclaimed_jobs_resend() == []
    job.refresh_from_db()
    assert job.state == "queued"
    broker.kill()
    broker.wipe()
    broker.start()  # the queue is empty now: nothing of it waits anywhere
    [line] = unclaimed_jobs_resend()
    job.refresh_from_db()
    assert (job.state, job.error_kind) == ("failed", "unclaimed")
    assert job.error.startswith("never started: sent 4 times, and no worker claimed it within "
                                "60 s of any send")
    assert "re-run the gate" in line
    job.gate_run.refresh_from_db()
    assert job.gate_run.state == "evaluating"  # every job over: decided (as an error) next
