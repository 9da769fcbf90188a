"""Issue 16, G4: the soak's default request rate is G2's measured capacity (output throughput ÷
output tokens per request), not a fixed 1 request/s; with no decided G2 there is no default and
the soak refuses, saying so. The G2 figure comes from a lab G2 run over SSH."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client

from acceptance.models import Membership
from gates.defaults import G4_SOAK_PLAN
from gates.models import Gate
from runners.models import GateRun, Measurement, ProbeRun
from runners.soak import driver, rate
from runners.soak.models import Soak, SoakEvent
from runners.soak.plan import SoakRefused, plan_validate
from runners.soak.rate import g2_rate_basis
from tests.web.conftest import make_user


def default_soak_plan(engagement):
    """G4's default plan with its default (null) rate; no faults (their targets and the
    vendor's drive command are other tests' matter)."""
    g4 = Gate.objects.get(engagement=engagement, code="G4")
    step = next(s for s in g4.probe_plan if s.get("expand") == "soak")
    assert step["soak"]["load"]["request_rate"] is None
    step["soak"]["faults"] = []
    g4.save(update_fields=["probe_plan"])
    return g4


def test_the_default_plan_asks_for_the_derived_rate():
    assert G4_SOAK_PLAN["load"]["request_rate"] is None
    assert plan_validate(G4_SOAK_PLAN)["load"]["request_rate"] is None
    missing = {**G4_SOAK_PLAN, "load": {k: v for k, v in G4_SOAK_PLAN["load"].items()
                                        if k != "request_rate"}}
    with pytest.raises(ValueError, match="load.request_rate is missing"):
        plan_validate(missing)


@pytest.mark.slow
def test_without_a_decided_g2_there_is_no_default_and_the_soak_refuses(lab, monkeypatch):
    engagement, _ = lab("healthy")
    engagement.gates.filter(code__in=["G1", "G2", "G3"]).update(state=Gate.State.PASSED)
    g4 = default_soak_plan(engagement)
    monkeypatch.setattr(driver, "_dispatch", lambda *args: None)
    with pytest.raises(SoakRefused) as refused:
        driver.soak_start(gate=g4, started_by="erin")
    assert str(refused.value) == (
        "no default request rate: engagement lab-healthy has no decided G2; the default is "
        "derived from G2's measured output throughput, so enter load.request_rate "
        "(requests/s) in the soak plan")
    assert not GateRun.objects.filter(gate=g4).exists()


@pytest.mark.slow
def test_the_default_rate_is_g2s_measured_capacity(lab, monkeypatch):
    # the healthy lab's G2 benchmark: 54.1 output tok/s at concurrency 16
    engagement, _ = lab("healthy")
    engagement.gates.filter(code="G1").update(state=Gate.State.PASSED)
    with pytest.raises(SystemExit) as exit_info:
        call_command("run_gate", engagement.name, "G2", stdout=io.StringIO(),
                     stderr=io.StringIO())
    assert exit_info.value.code == 0
    g2_run = GateRun.objects.get(gate__engagement=engagement, gate__code="G2")
    bench = ProbeRun.objects.get(gate_run=g2_run, probe="vllm_bench_serve")
    output_len = bench.parameters["output_len"]
    measured = Measurement.objects.get(gate_run=g2_run, metric="output_throughput")
    assert measured.value == pytest.approx(54.1)

    basis = g2_rate_basis(Gate.objects.get(engagement=engagement, code="G4"))
    assert basis.rate == pytest.approx(54.1 / output_len)
    assert basis.request_s == pytest.approx(16 * output_len / 54.1)
    assert (basis.measurement_id, basis.concurrency, basis.output_len) == (
        measured.id, 16, output_len)

    engagement.gates.filter(code="G3").update(state=Gate.State.PASSED)
    g4 = default_soak_plan(engagement)
    pm = Client()
    pm.force_login(make_user("pat-pm", Membership.Role.PROJECT_MANAGER))
    page = pm.get(f"/engagements/{engagement.name}/gates/G4/soak/").content.decode()
    assert f"{54.1 / output_len:.4g} req/s = G2&#x27;s output throughput 54.1 tok/s" in page
    assert f"measurement #{measured.id}" in page

    monkeypatch.setattr(driver, "_dispatch", lambda *args: None)
    gate_run = driver.soak_start(gate=g4, started_by="erin")
    soak = Soak.objects.get(gate_run=gate_run)
    assert soak.plan["load"]["request_rate"] == pytest.approx(54.1 / output_len)
    assert soak.plan["load"]["request_rate_basis"]["measurement_id"] == measured.id
    assert SoakEvent.objects.filter(soak=soak, text__startswith="request rate derived from "
                                    "G2: ").exists()


@pytest.mark.django_db
def test_an_entered_rate_is_used_as_entered():
    plan = plan_validate({**G4_SOAK_PLAN, "load": {**G4_SOAK_PLAN["load"],
                                                   "request_rate": 0.2}})
    assert plan["load"]["request_rate"] == 0.2


def test_a_derived_rate_outside_the_entered_range_is_refused_saying_why(monkeypatch):
    # 0.5 tok/s over 1000-token answers: 0.0005 requests/s, below what an entered rate may be
    slow = rate.RateBasis(rate=0.0005, output_throughput=0.5, output_len=1000, concurrency=1,
                          request_s=2000.0, measurement_id=7, node="lab-inference-1",
                          gate_run_id=1, attempt=1, decision_id=1)
    monkeypatch.setattr(rate, "g2_rate_basis", lambda gate: slow)
    with pytest.raises(SoakRefused) as refused:
        rate.plan_with_rate(None, G4_SOAK_PLAN)
    assert str(refused.value).startswith(
        "no default request rate: G2 measurement #7 gives 0.0005 requests/s (0.5 tok/s ÷ 1000 "
        "tokens), outside 0.01 … 10000;")
