"""CSV exports of measurements, decisions (with verdicts) and the audit trail, per engagement and
per run, from the pages' download buttons and ``?format=csv`` on the API lists: parsed back with
the csv module they give the stored values (units included); a text cell that a spreadsheet
would run as a formula gets a leading '; whoever may see the engagement may download, a
customer of another organisation gets 404."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from acceptance.models import AuditEntry
from runners.exports import csv_cell
from runners.models import GateRun, Measurement, ProbeRun
from tests.web.conftest import G1_MISSING_DRIVE, decide


@pytest.fixture
def ledger(engagement_a, engagement_b):
    """ACME's G1 stopped (attempt 1) with read figures, an audit trail with hostile text, and
    Globex's own run, which must never show."""
    decision = decide(engagement_a.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped")
    run = decision.gate_run
    probe = ProbeRun.objects.create(gate_run=run, probe="nvme_inventory", parser="nvme_list",
                                    parser_version="1", command="nvme list -o json",
                                    started_at=timezone.now(), simulated=False)
    rows = [
        Measurement.objects.create(gate_run=run, probe_run=probe, metric="drive_count",
                                   value=23.0, unit="1", labels={}),
        Measurement.objects.create(gate_run=run, probe_run=probe, metric="read_bandwidth",
                                   value=11.0e9, unit="B/s", labels={"job": "seqread"}),
        Measurement.objects.create(gate_run=run, metric="baseline_deviation", value=-0.0525,
                                   unit="ratio", labels={"figure": "ttft_p50"}, derived=True),
    ]
    AuditEntry.objects.create(engagement=engagement_a, actor="@attacker",
                              action="criterion threshold changed",
                              reason='=HYPERLINK("http://evil.example","x")',
                              details={"gate": "G1", "gate_run": run.id})
    AuditEntry.objects.create(engagement=engagement_a, actor="pat-pm", action="reopen",
                              reason="-2+3 drives replaced", details={"gate": "G1"})
    other = decide(engagement_b.gates.get(code="G1"), G1_MISSING_DRIVE, "stopped").gate_run
    Measurement.objects.create(gate_run=other, metric="drive_count", value=12.0, unit="1")
    AuditEntry.objects.create(engagement=engagement_b, actor="globex", action="reopen",
                              reason="secret of Globex", details={})
    return run, decision, rows


def parse(content: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(content.decode())))


def download(client, user, url: str):
    client.force_login(user)
    return client.get(url)


def test_it_guards_against_formula_injection_but_keeps_numbers_numbers():
    assert [csv_cell(v) for v in ("=1+1", "+1", "-2+3", "@SUM(A1)", "\tx", "plain")] == [
        "'=1+1", "'+1", "'-2+3", "'@SUM(A1)", "'\tx", "plain"]
    assert [csv_cell(v) for v in (-0.0525, 11.0e9, 23, True, None)] == [
        "-0.0525", "11000000000.0", "23", "true", ""]


