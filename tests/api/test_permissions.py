"""The API's permissions are the pages': every endpoint answers 401 without credentials; an
object of an engagement the user may not see is 404 and absent from lists; customers read
their own engagements and may not start or cancel runs (403); engineers may."""

import pytest

from gates.models import Gate
from runners.models import GateRun, NodeJob

ROLES_THAT_SEE_ALL = ["pm", "engineer"]


def urls(ledger) -> dict[str, tuple[str, str, str, object]]:
    """endpoint → (list URL, detail URL, key field of a row, the ledger object's key)."""
    e = ledger.engagement.name
    return {
        "engagements": ("/api/engagements/", f"/api/engagements/{e}/", "name", e),
        "gates": (f"/api/engagements/{e}/gates/", f"/api/engagements/{e}/gates/G1/", "code",
                  "G1"),
        "criteria": ("/api/criteria/", f"/api/criteria/{ledger.criterion.id}/", "id",
                     ledger.criterion.id),
        "gate-runs": ("/api/gate-runs/", f"/api/gate-runs/{ledger.gate_run.id}/", "id",
                      ledger.gate_run.id),
        "node-jobs": ("/api/node-jobs/", f"/api/node-jobs/{ledger.node_job.id}/", "id",
                      ledger.node_job.id),
        "probe-runs": ("/api/probe-runs/", f"/api/probe-runs/{ledger.probe_run.id}/", "id",
                       ledger.probe_run.id),
        "measurements": ("/api/measurements/", f"/api/measurements/{ledger.measurement.id}/",
                         "id", ledger.measurement.id),
        "decisions": ("/api/decisions/", f"/api/decisions/{ledger.decision.id}/", "id",
                      ledger.decision.id),
        "reports": ("/api/reports/", f"/api/reports/{ledger.report.id}/", "id",
                    ledger.report.id),
    }


def extra_detail_urls(ledger) -> list[str]:
    """Endpoints that show one object but are not a viewset's detail."""
    e = ledger.engagement.name
    return [f"/api/engagements/{e}/gates/G1/runs/",
            f"/api/probe-runs/{ledger.probe_run.id}/output/",
            f"/api/reports/{ledger.report.id}/download/"]


ENDPOINTS = ["engagements", "gates", "criteria", "gate-runs", "node-jobs", "probe-runs",
             "measurements", "decisions", "reports"]


def rows(response) -> list[dict]:
    assert response.status_code == 200, response.content
    body = response.json()
    # one page holds them all here (the measurements' cursor pages have no count)
    assert body.get("count", len(body["results"])) == len(body["results"])
    assert body["next"] is None
    return body["results"]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_anonymous_gets_401_on_list_and_detail(ledger, client_for, endpoint):
    list_url, detail_url, _, _ = urls(ledger)[endpoint]
    for url in (list_url, detail_url):
        response = client_for(None).get(url)
        assert response.status_code == 401, url
        assert response["WWW-Authenticate"].startswith("Token")


def test_anonymous_gets_401_on_the_other_endpoints_and_actions(ledger, client_for):
    client = client_for(None)
    for url in extra_detail_urls(ledger):
        assert client.get(url).status_code == 401, url
    assert client.post(f"/api/engagements/{ledger.engagement.name}/gates/G2/runs/").status_code \
        == 401
    assert client.post(f"/api/gate-runs/{ledger.gate_run.id}/cancel/").status_code == 401
    assert client.post(f"/api/gate-runs/{ledger.gate_run.id}/rerun/").status_code == 401
    assert client.get("/api/").status_code == 401


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_a_customer_of_another_organisation_gets_404_and_never_sees_foreign_rows(
        ledger, client_for, endpoint):
    list_url, detail_url, key, value = urls(ledger)[endpoint]
    client = client_for("foreign")
    assert client.get(detail_url).status_code == 404
    if endpoint == "gates":  # nested under an engagement they may not see
        assert client.get(list_url).status_code == 404
        own = client.get(f"/api/engagements/{ledger.other_engagement.name}/gates/")
        assert [g["code"] for g in rows(own)] == ["G1", "G2", "G3", "G4"]
        return
    listed = rows(client.get(list_url + "?limit=1000"))
    assert value not in [row[key] for row in listed]
    for row in listed:
        if "engagement" in row:
            assert row["engagement"] == ledger.other_engagement.name
        if endpoint == "engagements":
            assert row["name"] == ledger.other_engagement.name


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_someone_without_a_role_sees_nothing(ledger, client_for, endpoint):
    list_url, detail_url, _, _ = urls(ledger)[endpoint]
    client = client_for("nobody")
    assert client.get(detail_url).status_code == 404
    if endpoint == "gates":
        assert client.get(list_url).status_code == 404
    else:
        assert rows(client.get(list_url)) == []


