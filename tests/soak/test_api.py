"""The soak API: same permissions as the pages (401 anonymous, 404 for soaks of engagements the
user may not see, 403 for actions by other roles), token authentication, the shapes of the
soak and its time series, and the schema."""

import pytest
from rest_framework.test import APIClient

from acceptance.tokens import api_token_create
from runners.soak.models import Soak

from .pages_fixtures import personas, recorded_soak


@pytest.fixture
def world(db):
    soak = recorded_soak(drive_impact=True)
    return soak, personas("ACME")


def api(persona=None) -> APIClient:
    client = APIClient()
    if persona is not None:
        _, key = api_token_create(user=persona.user, name="test")
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def urls(soak):
    base = f"/api/soaks/{soak.id}/"
    return {"list": "/api/soaks/", "detail": base, "series": base + "series/?metric=ttft_p99",
            "pause": base + "pause/", "resume": base + "resume/", "abort": base + "abort/"}


def test_anonymous_gets_401_everywhere(world):
    soak, _ = world
    for name, url in urls(soak).items():
        response = api().post(url) if name in ("pause", "resume", "abort") else api().get(url)
        assert response.status_code == 401, name


@pytest.mark.parametrize("persona", ["outsider", "nobody"])
def test_others_get_404_and_an_empty_list(world, persona):
    soak, people = world
    client = api(getattr(people, persona))
    assert client.get("/api/soaks/").json()["results"] == []
    for name, url in urls(soak).items():
        if name == "list":
            continue
        response = client.post(url, {"reason": "x"}) if name in ("pause", "resume", "abort") \
            else client.get(url)
        assert response.status_code == 404, name
    assert Soak.objects.get(id=soak.id).abort_requested_at is None


@pytest.mark.parametrize("persona", ["customer", "manager"])
def test_readers_read_and_may_not_act(world, persona):
    soak, people = world
    client = api(getattr(people, persona))
    assert [row["id"] for row in client.get("/api/soaks/").json()["results"]] == [soak.id]
    assert client.get(urls(soak)["detail"]).status_code == 200
    for name in ("pause", "resume", "abort"):
        assert client.post(urls(soak)[name], {"reason": "x"}).status_code == 403, name
    assert Soak.objects.get(id=soak.id).state == "running"


def test_the_soak_shows_progress_checks_faults_and_gaps(world):
    soak, people = world
    body = api(people.customer).get(urls(soak)["detail"]).json()
    assert body["engagement"] == "acme-soak" and body["gate"] == "G4" and body["simulated"]
    assert body["plan_sha256"] == soak.plan_sha256 and body["state"] == "running"
    progress = body["progress"]
    assert progress["loaded_s"] == 18.0 and progress["duration_s"] == 30.0
    assert progress["plan_duration_s"] == 259200.0 and progress["percent"] == 60.0
    assert progress["plan_elapsed_s"] == pytest.approx(155520.0)
    checks = {c["key"]: c for c in body["checks"]}
    assert checks["error-rate"]["state"] == "fail" and checks["error-rate"]["value"] == 0.1875
    assert checks["error-rate"]["unit"] == "ratio"
    drive = next(f for f in body["faults"] if f["name"] == "drive-out")
    assert drive["verdict"] == "fail" and drive["heal_how"] == "timer"
    during = {c["check"]: c for c in drive["checks"]["during"]}
    assert during["error-rate"]["verdict"] == "fail" and during["error-rate"]["value"] == 0.1875
    assert [g["seconds"] for g in body["gaps"]] == [pytest.approx(1.7)]


def test_the_time_series_has_metric_value_unit_node_and_time(world):
    soak, people = world
    rows = api(people.customer).get(urls(soak)["series"]).json()
    assert len(rows) == 18
    assert rows[0] == {"metric": "ttft_p99", "value": pytest.approx(0.32), "unit": "s",
                       "node": "lab-inference-1", "time": "2026-11-30T12:00:01Z", "window": "1"}
    errors = api(people.customer).get(
        f"/api/soaks/{soak.id}/series/?metric=request_error_rate").json()
    assert [round(r["value"], 4) for r in errors[8:11]] == [0.3125] * 3
    assert {r["unit"] for r in errors} == {"ratio"}
    bad = api(people.customer).get(f"/api/soaks/{soak.id}/series/?metric=rm -rf")
    assert bad.status_code == 400 and "no time series" in bad.json()["metric"]


def test_engineer_actions_answer_409_when_the_soak_is_not_in_that_state(world):
    soak, people = world
    client = api(people.engineer)
    response = client.post(urls(soak)["resume"])
    assert response.status_code == 409 and "not paused" in response.json()["detail"]
    response = client.post(urls(soak)["pause"], {"reason": ""})
    assert response.status_code == 409 and "needs a reason" in response.json()["detail"]
    Soak.objects.filter(id=soak.id).update(state="done")
    response = client.post(urls(soak)["abort"], {"reason": "stop"})
    assert response.status_code == 409 and "already done" in response.json()["detail"]


def test_the_schema_lists_the_soak_endpoints(world):
    schema = api(world[1].customer).get("/api/schema/").content.decode()
    for path in ("/api/soaks/", "/api/soaks/{id}/", "/api/soaks/{id}/series/",
                 "/api/soaks/{id}/pause/", "/api/soaks/{id}/resume/", "/api/soaks/{id}/abort/"):
        assert path + ":" in schema, path
