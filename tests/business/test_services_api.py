"""The business case from G3's decided evidence: parameters validated and audited, the API's
GET and what-if POST, and who may see it (the personas)."""

from __future__ import annotations

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from acceptance.models import AuditEntry
from business.services import ParameterInvalid, case_for, parameters_save
from gates.models import Decision, Gate
from runners.models import GateRun, Measurement

PARAMS = {"currency": "CNY", "nodes": "22", "gpus_per_node": "8", "gpu_cost_per_hour": "15",
          "tokens_per_day": "100000000", "resume_share": "1", "arrays": "2",
          "horizon_years": "3"}


def g3_decide(engagement, outcome="passed", rounds=((53.6, 74.9),), sentence="G3 passed"):
    gate = Gate.objects.get(engagement=engagement, code="G3")
    run = GateRun.objects.create(gate=gate, attempt=1, started_by="erin-engineer",
                                 state=GateRun.State.DONE)
    ids = []
    for number, (local, array) in enumerate(rounds, start=1):
        for arm, value in (("local", local), ("array", array)):
            m = Measurement.objects.create(
                gate_run=run, metric="output_throughput", value=value, unit="tok/s", arm=arm,
                labels={"phase": "compare", "pass": "measured", "arm": arm,
                        "round": str(number), "concurrency": "16"})
            ids.append(m.id)
    Decision.objects.create(gate=gate, gate_run=run, outcome=outcome, sentence=sentence,
                            decided_by="pat-pm", decided_at=timezone.now())
    gate.state = outcome
    gate.save(update_fields=["state"])
    return ids


def test_the_case_from_the_decided_g3_names_its_measurements(engagement_a):
    ids = g3_decide(engagement_a)
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    case = case_for(engagement_a)
    assert case.established and not case.simulated
    s = case.scenario("expected")
    assert (s.gpus_local, s.gpus_array) == (176, 128)
    assert s.cost_per_mtok_local == pytest.approx(621.89, abs=0.01)
    assert list(case.measurement_ids) == ids
    entry = AuditEntry.objects.get(engagement=engagement_a,
                                   action="business parameters changed")
    assert entry.actor == "pat-pm" and entry.details["changed"]["nodes"] == [None, 22]


def test_a_stopped_g3_gives_not_established_with_the_reason(engagement_a):
    g3_decide(engagement_a, outcome="stopped", rounds=((53.6, 60.0),),
              sentence="throughput gain +11.9 % is below +29 %")
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    case = case_for(engagement_a)
    assert not case.established
    assert case.reason == "G3 stopped: throughput gain +11.9 % is below +29 %"


@pytest.mark.parametrize("field,value,words", [
    ("resume_share", "1.5", "resume_share: 1.5 is outside 0 … 1"),
    ("nodes", "2.5", "nodes: 2.5 is not a whole number"),
    ("gpu_cost_per_hour", "cheap", "gpu_cost_per_hour: 'cheap' is not a number"),
    ("currency", "XYZ", "currency: 'XYZ' is not one of"),
])
def test_bad_parameters_are_refused_naming_the_field(engagement_a, field, value, words):
    with pytest.raises(ParameterInvalid) as refusal:
        parameters_save(engagement=engagement_a, actor="pat-pm", data={field: value})
    assert str(refusal.value).startswith(words)
    assert not AuditEntry.objects.filter(action="business parameters changed").exists()


@pytest.mark.parametrize("field,value,words", [
    ("nodes", True, "nodes: True is not a number (nodes)"),
    ("arrays", False, "arrays: False is not a number (arrays)"),
    ("currency", 0, "currency: 0 is not a currency code"),
    ("currency", False, "currency: False is not a currency code"),
    ("resume_share", "nan", "resume_share: 'nan' is not a finite number (share 0–1)"),
    ("tokens_per_day", "-inf", "tokens_per_day: '-inf' is not a finite number"),
    ("array_price", "1e400", "array_price: '1e400' is not a finite number"),
    pytest.param("nodes", 10 ** 400, "nodes: 1000", id="nodes-10**400"),
    # float() reads these; a person's form does not mean them as numbers
    ("gpus_per_node", "٣", "gpus_per_node: '٣' is not a number (GPUs)"),
    ("tokens_per_day", "1_000", "tokens_per_day: '1_000' is not a number"),
])
def test_json_values_that_are_not_numbers_are_refused(engagement_a, field, value, words):
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    with pytest.raises(ParameterInvalid) as refusal:
        parameters_save(engagement=engagement_a, actor="pat-pm", data={field: value})
    assert str(refusal.value).startswith(words)
    assert str(refusal.value).count("\n") == 0
    row = engagement_a.business_parameters
    row.refresh_from_db()
    assert (row.nodes, row.arrays, row.currency, row.resume_share) == (22, 2, "CNY", 1.0)


def test_an_empty_parameter_is_named_missing(engagement_a):
    g3_decide(engagement_a)
    parameters_save(engagement=engagement_a, actor="pat-pm",
                    data={**PARAMS, "tokens_per_day": ""})
    case = case_for(engagement_a)
    assert not case.established and case.missing == ("tokens_per_day",)
    assert case.reason == "parameters missing: tokens_per_day"


def api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_api_get_and_what_if_post_which_is_not_stored(engagement_a, customer_a, pm):
    g3_decide(engagement_a)
    parameters_save(engagement=engagement_a, actor="pat-pm", data=PARAMS)
    url = "/api/engagements/acme-1/business-case/"
    got = api(customer_a).get(url)
    assert got.status_code == 200
    expected = next(s for s in got.json()["scenarios"] if s["name"] == "expected")
    assert expected["gpus_array"] == 128 and got.json()["parameters_used"]["nodes"] == 22
    what_if = api(pm).post(url, {"tokens_per_day": 200e6}, format="json")
    assert what_if.status_code == 200
    assert next(s for s in what_if.json()["scenarios"]
                if s["name"] == "expected")["gpus_array"] == 8 * 31  # 200e6 ÷ 6 471 360 = 30.9
    assert api(pm).get(url).json()["parameters_used"]["tokens_per_day"] == 100e6  # not stored
    for body in ({"nodes": True}, {"currency": False}):
        refused = api(pm).post(url, body, format="json")
        assert refused.status_code == 400, body
    refused = api(pm).post(url, {"resume_share": 2}, format="json")
    assert refused.status_code == 400
    assert refused.json()["detail"].startswith("resume_share: 2 is outside 0 … 1")


def test_customers_see_their_own_case_only(engagement_a, engagement_b, customer_b, nobody):
    g3_decide(engagement_a)
    url = "/api/engagements/acme-1/business-case/"
    assert api(customer_b).get(url).status_code == 404
    assert api(nobody).get(url).status_code == 404
    assert APIClient().get(url).status_code in (401, 403)
    assert api(customer_b).get("/api/engagements/globex-1/business-case/").status_code == 200