@pytest.mark.parametrize("role", ["customer", *ROLES_THAT_SEE_ALL])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_the_right_customer_and_the_staff_read_every_endpoint(ledger, client_for, role,
                                                              endpoint):
    list_url, detail_url, key, value = urls(ledger)[endpoint]
    client = client_for(role)
    detail = client.get(detail_url)
    assert detail.status_code == 200, detail.content
    assert detail.json()[key] == value
    assert value in [row[key] for row in rows(client.get(list_url + "?limit=1000"))]
    # read-only: no write through the collections, but project managers create engagements
    # (POST /api/engagements/, tests/api/test_engagement_create.py): an empty body is a 400
    created = 400 if (endpoint, role) == ("engagements", "pm") else None
    assert client.post(list_url, {}, format="json").status_code in ((created,) if created
                                                                    else (403, 405))
    assert client.delete(detail_url).status_code in (403, 405)


@pytest.mark.parametrize("role", ["customer", *ROLES_THAT_SEE_ALL])
def test_the_other_read_endpoints_answer_whoever_may_see_the_engagement(ledger, client_for,
                                                                        role):
    client = client_for(role)
    for url in extra_detail_urls(ledger):
        assert client.get(url).status_code == 200, url
    for url in extra_detail_urls(ledger):
        assert client_for("foreign").get(url).status_code == 404, url
        assert client_for("nobody").get(url).status_code == 404, url


def test_staff_see_every_engagement(ledger, client_for):
    for role in ROLES_THAT_SEE_ALL:
        names = [e["name"] for e in rows(client_for(role).get("/api/engagements/"))]
        assert names == sorted([ledger.engagement.name, ledger.other_engagement.name])


# --- starting a run --------------------------------------------------------------------------

@pytest.mark.parametrize(("role", "status"), [
    ("foreign", 404), ("nobody", 404), ("customer", 403), ("pm", 403),
    ("engineer", 409),  # may start runs, but G2 waits for G1
])
def test_starting_a_run_is_for_engineers(ledger, client_for, role, status):
    url = f"/api/engagements/{ledger.engagement.name}/gates/G2/runs/"
    response = client_for(role).post(url, {}, format="json")
    assert response.status_code == status, response.content
    if status == 409:
        assert "gates run in order and G1" in response.json()["detail"]
    assert not GateRun.objects.filter(gate__code="G2").exists()


def test_a_refusal_says_why_with_409(ledger, client_for):
    ledger.engagement.state = "stopped"
    ledger.engagement.stopped_reason = "G1 stopped: drive_count 23 < 24."
    ledger.engagement.save()
    response = client_for("engineer").post(
        f"/api/engagements/{ledger.engagement.name}/gates/G1/runs/", format="json")
    assert response.status_code == 409
    assert "is stopped" in response.json()["detail"]
    assert "reopen_engagement" in response.json()["detail"]


