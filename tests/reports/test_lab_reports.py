"""Reports of real lab runs: G1 and G2 on the healthy lab in English and Chinese, a stopped G1
and the final report; what they show and what they carry inside (pypdf)."""

import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from pypdf import PdfReader

from acceptance.models import Engagement
from reports.evidence import SUMMARY_NAME
from reports.models import Report
from reports.services import ReportRefused, final_report_issue
from reports.signing import verify_pdf
from runners.models import GateRun
from tests.reports.conftest import page_count, pdftotext
from tests.runners.test_run_gate import run_gate

pytestmark = pytest.mark.slow

LOOK_DIR = os.environ.get("REPORTS_LOOK_DIR")  # copy the PDFs there to look at them


def _keep(path: Path, name: str) -> None:
    if LOOK_DIR:
        Path(LOOK_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(LOOK_DIR) / name)


def _gate_report(engagement: Engagement, code: str) -> Report:
    run = GateRun.objects.filter(gate__engagement=engagement, gate__code=code).latest("id")
    return run.decision.report


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_it_reports_g1_and_g2_of_a_healthy_lab_with_evidence_inside(lab, language):
    engagement, _ = lab("healthy")
    Engagement.objects.filter(pk=engagement.pk).update(report_language=language)
    for gate in ("G1", "G2"):
        code, out, err = run_gate(engagement.name, gate)
        assert code == 0, out + err
        assert "report: " in out
    g1, g2 = _gate_report(engagement, "G1"), _gate_report(engagement, "G2")
    _keep(Path(g1.path), f"healthy-G1-{language}.pdf")
    _keep(Path(g2.path), f"healthy-G2-{language}.pdf")
    assert (g1.version, g1.kind, g1.about_id, g1.signoff_complete) == (1, "gate", g1.decision_id,
                                                                       False)

    data = Path(g2.path).read_bytes()
    result = verify_pdf(data)
    assert result.valid, result.summary
    # The evidence extracts with pypdf and hashes to the summary and to the ledger.
    reader = PdfReader(io.BytesIO(data))
    attachments = {name: contents[0] for name, contents in reader.attachments.items()}
    summary = json.loads(attachments[SUMMARY_NAME])
    run = GateRun.objects.get(pk=g2.decision.gate_run_id)
    probe_runs = list(run.probe_runs.order_by("started_at", "id"))
    assert len(summary["runs"]) == len(probe_runs) == len(attachments) - 1
    for entry, probe_run in zip(summary["runs"], probe_runs, strict=True):
        raw = attachments[entry["attachment"]]
        assert raw == probe_run.raw()
        assert hashlib.sha256(raw).hexdigest() == entry["sha256"] == probe_run.stdout_sha256
        assert entry["probe"] == probe_run.probe
    criteria = {c["metric"]: c for c in summary["gates"][0]["criteria"]}
    assert criteria["line_efficiency"]["verdict"] == "pass"
    assert criteria["line_efficiency"]["measured"].startswith("0.880")
    assert summary["decision"]["outcome"] == "passed"
    assert summary["simulated"] is True
    # PDF/A-3b: the XMP metadata says so and every attachment is associated with the document.
    xmp = reader.trailer["/Root"]["/Metadata"].get_data()
    assert b'pdfaid:part="3"' in xmp and b'pdfaid:conformance="B"' in xmp
    associated = {spec.get_object()["/UF"] for spec in reader.trailer["/Root"]["/AF"]}
    assert associated == set(attachments)

    path = Path(g2.path)
    pages = page_count(path)
    text = pdftotext(path)
    page_one = _words(pdftotext(path, page=1))
    for page in range(1, pages + 1):
        assert "SIMULATED EVIDENCE" in pdftotext(path, page=page)
    # the pages list each probe and each node once (the sha256 of every run is in the
    # embedded summary, checked against its attachment above)
    appendix = text[text.index("附录" if language == "zh-hans" else "Appendix A"):]
    for entry in summary["runs"]:
        assert entry["probe"] in appendix and entry["node"] in appendix
    if language == "zh-hans":
        assert "G2 单节点基线：已通过 — 5 项判据中 5 项达标。" in page_one
        assert "签字确认" in text and "附录" in text
        assert "模拟证据" in page_one
    else:
        assert "PASSED" in page_one
        assert "awaiting sign-off" in text.lower()
        assert "TTFT p50 per node" in text and "Line efficiency" in text
        assert "Bandwidth per node" in text
        assert "Schedule and decisions" in text and "Audit trail" in text