def test_engagement_measurements_read_back_as_stored(client, pm, ledger, engagement_a):
    run, _decision, rows = ledger
    response = download(client, pm, reverse("engagement-export",
                                            args=[engagement_a.name, "measurements"]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="acme-1-measurements.csv"'
    got = parse(response.content)
    assert [int(r["id"]) for r in got] == [m.id for m in rows]  # never Globex's
    for row, stored in zip(got, rows, strict=True):
        assert float(row["value"]) == stored.value
        assert row["unit"] == stored.unit
        assert json.loads(row["labels"]) == stored.labels
        assert (row["engagement"], row["gate"], row["attempt"], row["gate_run"]) == (
            "acme-1", "G1", "1", str(run.id))
    # The value as people read it is text: starting with "-", it is escaped (the number isn't).
    assert [r["value_text"] for r in got] == ["23", "11.00 GB/s", "'-0.052 (-5.2 %)"]
    assert [r["derived"] for r in got] == ["false", "false", "true"]
    assert got[0]["probe"] == "nvme_inventory" and got[2]["probe"] == ""


def test_engagement_decisions_carry_every_verdict(client, engineer, ledger, engagement_a):
    _run, decision, _rows = ledger
    got = parse(download(client, engineer, reverse(
        "engagement-export", args=[engagement_a.name, "decisions"])).content)
    assert len(got) == 4 and {r["decision"] for r in got} == {str(decision.id)}
    by_key = {r["criterion"]: r for r in got}
    drive = by_key["drive-count"]
    assert (drive["outcome"], drive["verdict"], drive["requirement"]) == (
        "stopped", "fail", ">= 24")
    assert (float(drive["measured_value"]), drive["unit"], drive["measured_text"]) == (
        23.0, "1", "23")
    assert drive["sentence"] == decision.sentence


def test_the_audit_trail_is_escaped(client, customer_a, ledger, engagement_a):
    got = parse(download(client, customer_a, reverse(
        "engagement-export", args=[engagement_a.name, "audit"])).content)
    assert [(r["actor"], r["reason"]) for r in got] == [
        ("'@attacker", '\'=HYPERLINK("http://evil.example","x")'),
        ("pat-pm", "'-2+3 drives replaced")]
    assert "Globex" not in json.dumps(got)
    assert json.loads(got[0]["details"])["gate_run"] == ledger[0].id


def test_a_runs_export_holds_that_run_only(client, pm, ledger, engagement_a):
    run, decision, rows = ledger
    later = GateRun.objects.create(gate=run.gate, attempt=2, started_by="erin",
                                   state=GateRun.State.RUNNING)
    Measurement.objects.create(gate_run=later, metric="drive_count", value=24.0, unit="1")
    client.force_login(pm)
    url = reverse("run-export", args=[run.id, "measurements"])
    response = client.get(url)
    assert response["Content-Disposition"] == (
        'attachment; filename="acme-1-G1-run1-measurements.csv"')
    assert [float(r["value"]) for r in parse(response.content)] == [m.value for m in rows]
    decisions = parse(client.get(reverse("run-export", args=[run.id, "decisions"])).content)
    assert {r["gate_run"] for r in decisions} == {str(run.id)}
    audit = parse(client.get(reverse("run-export", args=[run.id, "audit"])).content)
    assert [r["action"] for r in audit] == ["criterion threshold changed"]
    assert parse(client.get(reverse("run-export", args=[later.id, "decisions"])).content) == []


@pytest.mark.parametrize("kind", ["measurements", "decisions", "audit"])
def test_who_may_download(client, pm, engineer, customer_a, customer_b, nobody, ledger,
                          engagement_a, kind):
    run = ledger[0]
    urls = [reverse("engagement-export", args=[engagement_a.name, kind]),
            reverse("run-export", args=[run.id, kind])]
    for url in urls:
        for user, status in ((pm, 200), (engineer, 200), (customer_a, 200), (customer_b, 404),
                             (nobody, 404)):
            assert download(client, user, url).status_code == status, (url, user.username)
        client.logout()
        assert client.get(url).status_code == 302  # to the login page


def test_an_unknown_export_is_404(client, pm, ledger, engagement_a):
    client.force_login(pm)
    assert client.get(reverse("engagement-export",
                              args=[engagement_a.name, "secrets"])).status_code == 404
    assert client.get(reverse("run-export", args=[ledger[0].id, "secrets"])).status_code == 404


def test_the_pages_have_download_buttons(client, pm, ledger, engagement_a):
    client.force_login(pm)
    html = client.get(reverse("engagement-detail", args=[engagement_a.name])).content.decode()
    for kind in ("measurements", "decisions", "audit"):
        assert reverse("engagement-export", args=[engagement_a.name, kind]) in html
    html = client.get(reverse("run-detail", args=[ledger[0].id])).content.decode()
    for kind in ("measurements", "decisions", "audit"):
        assert reverse("run-export", args=[ledger[0].id, kind]) in html
    assert reverse("run-list", args=[engagement_a.name]) in html


# --- the API ---------------------------------------------------------------------------------


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_api_lists_answer_format_csv(pm, ledger, engagement_a):
    run, decision, rows = ledger
    response = api(pm).get(f"/api/measurements/?format=csv&gate_run={run.id}")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    got = parse(response.content)
    assert [(float(r["value"]), r["unit"]) for r in got] == [(m.value, m.unit) for m in rows]

    decisions = parse(api(pm).get("/api/decisions/?format=csv&engagement=acme-1").content)
    assert {r["criterion"] for r in decisions} == set(G1_MISSING_DRIVE)
    audit = parse(api(pm).get(f"/api/audit/?format=csv&gate_run={run.id}").content)
    assert [r["reason"] for r in audit] == ['\'=HYPERLINK("http://evil.example","x")']
    accept = api(pm).get("/api/audit/?engagement=acme-1", HTTP_ACCEPT="text/csv")
    assert len(parse(accept.content)) == 2
    listed = api(pm).get("/api/audit/?engagement=acme-1").json()
    assert [e["actor"] for e in listed["results"]] == ["@attacker", "pat-pm"]  # JSON: as stored


def test_api_csv_is_scoped_to_the_customers_organisation(customer_a, customer_b, ledger):
    for path in ("/api/measurements/?format=csv", "/api/decisions/?format=csv",
                 "/api/audit/?format=csv"):
        mine, theirs = parse(api(customer_a).get(path).content), parse(
            api(customer_b).get(path).content)
        assert {r["engagement"] for r in mine} == {"acme-1"}, path
        assert {r["engagement"] for r in theirs} == {"globex-1"}, path
    detail = api(customer_b).get(f"/api/measurements/{ledger[2][0].id}/?format=csv")
    assert detail.status_code == 404


def test_api_csv_refuses_a_bad_filter_naming_it(pm, ledger):
    response = api(pm).get("/api/measurements/?format=csv&gate_run=first")
    assert response.status_code == 400
    assert parse(response.content) == [{"gate_run": "expected an integer, not 'first'"}]


def test_an_old_entry_exports_in_order(pm, ledger, engagement_a):
    AuditEntry.objects.filter(actor="pat-pm").update(at=timezone.now() - timedelta(days=3))
    audit = parse(api(pm).get("/api/audit/?format=csv&engagement=acme-1").content)
    assert [r["actor"] for r in audit] == ["pat-pm", "'@attacker"]
