"""Thresholds are validated by what they measure — a ratio between 0 and 1, a time above 0,
``between`` low ≤ high, a drive count a whole number ≥ 1 — by one rule on the model
(``Criterion.clean``) that the page, the API and the admin share; a refusal names the field and
the rule and changes nothing. The criterion's text is derived from the stored bounds, so it
follows an edited threshold on the pages, the API and the decision's verdict rows."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.forms.models import model_to_dict
from django.test import Client
from django.urls import reverse
from django.utils import translation
from rest_framework.test import APIClient

from acceptance.models import AuditEntry
from gates.models import Criterion
from gates.presentation import criterion_text, verdict_row
from tests.web.conftest import decide

LINE_RULE = "threshold: line_efficiency is a ratio between 0 and 1 (0.83 means 83 %)"
BAD = [
    ("G2", "line-efficiency", {"threshold": "80"}, "threshold", f"{LINE_RULE}; 80 is not"),
    ("G2", "line-efficiency", {"threshold": "-5"}, "threshold", f"{LINE_RULE}; -5 is not"),
    ("G3", "throughput-gain", {"threshold": "0.5", "threshold_high": "0.4"}, "threshold",
     "threshold: the low threshold is above the high one (0.5 > 0.4)"),
    ("G1", "drive-count", {"threshold": "0"}, "threshold",
     "threshold: drive_count is a drive count: a whole number of at least 1; 0 is not"),
    ("G1", "drive-count", {"threshold": "23.5"}, "threshold",
     "threshold: drive_count is a drive count: a whole number of at least 1; 23.5 is not"),
    ("G4", "no-interruption", {"threshold": "0"}, "threshold",
     "threshold: completion_gap_max is a time in seconds above 0; 0 is not"),
    ("G2", "baseline-ttft", {"reference_value": "17.31", "tolerance": "1.5"}, "tolerance",
     "tolerance: the tolerance is a ratio above 0 and at most 1 (0.10 means ±10 %); 1.5 is not"),
]


def criterion(engagement, code: str, key: str) -> Criterion:
    return Criterion.objects.get(gate__engagement=engagement, gate__code=code, key=key)


def stored(engagement) -> list[dict]:
    return list(Criterion.objects.filter(gate__engagement=engagement).order_by("id").values())


def edit_url(engagement, code, key) -> str:
    return reverse("criterion-edit", args=[engagement.name, code, key])


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


# --- the page --------------------------------------------------------------------------------


@pytest.mark.parametrize("code,key,values,field,message", BAD)
def test_the_page_refuses_a_bad_threshold_naming_the_field(client, pm, engagement_a, code, key,
                                                           values, field, message):
    before = stored(engagement_a)
    client.force_login(pm)
    response = client.post(edit_url(engagement_a, code, key), {**values, "reason": "try"})
    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors[field] == [message]
    assert stored(engagement_a) == before
    assert not AuditEntry.objects.exists()


def test_only_a_project_manager_changes_a_threshold_on_the_page(client, engineer, customer_a,
                                                                customer_b, engagement_a):
    url = edit_url(engagement_a, "G2", "line-efficiency")
    data = {"threshold": "0.8", "reason": "the site's own switch"}
    for user, status in ((engineer, 403), (customer_a, 403), (customer_b, 404)):
        client.force_login(user)
        assert client.post(url, data).status_code == status, user.username
    assert criterion(engagement_a, "G2", "line-efficiency").threshold == 0.83


# --- the API ---------------------------------------------------------------------------------


@pytest.mark.parametrize("code,key,values,field,message", BAD)
def test_the_api_refuses_a_bad_threshold_with_400_naming_the_field(pm, engagement_a, code, key,
                                                                   values, field, message):
    before = stored(engagement_a)
    c = criterion(engagement_a, code, key)
    body = {name: float(value) for name, value in values.items()}
    response = api(pm).post(f"/api/criteria/{c.id}/threshold/", {**body, "reason": "try"},
                            format="json")
    assert response.status_code == 400
    assert response.json() == {field: [message]}
    assert stored(engagement_a) == before
    assert not AuditEntry.objects.exists()


def test_the_api_needs_a_reason_and_numbers(pm, engagement_a):
    c = criterion(engagement_a, "G2", "line-efficiency")
    url = f"/api/criteria/{c.id}/threshold/"
    response = api(pm).post(url, {"threshold": 0.8, "reason": " "}, format="json")
    assert (response.status_code, response.json()) == (
        400, {"reason": ["changing a threshold needs a reason"]})
    response = api(pm).post(url, {"threshold": "eighty", "reason": "x"}, format="json")
    assert response.status_code == 400 and list(response.json()) == ["threshold"]
    assert criterion(engagement_a, "G2", "line-efficiency").threshold == 0.83


def test_the_api_changes_a_threshold_for_project_managers_only(pm, engineer, customer_a,
                                                               customer_b, engagement_a):
    c = criterion(engagement_a, "G2", "line-efficiency")
    url = f"/api/criteria/{c.id}/threshold/"
    body = {"threshold": 0.8, "reason": "the site's own switch"}
    for user, status in ((engineer, 403), (customer_a, 403), (customer_b, 404)):
        assert api(user).post(url, body, format="json").status_code == status, user.username
    response = api(pm).post(url, body, format="json")
    assert response.status_code == 200
    data = response.json()
    assert (data["threshold"], data["requirement"]) == (0.8, ">= 0.8")
    assert data["description_text"] == "Sequential read reaches 80 % of the array port's line rate"
    entry = AuditEntry.objects.get(action="criterion threshold changed")
    assert (entry.actor, entry.details["old"], entry.details["new"]) == (
        "pat-pm", {"threshold": 0.83}, {"threshold": 0.8})
    again = api(pm).post(url, body, format="json")
    assert again.status_code == 409 and "nothing changed" in again.json()["detail"]


# --- the admin -------------------------------------------------------------------------------


def admin_post(criterion_row: Criterion, **changes):
    admin = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(admin)
    data = {k: ("" if v is None else v) for k, v in model_to_dict(criterion_row).items()}
    data["label_filter"] = json.dumps(criterion_row.label_filter)
    data.update(changes)
    if not data["blocking"]:
        del data["blocking"]
    url = reverse("admin:gates_criterion_change", args=[criterion_row.id])
    return client.post(url, {**data, "_save": "Save"})


@pytest.mark.parametrize("code,key,values,field,message", BAD)
def test_the_admin_refuses_a_bad_threshold_naming_the_field(engagement_a, code, key, values,
                                                            field, message):
    before = stored(engagement_a)
    response = admin_post(criterion(engagement_a, code, key), **values)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors[field] == [message]
    assert stored(engagement_a) == before


def test_the_admin_saves_a_good_threshold(engagement_a):
    response = admin_post(criterion(engagement_a, "G2", "line-efficiency"), threshold="0.8")
    assert response.status_code == 302
    assert criterion(engagement_a, "G2", "line-efficiency").threshold == 0.8


def test_every_default_criterion_meets_its_own_rule(engagement_a):
    for row in Criterion.objects.filter(gate__engagement=engagement_a):
        row.clean()


# --- the text follows the stored value -------------------------------------------------------


def test_the_requirement_text_follows_an_edited_threshold(client, pm, engineer, engagement_a):
    c = criterion(engagement_a, "G2", "line-efficiency")
    assert criterion_text(c) == "Sequential read reaches 83 % of the array port's line rate"
    client.force_login(pm)
    response = client.post(edit_url(engagement_a, "G2", "line-efficiency"),
                           {"threshold": "0.8", "reason": "the site's switch is 80 %"})
    assert response.status_code == 302
    html = client.get(reverse("engagement-detail", args=[engagement_a.name])).content.decode()
    assert "Sequential read reaches 80 % of the array port&#x27;s line rate" in html
    assert "reaches 83 %" not in html
    assert "&gt;= 0.8" in html
    form = client.get(edit_url(engagement_a, "G2", "line-efficiency")).content.decode()
    assert "Sequential read reaches 80 % of the array port&#x27;s line rate" in form

    # The engineer's launch page, and the same in Chinese.
    client.force_login(engineer)
    launch = client.get(reverse("gate-run-start", args=[engagement_a.name, "G2"]))
    launched = launch.content.decode()
    assert "Sequential read reaches 80 % of the array port&#x27;s line rate" in launched
    zh = client.get(reverse("gate-run-start", args=[engagement_a.name, "G2"]),
                    HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "顺序读达到阵列端口线速的 80 %" in zh.content.decode()


def test_a_decisions_verdict_rows_say_the_bound_it_was_judged_against(engagement_a):
    g1 = engagement_a.gates.get(code="G1")
    g1.state = "passed"
    g1.save(update_fields=["state"])
    g2 = engagement_a.gates.get(code="G2")
    c = criterion(engagement_a, "G2", "line-efficiency")
    c.threshold = 0.8
    c.save(update_fields=["threshold"])
    figures = {k: ("pass", 0.0) for k in g2.criteria.values_list("key", flat=True)}
    decision = decide(g2, figures, "passed")
    row = verdict_row(decision.verdicts.get(criterion=c))  # the PDF and run page use these
    assert (row.description, row.requirement) == (
        "Sequential read reaches 80 % of the array port's line rate", ">= 0.8")
    c.threshold = 0.85  # a later edit: the decision keeps what it was judged against
    c.save(update_fields=["threshold"])
    row = verdict_row(decision.verdicts.get(criterion=c))
    assert row.description == "Sequential read reaches 80 % of the array port's line rate"
    with translation.override("zh-hans"):
        assert verdict_row(decision.verdicts.get(criterion=c)).description == (
            "顺序读达到阵列端口线速的 80 %")


def test_texts_of_every_unit_read_as_people_read_them(engagement_a):
    texts = {c.key: criterion_text(c) for c in Criterion.objects.filter(
        gate__engagement=engagement_a)}
    assert texts["throughput-gain"] == (
        "Output throughput gain inside +29 % … +40 % (mean of the rounds)")
    assert texts["baseline-ttft"] == (
        "TTFT p50 within ±10 % of the reference profile's local-NVMe figure")
    assert texts["soak-duration"] == "Continuous load held for 72 h"
    assert texts["no-interruption"] == "No gap between successful completions longer than 60 s"
    assert texts["throughput"] == "Output throughput at most 10 % below the pre-fault baseline"


def test_a_refusal_reads_in_chinese_with_the_field_and_value_kept(engagement_a):
    row = criterion(engagement_a, "G1", "drive-count")
    row.threshold = 0
    with translation.override("zh-hans"), pytest.raises(ValidationError) as refused:
        row.clean()
    assert refused.value.message_dict["threshold"] == [
        "threshold：drive_count 应为 硬盘数量：不小于 1 的整数；0 不符合"]
