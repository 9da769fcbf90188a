"""What the endpoints show: METRICS.md's measurement JSON plus ids, filters, raw output by
offset, decisions with verdicts, report downloads, tokens, and a schema that validates."""

import hashlib
import io
import json

import pytest
import yaml
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from acceptance.tokens import ApiToken
from tests.api.conftest import STDOUT


def test_measurements_follow_the_metrics_json_plus_ids(ledger, client_for):
    client = client_for("customer")
    body = client.get(f"/api/measurements/{ledger.measurement.id}/").json()
    assert {k: body[k] for k in ("metric", "value", "unit", "labels")} == {
        "metric": "drive_count", "value": 24.0, "unit": "1", "labels": {"device": "all"}}
    assert isinstance(body["value"], float)
    assert body["gate_run"] == ledger.gate_run.id
    assert body["probe_run"] == ledger.probe_run.id
    assert body["node"] == "array-ctl"
    assert body["derived"] is False and body["inputs"] == []
    derived = client.get(f"/api/measurements/{ledger.derived.id}/").json()
    assert derived["derived"] is True
    assert derived["inputs"] == [ledger.measurement.id]
    assert derived["probe_run"] is None and derived["node"] is None
    assert (derived["value"], derived["unit"]) == (0.88, "ratio")


def test_measurements_filter_by_gate_run_and_metric(ledger, client_for):
    client = client_for("engineer")

    def metrics(query):
        response = client.get("/api/measurements/?" + query)
        assert response.status_code == 200, response.content
        return [m["metric"] for m in response.json()["results"]]

    assert metrics(f"gate_run={ledger.gate_run.id}") == ["drive_count", "line_efficiency"]
    assert metrics(f"gate_run={ledger.gate_run.id}&metric=drive_count") == ["drive_count"]
    assert metrics("derived=true") == ["line_efficiency"]
    assert metrics(f"gate_run={ledger.gate_run.id + 1000}") == []
    bad = client.get("/api/measurements/?gate_run=abc")
    assert bad.status_code == 400
    assert "gate_run" in bad.json()


def test_other_filters(ledger, client_for):
    client = client_for("engineer")
    e = ledger.engagement.name
    runs = client.get(f"/api/gate-runs/?engagement={e}&gate=g1").json()["results"]
    assert [r["id"] for r in runs] == [ledger.gate_run.id]
    assert client.get("/api/gate-runs/?engagement=globex-1").json()["results"] == []
    criteria = client.get(f"/api/criteria/?engagement={e}&gate=G1").json()["results"]
    assert {c["gate"] for c in criteria} == {"G1"}
    assert "drive_count" in [c["metric"] for c in criteria]
    jobs = client.get(f"/api/node-jobs/?gate_run={ledger.gate_run.id}").json()["results"]
    assert [(j["node"], j["state"]) for j in jobs] == [("array-ctl", "done")]
    probes = client.get("/api/probe-runs/?probe=nvme_inventory&node=array-ctl").json()
    assert [p["id"] for p in probes["results"]] == [ledger.probe_run.id]
    decisions = client.get(f"/api/decisions/?gate_run={ledger.gate_run.id}").json()["results"]
    assert [d["id"] for d in decisions] == [ledger.decision.id]
    reports = client.get(f"/api/reports/?engagement={e}&gate=G1").json()["results"]
    assert [r["id"] for r in reports] == [ledger.report.id]
    engagements = client.get("/api/engagements/?state=active").json()["results"]
    assert len(engagements) == 2


def test_engagements_and_gates(ledger, client_for):
    client = client_for("customer")
    engagement = client.get(f"/api/engagements/{ledger.engagement.name}/").json()
    assert engagement["customer"] == "Acme"
    assert engagement["end_date"] == "2026-11-10"
    assert [g["code"] for g in engagement["gates"]] == ["G1", "G2", "G3", "G4"]
    gate = client.get(f"/api/engagements/{ledger.engagement.name}/gates/g1/").json()
    assert gate["code"] == "G1" and gate["engagement"] == ledger.engagement.name
    assert "drive_count" in [c["metric"] for c in gate["criteria"]]
    runs = client.get(f"/api/engagements/{ledger.engagement.name}/gates/G1/runs/").json()
    assert [r["id"] for r in runs["results"]] == [ledger.gate_run.id]
    assert runs["results"][0]["decision"] == ledger.decision.id


def test_probe_runs_show_metadata_and_the_hash_not_the_output(ledger, client_for):
    body = client_for("customer").get(f"/api/probe-runs/{ledger.probe_run.id}/").json()
    assert body["stdout_sha256"] == hashlib.sha256(STDOUT).hexdigest()
    assert body["stdout_size"] == len(STDOUT)
    assert body["command"] == "nvme list -o json"
    for hidden in ("stdout", "stderr", "remote_token"):
        assert hidden not in body
    assert body["output_url"].endswith(f"/api/probe-runs/{ledger.probe_run.id}/output/")