def test_bad_probe_timeouts_are_400_and_start_nothing(ledger, client_for):
    url = f"/api/engagements/{ledger.engagement.name}/gates/G1/runs/"
    client = client_for("engineer")
    unknown = client.post(url, {"probe_timeouts": {"no_such_probe": 10}}, format="json")
    assert unknown.status_code == 400
    assert "unknown probe" in str(unknown.json())
    stray = client.post(url, {"probe_timeouts": {"fio_seqread": 10}}, format="json")
    assert stray.status_code == 400
    assert "G1 does not run fio_seqread" in str(stray.json())
    too_long = client.post(url, {"probe_timeouts": {"nvme_inventory": 10**9}}, format="json")
    assert too_long.status_code == 400
    assert GateRun.objects.filter(gate=ledger.gate).count() == 1


def test_an_unknown_gate_or_engagement_is_404(ledger, client_for):
    client = client_for("engineer")
    assert client.post(f"/api/engagements/{ledger.engagement.name}/gates/G9/runs/").status_code \
        == 404
    assert client.post("/api/engagements/no-such/gates/G1/runs/").status_code == 404
    assert client.get(f"/api/engagements/{ledger.engagement.name}/gates/G9/").status_code == 404


# --- cancelling a run ------------------------------------------------------------------------

@pytest.fixture
def running(ledger):
    run = GateRun.objects.create(gate=ledger.gate, attempt=2, state=GateRun.State.RUNNING,
                                 started_by="engineer")
    NodeJob.objects.create(gate_run=run, node=ledger.node_job.node)
    return run


@pytest.mark.parametrize(("role", "status"), [
    ("foreign", 404), ("nobody", 404), ("customer", 403), ("pm", 403)])
def test_only_engineers_cancel(running, client_for, role, status):
    response = client_for(role).post(f"/api/gate-runs/{running.id}/cancel/")
    assert response.status_code == status
    running.refresh_from_db()
    assert running.state == GateRun.State.RUNNING
    assert running.cancel_requested_at is None


def test_an_engineer_cancels_a_run_and_a_second_cancel_is_409(running, client_for):
    client = client_for("engineer")
    response = client.post(f"/api/gate-runs/{running.id}/cancel/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["gate_run"]["state"] == "cancelled"
    assert body["gate_run"]["cancel_requested_by"] == "engineer"
    assert body["killed"] == []
    assert running.node_jobs.get().state == NodeJob.State.CANCELLED
    again = client.post(f"/api/gate-runs/{running.id}/cancel/")
    assert again.status_code == 409
    assert "already over (cancelled)" in again.json()["detail"]


def test_a_finished_run_cannot_be_cancelled(ledger, client_for):
    response = client_for("engineer").post(f"/api/gate-runs/{ledger.gate_run.id}/cancel/")
    assert response.status_code == 409
    assert Gate.objects.get(pk=ledger.gate.pk).state == "pending"


# --- re-running a run ------------------------------------------------------------------------

@pytest.mark.parametrize(("role", "status"), [
    ("foreign", 404), ("nobody", 404), ("customer", 403), ("pm", 403)])
def test_only_engineers_re_run(ledger, client_for, role, status):
    node = ledger.node_job.node.name
    response = client_for(role).post(f"/api/gate-runs/{ledger.gate_run.id}/rerun/",
                                     {"node": node, "reason": "back"}, format="json")
    assert response.status_code == status
    assert GateRun.objects.filter(gate=ledger.gate).count() == 1
    if status == 404:
        assert ledger.engagement.name.encode() not in response.content


def test_an_engineers_re_run_that_may_not_run_is_409_and_creates_nothing(ledger, client_for):
    response = client_for("engineer").post(
        f"/api/gate-runs/{ledger.gate_run.id}/rerun/",
        {"node": "no-such-node", "reason": "back"}, format="json")
    assert response.status_code == 409
    assert "no node named 'no-such-node'" in response.json()["detail"]
    assert GateRun.objects.filter(gate=ledger.gate).count() == 1
