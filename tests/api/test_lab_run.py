"""A run started through the API on a lab engagement (real sshd, stand-in tools) ends with a
decision, its verdicts, measurements with units and a signed report, all read back through
the API — by the engineer who started it and by the lab's customer."""

import hashlib

import pytest
from rest_framework.test import APIClient

from acceptance.models import Membership
from acceptance.tokens import api_token_create
from reports.signing import verify_pdf
from tests.api.conftest import make_user

pytestmark = pytest.mark.slow


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + api_token_create(user=user, name="test")[1])
    return client


def test_a_run_started_through_the_api_ends_with_a_decision_read_through_the_api(lab):
    engagement, _ = lab("healthy")
    engineer = token_client(make_user("eng", Membership.Role.ENGINEER))
    customer = token_client(make_user("lab-customer", Membership.Role.CUSTOMER,
                                      engagement.customer))

    refused = customer.post(f"/api/engagements/{engagement.name}/gates/G1/runs/", format="json")
    assert refused.status_code == 403

    started = engineer.post(f"/api/engagements/{engagement.name}/gates/G1/runs/",
                            {"probe_timeouts": {"nvme_inventory": 120}}, format="json")
    assert started.status_code == 201, started.content
    run = started.json()
    assert (run["engagement"], run["gate"], run["attempt"], run["started_by"]) == (
        engagement.name, "G1", 1, "eng")
    assert started["Location"] == f"/api/gate-runs/{run['id']}/"
    # Celery runs in-process in the tests: the run is over when the request returns.
    run = customer.get(f"/api/gate-runs/{run['id']}/").json()
    assert run["state"] == "done", run["error"]
    assert run["probe_timeouts"] == {"nvme_inventory": 120}

    decision = customer.get(f"/api/decisions/{run['decision']}/").json()
    assert decision["outcome"] == "passed"
    verdicts = {v["metric"]: v for v in decision["verdicts"]}
    assert verdicts["drive_count"]["verdict"] == "pass"
    assert (verdicts["drive_count"]["measured_value"], verdicts["drive_count"]["unit"]) == (
        24.0, "1")
    assert all(v["verdict"] == "pass" for v in decision["verdicts"])

    # nvme list's count and G1's per-array count of the drive model (derived, judged).
    listed, drive_count = sorted(customer.get(
        f"/api/measurements/?gate_run={run['id']}&metric=drive_count").json()["results"],
        key=lambda m: m["labels"].get("scope", ""))
    assert listed["value"] == 24.0 and drive_count["labels"]["scope"] == "array"
    assert (drive_count["value"], drive_count["unit"], drive_count["node"]) == (
        24.0, "1", "lab-array-controller")
    assert drive_count["id"] in verdicts["drive_count"]["measurements"]
    every = customer.get(f"/api/measurements/?gate_run={run['id']}&limit=1000").json()
    assert every["next"] is None and len(every["results"]) > 24
    assert all(m["unit"] for m in every["results"])
    assert {m["metric"] for m in every["results"]} >= {"drive_count", "self_test_failures",
                                                       "critical_warning"}

    jobs = customer.get(f"/api/node-jobs/?gate_run={run['id']}").json()["results"]
    assert [j["state"] for j in jobs] == ["done"]
    [inventory] = customer.get(
        f"/api/probe-runs/?gate_run={run['id']}&probe=nvme_inventory").json()["results"]
    assert inventory["simulated"] is True
    raw = customer.get(inventory["output_url"])
    assert hashlib.sha256(raw.content).hexdigest() == inventory["stdout_sha256"]
    assert raw["X-Output-Finished"] == "true"

    report = customer.get(f"/api/reports/{decision['report']}/").json()
    assert report["simulated"] is True and report["outcome"] == "passed"
    pdf = customer.get(report["download_url"]).content
    assert hashlib.sha256(pdf).hexdigest() == report["sha256"]
    assert verify_pdf(pdf).valid

    gates = {g["code"]: g["state"] for g in
             customer.get(f"/api/engagements/{engagement.name}/").json()["gates"]}
    assert gates == {"G1": "passed", "G2": "pending", "G3": "pending", "G4": "pending"}
    # G3 must wait for G2: the refusal is a 409 with the service's own words.
    refused = engineer.post(f"/api/engagements/{engagement.name}/gates/G3/runs/", format="json")
    assert refused.status_code == 409
    assert "G2" in refused.json()["detail"]