def test_raw_output_by_stream_and_offset(ledger, client_for):
    client = client_for("customer")
    url = f"/api/probe-runs/{ledger.probe_run.id}/output/"
    full = client.get(url)
    assert full["Content-Type"] == "application/octet-stream"
    assert full.content == STDOUT
    assert hashlib.sha256(full.content).hexdigest() == ledger.probe_run.stdout_sha256
    assert (full["X-Next-Offset"], full["X-Output-Finished"], full["X-Probe-Run-State"]) == (
        str(len(STDOUT)), "true", "parsed")
    part = client.get(url + "?stream=stdout&offset=4&limit=5")
    assert part.content == STDOUT[4:9]
    assert (part["X-Next-Offset"], part["X-Output-Finished"]) == ("9", "false")
    assert client.get(url + "?stream=stderr").content == b"warn\n"
    assert client.get(url + "?stream=stdin").status_code == 400
    assert client.get(url + "?offset=-1").status_code == 400
    assert client.get(url + "?offset=x").status_code == 400
    assert client.get(url + "?limit=0").status_code == 400



@pytest.mark.parametrize("offset", [17592186044415, 9223372036854775807])
def test_an_offset_beyond_the_largest_file_reads_nothing(ledger, client_for, offset):
    """An offset past what the filesystem's largest file can reach (ext4: 2^44 bytes) made
    ``seek`` fail with EINVAL: a 500 here and a traceback from ``tail_run``."""
    from runners import intake

    run = ledger.probe_run
    intake.raw_output_keep(run, stdout=b"kept in its file\n", stderr=b"", simulated=False)
    run.save()
    assert run.stdout_file
    response = client_for("customer").get(
        f"/api/probe-runs/{run.id}/output/?offset={offset}")
    assert response.status_code == 200 and response.content == b""
    assert (response["X-Next-Offset"], response["X-Output-Finished"]) == (str(offset), "true")
    out, err = io.StringIO(), io.StringIO()
    call_command("tail_run", str(run.id), "--offset", str(offset), stdout=out, stderr=err)
    assert (out.getvalue(), err.getvalue()) == (
        "", f"[probe run {run.id} stdout: resume with --offset {offset}]\n")

def test_decisions_carry_their_verdicts(ledger, client_for):
    body = client_for("customer").get(f"/api/decisions/{ledger.decision.id}/").json()
    assert (body["outcome"], body["gate"], body["gate_run"], body["report"]) == (
        "passed", "G1", ledger.gate_run.id, ledger.report.id)
    [verdict] = body["verdicts"]
    assert (verdict["metric"], verdict["verdict"], verdict["measured_value"], verdict["unit"]) == (
        "drive_count", "pass", 24.0, "1")
    assert verdict["measurements"] == [ledger.measurement.id]
    assert verdict["criterion"] == ledger.criterion.id


def test_report_metadata_and_download(ledger, client_for):
    client = client_for("customer")
    body = client.get(f"/api/reports/{ledger.report.id}/").json()
    assert body["file_name"] == "acme.site-1-G1-run1.pdf"
    assert "path" not in body  # the server's file system is not shown
    assert body["sha256"] == hashlib.sha256(ledger.report_bytes).hexdigest()
    assert body["download_url"].endswith(f"/api/reports/{ledger.report.id}/download/")
    download = client.get(f"/api/reports/{ledger.report.id}/download/")
    assert download["Content-Type"] == "application/pdf"
    assert 'filename="acme.site-1-G1-run1.pdf"' in download["Content-Disposition"]
    assert download.content == ledger.report_bytes
    assert download["X-Report-SHA256"] == body["sha256"]


def test_a_report_file_that_changed_on_disk_is_not_served(ledger, client_for):
    from pathlib import Path

    path = Path(ledger.report.path)
    path.write_bytes(ledger.report_bytes + b"tampered")
    response = client_for("customer").get(f"/api/reports/{ledger.report.id}/download/")
    assert response.status_code == 500
    assert "does not match" in response.json()["detail"]
    path.unlink()
    assert client_for("customer").get(
        f"/api/reports/{ledger.report.id}/download/").status_code == 404


# --- authentication --------------------------------------------------------------------------

def test_api_token_command_prints_a_new_token_once_and_reset_replaces_it(users):
    out = io.StringIO()
    call_command("api_token", "acme-buyer", stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip()
    token = ApiToken.objects.get(user=users["customer"])
    # only the sha256 is stored: the key itself is nowhere in the row
    assert token.digest == hashlib.sha256(key.encode()).hexdigest()
    assert key not in {token.digest, token.prefix, token.name} and key.startswith(token.prefix)
    with pytest.raises(CommandError, match="already has an active token named "
                                           "'manage.py api_token'.*--reset"):
        call_command("api_token", "acme-buyer", stdout=io.StringIO())
    reset = io.StringIO()
    call_command("api_token", "acme-buyer", "--reset", stdout=reset, stderr=io.StringIO())
    new = reset.getvalue().strip()
    assert new not in ("", key)
    token.refresh_from_db()
    assert token.state == "revoked"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + key)
    response = client.get("/api/engagements/")
    assert response.status_code == 401 and response.json()["detail"] == "token revoked"
    client.credentials(HTTP_AUTHORIZATION="Token " + new)
    assert client.get("/api/engagements/").status_code == 200
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("api_token", "ghost")


