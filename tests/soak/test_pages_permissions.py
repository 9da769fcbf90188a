"""Who may open which soak page: every URL of ``runners.soak.urls`` (pages) for six personas.

Anonymous people are sent to log in; a customer of another organisation or someone without a
role learns nothing (404 on pages that show, 403 on actions, no engagement data, nothing
changed); the engagement's own customer reads the soak and its plan but every action is 403;
project managers read and may edit the plan, nothing else; engineers may do everything.
"""

import json

import pytest
from django.urls import reverse

from acceptance.models import AuditEntry
from runners.soak import urls as soak_urls
from runners.soak.models import FaultTarget, Soak, SoakEvent

from .pages_fixtures import personas, recorded_soak

READ, PLAN, ENGINEER = "read", "plan", "engineer"


@pytest.fixture
def world(db, settings):
    settings.SSH_CONNECT_RETRIES = 0
    soak = recorded_soak(name="acme-soak")
    return soak, personas("ACME")


def requests(soak):
    """(url name, url, method, data, who may: read | plan | engineer, engineer's status)."""
    plan_args = ["acme-soak", "G4"]
    return [
        ("soak-plan", reverse("soak-plan", args=plan_args), "get", None, READ, 200),
        ("soak-plan-edit", reverse("soak-plan-edit", args=plan_args), "get", None, PLAN, 200),
        ("soak-plan-edit", reverse("soak-plan-edit", args=plan_args), "post",
         {"plan": "{}", "reason": "try"}, PLAN, 200),
        ("soak-target-mark", reverse("soak-target-mark", args=plan_args), "post",
         {"node": "lab-array", "kind": "drive_out", "target": "3", "confirmation": "yes"},
         ENGINEER, 200),
        ("soak-start", reverse("soak-start", args=plan_args), "post", {}, ENGINEER, 302),
        ("soak-detail", reverse("soak-detail", args=[soak.id]), "get", None, READ, 200),
        ("soak-live", reverse("soak-live", args=[soak.id]), "get", None, READ, 200),
        # Without a reason: refused with a message, nothing sent to a node.
        ("soak-pause", reverse("soak-pause", args=[soak.id]), "post", {}, ENGINEER, 302),
        ("soak-resume", reverse("soak-resume", args=[soak.id]), "post", {}, ENGINEER, 302),
        ("soak-abort", reverse("soak-abort", args=[soak.id]), "post", {}, ENGINEER, 302),
    ]


def state_of(soak):
    soak = Soak.objects.select_related("gate_run__gate").get(id=soak.id)
    return (soak.state, soak.abort_requested_at, soak.pause_requested,
            SoakEvent.objects.filter(soak=soak).count(), FaultTarget.objects.count(),
            json.dumps(soak.gate_run.gate.probe_plan, sort_keys=True),
            AuditEntry.objects.count(), Soak.objects.count())


def call(client, method, url, data):
    return client.get(url) if method == "get" else client.post(url, data or {})


def assert_no_data(response):
    assert b"acme-soak" not in response.content and b"lab-inference-1" not in response.content
    assert b"drive-out" not in response.content


def test_every_soak_page_is_in_the_matrix(world):
    soak, _people = world
    assert {p.name for p in soak_urls.page_urlpatterns} == {r[0] for r in requests(soak)}


def test_it_sends_anonymous_people_to_the_login_page(world):
    soak, people = world
    before = state_of(soak)
    for name, url, method, data, _who, _status in requests(soak):
        response = call(people.anonymous.client, method, url, data)
        assert response.status_code == 302, name
        assert response["Location"].startswith("/accounts/login/?next="), name
    assert state_of(soak) == before


@pytest.mark.parametrize("persona", ["outsider", "nobody"])
def test_it_shows_a_customer_of_another_organisation_or_someone_without_a_role_nothing(
        world, persona):
    soak, people = world
    client = getattr(people, persona).client
    before = state_of(soak)
    for name, url, method, data, who, _status in requests(soak):
        response = call(client, method, url, data)
        assert response.status_code == (404 if who == READ else 403), (name, method)
        assert_no_data(response)
    assert state_of(soak) == before


def test_the_engagements_customer_reads_the_soak_and_its_plan_but_may_not_act(world):
    soak, people = world
    before = state_of(soak)
    for name, url, method, data, who, _status in requests(soak):
        response = call(people.customer.client, method, url, data)
        assert response.status_code == (200 if who == READ else 403), (name, method)
    assert state_of(soak) == before
    page = people.customer.client.get(reverse("soak-detail", args=[soak.id])).content.decode()
    assert "drive-out" in page and 'id="soak-pause"' not in page and 'id="soak-abort"' not in page
    plan = people.customer.client.get(reverse("soak-plan", args=["acme-soak", "G4"]))
    assert b'id="target-form"' not in plan.content and b"Edit the plan" not in plan.content


def test_project_managers_read_and_edit_the_plan_but_do_not_act_on_soaks(world):
    soak, people = world
    for name, url, method, data, who, _status in requests(soak):
        response = call(people.manager.client, method, url, data)
        assert response.status_code == (403 if who == ENGINEER else 200), (name, method)


def test_engineers_may_do_everything(world):
    soak, people = world
    for name, url, method, data, _who, status in requests(soak):
        response = call(people.engineer.client, method, url, data)
        assert response.status_code == status, (name, method)
    page = people.engineer.client.get(reverse("soak-detail", args=[soak.id])).content.decode()
    assert 'id="soak-pause"' in page and 'id="soak-abort"' in page
