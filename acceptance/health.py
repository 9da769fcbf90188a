"""Health endpoints for the orchestrator and the load balancer (no login: they say only whether
the service can work, never what it holds).

* ``/healthz``: the process answers (200 ``ok``); nothing else is touched.
* ``/readyz``: the database answers, the broker takes connections, the reports directory is
  writable and the signing identity loads: 200 with the checks passed, else 503 naming each
  one that failed, as one line of JSON. Error texts name the check and the kind of failure,
  never a URL (a broker or database URL may carry a password).

The metrics endpoint (``/metrics``, helper "ops") is a separate door; the checks here are plain
functions it may reuse.

``HealthMiddleware`` (first in ``MIDDLEWARE``) answers both paths before the host check: a
container's healthcheck or a load balancer asks ``http://127.0.0.1:8000/readyz`` or the pod's
address, never a name in ``ACCEPTANCE_ALLOWED_HOSTS``, and would otherwise get 400.
"""

import tempfile
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from acceptance.celery import app as celery_app
from reports.signing import SigningSetupError, load_signer

BROKER_TIMEOUT_S = 3.0


def database_check() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as error:  # any driver's error: the check's answer, not a crash
        return f"unreachable ({type(error).__name__})"
    return ""


def broker_check() -> str:
    if celery_app.conf.task_always_eager:
        return ""  # the embedded default runs tasks in-process: no broker to reach
    try:
        with celery_app.connection_for_write(connect_timeout=BROKER_TIMEOUT_S) as broker:
            broker.ensure_connection(max_retries=1, interval_start=0, interval_step=0.5,
                                     timeout=BROKER_TIMEOUT_S)
            broker.default_channel  # noqa: B018 (opens the channel: Redis answers PING here)
    except Exception as error:  # kombu wraps the transport's errors in several classes
        return f"unreachable ({type(error).__name__})"
    return ""


def reports_check() -> str:
    directory = Path(settings.REPORTS_DIR)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".readyz-") as probe:
            probe.write(b"ok")
            probe.flush()
    except OSError as error:
        return f"not writable ({error.strerror})"
    return ""


def signing_check() -> str:
    try:
        load_signer()
    except SigningSetupError as error:
        return str(error)
    return ""


CHECKS: dict[str, Callable[[], str]] = {
    "database": database_check,
    "broker": broker_check,
    "reports": reports_check,
    "signing": signing_check,
}


@never_cache
@require_safe
def healthz(request):
    return HttpResponse("ok\n", content_type="text/plain")


@never_cache
@require_safe
def readyz(request):
    failed = {name: problem for name, check in CHECKS.items() if (problem := check())}
    if failed:
        return JsonResponse({"status": "not ready", "failed": failed}, status=503)
    return JsonResponse({"status": "ready", "checked": list(CHECKS)})


HEALTH_VIEWS = {"/healthz": healthz, "/readyz": readyz}


class HealthMiddleware:
    """``/healthz`` and ``/readyz`` for any Host header (they say nothing a host name guards);
    every other path goes on through the middleware chain and its host check."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        view = HEALTH_VIEWS.get(request.path_info)
        if view is not None:
            return view(request)
        return self.get_response(request)
