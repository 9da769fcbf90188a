"""/healthz and /readyz: no login, one line each; /readyz names every check that failed."""

import json
import os
import socket

import pytest

from acceptance.celery import app as celery_app
from tests.production.helpers import free_port


def test_healthz_says_ok_without_touching_anything(client):
    answer = client.get("/healthz")
    assert (answer.status_code, answer.content) == (200, b"ok\n")
    assert answer["Content-Type"] == "text/plain"


def test_readyz_is_ready_on_the_embedded_default(client, db):
    answer = client.get("/readyz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ready",
                             "checked": ["database", "broker", "reports", "signing"]}
    assert b"\n" not in answer.content


def test_readyz_names_an_unwritable_reports_directory_and_a_missing_signing_key(
        client, db, settings, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the reports directory should be")
    settings.REPORTS_DIR = blocker / "reports"
    settings.REPORT_SIGNING_PKCS12 = str(tmp_path / "missing.p12")
    answer = client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json() == {"status": "not ready", "failed": {
        "reports": "not writable (Not a directory)",
        "signing": f"cannot read signing key {tmp_path / 'missing.p12'}: No such file or "
                   "directory"}}


@pytest.fixture
def unreachable_broker():
    """A Redis URL nobody listens on (a port bound but never listened to), with a password
    that must not show."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        url = f"redis://:hunter2-secret@127.0.0.1:{held.getsockname()[1]}/0"
        eager, broker = celery_app.conf.task_always_eager, celery_app.conf.broker_url
        celery_app.conf.task_always_eager, celery_app.conf.broker_url = False, url
        try:
            yield url
        finally:
            celery_app.conf.task_always_eager, celery_app.conf.broker_url = eager, broker


def test_readyz_names_an_unreachable_broker_without_its_url(client, db, unreachable_broker):
    answer = client.get("/readyz")
    assert answer.status_code == 503
    failed = answer.json()["failed"]
    assert list(failed) == ["broker"]
    assert failed["broker"].startswith("unreachable (")
    assert "hunter2" not in answer.content.decode() and "127.0.0.1" not in json.dumps(failed)


def test_readyz_reaches_a_real_redis(client, db, settings):
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.skip("no Redis: run through scripts/test, which starts one")
    eager, broker = celery_app.conf.task_always_eager, celery_app.conf.broker_url
    celery_app.conf.task_always_eager, celery_app.conf.broker_url = False, url
    try:
        answer = client.get("/readyz")
    finally:
        celery_app.conf.task_always_eager, celery_app.conf.broker_url = eager, broker
    assert answer.status_code == 200, answer.content


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health_answers_a_container_healthcheck_whose_host_is_not_an_allowed_host(
        client, db, settings, path):
    """docker-compose.yml and the Dockerfile ask http://127.0.0.1:8000/…; production's
    ACCEPTANCE_ALLOWED_HOSTS names the public host only."""
    settings.ALLOWED_HOSTS = ["acceptance.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    answer = client.get(path, HTTP_HOST="127.0.0.1:8000")
    assert answer.status_code == 200
    assert client.get("/accounts/login/", HTTP_HOST="127.0.0.1:8000").status_code == 400
    assert client.post(path, HTTP_HOST="127.0.0.1:8000").status_code == 405


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health_answers_a_head_request_as_load_balancers_send(client, db, path):
    answer = client.head(path)
    assert (answer.status_code, answer.content) == (200, b"")
