"""Creating an engagement on the page (project managers), moving a gate's due date with a
reason, and what the dashboard and the engagement page say about an engagement that lacks its
gates or its bill of materials."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from acceptance.models import Array, AuditEntry, Engagement, Organisation
from gates.defaults import DEFAULT_GATES, definition_sha256
from gates.models import Gate
from tests.web.conftest import G1_HEALTHY, decide

START = date(2026, 11, 2)  # a Monday


def form_data(**overrides) -> dict:
    data = {
        "name": "acme-prod", "organisation": "", "new_organisation": "Acme",
        "start_date": START.isoformat(), "report_language": "en",
        "reference_profile": "R2-c16",
        "arrays-TOTAL_FORMS": "3", "arrays-INITIAL_FORMS": "0",
        "arrays-MIN_NUM_FORMS": "0", "arrays-MAX_NUM_FORMS": "32",
    }
    # Untouched rows carry the form's initial values, as a browser sends them.
    for row in range(3):
        data.update({f"arrays-{row}-model": "FX100", f"arrays-{row}-serial": "",
                     f"arrays-{row}-expected_drive_count": "24",
                     f"arrays-{row}-link_speed_mbps": "100000", f"arrays-{row}-layout": "other"})
    data.update({"arrays-0-serial": "FX100-0001", "arrays-0-layout": "raid6",
                 "arrays-0-drive_model": "KCM6DRUL7T68"})
    data.update(overrides)
    return data


def stored() -> tuple:
    return (Engagement.objects.count(), Organisation.objects.count(), Array.objects.count(),
            Gate.objects.count(), AuditEntry.objects.count())


def post(client, user, **overrides):
    client.force_login(user)
    return client.post(reverse("engagement-new"), form_data(**overrides))


def test_it_creates_the_engagement_with_its_array_and_g1_to_g4_seeded(client, pm):
    response = post(client, pm)
    engagement = Engagement.objects.get(name="acme-prod")
    assert response.status_code == 302
    assert response["Location"] == reverse("engagement-detail", args=["acme-prod"])
    assert engagement.customer.name == "Acme"
    assert engagement.start_date == START and engagement.state == "active"
    assert engagement.reference_profile == "R2-c16"
    assert not engagement.is_lab
    array = engagement.arrays.get()
    assert (array.serial, array.model, array.expected_drive_count, array.link_speed_mbps,
            array.layout, array.drive_model) == ("FX100-0001", "FX100", 24, 100000, "raid6",
                                                 "KCM6DRUL7T68")
    page = client.get(reverse("engagement-detail", args=["acme-prod"])).content.decode()
    assert 'data-label="Drive model" class="mono">KCM6DRUL7T68</td>' in page
    gates = list(engagement.gates.order_by("order"))
    assert [g.code for g in gates] == ["G1", "G2", "G3", "G4"]
    assert [g.due_date for g in gates] == [date(2026, 11, 16), date(2026, 11, 30),
                                           date(2026, 12, 21), date(2027, 1, 11)]
    assert [g.defaults_sha256 for g in gates] == [definition_sha256(d) for d in DEFAULT_GATES]
    assert gates[0].criteria.count() == len(DEFAULT_GATES[0]["criteria"])
    entry = engagement.audit.get()
    assert (entry.actor, entry.action) == ("pat-pm", "engagement created")
    assert entry.reason == "engagement created on the engagement page"
    assert entry.details["organisation_created"] is True
    assert entry.details["arrays"] == ["FX100-0001"]
    assert entry.details["gates"]["G3"] == {"due_date": "2026-12-21",
                                            "defaults_sha256": gates[2].defaults_sha256}


def test_the_creator_manages_it_from_the_first_page(client, pm):
    post(client, pm)
    page = client.get(reverse("engagement-detail", args=["acme-prod"])).content.decode()
    assert reverse("bom-add", args=["acme-prod"]) in page
    assert reverse("gate-due-date", args=["acme-prod", "G1"]) in page
    assert "no items recorded yet" in page


def test_it_uses_an_existing_organisation_when_chosen(client, pm, engagement_a):
    acme = engagement_a.customer
    before = Organisation.objects.count()
    post(client, pm, organisation=str(acme.pk), new_organisation="")
    assert Engagement.objects.get(name="acme-prod").customer == acme
    assert Organisation.objects.count() == before


@pytest.mark.parametrize("overrides,field,message", [
    ({"name": "acme prod!"}, "name", "use letters, digits"),
    ({"name": "new"}, "name", "is reserved"),
    ({"start_date": "2026-13-40"}, "start_date", "Enter a date as YYYY-MM-DD."),
    ({"new_organisation": ""}, "organisation", "Choose the customer organisation"),
    ({"arrays-0-expected_drive_count": "0"}, "expected_drive_count",
     "greater than or equal to 1"),
    ({"arrays-1-serial": "FX100-0001"}, "serial", "Array 1 has this serial already."),
    ({"report_language": "fr"}, "report_language", "Select a valid choice"),
])
def test_bad_input_is_refused_naming_the_field_and_nothing_is_created(client, pm, overrides,
                                                                      field, message):
    before = stored()
    response = post(client, pm, **overrides)
    assert response.status_code == 400
    assert message in response.content.decode()
    form = response.context["form"]
    errors = dict(form.errors)
    for array_form in response.context["arrays"]:
        errors.update(array_form.errors)
    assert field in errors
    assert stored() == before


def test_a_name_taken_already_is_refused(client, pm, engagement_a):
    before = stored()
    response = post(client, pm, name="acme-1")
    assert response.status_code == 400
    assert "Engagement with this Name already exists." in response.context["form"].errors["name"]
    assert stored() == before


def test_choosing_and_naming_an_organisation_at_once_is_refused(client, pm, engagement_a):
    response = post(client, pm, organisation=str(engagement_a.customer.pk))
    assert response.status_code == 400
    assert "not both" in response.context["form"].errors["new_organisation"][0]


def test_a_superuser_may_create_one(client, db):
    admin = User.objects.create_superuser("root", password="x")  # noqa: S106
    assert post(client, admin).status_code == 302
    assert Engagement.objects.get(name="acme-prod").audit.get().actor == "root"


@pytest.mark.parametrize("who", ["engineer", "customer_a", "nobody"])
def test_only_project_managers_may_create(client, request, who):
    user = request.getfixturevalue(who)
    client.force_login(user)
    assert client.get(reverse("engagement-new")).status_code == 403
    before = stored()
    assert post(client, user).status_code == 403
    assert stored() == before


def test_the_start_date_starts_on_today_as_an_iso_date_in_every_language(client, pm):
    client.force_login(pm)
    today = timezone.localdate().isoformat()
    for language in ("en", "zh-hans"):
        client.cookies["django_language"] = language
        html = client.get(reverse("engagement-new")).content.decode()
        assert f'name="start_date" value="{today}"' in html, language
        assert ("开始日期" in html) == (language == "zh-hans")


def test_anonymous_visitors_are_sent_to_log_in(client, db):
    response = client.get(reverse("engagement-new"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_dashboard_offers_it_to_project_managers_only(client, pm, engineer):
    client.force_login(pm)
    assert reverse("engagement-new") in client.get(reverse("dashboard")).content.decode()
    client.force_login(engineer)
    assert reverse("engagement-new") not in client.get(reverse("dashboard")).content.decode()


# --- Due dates ----------------------------------------------------------------------------------

def move(client, user, engagement, code="G2", **data):
    client.force_login(user)
    return client.post(reverse("gate-due-date", args=[engagement.name, code]), data)


def test_a_project_manager_moves_a_due_date_with_a_reason(client, pm, engagement_a):
    gate = engagement_a.gates.get(code="G2")
    old = gate.due_date
    new = old + timedelta(days=9)
    response = move(client, pm, engagement_a, due_date=new.isoformat(),
                    reason="the second array arrives a week late")
    assert response.status_code == 302
    gate.refresh_from_db()
    assert gate.due_date == new and gate.due_week == 4
    entry = engagement_a.audit.get(action="due date moved")
    assert entry.actor == "pat-pm" and entry.reason == "the second array arrives a week late"
    assert entry.details == {"gate": "G2", "old_due_date": old.isoformat(),
                             "new_due_date": new.isoformat(), "due_week": 4}
    page = client.get(reverse("engagement-detail", args=[engagement_a.name])).content.decode()
    assert f"due {new.isoformat()}" in page
    assert f"G2 due {old.isoformat()} → {new.isoformat()}" in page
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert f"due {new.isoformat()}" in dashboard


@pytest.mark.parametrize("data,message", [
    ({"due_date": "2026-12-01", "reason": ""}, "Give a reason"),
    ({"due_date": "soon", "reason": "late"}, "Enter a date as YYYY-MM-DD."),
])
def test_a_move_without_a_reason_or_a_date_is_refused(client, pm, engagement_a, data, message):
    before = engagement_a.gates.get(code="G2").due_date
    response = move(client, pm, engagement_a, **data)
    assert response.status_code == 400 and message in response.content.decode()
    assert engagement_a.gates.get(code="G2").due_date == before
    assert not engagement_a.audit.filter(action="due date moved").exists()


def test_a_passed_gate_keeps_its_due_date(client, pm, engagement_a):
    decide(engagement_a.gates.get(code="G1"), G1_HEALTHY, "passed")
    response = move(client, pm, engagement_a, code="G1", due_date="2027-01-01", reason="late")
    assert response.status_code == 400
    assert "G1 has passed; its due date is history" in response.content.decode()
    assert engagement_a.gates.get(code="G1").rescheduled_due_date is None


def test_only_the_project_manager_moves_due_dates(client, engineer, customer_a, customer_b,
                                                  engagement_a):
    data = {"due_date": "2027-01-01", "reason": "late"}
    assert move(client, engineer, engagement_a, **data).status_code == 403
    assert move(client, customer_a, engagement_a, **data).status_code == 403
    assert move(client, customer_b, engagement_a, **data).status_code == 404
    assert not engagement_a.audit.exists()


# --- What is missing is said ---------------------------------------------------------------------

def test_an_engagement_without_gates_is_not_called_passed(client, pm, db):
    bare = Engagement.objects.create(name="bare-1", start_date=START,
                                     customer=Organisation.objects.create(name="Bare"))
    client.force_login(pm)
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert "Every gate has passed" not in dashboard
    assert "No gates: G1–G4 were never seeded for this engagement" in dashboard
    page = client.get(reverse("engagement-detail", args=[bare.name])).content.decode()
    assert "every item delivered and checked" not in page
    assert "no items recorded yet: G1 needs the delivered items listed and ticked" in page


def test_audit_entries_of_other_shapes_still_read(client, pm, engagement_a):
    # The lab's set-up records "bom" as a sentence; other services may reuse these keys.
    engagement_a.audit.create(actor="lab", action="lab engagement created", reason="lab up",
                              details={"bom": "ticked by the lab set-up", "gates": ["G1"],
                                       "file": 3})
    client.force_login(pm)
    response = client.get(reverse("engagement-detail", args=[engagement_a.name]))
    assert response.status_code == 200
    assert "lab engagement created" in response.content.decode()
