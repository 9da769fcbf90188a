"""Prometheus metrics of the service, read from the ledger at scrape time, and their door.

``LedgerCollector`` (a prometheus_client custom collector) queries the database on every scrape,
so every gunicorn worker answers with the same figures and no multiprocess directory is needed:

- ``acceptance_gate_runs{state}``: gate runs by state (every state, zeros included).
- ``acceptance_node_jobs_lost_total``: node jobs recovery failed as lost (worker stopped);
  ``acceptance_node_jobs_stale``: active jobs whose heartbeat is older than
  ``RUNS_LOST_AFTER_SECONDS`` (lost, not yet recovered).
- ``acceptance_celery_queue_depth{queue}``: messages waiting in the Celery queue. Read from
  Redis (the list of that name and its priority lists) when the broker is Redis; with any other
  broker (the embedded default runs tasks in-process) it reads 0 and
  ``acceptance_celery_queue_depth_known`` reads 0; a Redis that does not answer also reads
  "unknown" (0, known 0), never an error page.
- ``acceptance_probe_duration_seconds{probe}``: histogram of finished probe runs' wall time
  (``finished_at - started_at`` of the ``ProbeRun`` rows), one series per probe.
- ``acceptance_report_signing_seconds``: histogram of the time ``reports.services`` spent
  signing each report (``Report.signing_seconds``; reports signed before it was recorded are
  left out). Signing happens in Celery workers, the scrape in a web worker: the figure lives
  in the database, not in one process's memory.
- ``acceptance_soak_heartbeat_age_seconds{engagement,gate_run}``: seconds since the driver
  of each active G4 soak last beat (no heartbeat yet: since the soak started).
- ``acceptance_notification_failures``: deliveries that failed for good (every attempt used),
  from ``notifications.queries.notification_failures_count``.

``metrics_view`` serves the text format at ``/metrics``, only with ``Authorization: Bearer
<ACCEPTANCE_METRICS_TOKEN>`` (compared in constant time) or a staff session: 401 without
credentials, 403 with wrong ones or a session that is not staff.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from datetime import timedelta

import redis
from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from acceptance.celery import app as celery_app
from notifications.queries import notification_failures_count
from reports.models import Report
from runners.models import GateRun, NodeJob, ProbeRun
from runners.soak.models import Soak

logger = logging.getLogger(__name__)

# Probe runs take from under a second (nvme list) to hours (a soak's collection).
PROBE_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0)
SIGNING_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# kombu's Redis transport keeps priorities 3, 6, 9 in lists named queue + "\x06\x16" + step.
KOMBU_PRIORITY_SEPARATOR = "\x06\x16"
KOMBU_PRIORITY_STEPS = (3, 6, 9)


def notification_failures() -> int:
    """Notifications that could not be delivered: deliveries whose every attempt failed."""
    return notification_failures_count()


def queue_depth(queue: str) -> int | None:
    """Messages waiting in ``queue`` on a Redis broker; None when unknown (another broker, or
    Redis does not answer)."""
    url = str(celery_app.conf.broker_url or "")
    if settings.CELERY_TASK_ALWAYS_EAGER or not url.startswith(("redis://", "rediss://")):
        return None
    names = [queue] + [f"{queue}{KOMBU_PRIORITY_SEPARATOR}{s}" for s in KOMBU_PRIORITY_STEPS]
    try:
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        with client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.llen(name)
            return int(sum(pipe.execute()))
    except redis.RedisError as error:
        logger.warning("queue depth unknown: %s", type(error).__name__)
        return None


def _histogram(name: str, documentation: str, buckets, rows, label: str | None):
    """A histogram family from rows of {label?, le_<i>: count, total: count, sum: timedelta}."""
    family = HistogramMetricFamily(name, documentation, labels=[label] if label else None)
    for row in rows:
        cumulative = [(str(float(bound)), row[f"le_{i}"]) for i, bound in enumerate(buckets)]
        cumulative.append(("+Inf", row["total"]))
        total = row["sum"]
        seconds = total.total_seconds() if isinstance(total, timedelta) else float(total or 0)
        family.add_metric([row[label]] if label else [], cumulative, seconds)
    return family


def _bucket_counts(field: str, buckets, *, seconds: bool) -> dict:
    def bound(b: float):
        return timedelta(seconds=b) if not seconds else b

    counts = {f"le_{i}": Count("id", filter=Q(**{f"{field}__lte": bound(b)}))
              for i, b in enumerate(buckets)}
    return counts | {"total": Count("id"), "sum": Sum(field)}


class LedgerCollector(Collector):
    """Every figure from the database (and the broker), computed when Prometheus scrapes."""

    def collect(self) -> Iterator:
        yield from self._runs()
        yield from self._lost_jobs()
        yield from self._queue()
        yield self._probe_durations()
        yield self._signing()
        yield self._soak_heartbeats()
        failures = GaugeMetricFamily("acceptance_notification_failures",
                                     "Notifications that could not be delivered")
        failures.add_metric([], notification_failures())
        yield failures

    def _runs(self):
        family = GaugeMetricFamily("acceptance_gate_runs", "Gate runs by state",
                                   labels=["state"])
        counts = dict(GateRun.objects.values_list("state").annotate(n=Count("id")))
        for state in GateRun.State.values:
            family.add_metric([state], counts.get(state, 0))
        yield family

    def _lost_jobs(self):
        lost = CounterMetricFamily("acceptance_node_jobs_lost",
                                   "Node jobs failed as lost (their worker stopped)")
        lost.add_metric([], NodeJob.objects.filter(error_kind="lost").count())
        yield lost
        cutoff = timezone.now() - timedelta(seconds=settings.RUNS_LOST_AFTER_SECONDS)
        stale = GaugeMetricFamily(
            "acceptance_node_jobs_stale",
            "Active node jobs without a heartbeat for RUNS_LOST_AFTER_SECONDS (not yet recovered)")
        stale.add_metric([], NodeJob.objects.filter(state__in=NodeJob.ACTIVE,
                                                    heartbeat_at__lt=cutoff).count())
        yield stale

    def _queue(self):
        queue = celery_app.conf.task_default_queue or "celery"
        depth = queue_depth(queue)
        family = GaugeMetricFamily("acceptance_celery_queue_depth",
                                   "Messages waiting in the Celery queue (0 when unknown)",
                                   labels=["queue"])
        family.add_metric([queue], depth or 0)
        yield family
        known = GaugeMetricFamily("acceptance_celery_queue_depth_known",
                                  "1 when the queue depth was read from a Redis broker")
        known.add_metric([], 0 if depth is None else 1)
        yield known

    def _probe_durations(self):
        duration = ExpressionWrapper(F("finished_at") - F("started_at"),
                                     output_field=DurationField())
        rows = (ProbeRun.objects.filter(finished_at__isnull=False)
                .annotate(duration=duration).values("probe")
                .annotate(**_bucket_counts("duration", PROBE_BUCKETS, seconds=False))
                .order_by("probe"))
        return _histogram("acceptance_probe_duration_seconds",
                          "Wall time of finished probe runs, by probe", PROBE_BUCKETS, rows,
                          "probe")

    def _signing(self):
        row = (Report.objects.filter(signing_seconds__isnull=False)
               .aggregate(**_bucket_counts("signing_seconds", SIGNING_BUCKETS, seconds=True)))
        return _histogram("acceptance_report_signing_seconds", "Time spent signing a report",
                          SIGNING_BUCKETS, [row], None)

    def _soak_heartbeats(self):
        family = GaugeMetricFamily("acceptance_soak_heartbeat_age_seconds",
                                   "Seconds since each active soak's driver last beat",
                                   labels=["engagement", "gate_run"])
        now = timezone.now()
        for soak in (Soak.objects.filter(state__in=Soak.ACTIVE)
                     .select_related("gate_run__gate__engagement").order_by("id")):
            beat = soak.heartbeat_at or soak.started_at or soak.gate_run.created_at
            family.add_metric([soak.gate_run.gate.engagement.name, str(soak.gate_run_id)],
                              max(0.0, (now - beat).total_seconds()))
        return family


def registry() -> CollectorRegistry:
    """A registry of the ledger collector only (no process-global state)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(LedgerCollector())
    return reg


def _bearer(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the caller may read the metrics; else the 401 / 403 answer."""
    token = _bearer(request)
    configured = str(getattr(settings, "ACCEPTANCE_METRICS_TOKEN", "") or "")
    if token is not None:
        if configured and hmac.compare_digest(token.encode(), configured.encode()):
            return None
        return HttpResponse("metrics: wrong bearer token\n", status=403,
                            content_type="text/plain")
    if request.user.is_authenticated:
        if request.user.is_staff:
            return None
        return HttpResponse("metrics: staff only\n", status=403, content_type="text/plain")
    response = HttpResponse("metrics: give Authorization: Bearer <ACCEPTANCE_METRICS_TOKEN>\n",
                            status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
