"""``POST /api/engagements/`` (token auth): project managers create an engagement with its
arrays, G1–G4 seeded as on the page; bad input answers 400 naming the field and stores nothing;
other roles get 403, anonymous 401."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from acceptance.models import Array, AuditEntry, Engagement, Organisation
from acceptance.tokens import api_token_create
from gates.defaults import DEFAULT_GATES, definition_sha256
from gates.models import Gate

URL = "/api/engagements/"
BODY = {"name": "acme-prod", "customer": "Acme", "start_date": "2026-11-02",
        "report_language": "zh-hans",
        "arrays": [{"serial": "FX100-0001", "layout": "raid6"},
                   {"serial": "FX100-0002", "model": "FX100", "expected_drive_count": 12,
                    "link_speed_mbps": 200000, "layout": "raid10"}]}


def stored() -> tuple:
    return (Engagement.objects.count(), Organisation.objects.count(), Array.objects.count(),
            Gate.objects.count(), AuditEntry.objects.count())


def test_a_project_manager_creates_an_engagement_with_its_arrays(client_for, users):
    response = client_for("pm").post(URL, BODY, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["customer"], body["start_date"], body["state"],
            body["report_language"], body["is_lab"]) == (
        "acme-prod", "Acme", "2026-11-02", "active", "zh-hans", False)
    assert [(g["code"], g["due_date"], g["state"]) for g in body["gates"]] == [
        ("G1", "2026-11-16", "pending"), ("G2", "2026-11-30", "pending"),
        ("G3", "2026-12-21", "pending"), ("G4", "2027-01-11", "pending")]
    engagement = Engagement.objects.get(name="acme-prod")
    assert engagement.customer == Organisation.objects.get(name="Acme")  # the existing one
    assert engagement.reference_profile == "R2-c16"
    assert list(engagement.arrays.order_by("serial").values_list(
        "serial", "model", "expected_drive_count", "link_speed_mbps", "layout")) == [
        ("FX100-0001", "FX100", 24, 100000, "raid6"),
        ("FX100-0002", "FX100", 12, 200000, "raid10")]
    assert [g.defaults_sha256 for g in engagement.gates.order_by("order")] == [
        definition_sha256(d) for d in DEFAULT_GATES]
    entry = engagement.audit.get()
    assert (entry.actor, entry.action, entry.reason) == (
        "pm", "engagement created", "engagement created through the API")
    assert entry.details["organisation_created"] is False
    assert entry.details["arrays"] == ["FX100-0001", "FX100-0002"]


def test_a_new_organisation_is_created_by_its_name(client_for, users):
    response = client_for("pm").post(URL, {**BODY, "customer": "Initech", "arrays": []},
                                     format="json")
    assert response.status_code == 201
    assert Engagement.objects.get(name="acme-prod").customer.name == "Initech"
    assert Engagement.objects.get(name="acme-prod").audit.get().details[
        "organisation_created"] is True


@pytest.mark.parametrize("change,errors", [
    ({"name": "acme prod"}, {"name": ["use letters, digits, '.', '_' or '-' (at most 63 "
                                      "characters, starting with a letter or digit)"]}),
    ({"name": "new"}, {"name": ["'new' is reserved: choose another name"]}),
    ({"start_date": "2026-02-30"}, None),
    ({"customer": "  "}, {"customer": ["This field may not be blank."]}),
    ({"report_language": "fr"}, {"report_language": ['"fr" is not a valid choice.']}),
    ({"reference_profile": "R9-ascend"},
     {"reference_profile": ['"R9-ascend" is not a valid choice.']}),
    ({"arrays": [{"serial": "A"}, {"serial": "A"}]},
     {"arrays": {"1": {"serial": ["arrays[0] has serial A already"]}}}),
    ({"arrays": [{"serial": "A", "expected_drive_count": 0}]},
     {"arrays": {"0": {"expected_drive_count": ["Ensure this value is greater than or equal "
                                                "to 1."]}}}),
    ({"arrays": [{"model": "FX100"}]}, {"arrays": {"0": {"serial": ["This field is required."]}}}),
    ({"arrays": [{"serial": "A", "layout": "raid7"}]},
     {"arrays": {"0": {"layout": ['"raid7" is not a valid choice.']}}}),
])
def test_bad_input_answers_400_naming_the_field_and_stores_nothing(client_for, users, change,
                                                                   errors):
    before = stored()
    body = {**BODY, **change}
    response = client_for("pm").post(URL, body, format="json")
    assert response.status_code == 400
    field = next(iter(change))
    assert field in response.json()
    if errors is not None:
        assert response.json() == errors
    assert stored() == before


def test_a_taken_name_answers_400(client_for, users):
    client_for("pm").post(URL, BODY, format="json")
    before = stored()
    response = client_for("pm").post(URL, BODY, format="json")
    assert response.status_code == 400
    assert response.json() == {"name": ["Engagement with this Name already exists."]}
    assert stored() == before


def test_a_missing_field_is_named(client_for, users):
    response = client_for("pm").post(URL, {"name": "acme-prod"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"customer": ["This field is required."],
                               "start_date": ["This field is required."]}
    assert not Engagement.objects.exists()


@pytest.mark.parametrize("role", ["engineer", "customer", "foreign", "nobody"])
def test_other_roles_are_refused_with_403(client_for, users, role):
    before = stored()
    response = client_for(role).post(URL, BODY, format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "only project managers may create engagements"}
    assert stored() == before


def test_anonymous_gets_401(client_for, users):
    response = client_for(None).post(URL, BODY, format="json")
    assert response.status_code == 401
    assert not Engagement.objects.exists()


def test_a_superusers_token_may_create(users):
    root = User.objects.create_superuser("root")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=root, name='t')[1]}")
    assert client.post(URL, BODY, format="json").status_code == 201


def test_the_new_engagement_is_visible_to_its_customer_only(client_for, users):
    client_for("pm").post(URL, BODY, format="json")
    assert client_for("customer").get(URL + "acme-prod/").status_code == 200
    assert client_for("foreign").get(URL + "acme-prod/").status_code == 404
