"""The admin: the ledger is view-only (a POST to add, change or delete answers 403 and the row
stays as it was); an engagement's state and stop reason are read-only; an engagement added
there gets G1–G4 seeded as on the page; Membership is there for superusers."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from acceptance.models import AuditEntry, Engagement, Membership, Organisation
from gates.defaults import DEFAULT_GATES, definition_sha256
from gates.models import CriterionVerdict, Decision, Gate
from gates.services import engagement_create
from reports.models import Report, ReportDownload, SignOff
from runners.dispatch import service_probe_run
from runners.models import GateRun, Measurement, ProbeRun
from tests.web.conftest import G1_MISSING_DRIVE, decide, report_for

LEDGER = [AuditEntry, Decision, CriterionVerdict, Measurement, ProbeRun, Report, SignOff,
          ReportDownload]


@pytest.fixture
def root(db):
    return User.objects.create_superuser("root", password="x")  # noqa: S106


@pytest.fixture
def ledger(root, tmp_path):
    """One row of every ledger model, as the services write them."""
    engagement = engagement_create(name="acme-1", customer="ACME", start_date="2026-11-02",
                                   actor="pat-pm")
    engagement.bom_items.create(position=1, description="FX100 array", quantity=1)
    gate = engagement.gates.get(code="G1")
    decision = decide(gate, G1_MISSING_DRIVE, "stopped")
    service_probe_run(gate_run=decision.gate_run, probe_name="bom_checklist")
    report = report_for(decision, tmp_path)
    SignOff.objects.create(report=report, party="vendor", user=root, name="root", role="PM",
                           at=timezone.now())
    ReportDownload.objects.create(report=report, user=root, username="root", via="web")
    rows = {model: model.objects.first() for model in LEDGER}
    assert all(rows.values()), rows
    return rows


def admin_url(model, action: str, *args) -> str:
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{action}", args=args)


def snapshot(model) -> list[dict]:
    return list(model.objects.order_by("pk").values())


@pytest.mark.parametrize("model", LEDGER, ids=[m.__name__ for m in LEDGER])
def test_the_ledger_is_view_only_in_the_admin(client, root, ledger, model):
    client.force_login(root)
    row = ledger[model]
    before = snapshot(model)
    assert client.get(admin_url(model, "changelist")).status_code == 200
    view = client.get(admin_url(model, "change", row.pk))
    assert view.status_code == 200
    assert b'name="_save"' not in view.content  # shown, not offered for saving
    assert client.get(admin_url(model, "add")).status_code == 403
    assert client.post(admin_url(model, "add"), {}).status_code == 403
    assert client.post(admin_url(model, "change", row.pk), {}).status_code == 403
    assert client.get(admin_url(model, "delete", row.pk)).status_code == 403
    assert client.post(admin_url(model, "delete", row.pk), {"post": "yes"}).status_code == 403
    bulk = client.post(admin_url(model, "changelist"),
                       {"action": "delete_selected", "_selected_action": [row.pk],
                        "post": "yes"})
    assert bulk.status_code in (200, 302)  # no such action: nothing deleted
    assert snapshot(model) == before


def test_an_engagements_state_and_stop_reason_are_read_only(client, root, ledger):
    engagement = Engagement.objects.get(name="acme-1")
    assert engagement.state == "stopped"
    before = (engagement.state, engagement.stopped_reason)
    client.force_login(root)
    page = client.get(admin_url(Engagement, "change", engagement.pk)).content.decode()
    assert 'name="state"' not in page and 'name="stopped_reason"' not in page
    response = client.post(admin_url(Engagement, "change", engagement.pk), {
        "name": "acme-1", "customer": engagement.customer_id, "start_date": "2026-11-02",
        "state": "active", "stopped_reason": "", "report_language": "en",
        "reference_profile": "R2-c16", "max_parallel_nodes": "16",
        "arrays-TOTAL_FORMS": "0", "arrays-INITIAL_FORMS": "0"})
    assert response.status_code == 302
    engagement.refresh_from_db()
    assert (engagement.state, engagement.stopped_reason) == before


def test_a_gates_state_is_read_only_too(client, root, ledger):
    gate = Gate.objects.get(engagement__name="acme-1", code="G1")
    client.force_login(root)
    page = client.get(admin_url(Gate, "change", gate.pk)).content.decode()
    assert 'name="state"' not in page and 'name="rescheduled_due_date"' not in page


def test_an_engagement_added_in_the_admin_gets_its_gates_seeded(client, root):
    acme = Organisation.objects.create(name="Acme")
    client.force_login(root)
    response = client.post(admin_url(Engagement, "add"), {
        "name": "acme-prod", "customer": acme.pk, "start_date": "2026-11-02",
        "report_language": "en", "reference_profile": "R2-c16",
        "max_parallel_nodes": "16",
        "arrays-TOTAL_FORMS": "1", "arrays-INITIAL_FORMS": "0",
        "arrays-0-model": "FX100", "arrays-0-serial": "FX100-0001",
        "arrays-0-expected_drive_count": "24", "arrays-0-link_speed_mbps": "100000",
        "arrays-0-layout": "raid6"})
    assert response.status_code == 302
    engagement = Engagement.objects.get(name="acme-prod")
    gates = list(engagement.gates.order_by("order"))
    assert [(g.code, g.due_date.isoformat()) for g in gates] == [
        ("G1", "2026-11-16"), ("G2", "2026-11-30"), ("G3", "2026-12-21"), ("G4", "2027-01-11")]
    assert [g.defaults_sha256 for g in gates] == [definition_sha256(d) for d in DEFAULT_GATES]
    entry = engagement.audit.get()
    assert (entry.actor, entry.action, entry.reason) == (
        "root", "engagement created", "engagement created in the admin")
    assert entry.details["arrays"] == ["FX100-0001"]


def test_the_admin_action_seeds_gates_of_engagements_made_without_them(client, root):
    bare = Engagement.objects.create(name="bare-1", start_date="2026-11-02",
                                     customer=Organisation.objects.create(name="Bare"))
    seeded = engagement_create(name="full-1", customer="Bare", start_date="2026-11-02")
    client.force_login(root)
    response = client.post(admin_url(Engagement, "changelist"), {
        "action": "gates_seed_action", "_selected_action": [bare.pk, seeded.pk]})
    assert response.status_code == 302
    assert bare.gates.count() == 4 and seeded.gates.count() == 4
    assert bare.audit.get().action == "gates seeded"
    assert not seeded.audit.exists()


def test_superusers_give_roles_in_the_admin(client, root, db):
    acme = Organisation.objects.create(name="Acme")
    carla = User.objects.create_user("carla")
    client.force_login(root)
    assert client.get(admin_url(Membership, "changelist")).status_code == 200
    refused = client.post(admin_url(Membership, "add"),
                          {"user": carla.pk, "role": "customer", "organisation": ""})
    assert refused.status_code == 200
    assert "a customer belongs to an organisation" in refused.content.decode()
    assert not Membership.objects.exists()
    added = client.post(admin_url(Membership, "add"),
                        {"user": carla.pk, "role": "customer", "organisation": acme.pk})
    assert added.status_code == 302
    membership = Membership.objects.get(user=carla)
    assert (membership.role, membership.organisation) == ("customer", acme)
    changed = client.post(admin_url(Membership, "change", membership.pk),
                          {"user": carla.pk, "role": "engineer", "organisation": ""})
    assert changed.status_code == 302
    assert Membership.objects.get(user=carla).role == "engineer"
    assert client.post(admin_url(Membership, "delete", membership.pk),
                       {"post": "yes"}).status_code == 302
    assert not Membership.objects.exists()


def test_staff_who_are_not_superusers_cannot_give_roles(client, db):
    staff = User.objects.create_user("sam", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__endswith="_membership"))
    carla = User.objects.create_user("carla")
    client.force_login(staff)
    assert client.get(admin_url(Membership, "changelist")).status_code == 403
    assert client.post(admin_url(Membership, "add"),
                       {"user": carla.pk, "role": "project_manager"}).status_code == 403
    assert not Membership.objects.exists()


def test_gate_runs_stay_listed(client, root, ledger):
    client.force_login(root)
    assert client.get(admin_url(GateRun, "changelist")).status_code == 200