def test_it_refuses_the_final_report_while_gates_are_undecided_then_issues_it_when_stopped(lab):
    engagement, _ = lab("healthy")
    code, out, err = run_gate(engagement.name, "G1")
    assert code == 0, out + err
    with pytest.raises(ReportRefused, match="G2, G3, G4 have none yet"):
        final_report_issue(engagement=engagement, issued_by="pm")
    assert not Report.objects.filter(engagement=engagement, kind="final").exists()


def test_it_issues_a_final_report_of_an_engagement_stopped_at_g1(lab):
    engagement, _ = lab("missing-drive")
    code, out, _ = run_gate(engagement.name, "G1")
    assert code == 1
    report = final_report_issue(engagement=engagement, issued_by="pm")
    assert (report.kind, report.version, report.about_id) == ("final", 1, None)
    # the row keeps what the report states: the portal's final row shows it
    assert report.outcome == "stopped"
    assert Report.objects.get(kind="gate", engagement=engagement).outcome == "stopped"
    from django.utils import timezone

    from acceptance.models import Engagement
    from acceptance.pages.portal import portal_rows

    row, = portal_rows(Engagement.objects.filter(pk=engagement.pk), timezone.localdate())
    final_row, = [r for r in row.reports if r.title == "Final acceptance report"]
    assert (final_row.outcome, str(final_row.outcome_word)) == ("stopped", "stopped")
    path = Path(report.path)
    _keep(path, "missing-drive-final-en.pdf")
    assert verify_pdf(path.read_bytes()).valid
    page_one = _words(pdftotext(path, page=1))
    assert "STOPPED" in page_one
    assert "Not accepted: the engagement stopped at G1 Arrival acceptance" in page_one
    assert "G1 Arrival acceptance — STOPPED · Criteria 4 criteria: 3 pass, 1 fail" in page_one
    # a second request makes version 2, naming version 1
    again = final_report_issue(engagement=engagement, issued_by="pm")
    assert (again.version, again.replaces_id) == (2, report.id)
    assert f"replaces version 1 (sha256 {report.sha256[:16]}" in _words(
        pdftotext(Path(again.path), page=1))



def test_a_gate_reopened_after_its_stop_has_no_decision_for_the_final_report(lab):
    """The engagement stopped at G1 and was re-opened (G1 back to pending): G1's stopped
    decision no longer decides the engagement, so the final report waits for a new one."""
    from acceptance.services import engagement_reopen

    engagement, _ = lab("missing-drive")
    code, out, _ = run_gate(engagement.name, "G1")
    assert code == 1
    engagement.refresh_from_db()
    engagement_reopen(engagement=engagement, actor="pm", reason="drive replaced")
    engagement.refresh_from_db()
    with pytest.raises(ReportRefused, match="G1 was re-opened after its stop and has no "
                                            "decision since"):
        final_report_issue(engagement=engagement, issued_by="pm")
    assert not Report.objects.filter(engagement=engagement, kind="final").exists()

def test_the_final_report_command_refuses_then_issues(lab):
    from io import StringIO

    from django.core.management import call_command

    engagement, _ = lab("missing-drive")
    out = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("issue_final_report", engagement.name, stdout=out)
    assert exit_info.value.code == 2
    assert out.getvalue().startswith("refused: the final report needs a decision on every gate")
    run_gate(engagement.name, "G1")
    out = StringIO()
    call_command("issue_final_report", engagement.name, stdout=out)
    path = Path(out.getvalue().split("report: ")[1].strip())
    assert verify_pdf(path.read_bytes()).valid


def test_a_lab_reset_removes_every_version_and_sign_off_but_keeps_the_files(lab):
    from acceptance.models import Membership
    from reports.models import SignOff
    from reports.services import signoff_record
    from tests.web.conftest import make_user

    engagement, _ = lab("missing-drive")
    run_gate(engagement.name, "G1")
    first = _gate_report(engagement, "G1")
    pm = make_user("pat-pm", Membership.Role.PROJECT_MANAGER)
    customer = make_user("cora", Membership.Role.CUSTOMER, engagement.customer)
    signoff_record(report=first, user=pm)
    _, second = signoff_record(report=first, user=customer)
    final = final_report_issue(engagement=engagement, issued_by="pm")
    files = [Path(r.path) for r in (first, second, final)]
    lab("missing-drive")  # resets the lab engagement
    assert not Report.objects.filter(pk__in=[first.pk, second.pk, final.pk]).exists()
    assert not SignOff.objects.exists()
    for path in files:
        assert verify_pdf(path.read_bytes()).valid
