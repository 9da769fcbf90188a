"""The OpenAPI schema matches what the API answers: unpaginated lists are arrays, a run without
a decision has a nullable ``decision``, and every operation documents its error answers."""

import json

from runners.models import GateRun


def _schema(client) -> dict:
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return json.loads(response.content)


def _ok_schema(schema: dict, path: str, method: str = "get") -> dict:
    return schema["paths"][path][method]["responses"]["200"]["content"]["application/json"][
        "schema"]


def test_unpaginated_lists_are_documented_as_arrays(ledger, client_for):
    client = client_for("pm")
    schema = _schema(client)
    report = ledger.report.id
    for path, url in (("/api/reports/{id}/versions/", f"/api/reports/{report}/versions/"),
                      ("/api/reports/{id}/signoffs/", f"/api/reports/{report}/signoffs/"),
                      ("/api/reports/{id}/downloads/", f"/api/reports/{report}/downloads/")):
        assert _ok_schema(schema, path)["type"] == "array", path
        assert isinstance(client.get(url).json(), list), url
    assert _ok_schema(schema, "/api/soaks/{id}/series/")["type"] == "array"
    assert _ok_schema(schema, "/api/gate-runs/") == {
        "$ref": "#/components/schemas/PaginatedGateRunList"}
    assert "results" in client.get("/api/gate-runs/").json()


def test_a_run_without_a_decision_is_null_and_documented_nullable(ledger, client_for):
    client = client_for("engineer")
    schema = _schema(client)
    decision = schema["components"]["schemas"]["GateRun"]["properties"]["decision"]
    assert decision["type"] == "integer" and decision["nullable"] is True
    run = GateRun.objects.create(gate=ledger.gate, attempt=2, state=GateRun.State.QUEUED,
                                 started_by="engineer")
    assert client.get(f"/api/gate-runs/{run.id}/").json()["decision"] is None
    report = schema["components"]["schemas"]["Decision"]["properties"]["report"]
    assert report["nullable"] is True


def test_every_operation_documents_its_error_answers(ledger, client_for):
    schema = _schema(client_for("customer"))
    for path, operations in schema["paths"].items():
        if path == "/api/schema/":
            continue
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"401", "429"} <= codes, (method, path)
            if "{" in path:
                assert "404" in codes, (method, path)
    pause = schema["paths"]["/api/soaks/{id}/pause/"]["post"]["responses"]
    assert {"400", "403", "404", "409"} <= set(pause)
    assert "400" in schema["paths"]["/api/node-jobs/"]["get"]["responses"]