def test_token_authentication(ledger, users):
    out = io.StringIO()
    call_command("api_token", "acme-buyer", stdout=out, stderr=io.StringIO())
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + out.getvalue().strip())
    names = [e["name"] for e in client.get("/api/engagements/").json()["results"]]
    assert names == [ledger.engagement.name]
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get("/api/engagements/").status_code == 401


def test_session_authentication_works_too(ledger, users):
    client = APIClient()
    client.force_login(users["engineer"])
    assert client.get(f"/api/engagements/{ledger.engagement.name}/").status_code == 200


# --- schema ----------------------------------------------------------------------------------

def test_the_openapi_schema_validates_without_warnings(tmp_path, db):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    schema = yaml.safe_load(target.read_text())
    paths = schema["paths"]
    for expected in ("/api/engagements/", "/api/engagements/{name}/",
                     "/api/engagements/{engagement_name}/gates/",
                     "/api/engagements/{engagement_name}/gates/{code}/",
                     "/api/engagements/{engagement_name}/gates/{code}/runs/",
                     "/api/criteria/", "/api/gate-runs/", "/api/gate-runs/{id}/cancel/",
                     "/api/node-jobs/", "/api/probe-runs/", "/api/probe-runs/{id}/output/",
                     "/api/measurements/", "/api/decisions/", "/api/reports/",
                     "/api/reports/{id}/download/"):
        assert expected in paths, expected
    assert set(paths["/api/engagements/{engagement_name}/gates/{code}/runs/"]) == {"get",
                                                                                   "post"}
    measurement = schema["components"]["schemas"]["Measurement"]["properties"]
    assert {"metric", "value", "unit", "labels", "inputs"} <= set(measurement)


def test_the_schema_is_served_to_logged_in_people_only(client_for):
    assert client_for(None).get("/api/schema/").status_code == 401
    response = client_for("customer").get("/api/schema/",
                                          HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    assert json.loads(response.content)["info"]["title"] == "Acceptance service API"


@pytest.mark.parametrize("url", ["/api/engagements/", "/api/criteria/", "/api/gate-runs/",
                                 "/api/node-jobs/", "/api/probe-runs/", "/api/measurements/",
                                 "/api/decisions/", "/api/reports/"])
def test_lists_do_not_query_per_row(ledger, client_for, url):
    """More rows, same number of queries (no N+1): the ledger's rows again, under G2."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from gates.models import CriterionVerdict, Decision
    from gates.services import engagement_create
    from reports.models import Report
    from runners.models import Measurement

    client = client_for("engineer")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured.captured_queries)

    queries()  # a token's first use records its last-used time (one write, then once a minute)
    before = queries()
    engagement_create(name="acme-2", customer="Acme", start_date=ledger.engagement.start_date)
    g2 = ledger.engagement.gates.get(code="G2")
    run = type(ledger.gate_run).objects.create(gate=g2, attempt=1, state="done",
                                               started_by="engineer")
    type(ledger.node_job).objects.create(gate_run=run, node=ledger.node_job.node)
    probe = type(ledger.probe_run).objects.create(
        gate_run=run, node=ledger.node_job.node, probe="ethtool", parser="ethtool",
        parser_version="1", command="ethtool ens1f0", started_at=ledger.probe_run.started_at)
    rows = Measurement.objects.bulk_create(
        Measurement(gate_run=run, probe_run=probe, node=ledger.node_job.node,
                    metric="link_speed", value=12.5e9, unit="B/s", labels={})
        for _ in range(5))
    derived = Measurement.objects.create(gate_run=run, metric="line_efficiency", value=0.9,
                                         unit="ratio", derived=True)
    derived.inputs.set(rows)
    decision = Decision.objects.create(gate=g2, gate_run=run, outcome="passed", sentence="ok",
                                       decided_by="service", decided_at=run.created_at)
    for position, criterion in enumerate(g2.criteria.all(), start=1):
        CriterionVerdict.objects.create(
            decision=decision, criterion=criterion, position=position, criterion_snapshot={},
            measured_value=1, unit="1", verdict="pass", explanation="").measurements.set(rows)
    Report.objects.create(decision=decision, path="/nonexistent.pdf", sha256="0" * 64,
                          size_bytes=1, signer="CN=dev", signed_at=run.created_at)
    assert queries() == before
