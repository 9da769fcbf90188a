"""The domain tells what happened only after it committed, through acceptance.events; the
notifications room turns each event into notices. A failing listener changes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from acceptance import events
from gates.models import Decision
from notifications.models import Delivery
from reports.services import report_issue, signoff_record
from runners.control import recover_lost_jobs
from runners.decision import gate_run_report_failed
from runners.models import GateRun, NodeJob
from runners.soak import driver
from runners.soak.faults import fault_end
from runners.soak.models import FaultWindow, Soak
from runners.soak.nodes import NodePool
from tests.notifications.conftest import body_of, stop_g1
from tests.notifications.nodes import node_of
from tests.notifications.test_delivery import _hook
from tests.web.conftest import G1_HEALTHY, G1_MISSING_DRIVE, decide


def _subjects(inbox, to: str) -> list[str]:
    return [m["message"]["Subject"] for m in inbox if m["to"] == [to]]


def test_a_decision_rolled_back_tells_nobody(acme, pm, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError), transaction.atomic():
            decide(acme.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
            raise RuntimeError("the transaction ends without committing")
    assert not Decision.objects.exists()
    assert not Delivery.objects.exists()


def test_a_failing_listener_neither_stops_the_decision_nor_the_notice(
        smtp_server, acme, pm, django_capture_on_commit_callbacks):
    def broken(**_kwargs):
        raise RuntimeError("a listener that fails")

    events.gate_decided.connect(broken, weak=False, dispatch_uid="test-broken")
    try:
        decision = stop_g1(acme, django_capture_on_commit_callbacks)
    finally:
        events.gate_decided.disconnect(dispatch_uid="test-broken")
    assert Decision.objects.get(pk=decision.pk).outcome == "stopped"
    assert _subjects(smtp_server, "pat-pm@example.com") == [
        "[acme-prod] G1 stopped: Arrival acceptance"]


def test_a_run_that_failed_is_told_with_its_reason(
        smtp_server, acme, pm, engineer, customer, django_capture_on_commit_callbacks):
    decision = decide(acme.gates.get(code="G1"), G1_HEALTHY, "passed", settle=False)
    GateRun.objects.filter(id=decision.gate_run_id).update(state=GateRun.State.EVALUATING)
    decision.gate_run.refresh_from_db()  # a report fails while its run is evaluating
    with django_capture_on_commit_callbacks(execute=True):
        gate_run_report_failed(decision=decision, error=RuntimeError("no signing key"))
    [subject] = _subjects(smtp_server, "pat-pm@example.com")
    assert subject == "[acme-prod] G1 run #1: decided passed, signed report not issued"
    mail = next(m for m in smtp_server if m["to"] == ["erin-engineer@example.com"])
    assert ("decision recorded (passed) but the signed report could not be issued: "
            "RuntimeError: no signing key") in mail["message"].get_payload(decode=True).decode()
    assert _subjects(smtp_server, "carla-acme@example.com") == []  # not a customer's default


def test_a_lost_run_is_told(smtp_server, acme, pm, django_capture_on_commit_callbacks):
    run = GateRun.objects.create(gate=acme.gates.get(code="G1"), attempt=1,
                                 started_by="erin-engineer", state=GateRun.State.RUNNING)
    old = timezone.now() - timedelta(minutes=10)
    NodeJob.objects.create(gate_run=run, node=node_of(acme), state=NodeJob.State.RUNNING,
                           started_at=old, heartbeat_at=old)
    with django_capture_on_commit_callbacks(execute=True):
        recover_lost_jobs(after=timedelta(minutes=1))
    subjects = _subjects(smtp_server, "pat-pm@example.com")
    assert "[acme-prod] G1 run #1: node array-1 lost" in subjects
    assert "[acme-prod] G1 run #1 failed (no decision)" in subjects  # and then it ends


def _soak(engagement):
    gate = engagement.gates.get(code="G4")
    run = GateRun.objects.create(gate=gate, attempt=1, started_by="erin-engineer",
                                 state=GateRun.State.RUNNING)
    return Soak.objects.create(gate_run=run, state=Soak.State.RUNNING,
                               plan=gate.probe_plan[0]["soak"], plan_sha256="0" * 64,
                               started_at=timezone.now(), heartbeat_at=timezone.now())


def test_a_soak_fault_window_that_failed_is_told(
        webhook_receiver, acme, django_capture_on_commit_callbacks):
    _hook(acme, webhook_receiver)
    soak = _soak(acme)
    fault = FaultWindow.objects.create(soak=soak, position=1, name="drive-out",
                                       kind="drive_out", node=node_of(acme),
                                       target={"drive": 7}, start_s=86400, duration_s=300)
    with django_capture_on_commit_callbacks(execute=True):
        fault_end(soak, fault, FaultWindow.State.MISSED, "the load ended before it was due")
        fault_end(soak, fault, FaultWindow.State.FAILED, "inject failed: no such drive")
    [post] = webhook_receiver.posts  # a missed window is not a failure
    body = body_of(post)
    assert body["event"] == "soak_fault_window_failed"
    assert body["subject"] == "[acme-prod] G4 soak: fault window drive-out failed"
    assert body["data"]["error"] == "inject failed: no such drive"


def test_an_interrupted_soak_is_told(webhook_receiver, acme, django_capture_on_commit_callbacks):
    _hook(acme, webhook_receiver)
    soak = _soak(acme)
    with django_capture_on_commit_callbacks(execute=True):
        driver._abort(soak, NodePool(), "the soak could not start: agent refused", failed=True)
    [post] = webhook_receiver.posts
    body = body_of(post)
    assert (body["event"], body["data"]["state"]) == ("soak_interrupted", "failed")
    assert body["text"] == "the soak could not start: agent refused"


@pytest.mark.slow
def test_an_issued_report_and_each_waiting_signoff_are_told(
        smtp_server, webhook_receiver, acme, pm, customer, django_capture_on_commit_callbacks):
    _hook(acme, webhook_receiver, kinds=["report_issued", "signoff_waiting"])
    decision = decide(acme.gates.get(code="G1"), G1_HEALTHY, "passed")
    with django_capture_on_commit_callbacks(execute=True):
        report = report_issue(decision=decision)
    assert [body_of(p)["event"] for p in webhook_receiver.posts] == [
        "report_issued", "signoff_waiting"]
    assert body_of(webhook_receiver.posts[0])["data"]["sha256"] == report.sha256
    assert body_of(webhook_receiver.posts[1])["data"]["waiting_for"] == ["vendor", "customer"]
    assert "[acme-prod] acme-prod G1 report v1 awaits sign-off" in _subjects(
        smtp_server, "carla-acme@example.com")
    with django_capture_on_commit_callbacks(execute=True):
        signoff_record(report=report, user=pm)
    assert body_of(webhook_receiver.posts[2])["data"]["waiting_for"] == ["customer"]
    with django_capture_on_commit_callbacks(execute=True):
        signoff_record(report=report, user=customer)
    last = body_of(webhook_receiver.posts[-1])
    assert (last["event"], last["data"]["version"]) == ("report_issued", 2)
    assert len(webhook_receiver.posts) == 4  # nobody is waiting any more
