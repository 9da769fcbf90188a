"""Every page and action of the engagement and report URLs, for three kinds of visitor:
anonymous (sent to log in), a customer of another organisation (404 or 403, never the data,
nothing changed) and the role the page is for (200, or a redirect that lands on a 200).

``URLS`` must name every pattern of ``acceptance.web_urls`` and ``reports.urls``: a new page
without a row here fails ``test_every_url_pattern_is_in_the_matrix``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.urls import reverse

from acceptance import web_urls
from acceptance.models import AuditEntry, BomItem, Engagement
from gates.models import Criterion, Gate
from reports import urls as report_urls


@dataclass(frozen=True)
class Url:
    name: str
    method: str
    allowed: tuple[str, ...]  # fixtures of users who get the page
    forbidden: tuple[str, ...] = ()  # users who may see the engagement but not do this (403)
    own_scope: bool = False  # a page about the user's own things: 200, just not A's data
    data: dict | None = None


URLS = [
    Url("home", "get", ("pm", "engineer", "customer_a"), own_scope=True),
    Url("dashboard", "get", ("pm", "engineer"), forbidden=("customer_a",)),
    Url("portal", "get", ("customer_a",), forbidden=("pm", "engineer"), own_scope=True),
    Url("engagement-detail", "get", ("pm", "engineer", "customer_a")),
    Url("business-case", "get", ("pm", "engineer", "customer_a")),
    Url("bom-tick", "post", ("pm",), forbidden=("engineer", "customer_a")),
    Url("criterion-edit", "get", ("pm",), forbidden=("engineer", "customer_a")),
    Url("engagement-reopen", "get", ("pm",), forbidden=("engineer", "customer_a")),
    Url("gate-accept-review", "get", ("pm",), forbidden=("engineer", "customer_a")),
    Url("report-download", "get", ("pm", "engineer", "customer_a")),
    Url("report-redecide", "get", ("pm", "engineer", "customer_a")),
    Url("report-verify", "get", ("pm", "engineer", "customer_a"), own_scope=True),
    Url("engagement-reports", "get", ("pm", "engineer", "customer_a")),
    Url("report-signoff", "post", ("pm", "customer_a"), forbidden=("engineer",),
        data={"comment": "approved"}),
    Url("report-final", "post", ("pm",), forbidden=("engineer", "customer_a")),
    # only the customer names its trust anchor and countersigns (issue 13, item 3)
    Url("report-certificate", "post", ("customer_a",), forbidden=("pm", "engineer")),
    Url("report-countersigned", "post", ("customer_a",), forbidden=("pm", "engineer")),
    # setting an engagement up (issue 20): project managers only
    Url("engagement-new", "get", ("pm",), forbidden=("engineer", "customer_a")),
    Url("gate-due-date", "get", ("pm",), forbidden=("engineer", "customer_a")),
    Url("reference-profile-edit", "get", ("pm",), forbidden=("engineer", "customer_a")),
    Url("bom-add", "get", ("pm",), forbidden=("engineer", "customer_a")),
    Url("bom-upload", "get", ("pm",), forbidden=("engineer", "customer_a")),
    Url("bom-edit", "get", ("pm",), forbidden=("engineer", "customer_a")),
    Url("bom-remove", "post", ("pm",), forbidden=("engineer", "customer_a"),
        data={"reason": "counted twice"}),
]
BY_NAME = {u.name: u for u in URLS}


@pytest.fixture
def world(stopped_a, engagement_b):
    engagement, decision, report = stopped_a
    # A gate in review, so the review page has something to offer.
    engagement.gates.filter(code="G3").update(state=Gate.State.REVIEW)
    return {"engagement": engagement, "report": report}


def url_of(name: str, world) -> str:
    engagement = world["engagement"].name
    args = {
        "engagement-detail": [engagement],
        "business-case": [engagement],
        "reference-profile-edit": [engagement],
        "bom-tick": [engagement, 2],
        "criterion-edit": [engagement, "G1", "drive-count"],
        "engagement-reopen": [engagement],
        "gate-accept-review": [engagement, "G3"],
        "report-download": [world["report"].id],
        "report-redecide": [world["report"].id],
        "engagement-reports": [engagement],
        "report-signoff": [world["report"].id],
        "report-final": [engagement],
        "report-certificate": [engagement],
        "report-countersigned": [world["report"].id],
        "gate-due-date": [engagement, "G2"],
        "bom-add": [engagement], "bom-upload": [engagement],
        "bom-edit": [engagement, 2], "bom-remove": [engagement, 2],
    }.get(name, [])
    return reverse(name, args=args)


def state_of(engagement: Engagement) -> tuple:
    """Everything an action here could change."""
    return (
        Engagement.objects.get(pk=engagement.pk).state,
        list(BomItem.objects.filter(engagement=engagement).values_list(
            "position", "description", "quantity", "ticked_by", "ticked_at")),
        list(Criterion.objects.filter(gate__engagement=engagement).values_list("threshold")),
        list(Gate.objects.filter(engagement=engagement).values_list(
            "state", "rescheduled_due_date")),
        AuditEntry.objects.filter(engagement=engagement).count(),
    )


def send(client, spec: Url, url: str, **kwargs):
    if spec.method == "post":
        return client.post(url, spec.data or {}, **kwargs)
    return client.get(url, **kwargs)


def test_every_url_pattern_is_in_the_matrix():
    names = {p.name for p in web_urls.urlpatterns + report_urls.urlpatterns}
    assert names == set(BY_NAME)


@pytest.mark.parametrize("name", list(BY_NAME))
def test_it_sends_anonymous_visitors_to_log_in(client, world, name):
    before = state_of(world["engagement"])
    response = send(client, BY_NAME[name], url_of(name, world))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert state_of(world["engagement"]) == before


@pytest.mark.parametrize("name", list(BY_NAME))
def test_a_customer_of_another_organisation_never_gets_the_data(client, world, customer_b,
                                                                name):
    spec = BY_NAME[name]
    client.force_login(customer_b)
    before = state_of(world["engagement"])
    response = send(client, spec, url_of(name, world), follow=True)
    if spec.own_scope:
        assert response.status_code == 200
    else:
        assert response.status_code in (403, 404)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert b"acme-1" not in body and b"ACME" not in body
    assert b"stand-in report" not in body
    assert state_of(world["engagement"]) == before


@pytest.mark.parametrize("name,who", [(u.name, who) for u in URLS for who in u.allowed])
def test_the_right_role_gets_the_page(client, world, request, name, who):
    client.force_login(request.getfixturevalue(who))
    response = send(client, BY_NAME[name], url_of(name, world), follow=True)
    assert response.status_code == 200


@pytest.mark.parametrize("name,who", [(u.name, who) for u in URLS for who in u.forbidden])
def test_a_role_that_may_not_act_is_refused_and_nothing_changes(client, world, request, name,
                                                               who):
    client.force_login(request.getfixturevalue(who))
    before = state_of(world["engagement"])
    response = send(client, BY_NAME[name], url_of(name, world))
    assert response.status_code == 403
    assert state_of(world["engagement"]) == before


@pytest.mark.parametrize("name", ["home", "dashboard", "portal", "engagement-detail",
                                  "report-download", "engagement-reports"])
def test_a_person_without_a_role_sees_nothing(client, world, nobody, name):
    client.force_login(nobody)
    response = client.get(url_of(name, world))
    assert response.status_code in (403, 404)


def test_the_customer_sees_their_own_engagement_in_the_portal(client, world, customer_a):
    client.force_login(customer_a)
    response = client.get(reverse("portal"))
    assert b"acme-1" in response.content and b"globex-1" not in response.content


def test_a_project_manager_sees_every_engagement_on_the_dashboard(client, world, pm):
    client.force_login(pm)
    response = client.get(reverse("dashboard"))
    assert b"acme-1" in response.content and b"globex-1" in response.content
