"""The periodic sweep (Celery beat): a gate due within three days or overdue is told once per
gate and due date; a run no worker picked up is told once."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from acceptance.celery import app
from acceptance.models import Engagement
from notifications import services
from notifications.models import Delivery, Notice
from runners.models import GateRun, NodeJob
from tests.notifications.nodes import node_of
from tests.web.conftest import G1_HEALTHY, decide


def _start(engagement, days_ago: int):
    Engagement.objects.filter(pk=engagement.pk).update(
        start_date=timezone.localdate() - timedelta(days=days_ago))


def _mails(inbox, subject_part: str) -> list[str]:
    return sorted(m["to"][0] for m in inbox if subject_part in m["message"]["Subject"])


def test_a_gate_due_in_three_days_is_told_once(
        smtp_server, acme, pm, engineer, customer, django_capture_on_commit_callbacks):
    _start(acme, 11)  # G1 is due at the end of week 2: in three days
    with django_capture_on_commit_callbacks(execute=True):
        assert services.schedule_sweep() == [f"gate_due_soon:{acme.gates.get(code='G1').id}:"
                                             f"{timezone.localdate() + timedelta(days=3)}"]
    with django_capture_on_commit_callbacks(execute=True):
        assert services.schedule_sweep() == []  # the same gate and due date: not again
    due = (timezone.localdate() + timedelta(days=3)).isoformat()
    assert _mails(smtp_server, "G1") == ["erin-engineer@example.com", "pat-pm@example.com"]
    assert smtp_server[0]["message"]["Subject"] == (
        f"[acme-prod] G1 Arrival acceptance due in 3 days ({due})")


def test_a_gate_due_later_is_not_told(acme, pm):
    _start(acme, 10)  # four days left
    assert services.schedule_sweep() == []


def test_an_overdue_gate_is_told_once_and_again_for_a_new_due_date(
        smtp_server, acme, pm, django_capture_on_commit_callbacks):
    _start(acme, 15)  # G1 was due yesterday
    with django_capture_on_commit_callbacks(execute=True):
        first = services.schedule_sweep()
        services.schedule_sweep()
    gate = acme.gates.get(code="G1")
    yesterday = timezone.localdate() - timedelta(days=1)
    assert first == [f"gate_overdue:{gate.id}:{yesterday}"]
    assert len(_mails(smtp_server, "overdue")) == 1
    _start(acme, 16)  # the schedule moved: a new due date is a new notice
    with django_capture_on_commit_callbacks(execute=True):
        assert services.schedule_sweep() == [
            f"gate_overdue:{gate.id}:{yesterday - timedelta(days=1)}"]
    assert len(_mails(smtp_server, "overdue")) == 2


def test_decided_gates_and_stopped_engagements_are_not_told(acme, pm):
    _start(acme, 15)
    decide(acme.gates.get(code="G1"), G1_HEALTHY, "passed")
    assert services.schedule_sweep() == []
    Engagement.objects.filter(pk=acme.pk).update(state=Engagement.State.STOPPED)
    _start(acme, 40)  # G2 and G3 overdue too, but the engagement has stopped
    assert services.schedule_sweep() == []


def test_a_run_no_worker_picked_up_is_told_once(
        smtp_server, acme, pm, settings, django_capture_on_commit_callbacks, tmp_path):
    settings.NOTIFY_QUEUED_TOO_LONG_SECONDS = 600
    run = GateRun.objects.create(gate=acme.gates.get(code="G1"), attempt=1,
                                 started_by="erin-engineer", state=GateRun.State.RUNNING)
    NodeJob.objects.create(gate_run=run, node=node_of(acme), state=NodeJob.State.QUEUED,
                           dispatched_at=timezone.now() - timedelta(minutes=20))
    with django_capture_on_commit_callbacks(execute=True):
        assert services.schedule_sweep() == [f"run_queued_too_long:{run.id}"]
        assert services.schedule_sweep() == []
    [mail] = smtp_server
    assert mail["message"]["Subject"] == "[acme-prod] G1 run #1 queued for 20 min"
    assert Notice.objects.filter(key=f"run_queued_too_long:{run.id}").exists()
    assert Delivery.objects.get().event == "run_queued_too_long"


def test_celery_beat_runs_the_sweep_by_its_registered_name():
    app.loader.import_default_modules()
    [entry] = [e for e in app.conf.beat_schedule.values()
               if e["task"] == "notifications.schedule_sweep"]
    assert entry["schedule"] == 600.0
    assert "notifications.schedule_sweep" in app.tasks
    assert "notifications.delivery_send" in app.tasks
