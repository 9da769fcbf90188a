"""A start the broker refuses, through the API and the browser's start page: HTTP 503 with
the reason (the API), the same words on the page, and no half-dispatched run — nothing created
when the broker is down before the start, the run ended at once as an error when its send is
refused after the run was written. The broker is a private Redis, killed by the test."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from acceptance.celery import app as celery_app
from acceptance.models import Membership
from acceptance.tokens import api_token_create
from runners.models import GateRun, NodeJob
from tests.api.conftest import make_user
from tests.faults.harness import private_redis  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def dead_broker(private_redis, settings):  # noqa: F811
    """Celery sends to the private Redis, which is then killed."""
    saved = celery_app.conf.broker_url, celery_app.conf.task_always_eager
    celery_app.conf.broker_url, celery_app.conf.task_always_eager = private_redis.url, False
    # As the settings give a Redis broker: a port that does not answer never hangs a send.
    options = celery_app.conf.broker_transport_options
    celery_app.conf.broker_transport_options = {"socket_connect_timeout": 4,
                                                "socket_timeout": 10}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    _forget_pools()
    private_redis.kill()
    yield private_redis
    celery_app.conf.broker_url, celery_app.conf.task_always_eager = saved
    celery_app.conf.broker_transport_options = options
    _forget_pools()


def _forget_pools() -> None:
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


def engineer_client() -> APIClient:
    client = APIClient()
    user = make_user("eng", Membership.Role.ENGINEER)
    client.credentials(HTTP_AUTHORIZATION="Token " + api_token_create(user=user, name="t")[1])
    return client


def test_the_api_answers_503_with_the_reason_and_creates_nothing(lab, dead_broker):
    engagement, _ = lab("healthy")
    answer = engineer_client().post(f"/api/engagements/{engagement.name}/gates/G1/runs/",
                                    format="json")
    assert answer.status_code == 503, answer.content
    assert answer.json()["detail"].startswith("refused: the task broker is not answering (")
    assert GateRun.objects.count() == 0 and NodeJob.objects.count() == 0


def test_a_send_refused_after_the_run_was_written_ends_that_run_at_once(
        lab, dead_broker, monkeypatch, private_redis):  # noqa: F811
    """The broker goes away between the check and the send: the run written is ended as an
    error at once (its jobs failed, kind ``broker``), so the gate can start again."""
    import runners.launch

    engagement, _ = lab("healthy")
    monkeypatch.setattr(runners.launch, "broker_check", lambda: None)  # the check passed …
    client = engineer_client()
    answer = client.post(f"/api/engagements/{engagement.name}/gates/G1/runs/", format="json")
    assert answer.status_code == 503, answer.content
    detail = answer.json()["detail"]
    assert detail.startswith("refused: the task broker is not answering (")
    assert detail.endswith("attempt #1 was ended as an error, nothing ran on the nodes")
    run = GateRun.objects.get()
    assert run.state == "failed" and run.error.startswith("not started: the task broker")
    assert list(NodeJob.objects.values_list("state", "error_kind")) == [("failed", "broker")]
    # Nothing blocks the gate: once the broker answers, the next start goes through.
    private_redis.start()
    _forget_pools()
    again = client.post(f"/api/engagements/{engagement.name}/gates/G1/runs/", format="json")
    assert again.status_code == 201, again.content
    assert again.json()["attempt"] == 2
    assert private_redis.queue_length() == 1  # its job's task is in the broker


def test_the_start_page_shows_the_refusal(lab, dead_broker):
    engagement, _ = lab("healthy")
    browser = Client()
    browser.force_login(make_user("eng", Membership.Role.ENGINEER))
    page = browser.post(f"/engagements/{engagement.name}/gates/G1/run/", {"reason": ""},
                        follow=True)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Not started: the task broker is not answering (" in text
    assert GateRun.objects.count() == 0
