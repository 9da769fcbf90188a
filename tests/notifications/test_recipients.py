"""Who gets what: per engagement and role (the project manager's settings), each person's
mutes, and a sign-off notice only to the party still to sign."""

from __future__ import annotations

import hashlib

from django.utils import timezone

from notifications import services
from notifications.models import Delivery
from reports.models import Report
from tests.notifications.conftest import stop_g1
from tests.web.conftest import G1_HEALTHY, decide


def _mailed(inbox) -> list[str]:
    return sorted(m["to"][0] for m in inbox)


def test_a_person_who_muted_the_engagement_gets_nothing(
        smtp_server, acme, pm, engineer, customer, django_capture_on_commit_callbacks):
    services.mute_set(user=customer, engagement=acme, kind="", muted=True)
    stop_g1(acme, django_capture_on_commit_callbacks)
    assert _mailed(smtp_server) == ["erin-engineer@example.com", "pat-pm@example.com"]


def test_muting_one_kind_keeps_the_others(acme, pm, engineer):
    services.mute_set(user=engineer, engagement=acme, kind="gate_decided", muted=True)
    gate = acme.gates.get(code="G1")
    assert services.is_muted(engineer, acme, "gate_decided")
    assert not services.is_muted(engineer, acme, "run_failed")
    services.mute_set(user=engineer, engagement=acme, kind="gate_decided", muted=False)
    assert not services.is_muted(engineer, acme, "gate_decided")
    assert gate.state == "pending"


def test_a_mute_of_one_engagement_leaves_the_others(
        smtp_server, acme, globex, pm, django_capture_on_commit_callbacks):
    services.mute_set(user=pm, engagement=globex, kind="", muted=True)
    stop_g1(acme, django_capture_on_commit_callbacks)
    assert _mailed(smtp_server) == ["pat-pm@example.com"]


def test_the_project_manager_chooses_who_gets_what_per_engagement(
        smtp_server, acme, globex, pm, engineer, customer, other_customer,
        django_capture_on_commit_callbacks):
    grid = services.subscription_grid(acme)
    chosen = {(kind, role) for kind, roles in grid.items() for role in roles}
    chosen.discard(("gate_decided", "customer"))
    chosen.discard(("gate_decided", "engineer"))
    services.subscriptions_save(engagement=acme, chosen=chosen)
    assert services.subscribed_roles(acme, "gate_decided") == {"project_manager"}
    assert services.subscribed_roles(globex, "gate_decided") == {
        "project_manager", "engineer", "customer"}  # another engagement keeps the defaults
    stop_g1(acme, django_capture_on_commit_callbacks)
    assert _mailed(smtp_server) == ["pat-pm@example.com"]
    with django_capture_on_commit_callbacks(execute=True):
        decide(globex.gates.get(code="G1"), G1_HEALTHY, "passed")
    assert "bob-globex@example.com" in _mailed(smtp_server)


def _report(decision, tmp_path) -> Report:
    path = tmp_path / "r.pdf"
    path.write_bytes(b"%PDF-1.7\n")
    return Report.objects.create(decision=decision, path=str(path),
                                 sha256=hashlib.sha256(b"%PDF-1.7\n").hexdigest(),
                                 size_bytes=9, signer="dev", signed_at=timezone.now())


def test_a_signoff_notice_goes_only_to_the_party_still_to_sign(
        smtp_server, acme, pm, engineer, customer, tmp_path,
        django_capture_on_commit_callbacks):
    decision = decide(acme.gates.get(code="G1"), G1_HEALTHY, "passed")
    report = _report(decision, tmp_path)
    with django_capture_on_commit_callbacks(execute=True):
        services.notice_send(kind="signoff_waiting", report_id=report.id, parties=["customer"])
    [mail] = smtp_server
    assert mail["to"] == ["carla-acme@example.com"]
    assert mail["message"]["Subject"] == "[acme-prod] acme-prod G1 report v1 awaits sign-off"
    assert "the customer's representative" in mail["message"].get_payload(decode=True).decode()
    with django_capture_on_commit_callbacks(execute=True):
        services.notice_send(kind="signoff_waiting", report_id=report.id, parties=["vendor"])
    assert _mailed(smtp_server) == ["carla-acme@example.com", "pat-pm@example.com"]


def test_people_without_an_address_or_inactive_get_no_mail(
        smtp_server, acme, pm, engineer, django_capture_on_commit_callbacks):
    engineer.email = ""
    engineer.save(update_fields=["email"])
    pm.is_active = False
    pm.save(update_fields=["is_active"])
    stop_g1(acme, django_capture_on_commit_callbacks)
    assert smtp_server == []
    assert not Delivery.objects.exists()
